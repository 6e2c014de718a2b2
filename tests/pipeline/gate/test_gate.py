"""The confidence gate: which scale and threshold, the boundary, abstention with zero LLM calls, replay."""

import dataclasses

import pytest

from pipeline.config import GateConfig, PipelineConfig
from pipeline.gate import stage as gate
from pipeline.generation.prompts import ABSTENTION_MESSAGE
from pipeline.storage.cache import AnswerCache
from pipeline.testing import FakeLLM, fake_models
from pipeline.trace import Candidate, RerankScore, RerankTrace, RetrievalTrace, Trace


def _cand(chunk_id, doc_id, fused_rank, fused_score, dense_rank=None, dense_score=None, keyword_rank=None):
    return Candidate(chunk_id=chunk_id, doc_id=doc_id, title=f"Title of {doc_id}", text="...",
                     fused_rank=fused_rank, fused_score=fused_score, dense_rank=dense_rank, dense_score=dense_score,
                     keyword_rank=keyword_rank, keyword_score=None if keyword_rank is None else 5.0)


# Fused order: a#0 (both legs), b#0 (keyword only), a#1 (dense only, the best dense hit), c#0 (dense).
RETRIEVAL = RetrievalTrace(status="ran", query="q", candidates=(
    _cand("a#0", "a", 1, 1 / 62 + 1 / 63, dense_rank=2, dense_score=0.61, keyword_rank=3),
    _cand("b#0", "b", 2, 1 / 61, keyword_rank=1),
    _cand("a#1", "a", 3, 1 / 61, dense_rank=1, dense_score=0.72),
    _cand("c#0", "c", 4, 1 / 63, dense_rank=3, dense_score=0.40),
))


def _rerank(*scores) -> RerankTrace:
    """Rerank trace with (chunk_id, score) pairs, best first."""
    by_id = {c.chunk_id: c for c in RETRIEVAL.candidates}
    return RerankTrace(status="ran", model="m", candidates_in=4, scored=4, candidates=tuple(
        RerankScore(chunk_id=cid, doc_id=by_id[cid].doc_id, rerank_score=s, rerank_rank=i,
                    fused_rank=by_id[cid].fused_rank)
        for i, (cid, s) in enumerate(scores, start=1)))


SKIPPED = RerankTrace(status="skipped", reason="cross-encoder unavailable: pip install something")


def test_auto_reads_the_learned_rule_whether_or_not_a_cross_encoder_ran():
    g = gate.run(RETRIEVAL, _rerank(("b#0", 0.8), ("a#0", 0.3)), GateConfig())
    assert (g.status, g.scale, g.signal) == ("ran", "learned", "auto")
    assert g.threshold == GateConfig().confidence_threshold_learned


def test_the_rerank_rule_reads_the_rerank_scale_when_the_reranker_ran():
    g = gate.run(RETRIEVAL, _rerank(("b#0", 0.8), ("a#0", 0.3)), GateConfig(signal="rerank"))
    assert (g.status, g.scale, g.signal) == ("ran", "rerank", "rerank")
    assert g.threshold == 0.45 and g.score == 0.8 and g.decision == "answer"
    assert g.margin == pytest.approx(0.35)
    assert g.top_chunk_id == g.score_chunk_id == "b#0"
    assert g.top_rerank_score == 0.8 and g.top_fused_score == pytest.approx(1 / 61)
    assert g.top_dense_cosine is None  # the top chunk is a keyword-only hit...
    assert g.best_dense_cosine == 0.72  # ...but the best dense hit's cosine is still recorded
    assert g.llm_calls_saved == 0 and g.abstention_message == "" and g.closest_documents == ()


def test_auto_reads_the_learned_rule_without_a_rerank_score():
    g = gate.run(RETRIEVAL, SKIPPED, GateConfig())
    assert g.scale == "learned" and [c.scale for c in g.conditions] == ["learned"]
    assert 0.0 <= g.score <= 1.0 and g.threshold == GateConfig().confidence_threshold_learned
    assert "learned rule decides" in g.reason
    # the missing cross-encoder is the trace's degradation, stated once there, not repeated in the reason
    assert "pip install something" not in g.reason


def test_fused_and_dense_requires_both():
    cfg = GateConfig(signal="fused_and_dense", confidence_threshold_fused=0.03, confidence_threshold_dense=0.7)
    g = gate.run(RETRIEVAL, SKIPPED, cfg)
    assert g.scale == "fused_and_dense" and g.decision == "answer"
    assert [(c.scale, c.passed) for c in g.conditions] == [("fused", True), ("dense", True)]
    assert g.conditions[0].score == pytest.approx(1 / 62 + 1 / 63) and g.conditions[1].score == 0.72
    assert g.top_chunk_id == "a#0" and g.top_dense_cosine == 0.61


@pytest.mark.parametrize("fused, dense, binding", [(0.033, 0.7, "fused"), (0.03, 0.8, "dense")])
def test_either_failing_condition_abstains_and_is_the_one_reported(fused, dense, binding):
    g = gate.run(RETRIEVAL, SKIPPED, GateConfig(signal="fused_and_dense", confidence_threshold_fused=fused,
                                                confidence_threshold_dense=dense))
    assert g.decision == "abstain" and g.llm_calls_saved == 1 and g.abstention_message == ABSTENTION_MESSAGE
    assert g.scale == "fused_and_dense" and sum(not c.passed for c in g.conditions) == 1
    failed = next(c for c in g.conditions if not c.passed)
    assert failed.scale == binding and (g.score, g.threshold) == (failed.score, failed.threshold)
    assert g.margin < 0 and f"< threshold {failed.threshold:g}" in g.reason


def test_the_seed_fused_threshold_alone_could_never_abstain():
    """Why the default changed: a chunk first on one leg only scores 1/61 > 0.015."""
    lone = RetrievalTrace(status="ran", query="q", candidates=(_cand("x#0", "x", 1, 1 / 61, dense_rank=1,
                                                                     dense_score=0.05),))
    assert gate.run(lone, SKIPPED, GateConfig(signal="fused", confidence_threshold_fused=0.015)).decision == "answer"
    assert gate.run(lone, SKIPPED, GateConfig(signal="fused_and_dense")).decision == "abstain"


def test_without_dense_hits_the_combined_rule_reads_fused_only():
    keyword_only = RetrievalTrace(status="ran", query="q", candidates=(_cand("b#0", "b", 1, 1 / 61, keyword_rank=1),))
    g = gate.run(keyword_only, SKIPPED, GateConfig(signal="fused_and_dense", confidence_threshold_fused=0.016))
    assert g.scale == "fused" and g.decision == "answer" and "dense leg returned nothing" in g.reason


def test_disabled_rerank_also_means_the_offline_rule():
    g = gate.run(RETRIEVAL, RerankTrace(status="disabled", reason="rerank.enabled is false"), GateConfig())
    assert g.scale == "learned" and "no rerank score" in g.reason


def test_signal_rerank_reports_its_fallback():
    g = gate.run(RETRIEVAL, SKIPPED, GateConfig(signal="rerank"))
    assert g.scale == "fused" and "fell back" in g.reason and g.signal == "rerank"


def test_signal_fused_ignores_the_rerank_scores():
    g = gate.run(RETRIEVAL, _rerank(("c#0", 0.99)), GateConfig(signal="fused", confidence_threshold_fused=0.03))
    assert g.scale == "fused" and g.score_chunk_id == "a#0"
    assert g.score == pytest.approx(1 / 62 + 1 / 63) and g.decision == "answer"
    assert g.top_chunk_id == "c#0"  # the generator's first source is still the reranked top


def test_signal_dense_reads_the_best_dense_cosine():
    g = gate.run(RETRIEVAL, SKIPPED, GateConfig(signal="dense", confidence_threshold_dense=0.75))
    assert (g.scale, g.score, g.threshold, g.score_chunk_id) == ("dense", 0.72, 0.75, "a#1")
    assert g.decision == "abstain" and g.margin == pytest.approx(-0.03)
    keyword_only = dataclasses.replace(RETRIEVAL, candidates=(RETRIEVAL.candidates[1],))
    g = gate.run(keyword_only, SKIPPED, GateConfig(signal="dense"))
    assert g.scale == "fused" and "fell back" in g.reason


def test_a_single_evidence_signal_decides_alone_and_the_trace_records_it():
    sure = _rerank(("a#0", 0.99))  # the reranker would answer: the rule chosen reads the dense margin only
    g = gate.run(RETRIEVAL, sure, GateConfig(signal="dense_margin", confidence_threshold_dense_margin=0.1))
    assert (g.signal, g.scale, g.decision) == ("dense_margin", "dense_margin", "answer")
    assert g.score == pytest.approx(0.72 - 0.61) and g.threshold == 0.1 and g.margin == pytest.approx(0.01)
    assert [(c.scale, c.passed) for c in g.conditions] == [("dense_margin", True)]
    assert g.reason == "dense_margin score 0.11 >= threshold 0.1"
    stricter = gate.run(RETRIEVAL, sure, GateConfig(signal="dense_margin", confidence_threshold_dense_margin=0.2))
    assert stricter.decision == "abstain" and stricter.llm_calls_saved == 1
    assert stricter.plain_reason and [d.doc_id for d in stricter.closest_documents] == ["a", "b", "c"]
    assert "dense_margin score 0.11 < threshold 0.2" in stricter.reason
    # the new scale survives the stored trace's JSON round trip
    stored = Trace.from_json(Trace(question="q", retrieval=RETRIEVAL, rerank=sure, gate=stricter).to_json())
    assert stored.gate == stricter and gate.replay(stored, GateConfig(signal="dense_margin")) == gate.run(
        RETRIEVAL, sure, GateConfig(signal="dense_margin"))


def test_a_single_signal_rule_without_a_value_abstains_and_says_why():
    # no sentence windows recorded: even the lowest window threshold abstains, with a sure reranker beside it
    g = gate.run(RETRIEVAL, _rerank(("a#0", 0.99)), GateConfig(signal="window", confidence_threshold_window=-1.0))
    assert (g.decision, g.scale, g.signals.window) == ("abstain", "window", None)
    assert "no window value" in g.reason and "passage vectors" in g.reason
    assert g.plain_reason and g.abstention_message == ABSTENTION_MESSAGE


@pytest.mark.parametrize("scale,cfg,rerank_trace,score", [
    ("rerank", GateConfig(signal="rerank", confidence_threshold_rerank=0.5), _rerank(("a#0", 0.5)), 0.5),
    ("fused", GateConfig(signal="fused", confidence_threshold_fused=1 / 62 + 1 / 63), SKIPPED, 1 / 62 + 1 / 63),
    ("dense", GateConfig(signal="dense", confidence_threshold_dense=0.72), SKIPPED, 0.72),
])
def test_a_score_exactly_at_the_threshold_answers(scale, cfg, rerank_trace, score):
    g = gate.run(RETRIEVAL, rerank_trace, cfg)
    assert g.scale == scale and g.score == g.threshold == score
    assert g.decision == "answer" and g.margin == 0.0
    nudged = {"rerank": "confidence_threshold_rerank", "fused": "confidence_threshold_fused",
              "dense": "confidence_threshold_dense"}[scale]
    above = dataclasses.replace(cfg, **{nudged: score + 1e-9})
    assert gate.run(RETRIEVAL, rerank_trace, above).decision == "abstain"


def test_abstention_gives_the_fixed_sentence_and_the_closest_distinct_documents():
    low = _rerank(("a#1", 0.2), ("a#0", 0.15), ("c#0", 0.1), ("b#0", 0.05))
    g = gate.run(RETRIEVAL, low, GateConfig(signal="rerank", closest_documents=2))
    assert g.decision == "abstain" and g.score == 0.2
    assert g.abstention_message == ABSTENTION_MESSAGE
    assert g.llm_calls_saved == 1
    assert [(d.doc_id, d.chunk_id, d.score, d.scale) for d in g.closest_documents] == [
        ("a", "a#1", 0.2, "rerank"), ("c", "c#0", 0.1, "rerank")]
    assert g.closest_documents[0].title == "Title of a"
    g = gate.run(RETRIEVAL, SKIPPED, GateConfig(confidence_threshold_learned=1.0))
    assert [d.doc_id for d in g.closest_documents] == ["a", "b", "c"]
    assert all(d.scale == "fused" for d in g.closest_documents)


def test_no_candidates_abstains_and_says_why():
    failed = RetrievalTrace(status="failed", reason="dense search failed: ConnectionError")
    g = gate.run(failed, RerankTrace(status="skipped", reason="no candidates to rerank"), GateConfig())
    assert g.decision == "abstain" and g.llm_calls_saved == 1
    assert "retrieval failed" in g.reason and g.closest_documents == ()


def test_replay_of_a_stored_trace_matches_the_live_decision_and_follows_new_thresholds():
    rr = _rerank(("a#0", 0.5))
    live = gate.run(RETRIEVAL, rr, GateConfig(signal="rerank"))
    stored = Trace.from_json(Trace(question="q", retrieval=RETRIEVAL, rerank=rr, gate=live).to_json())
    assert gate.replay(stored, GateConfig(signal="rerank")) == live == stored.gate
    assert gate.replay(stored, GateConfig(signal="rerank", confidence_threshold_rerank=0.6)).decision == "abstain"
    inputs = gate.gate_inputs(stored.retrieval, stored.rerank)
    for threshold in (0.1, 0.5, 0.9):
        cfg = GateConfig(signal="rerank", confidence_threshold_rerank=threshold)
        assert gate.decide(inputs, cfg) == gate.replay((RETRIEVAL, rr), cfg) == gate.replay(inputs, cfg)


def test_llm_calls_saved_adds_up_over_a_session():
    gates = [gate.run(RETRIEVAL, _rerank(("a#0", s)), GateConfig(signal="rerank")) for s in (0.9, 0.1, 0.2, 0.7)]
    assert gate.llm_calls_saved(gates) == 2


# -- through the engine: an abstention makes no LLM call -----------------------------------------------------

def _pipeline(store, llm, tmp_path):
    from pipeline.engine import Pipeline

    cfg = PipelineConfig().with_overrides({"generate.backend": "litellm", "generate.model": "openai/fake",
                                           "cache.enabled": False})
    return Pipeline(store, models=fake_models(llm=llm), cfg=cfg, log_runs=False,
                    cache=AnswerCache(tmp_path / "cache.sqlite")), cfg


def test_an_off_topic_question_abstains_with_zero_llm_calls(demo_store_fake, tmp_path):
    llm = FakeLLM(["this reply must never be requested"])
    pipeline, cfg = _pipeline(demo_store_fake, llm, tmp_path)
    trace = pipeline.ask("sourdough bread recipe with rye flour")
    assert trace.gate.decision == "abstain" and trace.gate.scale == "learned"
    assert trace.abstained and trace.answer == ABSTENTION_MESSAGE
    assert trace.llm_calls == 0 and llm.requests == []
    assert trace.llm_calls_saved == 1
    assert trace.gate.closest_documents


def test_an_answerable_question_does_reach_the_llm(demo_store_fake, tmp_path):
    # the contrast that makes the zero above meaningful: the same wiring does call the fake LLM
    llm = FakeLLM(['{"answer": "It times out after 15000 ms [1].", "used_source_ids": [1], "confidence": "HIGH", '
                   '"limitations": []}'])
    pipeline, _ = _pipeline(demo_store_fake, llm, tmp_path)
    trace = pipeline.ask("ERR_TIMEOUT_502 endpoint did not respond in time")
    assert trace.gate.decision == "answer"
    assert len(llm.requests) >= 1 and trace.llm_calls >= 1
