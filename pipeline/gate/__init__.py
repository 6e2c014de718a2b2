"""The confidence gate: answer or abstain, decided after rerank and before any LLM call.

In: one run's :class:`pipeline.trace.RetrievalTrace` (the fused candidates with their fused score, dense
rank and cosine) and :class:`pipeline.trace.RerankTrace` (the reranker's status and scores), and the
:class:`pipeline.config.GateConfig` (``signal``, a threshold per rule, ``closest_documents``).

Out: a :class:`pipeline.trace.GateTrace`: the decision, the scale read, each condition checked with its
score and threshold, the binding condition's margin, the reason, and on abstention the fixed abstention
message and the closest documents (``llm_calls_saved = 1``).

Modules:

- :mod:`pipeline.gate.rule` — the rule itself, once: which scale each ``gate.signal`` reads, its
  fallbacks, and ``score >= threshold``, as pure vectorised NumPy over score arrays (NaN: no score) and
  broadcast thresholds. One case or a whole threshold sweep (``workbench.sweep``) is decided by the same
  function.
- :mod:`pipeline.gate.stage` — the pipeline stage: the signal extraction (``gate_inputs`` reads the few
  scores and closest documents from the retrieval and rerank records once; ``score_arrays`` and
  ``evidence_arrays`` turn them into the rule's arrays), ``decide`` (the rule's verdict on one run, plus the
  trace around it), ``run`` (both, as the engine calls it) and ``replay`` (over a stored trace with another
  config).
"""
