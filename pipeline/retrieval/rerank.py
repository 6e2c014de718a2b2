"""Rerank: a cross-encoder rescores the fused top candidates; the gate reads its top score.

A cross-encoder reads the query and one passage together and returns a relevance logit (monoBERT-style
passage re-ranking: Nogueira & Cho, "Passage Re-ranking with BERT", 2019; the default checkpoint is
``cross-encoder/ms-marco-MiniLM-L-6-v2``). The first ``rerank.candidates`` of the fused list are scored in
batches of ``rerank.batch_size`` pairs, each pair truncated by the model to ``rerank.max_tokens`` tokens,
and the logits are squashed with the logistic sigmoid to [0, 1] so one threshold
(``gate.confidence_threshold_rerank``) means the same thing for every query. The best ``rerank.top_k`` are
kept, best first; ties keep the fused order.

The passage shown to the model is the chunk's heading path (document title first) and its text — the
same text the legs indexed.

Where no cross-encoder resolves (offline with nothing installed, or ``precision="int8"`` before its ONNX
module exists) the stage is recorded as ``skipped`` with the reason and what to install, and the gate
falls back to the fused scale. A model that raises or returns non-finite or misshapen scores is treated
the same way: never a fake score.

Early stop (``rerank.early_stop``). The gate answers exactly when the highest rerank score reaches the
threshold, and scoring more candidates can only raise that maximum. So, when the gate reads the rerank
scale (``gate.signal`` auto or rerank), the stage scores candidates in fused order, batch by batch, and
stops after the first batch at which (a) at least ``min(top_k, candidates)`` have been scored and (b) some
scored candidate's sigmoid score is >= ``gate.confidence_threshold_rerank``. From then on the decision is
"answer" whatever the rest would score. It never stops towards "abstain": proving abstention needs every
candidate scored. What it trades away: the kept top-k is the best of the scored prefix, so a lower-fused
candidate that would have outscored them is missed (order and membership may differ from full scoring);
the recorded top score and the gate's margin are a lower bound of the full maximum; and replaying the gate
over such a trace with a *higher* threshold is no longer exact (the sweep should use traces scored in
full). It is safe when only the decision at the threshold in force matters and a good-enough top-k will
do. ``scored`` and ``early_stopped`` record what happened.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from pipeline.config import RerankConfig
from pipeline.context import StageContext, as_context
from pipeline.models.registry import Models
from pipeline.models.resolve import ModelUnavailable
from pipeline.trace import Candidate, RerankScore, RerankTrace, RetrievalTrace

_INT8_MISSING = ("int8 reranking needs pipeline.models.rerank_onnx (ONNX Runtime dynamic quantisation), which is not "
                 "built yet; set rerank.precision=fp32")


def _sigmoid(logits: np.ndarray) -> np.ndarray:
    """Numerically stable logistic function."""
    x = np.asarray(logits, dtype=np.float64)
    out = np.empty_like(x)
    pos = x >= 0
    out[pos] = 1.0 / (1.0 + np.exp(-x[pos]))
    ex = np.exp(x[~pos])
    out[~pos] = ex / (1.0 + ex)
    return out


def _passage(candidate: Candidate) -> str:
    path = candidate.heading_path or ((candidate.title,) if candidate.title else ())
    return (" > ".join(path) + "\n" + candidate.text) if path else candidate.text


def _load(models: Models, cfg: RerankConfig):
    """The reranker, or (None, why it is unavailable and what to install)."""
    try:
        return models.reranker(cfg), ""
    except ModelUnavailable as exc:
        return None, f"cross-encoder {cfg.model!r} unavailable: {exc}"
    except ImportError as exc:
        if cfg.precision == "int8":
            return None, _INT8_MISSING
        return None, f"cross-encoder {cfg.model!r} could not be loaded: {exc}"
    except Exception as exc:  # a broken checkpoint must not take the question down
        return None, f"cross-encoder {cfg.model!r} failed to load: {type(exc).__name__}: {exc}"


def _score_batches(model, query: str, passages: Sequence[str], batch_size: int, stop_at: float | None,
                   min_scored: int) -> tuple[np.ndarray, str]:
    """Logits for a prefix of ``passages`` (all of them unless early stop fired), or (empty, error)."""
    parts: list[np.ndarray] = []
    best = -np.inf
    for start in range(0, len(passages), batch_size):
        batch = list(passages[start:start + batch_size])
        try:
            logits = np.asarray(model.score(query, batch), dtype=np.float64).reshape(-1)
        except Exception as exc:
            return np.zeros(0), f"cross-encoder failed while scoring: {type(exc).__name__}: {exc}"
        if logits.shape[0] != len(batch):
            return np.zeros(0), f"cross-encoder returned {logits.shape[0]} scores for {len(batch)} passages"
        if not np.all(np.isfinite(logits)):
            return np.zeros(0), "cross-encoder returned non-finite scores (NaN or infinity)"
        parts.append(logits)
        best = max(best, float(_sigmoid(logits).max()))
        scored = start + len(batch)
        if stop_at is not None and scored >= min_scored and best >= stop_at and scored < len(passages):
            break
    return np.concatenate(parts), ""


def _ranked(pool: Sequence[Candidate], logits: np.ndarray, top_k: int) -> tuple[RerankScore, ...]:
    scores = _sigmoid(logits)
    order = sorted(range(len(logits)), key=lambda i: (-scores[i], pool[i].fused_rank, pool[i].chunk_id))
    return tuple(RerankScore(chunk_id=pool[i].chunk_id, doc_id=pool[i].doc_id, rerank_score=float(scores[i]),
                             rerank_rank=rank, fused_rank=pool[i].fused_rank, logit=float(logits[i]))
                 for rank, i in enumerate(order[:top_k], start=1))


def run(query: str, retrieval: RetrievalTrace, cfg: RerankConfig, ctx: StageContext | Models,
        stop_at: float | None = None) -> RerankTrace:
    """Score the fused top ``cfg.candidates`` with the cross-encoder; never raises for a model failure.

    ``stop_at``: the rerank score at which the gate's decision can no longer change (the engine derives it
    from the gate's config, :func:`pipeline.engine.rerank_stop_at`); with ``rerank.early_stop`` on, scoring
    stops once a candidate reaches it. None: the gate does not read rerank scores.
    """
    models = as_context(ctx).models
    base = dict(model=cfg.model, precision=cfg.precision, max_tokens=cfg.max_tokens)
    if not cfg.enabled:
        return RerankTrace(status="disabled", reason="rerank.enabled is false; the gate uses the fused scale",
                           **base)
    pool = retrieval.candidates[:cfg.candidates]
    if not pool:
        return RerankTrace(status="skipped", reason="no candidates to rerank", **base)
    model, why = _load(models, cfg)
    if model is None:
        return RerankTrace(status="skipped", reason=why, candidates_in=len(pool), **base)
    early_stop_at = stop_at if cfg.early_stop else None
    logits, error = _score_batches(model, query, [_passage(c) for c in pool], cfg.batch_size, early_stop_at,
                                   min(cfg.top_k, len(pool)))
    if error:
        return RerankTrace(status="skipped", reason=f"{error}; the gate uses the fused scale",
                           candidates_in=len(pool), **base)
    scored = len(logits)
    early = scored < len(pool)
    base["model"] = getattr(model, "name", "") or cfg.model  # the model that scored, e.g. a test fake
    return RerankTrace(status="ran", reason=_note(cfg, stop_at, early, scored, len(pool)),
                       candidates_in=len(pool), scored=scored, early_stopped=early,
                       candidates=_ranked(pool, logits, cfg.top_k), **base)


def _note(cfg: RerankConfig, stop_at: float | None, early: bool, scored: int, total: int) -> str:
    if early:
        return (f"early stop after {scored} of {total} candidates: a score reached "
                f"{stop_at:g}, so the gate answers whatever the rest score")
    if cfg.early_stop and stop_at is None:
        return "early stop not applied: the gate's signal does not read rerank scores"
    return ""
