"""Retrieval: a query in, ranked candidates out.

In: the standalone query (after rewrite), the ``retrieve`` / ``rerank`` config sections and a
:class:`~pipeline.context.StageContext` (store, embedder). Out: a
:class:`~pipeline.trace.RetrievalTrace` (every candidate with its dense rank, keyword rank, matched terms and
fused score) and a :class:`~pipeline.trace.RerankTrace` (cross-encoder scores of the fused top candidates).

- ``retrieve.py``: the dense leg and the BM25 keyword leg in one Qdrant engine, fused by reciprocal rank.
- ``bm25.py``: BM25 term weights for the sparse vectors and the query side of the keyword leg.
- ``rerank.py``: the cross-encoder stage (sigmoid scores, optional early stop at a threshold the engine passes).
"""
