"""The confidence gate: answer or abstain, decided before any LLM call.

The rule — which score is compared with which threshold for each ``gate.signal``, and the fallbacks
when the reranker did not run or the dense leg returned nothing — is :mod:`pipeline.gate.rule`, stated
and implemented there once, vectorised; :func:`decide` takes its answer/abstain decision from
:func:`pipeline.gate.rule.answers` on one case and builds the :class:`GateTrace` around it:

- ``scale`` is the scale read (:func:`pipeline.gate.rule.scale`); when it is not the one asked for
  (``rerank`` without a rerank score, ``dense``/``fused_and_dense`` without a dense hit, ``auto`` without
  a rerank score) the reason says why.
- ``dense``: the best dense hit (dense rank 1) is compared rather than the top-ranked chunk's cosine
  because the top-ranked chunk may be a keyword-only hit with no cosine; both are recorded
  (``best_dense_cosine``, ``top_dense_cosine``).
- ``fused``: an RRF score measures rank agreement between the legs more than relevance
  (:data:`pipeline.trace.FUSED_SCALE_NOTE`).
- ``fused_and_dense``: ``score``/``threshold``/``margin`` report the binding condition (the one that
  failed by most, or passed by least, relative to its threshold); ``conditions`` has both.
- a single evidence signal (``window``, ``coverage``, ...; :data:`pipeline.gate.rule.EVIDENCE`): the scale is
  the signal, its one condition the run's value against ``confidence_threshold_<signal>``; a run without a
  value abstains and the reason says the signal was not measured.

Each scale reads the top of its own ranking; ``score_chunk_id`` names the chunk whose score was compared,
``top_chunk_id`` the first chunk of the final ranking (rerank order when the reranker ran, else fused),
and ``top_rerank_score`` / ``top_fused_score`` / ``top_dense_cosine`` describe that chunk.

Abstaining returns the fixed :data:`pipeline.generation.prompts.ABSTENTION_MESSAGE`, the closest documents (distinct
documents, best first, with the score on the scale read) and ``llm_calls_saved = 1``: the generation call
that was not made.

The decision is split in two so that it can be replayed cheaply over stored traces (the threshold sweep,
the app's what-if sliders): :func:`gate_inputs` extracts the few numbers the gate reads from a trace's
retrieval and rerank records once (:func:`score_arrays` turns many of them into the rule's arrays);
:func:`decide` is a pure function of those and a :class:`GateConfig` (no I/O, no models). :func:`run` is
both; :func:`replay` accepts a stored :class:`Trace`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from pipeline.config import GateConfig
from pipeline.gate import learned, rule, signals
from pipeline.generation.prompts import ABSTENTION_MESSAGE
from pipeline.trace import (
    Candidate,
    ClosestDocument,
    EvidenceSignals,
    GateCondition,
    GateTrace,
    RerankTrace,
    RetrievalTrace,
    Trace,
)

MAX_CLOSEST = 50  # the upper bound of gate.closest_documents


@dataclass(frozen=True)
class GateInputs:
    """What the gate reads from one run: a few scores and the closest documents on each scale."""
    rerank_ran: bool = False
    no_rerank_reason: str = ""                # why there is no rerank score
    no_retrieval_reason: str = ""             # why there are no candidates at all
    dense_available: bool = False
    top_chunk_id: str = ""                    # first chunk of the final ranking
    top_rerank_score: float | None = None     # of that chunk (= the highest rerank score)
    top_fused_score: float | None = None      # of that chunk
    top_dense_cosine: float | None = None     # of that chunk (None: not in the dense leg's top-k)
    best_rerank: tuple[str, float] | None = None  # (chunk id, score) on each scale's own ranking
    best_fused: tuple[str, float] | None = None
    best_dense: tuple[str, float] | None = None
    closest_rerank: tuple[ClosestDocument, ...] = ()
    closest_fused: tuple[ClosestDocument, ...] = ()
    closest_dense: tuple[ClosestDocument, ...] = ()
    signals: EvidenceSignals = EvidenceSignals()  # the evidence signals (pipeline.gate.signals)
    top_superseded: bool = False              # the first chunk of the final ranking is superseded or retracted
    retracted_matches: tuple[str, ...] = ()   # retracted documents holding what the query names (not indexed)
    closest_sentence: str = ""                # the reader's best-scored sentence (rerank granularity=sentence)
    closest_sentence_doc: str = ""            # the document it is in
    closest_sentence_score: float | None = None


# -- extraction (once per run) ------------------------------------------------------------------------------

def _distinct_documents(ranked: list[tuple[Candidate, float]], scale: str,
                        already: tuple[ClosestDocument, ...] = ()) -> tuple[ClosestDocument, ...]:
    seen = {d.doc_id for d in already}
    out = list(already)
    for candidate, score in ranked:
        if len(out) >= MAX_CLOSEST:
            break
        if candidate.doc_id not in seen:
            seen.add(candidate.doc_id)
            out.append(ClosestDocument(doc_id=candidate.doc_id, title=candidate.title,
                                       chunk_id=candidate.chunk_id, score=score, scale=scale))
    return tuple(out)


def _rrf(candidate: Candidate) -> float:
    return candidate.fused_score if candidate.rrf_score is None else candidate.rrf_score


def gate_inputs(retrieval: RetrievalTrace, rerank: RerankTrace) -> GateInputs:
    """Extract what the gate reads; cheap, pure, and the only part that walks the candidate lists."""
    candidates = retrieval.candidates
    by_id = {c.chunk_id: c for c in candidates}
    reranked = [(by_id[r.chunk_id], r.rerank_score) for r in rerank.candidates if r.chunk_id in by_id]
    rerank_ran = rerank.status == "ran" and bool(reranked)
    # the fused rule reads the RRF value whatever retrieve.fusion is (its thresholds are on the RRF scale; a
    # convex fused score is in [0, 1]); traces from before rrf_score existed were RRF already
    fused = sorted(((c, _rrf(c)) for c in candidates), key=lambda pair: -pair[1])
    dense = sorted(((c, c.dense_score) for c in candidates if c.dense_rank is not None and c.dense_score is not None),
                   key=lambda pair: pair[0].dense_rank)
    top = reranked[0][0] if rerank_ran else (candidates[0] if candidates else None)
    closest_fused = _distinct_documents(fused, "fused")
    return GateInputs(
        rerank_ran=rerank_ran,
        no_rerank_reason="" if rerank_ran else _no_rerank_reason(rerank),
        no_retrieval_reason="" if candidates else _no_retrieval_reason(retrieval),
        dense_available=bool(dense),
        top_chunk_id=top.chunk_id if top else "",
        top_rerank_score=reranked[0][1] if rerank_ran else None,
        top_fused_score=_rrf(top) if top else None,
        top_dense_cosine=top.dense_score if top else None,
        best_rerank=(reranked[0][0].chunk_id, reranked[0][1]) if rerank_ran else None,
        best_fused=(fused[0][0].chunk_id, fused[0][1]) if fused else None,
        best_dense=(dense[0][0].chunk_id, dense[0][1]) if dense else None,
        closest_rerank=_distinct_documents(fused, "fused", _distinct_documents(reranked, "rerank"))
        if rerank_ran else (),
        closest_fused=closest_fused,
        closest_dense=_distinct_documents(dense, "dense"),
        signals=signals.compute(retrieval, rerank),
        top_superseded=bool(top and (top.superseded_by or top.superseded_reason)),
        retracted_matches=tuple(getattr(retrieval, "retracted_matches", ())),
        **_closest_sentence(rerank, by_id))


def _closest_sentence(rerank: RerankTrace, by_id: dict[str, Candidate]) -> dict:
    best = rerank.best_unit() if rerank.status == "ran" else None
    if best is None:
        return {}
    candidate, unit = best
    source = by_id.get(candidate.chunk_id)
    return {"closest_sentence": unit.text, "closest_sentence_score": unit.score,
            "closest_sentence_doc": (source.title if source and source.title else candidate.doc_id)}


def _no_rerank_reason(rerank: RerankTrace) -> str:
    if rerank.status == "ran":
        return "the reranker scored no candidates"
    return f"rerank {rerank.status}" + (f": {rerank.reason}" if rerank.reason else "")


def _no_retrieval_reason(retrieval: RetrievalTrace) -> str:
    if retrieval.status == "failed":
        return f"retrieval failed: {retrieval.reason}"
    if retrieval.status == "skipped":
        return "retrieval did not run"
    return "retrieval found no candidates"


# -- the decision (pure, cheap) -----------------------------------------------------------------------------

def _score(present: bool, best: tuple[str, float] | None) -> float:
    """A scale's score as the rule reads it: NaN where the scale has no score; one that cannot be compared
    (a present scale without a number, or a NaN score) fails its condition (-inf)."""
    if not present:
        return np.nan
    return -np.inf if best is None or np.isnan(best[1]) else best[1]


def score_arrays(inputs: Sequence[GateInputs]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The (rerank, fused, dense) score arrays :func:`pipeline.gate.rule.answers` reads, one entry per run."""
    def column(present, attr: str) -> np.ndarray:
        return np.array([_score(present(i), getattr(i, attr)) for i in inputs], dtype=np.float64)

    return (column(lambda i: i.rerank_ran, "best_rerank"), column(lambda i: i.best_fused is not None, "best_fused"),
            column(lambda i: i.dense_available, "best_dense"))


def evidence_arrays(inputs: Sequence[GateInputs], names: Sequence[str] = rule.EVIDENCE) -> dict[str, np.ndarray]:
    """Each evidence signal's values (:mod:`pipeline.gate.signals`), one entry per run, NaN where it was not
    measured: the ``evidence`` :func:`pipeline.gate.rule.answers` reads."""
    return {name: np.array([np.nan if (v := signals.value(i.signals, name)) is None else v for i in inputs],
                           dtype=np.float64) for name in names}


def evidence_thresholds(cfg: GateConfig) -> dict[str, float]:
    """Each single-signal rule's threshold (``confidence_threshold_<signal>``), for
    :func:`pipeline.gate.rule.answers`."""
    return {name: getattr(cfg, f"confidence_threshold_{name}") for name in rule.EVIDENCE}


def learned_scores(inputs: Sequence[GateInputs], cfg: GateConfig) -> np.ndarray:
    """The learned rule's probability per run (NaN where retrieval found nothing), for
    :func:`pipeline.gate.rule.answers`."""
    p = learned.probabilities([i.signals for i in inputs], cfg)
    return np.where([i.best_fused is not None for i in inputs], p, np.nan)


# Which abstention it is, from the evidence signals: a question whose best passage is far in meaning (best
# sentence-window cosine below OFF_TOPIC_COSINE), or whose rarer words mostly appear in none of the top passages
# (coverage below OFF_TOPIC_COVERAGE), is about something the corpus does not cover. Both cut-offs are chosen on
# the golden set's tune part by benchmarks/abstention_cases.py, which reports them on the test part
# (BENCHMARKS.md, "Abstention cases"); the coverage cut-off chosen there is 0: an on-topic question that the
# corpus does not answer often misses terms too, so coverage alone does not tell the two cases apart.
OFF_TOPIC_COVERAGE = 0.0
OFF_TOPIC_COSINE = 0.4
CASES = {
    "no-retrieval": "Nothing in the documents matched this question.",
    "off-topic": "Nothing in the documents is about this question.",
    "on-topic": "The documents cover this topic, but no passage states the answer.",
    "retracted": "The passages that match this question are retracted or superseded.",
}


def abstention_case(inputs: GateInputs, coverage: float = OFF_TOPIC_COVERAGE, cosine: float = OFF_TOPIC_COSINE) -> str:
    """off-topic | on-topic | retracted | no-retrieval: which kind of abstention this would be. Retracted: the top
    chunk is superseded, or a retracted document holds what the query names and no top passage does
    (:func:`pipeline.gate.signals.retracted_matches`). ``coverage`` and ``cosine``: below either, the question
    reads off-topic (``benchmarks/abstention_cases.py`` measures them)."""
    if inputs.best_fused is None:
        return "no-retrieval"
    if inputs.top_superseded or inputs.retracted_matches:
        return "retracted"
    s = inputs.signals
    best = s.window if s.window is not None else s.dense
    if (s.coverage is not None and s.coverage < coverage) or (best is not None and best < cosine):
        return "off-topic"
    return "on-topic"


def _scale(inputs: GateInputs, signal: str) -> tuple[str, str]:
    """The scale to read (the rule's) and, when it is not the one asked for, why."""
    scale = str(rule.scale(signal, inputs.rerank_ran, inputs.dense_available, inputs.best_fused is not None))
    if signal in ("auto", "rerank") and not inputs.rerank_ran:
        if signal == "rerank":
            return scale, f"gate.signal=rerank but there is no rerank score ({inputs.no_rerank_reason}); " \
                          "fell back to the fused scale"
        if scale == "learned":
            return scale, "no rerank score: the learned rule decides on the similarity signals alone, without " \
                          "the reader"
        note = "no rerank score; requiring fused and dense"
        if not inputs.dense_available:
            return scale, note + ", but the dense leg returned nothing: fused only"
        return scale, note
    if signal in ("dense", "fused_and_dense") and not inputs.dense_available:
        return scale, f"gate.signal={signal} but the dense leg returned nothing; fell back to the fused scale"
    return scale, ""


# why a run can lack each single-signal rule's value (pipeline/gate/signals.py)
MISSING = {"window": "no sentence-window cosines were recorded: the store has no passage vectors, or the trace "
                     "predates them",
           "coverage": "the query has no weighted terms", "critical": "no candidates to look in",
           "bm25": "the trace records no query IDF", "dense_margin": "the dense leg returned nothing",
           "fused_norm": "the fusion's leg weights allow no positive score"}


def _evidence(inputs: GateInputs, name: str) -> float | None:
    value = signals.value(inputs.signals, name)
    return None if value is None or np.isnan(value) else value


def _threshold(scale: str, cfg: GateConfig) -> float:
    return getattr(cfg, f"confidence_threshold_{scale}")


def _condition(inputs: GateInputs, scale: str, cfg: GateConfig) -> tuple[GateCondition, str]:
    threshold = _threshold(scale, cfg)
    if scale in rule.EVIDENCE:
        value = _evidence(inputs, scale) if inputs.best_fused is not None else None
        best = None if value is None else (inputs.top_chunk_id, value)
    else:
        best = {"rerank": inputs.best_rerank, "fused": inputs.best_fused, "dense": inputs.best_dense,
                "learned": (inputs.top_chunk_id, float(learned_scores([inputs], cfg)[0]))
                if inputs.best_fused is not None else None}[scale]
    if best is None:
        return GateCondition(scale, 0.0, threshold, False), ""
    chunk_id, score = best
    return GateCondition(scale, score, threshold, score >= threshold), chunk_id


def _relative_margin(c: GateCondition) -> float:
    return (c.score - c.threshold) / max(abs(c.threshold), 1e-9)


def decide(inputs: GateInputs, cfg: GateConfig) -> GateTrace:
    """Answer when every condition of the chosen rule holds (score >= threshold); abstain otherwise."""
    scale, note = _scale(inputs, cfg.signal)
    parts = ("fused", "dense") if scale == "fused_and_dense" else (scale,)
    checked = [_condition(inputs, part, cfg) for part in parts]
    conditions = tuple(c for c, _ in checked)
    binding, chunk_id = min(checked, key=lambda pair: _relative_margin(pair[0]))
    answered = rule.answers(*score_arrays([inputs]), cfg.signal, cfg.confidence_threshold_rerank,
                            cfg.confidence_threshold_fused, cfg.confidence_threshold_dense,
                            learned_scores([inputs], cfg), cfg.confidence_threshold_learned,
                            evidence_arrays([inputs]), evidence_thresholds(cfg))
    abstain = not answered[0]
    decision = "abstain" if abstain else "answer"
    case = abstention_case(inputs) if abstain else ""
    if inputs.best_fused is None:
        why = inputs.no_retrieval_reason or f"no {scale} score"
    elif scale in rule.EVIDENCE and _evidence(inputs, scale) is None:
        why = (f"gate.signal={scale} but this run has no {scale} value ({MISSING[scale]}); a signal that was not "
               f"measured abstains (threshold {_threshold(scale, cfg):g})")
    else:
        why = " and ".join(f"{'' if c.scale in rule.EVIDENCE else 'top '}{c.scale} score {c.score:.4g} "
                           f"{'>=' if c.passed else '<'} threshold {c.threshold:g}" for c in conditions)
    closest_scale = scale if scale in ("rerank", "fused", "dense") else "fused"
    closest = {"rerank": inputs.closest_rerank, "fused": inputs.closest_fused,
               "dense": inputs.closest_dense}[closest_scale] if abstain else ()
    score, threshold = binding.score, binding.threshold
    return GateTrace(
        status="ran", decision=decision, signal=cfg.signal, scale=scale, score=score, threshold=threshold,
        conditions=conditions,
        margin=score - threshold, reason=f"{note}; {why}" if note else why, top_chunk_id=inputs.top_chunk_id,
        top_rerank_score=inputs.top_rerank_score, top_fused_score=inputs.top_fused_score,
        top_dense_cosine=inputs.top_dense_cosine, closest_documents=closest[:cfg.closest_documents],
        abstention_message=ABSTENTION_MESSAGE if abstain else "", llm_calls_saved=1 if abstain else 0,
        best_dense_cosine=inputs.best_dense[1] if inputs.best_dense else None, score_chunk_id=chunk_id,
        signals=inputs.signals,
        contributions=learned.contributions(inputs.signals, cfg) if inputs.best_fused is not None else (),
        case=case, plain_reason=_plain_reason(case, inputs),
        closest_sentence=inputs.closest_sentence if abstain else "",
        closest_sentence_score=inputs.closest_sentence_score if abstain else None)


def _plain_reason(case: str, inputs: GateInputs) -> str:
    if not case:
        return ""
    if case == "retracted" and inputs.retracted_matches and not inputs.top_superseded:
        return (f"What this question names is only in a retracted document "
                f"({', '.join(inputs.retracted_matches)}), which is no longer searched.")
    if case == "on-topic" and inputs.closest_sentence:
        return (f"{CASES[case][:-1]}: the closest sentence, in {inputs.closest_sentence_doc}, does not answer it "
                f"(reader {inputs.closest_sentence_score:.2f}): \u201c{_clip(inputs.closest_sentence)}\u201d")
    return CASES[case]


def _clip(text: str, limit: int = 160) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit - 1].rstrip() + "\u2026"


def run(retrieval: RetrievalTrace, rerank: RerankTrace, cfg: GateConfig) -> GateTrace:
    return decide(gate_inputs(retrieval, rerank), cfg)


def replay(source: Trace | GateInputs | tuple[RetrievalTrace, RerankTrace], cfg: GateConfig) -> GateTrace:
    """Re-run the gate over a stored run with another config: no retrieval, no model, no I/O.

    For many configs over the same run, extract once with :func:`gate_inputs` and pass the
    :class:`GateInputs` here (or to :func:`decide`) each time.
    """
    if isinstance(source, GateInputs):
        return decide(source, cfg)
    if isinstance(source, Trace):
        return run(source.retrieval, source.rerank, cfg)
    retrieval, rerank = source
    return run(retrieval, rerank, cfg)


def llm_calls_saved(gates: list[GateTrace]) -> int:
    """Generation calls avoided over a session or an evaluation: one per abstention."""
    return sum(g.llm_calls_saved for g in gates)
