"""BM25 for the keyword leg, in one place: term weights, IDF, sparse vectors and the corpus statistics.

BM25 (Robertson & Zaragoza, "The Probabilistic Relevance Framework: BM25 and Beyond", 2009) splits into a
per-document term-frequency weight, computed here and stored as the sparse vector's value,

    w(t, d) = tf * (k1 + 1) / (tf + k1 * (1 - b + b * |d| / avgdl))

and the inverse document frequency, which the engine applies at query time (Qdrant's IDF modifier:
``ln(1 + (N - n + 0.5) / (n + 0.5))``). The query vector carries each term's count in the query, so the
engine's dot product is exactly ``sum_t count_q(t) * idf(t) * w(t, d)``.

The tokens come from :func:`pipeline.text.tokenize.tokenize`. The corpus statistics are computed here as pure
functions: the average chunk length ``avgdl`` (:func:`average_length`; when it drifts by more than
:data:`AVGDL_TOLERANCE` the ingest rewrites every chunk's sparse vector, :func:`avgdl_drifted`) and the term
document-frequency changes of a write (:func:`df_deltas`). The catalogue persists the document frequencies
(:mod:`pipeline.storage.catalogue`) so the store can report the same IDF as the engine.
"""

from __future__ import annotations

import functools
import hashlib
import math
from collections import Counter
from collections.abc import Iterable

AVGDL_TOLERANCE = 0.02


@functools.lru_cache(maxsize=200_000)
def term_id(term: str) -> int:
    """Stable 32-bit sparse-vector index of a term (Qdrant sparse indices are u32)."""
    return int.from_bytes(hashlib.blake2b(term.encode("utf-8"), digest_size=4).digest(), "little")


def bm25_doc_weights(tokens: Iterable[str], avgdl: float, k1: float, b: float, heading_tokens: int = 0,
                     heading_weight: float = 1.0) -> dict[str, float]:
    """Per-term BM25 term-frequency weights of one document (the IDF is applied by the engine).

    The first ``heading_tokens`` tokens are the chunk's heading path (a document's title); each of their
    occurrences adds ``heading_weight`` to the term frequency instead of 1, a one-parameter form of BM25F
    (Robertson, Zaragoza & Taylor, "Simple BM25 extension to multiple weighted fields", CIKM 2004) with the
    length normalisation left on the plain token count, so ``avgdl`` does not depend on the weight. At weight
    1 (the default) heading and text are one field, as before the parameter existed."""
    tokens = list(tokens)
    length = len(tokens)
    if not tokens:
        return {}
    counts: dict[str, float] = dict(Counter(tokens))
    if heading_weight != 1.0 and heading_tokens > 0:
        for term in tokens[:heading_tokens]:
            counts[term] += heading_weight - 1.0
        counts = {t: c for t, c in counts.items() if c > 0}
    norm = k1 * (1.0 - b + b * length / max(avgdl, 1e-9))
    return {term: tf * (k1 + 1.0) / (tf + norm) for term, tf in counts.items()}


def query_weights(tokens: Iterable[str]) -> dict[str, float]:
    """Query-side weights: each term's count, so repeated query terms count as rank-bm25 counts them."""
    return {term: float(count) for term, count in Counter(tokens).items()}


def idf(n_docs: int, doc_freq: int) -> float:
    """The engine's IDF (Qdrant's modifier, Lucene's BM25 variant): always positive."""
    return math.log(1.0 + (n_docs - doc_freq + 0.5) / (doc_freq + 0.5))


def to_sparse(weights: dict[str, float]) -> tuple[list[int], list[float]]:
    """Sparse (indices, values) for the engine; colliding term ids (rare) have their weights summed."""
    merged: dict[int, float] = {}
    for term, weight in weights.items():
        index = term_id(term)
        merged[index] = merged.get(index, 0.0) + weight
    indices = sorted(merged)
    return indices, [merged[i] for i in indices]


def doc_sparse(tokens: Iterable[str], avgdl: float, k1: float, b: float, heading_tokens: int = 0,
               heading_weight: float = 1.0) -> tuple[list[int], list[float]]:
    """One chunk's stored sparse vector: its BM25 term-frequency weights for ``avgdl``."""
    return to_sparse(bm25_doc_weights(tokens, avgdl, k1, b, heading_tokens, heading_weight))


def average_length(lengths: list[int]) -> float:
    """``avgdl``: the mean chunk length in tokens (1.0 for an empty corpus)."""
    return (sum(lengths) / len(lengths)) if lengths else 1.0


def avgdl_drifted(previous: float, current: float, tolerance: float = AVGDL_TOLERANCE) -> bool:
    """Whether the stored sparse vectors, built for ``previous``, are stale for ``current`` (``previous`` > 0)."""
    return abs(current - previous) / previous > tolerance


def df_deltas(term_lists: Iterable[Iterable[str]], delta: int) -> dict[str, int]:
    """The change in each term's document frequency when these chunks (one token list each) are added
    (``delta`` = +1) or removed (-1): a term counts once per chunk, however often it occurs there."""
    counts: dict[str, int] = {}
    for terms in term_lists:
        for term in set(terms):
            counts[term] = counts.get(term, 0) + delta
    return counts
