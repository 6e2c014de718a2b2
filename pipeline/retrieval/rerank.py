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

Sentence granularity (``rerank.granularity="sentence"``, the default with the project's reader). The reader
(``workbench train answerability``) was trained to say whether one *sentence* answers a question, as in
answer-sentence selection (Wang et al. 2007; Yang et al. 2015). Each candidate is cut into its quotable units with
the extractive generator's own rule (:func:`pipeline.text.units.split_units`: sentences, list items, labelled
table rows, one-line commands), the first ``rerank.max_sentences`` of them are scored, and the candidate's score
is its best unit's. Every unit's score is kept (``RerankScore.units``), so the gate reads the reader's best answer
probability and the extractive generator quotes the units the reader says answer, without scoring again. A
candidate with no quotable unit is scored as a passage. The kept candidates are ordered by a reciprocal-rank fusion of
the fused rank and the reader's rank (``rerank.order="blend"``; Cormack et al. 2009), or by the reader's score alone
(``"reader"``), or left in fused order (``"fused"``): the reader judges sentences, not which document a question is
about.

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
from pipeline.text.units import split_units
from pipeline.trace import Candidate, RerankScore, RerankTrace, RetrievalTrace, UnitScore

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


def _texts(candidate: Candidate, cfg: RerankConfig) -> list[str]:
    """What the model reads of one candidate: its passage, or its first ``max_sentences`` quotable units."""
    if cfg.granularity == "sentence":
        units = [u.text for u in split_units(candidate.text, 1)][:cfg.max_sentences]
        if units:
            return units
    return [_passage(candidate)]


def _score_batches(model, query: str, items: Sequence[list[str]], batch_size: int, stop_at: float | None,
                   min_scored: int) -> tuple[list[np.ndarray], str]:
    """Logits per item (an item is a candidate's texts) for a prefix of ``items`` (all unless early stop fired),
    or ([], error). ``batch_size`` items go to the model per call."""
    parts: list[np.ndarray] = []
    best = -np.inf
    for start in range(0, len(items), batch_size):
        batch = list(items[start:start + batch_size])
        flat = [text for item in batch for text in item]
        try:
            logits = np.asarray(model.score(query, flat), dtype=np.float64).reshape(-1)
        except Exception as exc:
            return [], f"cross-encoder failed while scoring: {type(exc).__name__}: {exc}"
        if logits.shape[0] != len(flat):
            return [], f"cross-encoder returned {logits.shape[0]} scores for {len(flat)} passages"
        if not np.all(np.isfinite(logits)):
            return [], "cross-encoder returned non-finite scores (NaN or infinity)"
        offsets = np.cumsum([0] + [len(item) for item in batch])
        parts.extend(logits[offsets[i]:offsets[i + 1]] for i in range(len(batch)))
        best = max(best, float(_sigmoid(logits).max()))
        scored = start + len(batch)
        if stop_at is not None and scored >= min_scored and best >= stop_at and scored < len(items):
            break
    return parts, ""


def blend_order(scores: Sequence[float], fused_ranks: Sequence[int], k: int) -> list[int]:
    """Indices ordered by ``1/(k + fused rank) + 1/(k + reader rank)`` (reciprocal-rank fusion of the two orders;
    ties: the better reader score, then the fused order)."""
    by_reader = sorted(range(len(scores)), key=lambda i: (-scores[i], fused_ranks[i]))
    reader_rank = {i: r for r, i in enumerate(by_reader, start=1)}
    fused = sorted(range(len(scores)), key=lambda i: fused_ranks[i])
    fused_rank = {i: r for r, i in enumerate(fused, start=1)}
    return sorted(range(len(scores)), key=lambda i: (-(1 / (k + fused_rank[i]) + 1 / (k + reader_rank[i])),
                                                     -scores[i], fused_ranks[i]))


def _ranked(pool: Sequence[Candidate], per_item: list[np.ndarray], items: Sequence[list[str]], cfg: RerankConfig
            ) -> tuple[RerankScore, ...]:
    sentences = cfg.granularity == "sentence"
    logits = np.array([float(x.max()) for x in per_item])
    scores = _sigmoid(logits)
    if sentences and cfg.order == "blend":
        order = blend_order(list(scores), [c.fused_rank for c in pool[:len(scores)]], cfg.blend_k)
    elif sentences and cfg.order == "fused":
        order = sorted(range(len(logits)), key=lambda i: (pool[i].fused_rank, pool[i].chunk_id))
    else:
        order = sorted(range(len(logits)), key=lambda i: (-scores[i], pool[i].fused_rank, pool[i].chunk_id))
    top_k = cfg.top_k

    def units(i: int) -> tuple[UnitScore, ...]:
        if not sentences:
            return ()
        return tuple(UnitScore(text, float(p)) for text, p in zip(items[i], _sigmoid(per_item[i]), strict=True))

    return tuple(RerankScore(chunk_id=pool[i].chunk_id, doc_id=pool[i].doc_id, rerank_score=float(scores[i]),
                             rerank_rank=rank, fused_rank=pool[i].fused_rank, logit=float(logits[i]), units=units(i))
                 for rank, i in enumerate(order[:top_k], start=1))


def run(query: str, retrieval: RetrievalTrace, cfg: RerankConfig, ctx: StageContext | Models,
        stop_at: float | None = None) -> RerankTrace:
    """Score the fused top ``cfg.candidates`` with the cross-encoder; never raises for a model failure.

    ``stop_at``: the rerank score at which the gate's decision can no longer change (the engine derives it
    from the gate's config, :func:`pipeline.engine.rerank_stop_at`); with ``rerank.early_stop`` on, scoring
    stops once a candidate reaches it. None: the gate does not read rerank scores.
    """
    models = as_context(ctx).models
    base = dict(model=cfg.model, precision=cfg.precision, max_tokens=cfg.max_tokens, granularity=cfg.granularity)
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
    items = [_texts(c, cfg) for c in pool]
    per_item, error = _score_batches(model, query, items, _items_per_call(cfg), early_stop_at,
                                     min(cfg.top_k, len(pool)))
    if error:
        return RerankTrace(status="skipped", reason=f"{error}; the gate uses the fused scale",
                           candidates_in=len(pool), **base)
    scored = len(per_item)
    early = scored < len(pool)
    base["model"] = getattr(model, "name", "") or cfg.model  # the model that scored, e.g. a test fake
    return RerankTrace(status="ran", reason=_note(cfg, stop_at, early, scored, len(pool)),
                       candidates_in=len(pool), scored=scored, early_stopped=early,
                       pairs_scored=sum(len(x) for x in per_item),
                       candidates=_ranked(pool, per_item, items, cfg), **base)


def _items_per_call(cfg: RerankConfig) -> int:
    """Candidates per model call: ``batch_size`` passages; in sentence granularity every candidate at once unless
    early stop needs the batches (the model batches the pairs itself, sorted by length)."""
    if cfg.granularity == "sentence" and not cfg.early_stop:
        return max(cfg.candidates, 1)
    return cfg.batch_size


def _note(cfg: RerankConfig, stop_at: float | None, early: bool, scored: int, total: int) -> str:
    if early:
        return (f"early stop after {scored} of {total} candidates: a score reached "
                f"{stop_at:g}, so the gate answers whatever the rest score")
    if cfg.early_stop and stop_at is None:
        return "early stop not applied: the gate's signal does not read rerank scores"
    return ""
