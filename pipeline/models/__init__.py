"""Models: config names in, loaded models out; the only module-level state of the answerer.

In: model names from config (``embedding.model``, ``rerank.model``, ``generate.model`` ...). Out: objects that
satisfy the small protocols the stages call (``Embedder.encode``, ``Reranker.score``, ``LLM.complete``), loaded
lazily and once per process, or injected fakes (``pipeline.testing``). Offline and unresolvable: a
``ModelUnavailable`` whose message names what to install.

- ``resolve.py``: name -> files on disk (a directory, a package that ships weights, the HF cache, the hub
  when allowed), and the process-wide loader cache.
- ``encoders.py``: the bi-encoder, cross-encoder and NLI classifier.
- ``rerank_onnx.py``: the int8 ONNX Runtime cross-encoder.
- ``llm.py``: the LLM protocol and the litellm backend; ``local_llm.py``: SmolLM2 offline.
- ``registry.py``: ``Models`` (what a stage context carries) and ``build_backend``.
"""
