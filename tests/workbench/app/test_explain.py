"""Abstentions in words: a single-signal gate rule's failed check reads as what the signal measures, and a
signal that could not be measured says so instead of printing a stand-in score."""

from __future__ import annotations

from pipeline.config import GateConfig
from pipeline.gate import stage as gate
from pipeline.trace import Candidate, RerankTrace, RetrievalTrace, Trace, WindowScore
from workbench.app import explain

CANDIDATES = (
    Candidate(chunk_id="a#0", doc_id="a", title="A", text="Ports are opened by the relay.", fused_rank=1,
              fused_score=1 / 61 + 1 / 62, dense_rank=1, dense_score=0.7, keyword_rank=2, keyword_score=3.0),
    Candidate(chunk_id="b#0", doc_id="b", title="B", text="Something else entirely.", fused_rank=2,
              fused_score=1 / 61 + 1 / 63, dense_rank=2, dense_score=0.5, keyword_rank=1, keyword_score=4.0),
)
SKIPPED = RerankTrace(status="skipped", reason="cross-encoder unavailable")


def _trace(cfg: GateConfig, windows=()) -> Trace:
    retrieval = RetrievalTrace(status="ran", query="which port", candidates=CANDIDATES, window_scores=windows)
    return Trace(question="which port", retrieval=retrieval, rerank=SKIPPED, gate=gate.run(retrieval, SKIPPED, cfg))


def test_a_failed_single_signal_check_reads_as_what_the_signal_measures():
    trace = _trace(GateConfig(signal="dense_margin", confidence_threshold_dense_margin=0.5))
    assert trace.gate.decision == "abstain"
    (check,) = explain.failed_checks(trace)
    assert check == ("no passage stands out from the next best in meaning (lead 0.200; answering needs 0.500)")
    assert explain.abstention_reason(trace).startswith(trace.gate.plain_reason)


def test_a_signal_that_was_not_measured_says_so():
    trace = _trace(GateConfig(signal="window", confidence_threshold_window=-1.0))  # no windows recorded
    assert trace.gate.decision == "abstain"
    assert explain.failed_checks(trace) == [
        "the window signal could not be measured for this question, and this rule reads it alone"]
    measured = _trace(GateConfig(signal="window", confidence_threshold_window=0.9),
                      windows=(WindowScore(chunk_id="a#0", cosine=0.8),))
    assert explain.failed_checks(measured) == [
        "no sentence of the top passages is close enough in meaning to the question (similarity 0.800; answering "
        "needs 0.900)"]


# -- the gate in one sentence, from the configuration that runs ---------------------------------------------------

def test_the_gate_summary_names_the_rule_and_threshold_that_run():
    from pipeline.config import PipelineConfig
    from workbench.app.thresholds import fmt

    shipped = PipelineConfig()
    text = explain.gate_summary(shipped)
    assert "learned rule" in text and fmt("learned", shipped.gate.confidence_threshold_learned) in text
    assert "fused and dense" not in text and "both" not in text
    fitted = shipped.with_overrides({"gate.learned_r_reader": 2.0})
    assert "reader's best sentence score" in explain.gate_summary(fitted)
    assert "reader's best sentence score" not in explain.gate_summary(fitted, reader_available=False)
    both = shipped.with_overrides({"gate.signal": "fused_and_dense", "gate.confidence_threshold_dense": 0.61})
    assert "0.61" in explain.gate_summary(both) and "fused score reaches" in explain.gate_summary(both)
    rerank = shipped.with_overrides({"gate.signal": "rerank", "gate.confidence_threshold_rerank": 0.7})
    assert "0.7" in explain.gate_summary(rerank)
    assert "reader is off" in explain.gate_summary(rerank, reader_available=False)
    window = shipped.with_overrides({"gate.signal": "window", "gate.confidence_threshold_window": 0.55})
    assert "sentence-window cosine reaches 0.550, read alone" in explain.gate_summary(window), "to the widget's precision"
    margin = shipped.with_overrides({"gate.signal": "dense_margin", "gate.confidence_threshold_dense_margin": 0.04})
    assert "the dense margin reaches 0.040, read alone" in explain.gate_summary(margin)
