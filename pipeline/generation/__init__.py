"""Generation: a question and ranked sources in, a cited answer out (and the rewrite before retrieval).

In: the question, the conversation history, the ranked candidates the gate let through, the ``rewrite`` /
``generate`` config sections and a :class:`~pipeline.context.StageContext` (models). Out: a
:class:`~pipeline.trace.RewriteTrace` (the standalone query, or the raw question with the reason a rewrite was
rejected) and a :class:`~pipeline.trace.GenerationTrace` (answer, numbered sources offered, every LLM attempt,
fallbacks).

- ``rewrite.py``: validated query rewriting for follow-up questions.
- ``prompts.py``: prompt texts, the fixed ``ABSTENTION_MESSAGE``, untrusted-source fencing and the detector of
  text addressed to a model.
- ``generate.py``: the generation stage: a closed-book prompt over numbered sources, structured output,
  one repair turn, the extractive fallback when a provider fails.
- ``extractive.py``: the model-free generator: verbatim cited sentences of the best sources.
"""
