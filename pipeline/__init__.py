"""The answerer. No Streamlit, no plotting, no HTML display: the notebooks, the app and the CLI import it.

    question + history
      -> generation.rewrite -> retrieval.retrieve -> retrieval.rerank -> gate
      -> generation.generate -> validation.citations -> validation.trust -> storage (cache, run log)

``engine.py`` sequences the stages into one ``Trace`` (``trace.py``) under one ``PipelineConfig``
(``config.py``); each stage family is a subpackage whose ``__init__`` says what flows in and out.
``docs/ARCHITECTURE.md`` has the picture and the contracts.
"""
