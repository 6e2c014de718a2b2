"""Retrieval: a dense leg and a BM25 keyword leg over the same Qdrant points, fused by reciprocal rank.

Dense leg: the query is embedded with the configured bi-encoder and the index returns the
``retrieve.dense_top_k`` nearest chunks by cosine similarity.

Keyword leg: the query is tokenized with the project's identifier-preserving tokenizer
(:mod:`pipeline.text.tokenize`; ``ERR_TIMEOUT_502`` stays one token), each term weighted by its count in the
query, and the index returns the ``retrieve.keyword_top_k`` chunks with the highest BM25 score

    score(d) = sum_t count_q(t) * idf(t) * w(t, d)

where ``w(t, d)`` is the chunk's stored term-frequency weight and ``idf`` the engine's IDF modifier. Each
hit keeps the terms it matched with their share of that sum (:class:`MatchedTerm`), so a researcher sees
why a chunk matched; the shares are rebuilt from the hit's stored sparse vector and the catalogue's IDF
and add up to the engine's score.

Fusion: reciprocal-rank fusion (Cormack, Clarke & Büttcher, "Reciprocal Rank Fusion outperforms Condorcet
and individual Rank Learning Methods", SIGIR 2009):

    fused(d) = sum over legs l of  weight_l / (k + rank_l(d))

with 1-based ranks and k = 60 by default; a leg that did not return ``d`` contributes nothing. RRF uses
only ranks, so the two legs' incomparable raw scores (a cosine, an unbounded BM25 sum) never need to be
normalised. The price is the scale: with two legs the maximum is 2/61 ~ 0.033 and a chunk ranked first
by one leg only scores 1/61 ~ 0.016 (:data:`pipeline.trace.FUSED_SCALE_NOTE`), so a fused threshold
measures whether the legs agree rather than how relevant the top chunk is.

Convex fusion (``retrieve.fusion = "convex"``; Bruch, Gai & Ingber, TOIS 2023) instead adds the legs' scores
after mapping each to [0, 1] (:func:`normalise_scores`: min-max over the leg's top-k, or theoretical min-max
from the leg's lowest possible score):

    fused(d) = alpha * norm_dense(d) + (1 - alpha) * norm_keyword(d)

with ``alpha = retrieve.convex_dense_weight``; a leg that did not return ``d`` adds 0. Each candidate then
records both normalised scores, and ``rrf_score`` keeps the RRF value for readers of the RRF scale (the gate's
fused threshold). Under the default ``rrf``, ``fused_score`` is the RRF value, as before.

Ties in fused score are broken by the better single-leg rank, then by chunk id, so the same index always
yields the same order. A leg that fails (the embedder raised, the index is unreachable) is recorded and
the other leg still runs; only when no leg produced a result is the stage marked ``failed``.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from pipeline.config import RetrieveConfig
from pipeline.context import StageContext
from pipeline.retrieval.bm25 import query_weights, term_id, to_sparse
from pipeline.storage.store import SearchHit, Store
from pipeline.text.tokenize import tokenize
from pipeline.trace import CONVEX_SCALE_NOTE, FUSED_SCALE_NOTE, Candidate, MatchedTerm, RetrievalTrace, WindowScore


@dataclass(frozen=True)
class FusedItem:
    """One item of a fused list: its id, fused score, and each leg's rank and contribution (legs in order)."""
    item_id: str
    fused_score: float
    ranks: tuple[int | None, ...]
    contributions: tuple[float, ...]
    normalised: tuple[float | None, ...] = ()   # convex fusion: each leg's normalised score (None: not returned)


@dataclass(frozen=True)
class LegScores:
    """One leg's result for fusion: ids best first and their raw scores (same length)."""
    ids: tuple
    scores: tuple[float, ...]


# Convex fusion's theoretical-min-max normalisation (Bruch et al. 2023): the lowest score each leg can give,
# (dense, keyword): a cosine is at least -1, a BM25 sum at least 0.
THEORETICAL_MIN = (-1.0, 0.0)


@dataclass(frozen=True)
class _Leg:
    """What one leg returned: hits in rank order, or why it returned none."""
    hits: tuple[SearchHit, ...] = ()
    status: str = "ran"          # ran | failed | no-terms
    error: str = ""
    elapsed_ms: float = 0.0
    vector: tuple[float, ...] = ()   # the query vector (dense leg), for the gate's sentence-window signal


WINDOW_TOP_K = 5  # each leg's top candidates whose stored sentence windows are compared with the query (gate signal)


def _retracted_matches(query: str, candidates: tuple[Candidate, ...], store: Store) -> tuple[str, ...]:
    """:func:`pipeline.gate.signals.retracted_matches` against the store's retracted documents (none readable:
    none matched; the abstention then reads on- or off-topic, which is what it said before the table existed)."""
    from pipeline.gate.signals import retracted_matches

    try:
        retracted = store.retracted_documents()
    except Exception:
        return ()
    return retracted_matches(query, candidates, retracted)


def _window_scores(vector: tuple[float, ...], candidates: Sequence[Candidate], store: Store,
                   model: str) -> tuple[tuple[WindowScore, ...], str]:
    """Best sentence-window cosine of each leg's top :data:`WINDOW_TOP_K` candidates (so the set does not depend on
    the fusion's k or weights), from the passage vectors stored at ingestion (``ingest.passage_vectors``);
    nothing is encoded here. Returns (scores, status)."""
    if not vector:
        return (), "no query vector (the dense leg did not run)"
    top = [c for c in candidates if min(c.dense_rank or WINDOW_TOP_K + 1, c.keyword_rank or WINDOW_TOP_K + 1)
           <= WINDOW_TOP_K]
    try:
        stored = store.passage_vectors([c.chunk_id for c in top])
    except Exception as exc:  # the signal is lost, retrieval stands
        return (), f"passage vectors unavailable: {type(exc).__name__}: {exc}"
    q = np.asarray(vector, dtype=np.float64)
    q = q / (np.linalg.norm(q) or 1.0)
    out = []
    for c in top:
        entry = stored.get(c.chunk_id)
        if entry is None or (model and entry.model != model) or entry.vectors.shape[0] < 2 \
                or entry.vectors.shape[1] != q.shape[0]:
            continue
        windows = np.asarray(entry.vectors[1:], dtype=np.float64)
        cosines = windows @ q / np.maximum(np.linalg.norm(windows, axis=1), 1e-12)
        best = int(np.argmax(cosines))
        out.append(WindowScore(chunk_id=c.chunk_id, cosine=round(float(cosines[best]), 6),
                               passage=entry.passages[best] if best < len(entry.passages) else ""))
    if not out:
        return (), "no stored sentence-window vectors for the top candidates (ingest.passage_vectors off?)"
    return tuple(out), "ran"


def _reciprocal_rank_fusion(ranked_lists: Sequence[Sequence[str]], k: int,
                            weights: Sequence[float] | None = None) -> list[FusedItem]:
    """Fuse ranked id lists (best first) by RRF; returns every id once, best fused score first.

    An id repeated within one list keeps its first (best) rank there. Ties are broken by the best rank the
    item has on any leg, then by id.
    """
    if k < 1:
        raise ValueError(f"RRF k must be at least 1; got {k}")
    weights = tuple(weights) if weights is not None else (1.0,) * len(ranked_lists)
    if len(weights) != len(ranked_lists):
        raise ValueError(f"{len(ranked_lists)} ranked lists but {len(weights)} weights")
    ranks: dict[str, list[int | None]] = {}
    for leg, ids in enumerate(ranked_lists):
        for rank, item_id in enumerate(ids, start=1):
            slot = ranks.setdefault(item_id, [None] * len(ranked_lists))
            if slot[leg] is None:
                slot[leg] = rank
    items = []
    for item_id, item_ranks in ranks.items():
        contributions = tuple(0.0 if r is None else w / (k + r) for r, w in zip(item_ranks, weights, strict=True))
        items.append(FusedItem(item_id, math.fsum(contributions), tuple(item_ranks), contributions))
    items.sort(key=lambda it: (-it.fused_score, min(r for r in it.ranks if r is not None), it.item_id))
    return items


def normalise_scores(scores: Sequence[float], normalisation: str, lower_bound: float) -> list[float]:
    """One leg's scores mapped to [0, 1] for convex fusion (Bruch, Gai & Ingber, "An Analysis of Fusion
    Functions for Hybrid Retrieval", TOIS 2023).

    ``minmax``: ``(s - min) / (max - min)`` over the scores the leg returned (its top-k); ``tmm`` (theoretical
    min-max): ``(s - lower_bound) / (max - lower_bound)`` with the leg's lowest possible score
    (:data:`THEORETICAL_MIN`), so a leg whose top-k are all close stays close instead of being stretched to
    0..1. When every score is equal (one hit) each maps to 1.
    """
    if normalisation not in ("minmax", "tmm"):
        raise ValueError(f"normalisation must be 'minmax' or 'tmm'; got {normalisation!r}")
    if not scores:
        return []
    top = max(scores)
    low = min(scores) if normalisation == "minmax" else min(lower_bound, min(scores))
    if top - low <= 0:
        return [1.0] * len(scores)
    return [(s - low) / (top - low) for s in scores]


def _convex_fusion(legs: Sequence[LegScores], weights: Sequence[float], normalisation: str,
                   lower_bounds: Sequence[float]) -> list[FusedItem]:
    """``fused(d) = sum_l weight_l * norm_l(d)``; a leg that did not return ``d`` contributes 0 (its
    normalised minimum). Ties broken as in RRF: the best single-leg rank, then the id."""
    ranks: dict = {}
    norms: dict = {}
    for leg, (run, low) in enumerate(zip(legs, lower_bounds, strict=True)):
        for rank, (item_id, value) in enumerate(zip(run.ids, normalise_scores(run.scores, normalisation, low),
                                                    strict=True), start=1):
            slot = ranks.setdefault(item_id, [None] * len(legs))
            norm = norms.setdefault(item_id, [None] * len(legs))
            if slot[leg] is None:
                slot[leg], norm[leg] = rank, value
    items = []
    for item_id, item_ranks in ranks.items():
        contributions = tuple(0.0 if n is None else w * n for n, w in zip(norms[item_id], weights, strict=True))
        items.append(FusedItem(item_id, math.fsum(contributions), tuple(item_ranks), contributions,
                               tuple(norms[item_id])))
    items.sort(key=lambda it: (-it.fused_score, min(r for r in it.ranks if r is not None), it.item_id))
    return items


def fuse(legs: Sequence[LegScores], method: str = "rrf", k: int = 60, weights: Sequence[float] | None = None,
         alpha: float = 0.5, normalisation: str = "minmax") -> list[FusedItem]:
    """The stage's fusion of the (dense, keyword) legs: ``rrf`` (ranks only, ``k`` and leg ``weights``) or
    ``convex`` (``alpha * norm(dense) + (1 - alpha) * norm(keyword)``, ``normalisation`` minmax or tmm)."""
    if method == "rrf":
        return _reciprocal_rank_fusion([list(leg.ids) for leg in legs], k, weights)
    if method == "convex":
        if len(legs) != 2:
            raise ValueError(f"convex fusion takes the (dense, keyword) legs; got {len(legs)} legs")
        if not 0.0 <= alpha <= 1.0:
            raise ValueError(f"convex fusion alpha must be in [0, 1]; got {alpha}")
        return _convex_fusion(legs, (alpha, 1.0 - alpha), normalisation, THEORETICAL_MIN)
    raise ValueError(f"fusion must be 'rrf' or 'convex'; got {method!r}")


def _matched_terms(weights: dict[str, float], hit: SearchHit, idfs: dict[str, float]) -> tuple[MatchedTerm, ...]:
    """Each query term found in the hit's sparse vector, with its share of the BM25 score, largest first."""
    if not hit.sparse:
        return ()
    out = []
    for term, q_weight in weights.items():
        doc_weight = hit.sparse.get(term_id(term))
        if doc_weight is None:
            continue
        term_idf = idfs.get(term, 0.0)
        out.append(MatchedTerm(term=term, query_weight=q_weight, doc_weight=float(doc_weight), idf=term_idf,
                               contribution=q_weight * float(doc_weight) * term_idf))
    out.sort(key=lambda m: (-m.contribution, m.term))
    return tuple(out)


def _elapsed_ms(t0: float) -> float:
    return round((time.perf_counter() - t0) * 1000, 3)


def _dense_leg(query: str, cfg: RetrieveConfig, ctx: StageContext) -> tuple[_Leg, float]:
    """Embed the query and search; returns the leg and the embedding time."""
    t0 = time.perf_counter()
    try:
        vector = ctx.embedder().encode([query])[0]
    except Exception as exc:  # a model failure degrades to keyword-only retrieval
        return _Leg(status="failed", error=f"query embedding failed: {type(exc).__name__}: {exc}",
                    elapsed_ms=_elapsed_ms(t0)), _elapsed_ms(t0)
    embed_ms = _elapsed_ms(t0)
    vector = tuple(float(x) for x in vector)
    t1 = time.perf_counter()
    try:
        hits = ctx.store.dense_search(list(vector), cfg.dense_top_k)
    except Exception as exc:
        return _Leg(status="failed", error=f"dense search failed: {type(exc).__name__}: {exc}",
                    elapsed_ms=_elapsed_ms(t1)), embed_ms
    return _Leg(hits=tuple(hits), elapsed_ms=_elapsed_ms(t1), vector=vector), embed_ms


def _keyword_leg(weights: dict[str, float], cfg: RetrieveConfig, store: Store) -> _Leg:
    t0 = time.perf_counter()
    if not weights:
        return _Leg(status="no-terms", error="the query has no keyword terms (only stop words or punctuation)")
    indices, values = to_sparse(weights)
    try:
        hits = store.keyword_search(indices, values, cfg.keyword_top_k)
    except Exception as exc:
        return _Leg(status="failed", error=f"keyword search failed: {type(exc).__name__}: {exc}",
                    elapsed_ms=_elapsed_ms(t0))
    return _Leg(hits=tuple(hits), elapsed_ms=_elapsed_ms(t0))


def _candidate(hit: SearchHit, item: FusedItem, fused_rank: int, dense: SearchHit | None,
               keyword: SearchHit | None, matched: tuple[MatchedTerm, ...],
               rrf_score: float | None = None) -> Candidate:
    p = hit.payload
    return Candidate(
        chunk_id=hit.chunk_id, doc_id=hit.doc_id, title=str(p.get("title", "")), text=str(p.get("text", "")),
        heading_path=tuple(p.get("heading_path") or ()), kind=str(p.get("kind", "prose")),
        version=str(p.get("version", "") or ""), effective_date=str(p.get("effective_date", "") or ""),
        superseded_by=tuple(p.get("superseded_by") or ()), superseded_reason=str(p.get("superseded_reason", "")),
        dense_rank=item.ranks[0], dense_score=None if dense is None else float(dense.score),
        keyword_rank=item.ranks[1], keyword_score=None if keyword is None else float(keyword.score),
        matched_terms=matched, dense_contribution=item.contributions[0],
        keyword_contribution=item.contributions[1], fused_score=item.fused_score, fused_rank=fused_rank,
        rrf_score=rrf_score, dense_norm=item.normalised[0] if item.normalised else None,
        keyword_norm=item.normalised[1] if item.normalised else None)


def _first_by_id(hits: Sequence[SearchHit]) -> dict[str, SearchHit]:
    out: dict[str, SearchHit] = {}
    for hit in hits:
        out.setdefault(hit.chunk_id, hit)
    return out


def _reason(dense: _Leg, keyword: _Leg, idf_error: str) -> str:
    parts = [f"dense leg {leg.status}: {leg.error}" if leg is dense else f"keyword leg {leg.status}: {leg.error}"
             for leg in (dense, keyword) if leg.status != "ran"]
    if idf_error:
        parts.append(idf_error)
    return "; ".join(parts)


def run(query: str, cfg: RetrieveConfig, ctx: StageContext) -> RetrievalTrace:
    """Both legs over ``ctx.store``, fused; never raises for a model or index failure (recorded as the reason).

    The stage's own wall time is recorded by the engine (``Trace.timings_ms["retrieve"]``); ``timings_ms`` here
    splits it into the parts only the stage can see.
    """
    rc, store = cfg, ctx.store
    terms = tokenize(query)
    weights = query_weights(terms)
    dense, embed_ms = _dense_leg(query, cfg, ctx)
    keyword = _keyword_leg(weights, cfg, store)

    idf_error = ""
    idfs: dict[str, float] = {}
    if weights:
        try:
            idfs = store.idf(list(weights))
        except Exception as exc:  # the score stands; only the per-term explanation is lost
            idf_error = f"matched-term IDF unavailable: {type(exc).__name__}: {exc}"

    t0 = time.perf_counter()
    rrf = _reciprocal_rank_fusion([[h.chunk_id for h in dense.hits], [h.chunk_id for h in keyword.hits]],
                                  rc.rrf_k, (rc.dense_weight, rc.keyword_weight))
    fused = rrf if rc.fusion == "rrf" else fuse(
        [LegScores(tuple(h.chunk_id for h in leg.hits), tuple(float(h.score) for h in leg.hits))
         for leg in (dense, keyword)], "convex", alpha=rc.convex_dense_weight, normalisation=rc.convex_normalisation)
    rrf_score = {item.item_id: item.fused_score for item in rrf}
    dense_by_id, keyword_by_id = _first_by_id(dense.hits), _first_by_id(keyword.hits)
    candidates = []
    for rank, item in enumerate(fused, start=1):
        d, kw = dense_by_id.get(item.item_id), keyword_by_id.get(item.item_id)
        matched = _matched_terms(weights, kw, idfs) if kw is not None and idfs else ()
        candidates.append(_candidate(d or kw, item, rank, d, kw, matched, rrf_score[item.item_id]))
    fusion_ms = _elapsed_ms(t0)
    t0 = time.perf_counter()
    windows, window_status = _window_scores(dense.vector, candidates, store, getattr(ctx.embedder(), "name", "")) \
        if dense.status == "ran" else ((), "the dense leg did not run")
    windows_ms = _elapsed_ms(t0)

    any_ran = dense.status == "ran" or keyword.status == "ran"
    retracted = _retracted_matches(query, tuple(candidates), store)
    return RetrievalTrace(
        status="ran" if any_ran else "failed", query=query, query_terms=tuple(terms),
        dense_top_k=rc.dense_top_k, keyword_top_k=rc.keyword_top_k, rrf_k=rc.rrf_k,
        dense_weight=rc.dense_weight, keyword_weight=rc.keyword_weight, fusion=rc.fusion,
        convex_dense_weight=rc.convex_dense_weight if rc.fusion == "convex" else None,
        convex_normalisation=rc.convex_normalisation if rc.fusion == "convex" else "",
        fused_scale_note=FUSED_SCALE_NOTE if rc.fusion == "rrf" else CONVEX_SCALE_NOTE,
        dense_hits=len(dense.hits), keyword_hits=len(keyword.hits), candidates=tuple(candidates),
        reason=_reason(dense, keyword, idf_error), dense_status=dense.status, keyword_status=keyword.status,
        query_idf=dict(idfs), window_scores=windows, window_status=window_status, retracted_matches=retracted,
        timings_ms={"embed_query": embed_ms, "dense": dense.elapsed_ms, "keyword": keyword.elapsed_ms,
                    "fusion": fusion_ms, "windows": windows_ms})
