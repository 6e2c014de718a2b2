"""The gate's evidence signals, computed once per run from the retrieval and rerank records (pure).

The top candidates are each leg's first :data:`TOP_K` (dense and keyword ranks), so which passages are read
does not depend on the fusion's k or leg weights. Each signal is a number in roughly [0, 1] that should be
high when the corpus states the answer:

- ``window``: the best sentence-window cosine between the query and the top candidates (the retrieve stage
  compares the query vector with the windows' vectors stored at ingestion and
  records them, :attr:`pipeline.trace.RetrievalTrace.window_scores`). A question is usually answered by one
  sentence, which the whole-chunk cosine dilutes.
- ``coverage``: the share of the query's IDF mass whose terms appear in one passage, the best of the top
  candidates (heading and text): a rare term missing costs more than a common one, and the terms must meet
  in one passage, the way an answer states them.
- ``critical``: the share of the question's critical terms — identifiers, numbers, versions, names — that the
  top candidates contain (1.0 when the question has none). A question about ``v4.2`` answered from a page
  about ``v3.1`` is the typical false answer.
- ``bm25``: the top BM25 score divided by the query's IDF mass (sum of count x IDF), so it does not grow with
  the question's length.
- ``dense`` / ``dense_margin``: dense rank 1's cosine, and its lead over dense rank 2.
- ``fused_norm``: the top RRF score (``rrf_score``, also under convex fusion) divided by the largest score
  possible for this ``rrf_k`` and these leg weights (first on both legs), so it stays in [0, 1] whatever k is.
- ``rerank``: the top rerank score when a cross-encoder ran.
- ``reader``: the same score when it is the reader's (rerank granularity ``sentence``): the best answer probability
  over the top candidates' sentences. The learned rule's reader set reads it (:mod:`pipeline.gate.learned`).

A signal that cannot be measured for a run (no dense leg, no stored windows, a trace older than the field)
is ``None``. Everything here reads only the trace, so stored runs replay.
"""

from __future__ import annotations

import re

from pipeline.text.tokenize import STOP_WORDS, tokenize
from pipeline.trace import Candidate, EvidenceSignals, RerankTrace, RetrievalTrace

TOP_K = 5  # each leg's top candidates the coverage signals read (the retrieve stage's WINDOW_TOP_K)
NAMES = ("window", "coverage", "critical", "bm25", "dense", "dense_margin", "fused_norm", "rerank", "reader")

# identifiers, numbers and versions: any token with a digit, an underscore, or an inner . - / :
_CODE = re.compile(r"[0-9A-Za-z_]*(?:\d|_|[A-Za-z0-9][.\-/:][A-Za-z0-9])[0-9A-Za-z_.\-/:]*")
_WORD = re.compile(r"[A-Za-z][A-Za-z'’]*")


def critical_terms(question: str) -> tuple[str, ...]:
    """The question's critical terms, lower-cased, in order: identifiers, numbers and versions (any token with
    a digit, an underscore or an inner ``.-/:``), ALL-CAPS words and CamelCase, and capitalised words that do not
    open a sentence (names). Stop words never count."""
    out: list[str] = []
    inside: set[int] = set()
    for m in _CODE.finditer(question):
        token = m.group(0).strip(".-/:")
        if token and not token.isalpha():
            out.append(token.lower())
            inside.update(range(m.start(), m.end()))
    for m in _WORD.finditer(question):
        word = m.group(0)
        start = m.start()
        if start in inside:
            continue
        before = question[:start].rstrip()
        opens = not before or before[-1] in ".?!:\"'(“"
        if word.lower() in STOP_WORDS or len(word) < 2:
            continue
        caps = word.isupper() and len(word) >= 2
        camel = any(c.isupper() for c in word[1:]) and word[0].isalpha()
        name = word[0].isupper() and not opens
        if caps or camel or name:
            out.append(word.lower())
    return tuple(dict.fromkeys(out))


def retracted_matches(query: str, candidates: tuple[Candidate, ...],
                      retracted: dict[str, tuple[str, frozenset[str]]]) -> tuple[str, ...]:
    """The retracted documents (doc ids) that hold what the question names and the corpus no longer does: the
    query has a critical term (:func:`critical_terms`) that none of the top candidates contains, and the retracted
    document contains every critical term of the query. A term counts as contained when all its tokens are.
    Without a critical term nothing matches: ordinary words are shared too widely to say a question is about a
    retracted document."""
    critical = critical_terms(query)
    if not critical or not retracted:
        return ()
    live = set(tokenize(_top_text(top_candidates(candidates))))

    def holds(term: str, terms) -> bool:
        tokens = tokenize(term)
        return bool(tokens) and all(t in terms for t in tokens)

    if all(holds(term, live) for term in critical):
        return ()
    return tuple(doc_id for doc_id, (_, terms) in sorted(retracted.items())
                 if all(holds(term, terms) for term in critical))


def _top_text(candidates: tuple[Candidate, ...]) -> str:
    return "\n".join(" ".join(c.heading_path) + " " + c.title + " " + c.text for c in candidates).lower()


def top_candidates(candidates: tuple[Candidate, ...]) -> tuple[Candidate, ...]:
    """Each leg's first :data:`TOP_K` candidates, in fused order."""
    return tuple(c for c in candidates
                 if min(c.dense_rank or TOP_K + 1, c.keyword_rank or TOP_K + 1) <= TOP_K)


def _fused_max(retrieval: RetrievalTrace) -> float:
    k = max(retrieval.rrf_k, 1)
    return (max(retrieval.dense_weight, 0.0) + max(retrieval.keyword_weight, 0.0)) / (k + 1)


def compute(retrieval: RetrievalTrace, rerank: RerankTrace) -> EvidenceSignals:
    """The evidence signals of one run (pure; ``None`` where a signal cannot be measured)."""
    candidates = retrieval.candidates
    if not candidates:
        return EvidenceSignals(critical_terms=critical_terms(retrieval.query))
    top = top_candidates(candidates)
    text = _top_text(top)
    per_chunk = [set(tokenize(_top_text((c,)))) for c in top]
    tokens = set().union(*per_chunk)

    terms = list(dict.fromkeys(retrieval.query_terms))
    weights = {t: retrieval.query_idf.get(t, 1.0) if retrieval.query_idf else 1.0 for t in terms}
    missing_terms = tuple(t for t in terms if t not in tokens)
    mass = sum(weights.values())
    coverage = max(sum(weights[t] for t in terms if t in chunk) for chunk in per_chunk) / mass if mass > 0 else None

    critical = critical_terms(retrieval.query)
    missing_critical = tuple(t for t in critical if t not in text)
    critical_share = 1.0 - len(missing_critical) / len(critical) if critical else 1.0

    bm25 = None
    if retrieval.query_idf:
        counts = {t: retrieval.query_terms.count(t) for t in terms}
        idf_mass = sum(counts[t] * retrieval.query_idf.get(t, 0.0) for t in terms)
        top_bm25 = max((c.keyword_score for c in candidates if c.keyword_score is not None), default=0.0)
        bm25 = top_bm25 / idf_mass if idf_mass > 0 else None

    dense = sorted((c for c in candidates if c.dense_rank is not None and c.dense_score is not None),
                   key=lambda c: c.dense_rank)
    dense_top = dense[0].dense_score if dense else None
    margin = (dense[0].dense_score - dense[1].dense_score) if len(dense) > 1 else (0.0 if dense else None)

    fused_max = _fused_max(retrieval)
    # the RRF value whatever retrieve.fusion is (rrf_score; traces from before it: fused_score, which was RRF)
    rrf = max((c.fused_score if getattr(c, "rrf_score", None) is None else c.rrf_score) for c in candidates)
    fused_norm = min(rrf / fused_max, 1.0) if fused_max > 0 else None

    windows = [w.cosine for w in retrieval.window_scores]
    scored = [r.rerank_score for r in rerank.candidates]
    return EvidenceSignals(
        window=max(windows) if windows else None, coverage=coverage, critical=critical_share, bm25=bm25,
        dense=dense_top, dense_margin=margin, fused_norm=fused_norm,
        rerank=max(scored) if rerank.status == "ran" and scored else None,
        reader=max(scored) if rerank.status == "ran" and scored and rerank.granularity == "sentence" else None,
        critical_terms=critical, missing_critical=missing_critical, missing_terms=missing_terms, top_k=len(top),
        retracted_top=sum(1 for c in top if c.superseded_by or c.superseded_reason))


def value(signals: EvidenceSignals, name: str) -> float | None:
    if name not in NAMES:
        raise ValueError(f"unknown evidence signal {name!r}; expected one of {', '.join(NAMES)}")
    return getattr(signals, name)
