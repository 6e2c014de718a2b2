"""Text: language rules shared by several stages, with no state and no I/O.

- :mod:`~pipeline.text.tokenize` — the identifier-preserving tokenizer (``ERR_TIMEOUT_502`` stays whole,
  its parts are emitted too), English stop words and a plural stemmer.
- :mod:`~pipeline.text.sentences` — what a sentence and a Markdown block are, for the answerer.
- :mod:`~pipeline.text.memo` — the one exception to "no state": inside a golden walk (``text_memo()``, entered by
  :func:`workbench.walk.walk_batched`) the pure text rules marked ``@memoised`` keep their results per text, so the
  chunks every question retrieves are tokenized and read for language and instructions once per walk.

In: raw text (chunks, queries, answers). Out: tokens for the BM25 keyword leg (:mod:`pipeline.retrieval.bm25`,
via ingestion and retrieval) and the extractive generator's overlap checks; sentence spans for the
extractive generator and the claim splitter. BM25 weighting itself lives in :mod:`pipeline.retrieval.bm25`.
"""
