"""What the app shows of the reader (issue 27, item 4): each scored sentence with its verdict against the
run's ``generate.reader_min_score`` and whether the answer quotes it; the Gate lab's reader step after the gate;
Compare's presets that switch the reader off or back to whole passages."""

from __future__ import annotations

import dataclasses

from pipeline.config import PipelineConfig
from pipeline.trace import GenerationTrace, RerankScore, RerankTrace, UnitScore
from tests.support.traces import answered_trace
from workbench.app.compare_view import applied_rule, presets
from workbench.app.gate_view import reader_outcome
from workbench.app.trace_view import reader_rows, reader_verdict

ANSWERS = "The default max_retries in 3.1 is 8."
CARRIED = "If you carried max_retries = 5 over from a 2.x file, 3.1 still uses 5."


def _with_reader(answer: str, min_score: float = 0.5):
    cfg = PipelineConfig().with_overrides({"generate.reader_min_score": min_score})
    rerank = RerankTrace(status="ran", granularity="sentence", candidates=(
        RerankScore(chunk_id="cfg#0", doc_id="cfg", rerank_score=0.93, rerank_rank=1, fused_rank=2,
                    units=(UnitScore(ANSWERS, 0.93), UnitScore("Retries back off exponentially.", 0.2))),
        RerankScore(chunk_id="mig#0", doc_id="mig", rerank_score=0.4, rerank_rank=2, fused_rank=1,
                    units=(UnitScore(CARRIED, 0.4),))))
    trace = answered_trace()
    return dataclasses.replace(trace, rerank=rerank, config=cfg, answer=answer,
                               generation=dataclasses.replace(trace.generation, answer=answer))


def test_every_scored_sentence_is_a_row_with_its_verdict_and_whether_it_is_quoted():
    rows = reader_rows(_with_reader(f"{ANSWERS} [1]"))
    assert [(r["chunk"], r["sentence"], r["verdict"], r["quoted"]) for r in rows] == [
        ("cfg#0", ANSWERS, "answers", True),
        ("cfg#0", "Retries back off exponentially.", "does not answer", False),
        ("mig#0", CARRIED, "close", False)]
    assert [r["reader score"] for r in rows] == [0.93, 0.2, 0.4]


def test_the_verdict_follows_the_runs_own_threshold():
    rows = reader_rows(_with_reader(f"{ANSWERS} [1]", min_score=0.35))
    assert [r["verdict"] for r in rows] == ["answers", "close", "answers"]
    assert reader_verdict(0.5, 0.5) == "answers" and reader_verdict(0.25, 0.5) == "close"
    assert reader_verdict(0.24, 0.5) == "does not answer"


def test_an_abstention_quotes_nothing_and_passage_granularity_has_no_rows():
    trace = _with_reader("I don't know: the available sources do not answer this question.")
    trace = dataclasses.replace(trace, generation=GenerationTrace(status="abstained", is_abstention=True,
                                                                  answer=trace.answer))
    assert not any(r["quoted"] for r in reader_rows(trace))
    assert reader_rows(answered_trace()) == [], "no sentence scores: nothing to show"


def test_the_reader_step_after_the_gate():
    assert reader_outcome("abstain", 0.99, 0.5, True)[0] == "abstain", "the gate decides first"
    outcome, why = reader_outcome("answer", 0.31, 0.5, True)
    assert outcome == "abstain" and "0.310 < 0.5" in why
    assert reader_outcome("answer", 0.31, 0.3, True)[0] == "answer", "a lower threshold lets it quote"
    outcome, why = reader_outcome("answer", 0.31, 0.5, False)
    assert outcome == "answer" and "most similar" in why, "reader off: the similarity pick quotes anyway"
    assert reader_outcome("answer", None, 0.5, True)[0] == "answer"


def test_compare_offers_the_reader_off_and_whole_passages_and_auto_reads_the_learned_rule():
    cfg = PipelineConfig()
    found = presets(cfg, reranker_available=True)
    off = next(k for k in found if k.startswith("reader off"))
    assert found[off] == {"rerank.enabled": False}
    passage = next(k for k in found if "whole passages" in k)
    assert found[passage] == {"rerank.granularity": "passage"}
    assert applied_rule(cfg, True) == applied_rule(cfg, False) == "learned"
    assert any(k.startswith("stricter gate on the rule in use (learned") for k in found)
    passage_cfg = cfg.with_overrides({"rerank.granularity": "passage"})
    assert "reranker off" in presets(passage_cfg, True) and not any(k.startswith("reader") for k in
                                                                    presets(passage_cfg, True))
    assert not any(k.startswith(("reader", "reranker")) for k in presets(cfg, reranker_available=False))
