"""Plain-language readings of a trace for the people in front of the app (no Streamlit here).

A product owner reads why the answerer declined before any number; a researcher opens the details. So an
abstention reads as a headline in words, then one line per failed check with its score and threshold, then
the closest documents with a score people can read: how far each got towards what the gate needs (100 % =
enough to answer), the weakest of the gate's checks. A generator fallback reads as a short label; the
provider's exception stays in the details.
"""

from __future__ import annotations

from pipeline.config import PipelineConfig
from pipeline.gate.rule import EVIDENCE
from pipeline.trace import GateCondition, GenerationTrace, Trace
from workbench.app.thresholds import LABEL, fmt

_FAILED = {
    "rerank": "the reranker scores the best passage {score} for relevance; answering needs {threshold}",
    "dense": "the closest passage is only loosely related in meaning (similarity {score}; answering needs "
             "{threshold})",
    "fused": "keyword search and meaning search do not agree on a best passage (fused score {score}; answering "
             "needs {threshold}, near the top of both)",
    "learned": "the evidence signals together give {score} that a passage states the answer; answering needs "
               "{threshold}",
    # the single-signal rules (gate.signal=window, ...)
    "window": "no sentence of the top passages is close enough in meaning to the question (similarity {score}; "
              "answering needs {threshold})",
    "coverage": "no top passage holds enough of the question's words together (share {score}; answering needs "
                "{threshold})",
    "critical": "the top passages miss identifiers, numbers or names the question asks about (share found "
                "{score}; answering needs {threshold})",
    "bm25": "keyword search finds only a weak match for the question's words (score {score}; answering needs "
            "{threshold})",
    "dense_margin": "no passage stands out from the next best in meaning (lead {score}; answering needs "
                    "{threshold})",
    "fused_norm": "keyword search and meaning search do not agree on a best passage (fused score {score} of the "
                  "highest possible; answering needs {threshold})",
}
_NOT_MEASURED = "the {scale} signal could not be measured for this question, and this rule reads it alone"


def failed_checks(trace: Trace) -> list[str]:
    """One sentence per gate condition that failed, with its score and threshold (a single-signal rule's signal
    that was not measured says so instead)."""
    out = []
    for c in trace.gate.conditions:
        if c.passed:
            continue
        missing = c.scale in EVIDENCE and getattr(trace.gate.signals, c.scale) is None
        template = _NOT_MEASURED if missing else _FAILED.get(c.scale, "{scale} score {score} below {threshold}")
        out.append(template.format(scale=c.scale, score=fmt(c.scale, c.score), threshold=fmt(c.scale, c.threshold)))
    return out


def abstention_headline(trace: Trace) -> str:
    """Why there is no answer, in one sentence a user can read."""
    gate = trace.gate
    if gate.decision == "answer":
        if trace.generation.is_abstention:
            return ("The closest passages passed the gate, but none of them states an answer, so the generator "
                    "declined.")
        return ""
    if not trace.retrieval.candidates:
        if trace.retrieval.status == "failed":
            return "The search failed, so there is nothing to answer from (details below)."
        return "Nothing in the documents matched this question."
    if gate.plain_reason:  # the gate's own reading: off-topic, on-topic but unanswered, retracted
        return gate.plain_reason
    failed = {c.scale for c in gate.conditions if not c.passed}
    if failed & {"dense", "rerank"}:
        return "Nothing in the documents is close enough to this question to answer it."
    if failed == {"fused"}:
        return ("The documents touch on this, but no passage is a clear match: keyword search and meaning "
                "search disagree on the best one.")
    return "The gate held the answer back."


def abstention_reason(trace: Trace) -> str:
    """The headline and the failed checks as one paragraph."""
    checks = failed_checks(trace)
    headline = abstention_headline(trace)
    if not checks:
        return headline
    return f"{headline} In detail: {'; '.join(checks)}."


def _chunk_score(trace: Trace, chunk_id: str, scale: str) -> float | None:
    candidate = trace.candidate(chunk_id)
    if scale == "rerank":
        return trace.rerank_score(chunk_id)
    if candidate is None or scale not in ("fused", "dense"):
        return None  # the learned rule scores the run as a whole, not one chunk
    return candidate.fused_score if scale == "fused" else candidate.dense_score


def _share(score: float | None, c: GateCondition) -> float | None:
    if score is None or c.threshold <= 0:
        return None
    return max(score, 0.0) / c.threshold


def _learned_share(trace: Trace, chunk_id: str, c: GateCondition) -> float | None:
    """The learned rule scores the run, not a chunk: the run's probability over its threshold, scaled for each
    document by its passage's dense cosine relative to the best one (the best passage gets the run's share)."""
    candidate, best = trace.candidate(chunk_id), trace.gate.best_dense_cosine
    if candidate is None or c.threshold <= 0:
        return None
    relative = 1.0 if not best or best <= 0 else max(candidate.dense_score or 0.0, 0.0) / best
    return max(c.score, 0.0) / c.threshold * min(relative, 1.0)


def closeness(trace: Trace, chunk_id: str) -> float | None:
    """How far ``chunk_id`` got towards answering, as a fraction of the gate's need (1.0 = enough): the
    weakest of the gate's checks, each score over its threshold. None when no check has a score for it."""
    shares = [_learned_share(trace, chunk_id, c) if c.scale == "learned"
              else _share(_chunk_score(trace, chunk_id, c.scale), c) for c in trace.gate.conditions]
    known = [s for s in shares if s is not None]
    return min(known) if known else None


def closest_rows(trace: Trace) -> list[dict]:
    """The abstention's closest documents with a readable score first and the raw one last."""
    rows = []
    for d in trace.gate.closest_documents:
        share = closeness(trace, d.chunk_id)
        rows.append({"document": d.title or d.doc_id, "how close": None if share is None else round(100 * share),
                     "id": d.doc_id, "chunk": d.chunk_id, f"{d.scale} score": fmt(d.scale, d.score)})
    # closest first; the gate's own order (its scale's score) breaks ties and places rows without a share last
    order = sorted(range(len(rows)), key=lambda i: (rows[i]["how close"] is None, -(rows[i]["how close"] or 0), i))
    return [rows[i] for i in order]


def fallback_label(gen: GenerationTrace) -> str:
    """A short reason for a generator fallback; the provider's full message stays in the trace."""
    reason = gen.fallback_reason.lower()
    if reason.startswith("provider connection"):
        return "the LLM provider could not be reached"
    if reason.startswith("provider timeout"):
        return "the LLM provider did not answer in time"
    if reason.startswith("provider server"):
        return "the LLM provider returned a server error"
    if reason.startswith("provider bad_response"):
        return "the LLM provider's reply was unreadable"
    if reason.startswith("malformed output"):
        return "the LLM's reply did not follow the answer format, twice"
    if " unavailable:" in reason:
        return "the LLM is not available here"
    if reason.startswith("provider"):
        return "the LLM call failed"
    return "the LLM's answer could not be used" if reason else ""


def _signal_name(signal: str) -> str:
    """What a single-signal rule reads, from the threshold widget's own label ("sentence-window cosine")."""
    name = LABEL.get(signal, signal).removesuffix(" threshold")
    return name[:1].lower() + name[1:]


def gate_summary(cfg: PipelineConfig, reader_available: bool = True) -> str:
    """One sentence on when the gate answers, generated from the configuration that runs (``cfg.gate.signal``,
    its thresholds, and whether the reader runs and its coefficient set is fitted), so a banner never says a
    rule other than the one in the trace."""
    from pipeline.gate.learned import reader_fitted

    g = cfg.gate
    reader = reader_available and cfg.rerank.enabled
    signal = g.signal
    if signal in ("auto", "learned"):
        with_reader = reader and reader_fitted(g)
        signals = ("the reader's best sentence score and the similarity and keyword signals" if with_reader
                   else "the similarity and keyword signals (sentence-window cosine, term and identifier coverage, "
                        "BM25, dense cosine and margin)")
        return (f"The gate answers when the learned rule — a logistic combination of {signals} — gives at least "
                f"{fmt('learned', g.confidence_threshold_learned)} that a passage states the answer; otherwise it says "
                "it does not know.")
    if signal == "rerank":
        if reader:
            return (f"The gate answers when the reader scores the best passage at least "
                    f"{fmt('rerank', g.confidence_threshold_rerank)}; otherwise it says it does not know.")
        return ("The gate reads the reader's score, and the reader is off here, so it answers when the top fused "
                f"score reaches {fmt('fused', g.confidence_threshold_fused)}.")
    if signal == "fused":
        return f"The gate answers when the top fused score reaches {fmt('fused', g.confidence_threshold_fused)}."
    if signal == "dense":
        return f"The gate answers when the best dense cosine reaches {fmt('dense', g.confidence_threshold_dense)}."
    if signal == "fused_and_dense":
        fused, dense = fmt("fused", g.confidence_threshold_fused), fmt("dense", g.confidence_threshold_dense)
        return (f"The gate answers only when the fused score reaches {fused} (both retrieval legs agree on the top "
                f"chunk) and the dense cosine reaches {dense} (something in the corpus is close in meaning).")
    return (f"The gate answers when the {_signal_name(signal)} reaches "
            f"{fmt(signal, getattr(g, f'confidence_threshold_{signal}'))}, read alone.")
