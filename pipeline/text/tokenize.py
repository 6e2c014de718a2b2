"""Identifier-preserving tokenizer and BM25 term weights for the keyword leg's sparse vectors.

Support questions are full of identifiers — ``ERR_TIMEOUT_502``, ``delivery.timeout_ms``, ``v3.1``,
``harbor.toml`` — that generic tokenizers (Qdrant's built-in BM25 one included) split into pieces, so a
query for the exact code also matches every page that mentions "timeout" or "502". Here a compound token
is kept whole *and* its parts are emitted as well, so the exact identifier scores highest while a partial
query ("timeout 502") still matches.

Plain words are lower-cased, English stop words are dropped, and a light plural stemmer (Harman's
"S" stemmer, "How effective is suffixing?", JASIS 1991) folds "retries"/"retry", "endpoints"/"endpoint".
Identifiers and numbers are never stemmed.

BM25 (Robertson & Zaragoza, "The Probabilistic Relevance Framework: BM25 and Beyond", 2009) splits into a
per-document term-frequency weight, computed here and stored as the sparse vector's value,

    w(t, d) = tf * (k1 + 1) / (tf + k1 * (1 - b + b * |d| / avgdl))

and the inverse document frequency, which the engine applies at query time (Qdrant's IDF modifier:
``ln(1 + (N - n + 0.5) / (n + 0.5))``). The query vector carries each term's count in the query, so the
engine's dot product is exactly ``sum_t count_q(t) * idf(t) * w(t, d)``.
"""

from __future__ import annotations

import functools
import hashlib
import math
import re
from collections import Counter
from collections.abc import Iterable

# A token: runs of letters/digits/underscores, optionally joined by . - / : into one compound
# ("delivery.timeout_ms", "v3.1", "ERR_TIMEOUT_502", "harbor.toml", "/v2/events").
_TOKEN = re.compile(r"[0-9A-Za-z_]+(?:[.\-/:][0-9A-Za-z_]+)*")
_PART_SPLIT = re.compile(r"[._\-/:]+")

STOP_WORDS = frozenset(
    """a an and are as at be been but by can could did do does for from had has have how i if in into is it
    its me my no not of on or our so such than that the their them then there these they this those to too
    us was we were what when where which who whom why will with would you your yours""".split()
)


def _stem(word: str) -> str:
    """Harman's S stemmer: only plural endings, only on alphabetic words."""
    if not word.isalpha() or len(word) <= 3:
        return word
    if word.endswith("ies") and not word.endswith(("eies", "aies")):
        return word[:-3] + "y"
    if word.endswith("es") and not word.endswith(("aes", "ees", "oes")):
        return word[:-1]
    if word.endswith("s") and not word.endswith(("us", "ss")):
        return word[:-1]
    return word


def _is_compound(raw: str) -> bool:
    return bool(_PART_SPLIT.search(raw)) or (any(c.isdigit() for c in raw) and any(c.isalpha() for c in raw))


def tokenize(text: str) -> list[str]:
    """Tokens of ``text`` in order; a compound identifier yields itself, then its parts."""
    out: list[str] = []
    for match in _TOKEN.finditer(text):
        raw = match.group(0).lower().strip("_")
        if not raw:
            continue
        if _PART_SPLIT.search(raw):
            out.append(raw)
            for part in _PART_SPLIT.split(raw):
                if part and part not in STOP_WORDS:
                    out.append(part if not part.isalpha() else _stem(part))
        elif raw in STOP_WORDS:
            continue
        else:
            out.append(raw if _is_compound(raw) else _stem(raw))
    return out


@functools.lru_cache(maxsize=200_000)
def term_id(term: str) -> int:
    """Stable 32-bit sparse-vector index of a term (Qdrant sparse indices are u32)."""
    return int.from_bytes(hashlib.blake2b(term.encode("utf-8"), digest_size=4).digest(), "little")


def bm25_doc_weights(tokens: Iterable[str], avgdl: float, k1: float, b: float) -> dict[str, float]:
    """Per-term BM25 term-frequency weights of one document (the IDF is applied by the engine)."""
    counts = Counter(tokens)
    length = sum(counts.values())
    if not counts:
        return {}
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
