"""pipeline.engine in steps: ``begin -> retrieve -> decide -> finish`` is ``ask``, ``resume`` starts a run from an
earlier trace's retrieval, and :func:`retrieval_differences` says when that is allowed (issue 19: batched
evaluation and trace reuse)."""

from __future__ import annotations

import dataclasses

import pytest

from pipeline.config import PipelineConfig
from pipeline.engine import AFTER_RETRIEVAL, Pipeline, QuestionError, retrieval_differences
from tests.support.traces import timeless

QUESTIONS = ("What does ERR_TIMEOUT_502 mean?", "How do I rotate an API token?", "What is the capital of France?")
FOLLOW_UP = ("and how long does it wait?", [{"role": "user", "content": "What does ERR_TIMEOUT_502 mean?"},
                                            {"role": "assistant", "content": "A gateway timeout [1]."}])
OFF = {"cache.enabled": False}


def _same(a, b) -> dict:
    """Everything a run recorded except when it ran, its id and its wall-clock times."""
    return timeless(a) == timeless(b)


def _stepped(pipeline: Pipeline, question, history=None, generate_answer=True):
    trace = pipeline.retrieve(pipeline.begin(question, history))
    return pipeline.finish(pipeline.decide(trace, generate_answer=generate_answer), generate_answer=generate_answer)


@pytest.mark.parametrize("overrides", [{}, {"gate.signal": "dense", "gate.confidence_threshold_dense": 0.99},
                                       {"validate.enabled": False}])
def test_the_four_steps_give_the_trace_ask_gives(demo_store_fake, models, overrides):
    pipeline = Pipeline(demo_store_fake, models, PipelineConfig().with_overrides({**OFF, **overrides}), log_runs=False)
    for question, history in [(q, None) for q in QUESTIONS] + [FOLLOW_UP]:
        asked, stepped = pipeline.ask(question, history), _stepped(pipeline, question, history)
        assert _same(asked, stepped), question
        assert set(stepped.timings_ms) == set(asked.timings_ms)
        assert stepped.timings_ms["total"] == pytest.approx(sum(v for k, v in stepped.timings_ms.items()
                                                                if k != "total"), abs=0.01)
    searched = pipeline.search(QUESTIONS[0])
    assert _same(searched, _stepped(pipeline, QUESTIONS[0], generate_answer=False))


def test_begin_rejects_what_ask_rejects(demo_store_fake, models):
    pipeline = Pipeline(demo_store_fake, models, PipelineConfig(), log_runs=False)
    with pytest.raises(QuestionError):
        pipeline.begin("   ")


def test_a_resumed_run_is_the_run_under_the_new_settings(demo_store_fake, models):
    before = PipelineConfig().with_overrides(OFF)
    after = before.with_overrides({"gate.confidence_threshold_learned": 0.99, "generate.extractive_sentences": 1,
                                   "validate.claim_threshold": 0.9})
    earlier = Pipeline(demo_store_fake, models, before, log_runs=False).ask(QUESTIONS[0])
    pipeline = Pipeline(demo_store_fake, models, after, log_runs=False)
    resumed = pipeline.finish(pipeline.decide(pipeline.resume(earlier)))
    fresh = pipeline.ask(QUESTIONS[0])
    assert _same(resumed, fresh) and resumed.config_hash == after.config_hash() != earlier.config_hash
    assert resumed.retrieval is earlier.retrieval and resumed.rerank is earlier.rerank
    assert resumed.gate.threshold == 0.99 != earlier.gate.threshold
    assert {k: resumed.timings_ms[k] for k in ("rewrite", "retrieve", "rerank")} == \
        {k: earlier.timings_ms[k] for k in ("rewrite", "retrieve", "rerank")}, "the reused steps keep their times"


def test_resume_refuses_a_run_that_retrieved_otherwise_or_saw_another_corpus(demo_store_fake, models):
    cfg = PipelineConfig().with_overrides(OFF)
    earlier = Pipeline(demo_store_fake, models, cfg, log_runs=False).ask(QUESTIONS[0])
    other = Pipeline(demo_store_fake, models, cfg.with_overrides({"retrieve.rrf_k": 10}), log_runs=False)
    with pytest.raises(ValueError, match=r"retrieve\.rrf_k"):
        other.resume(earlier)
    same = Pipeline(demo_store_fake, models, cfg, log_runs=False)
    with pytest.raises(ValueError, match="corpus version"):
        same.resume(dataclasses.replace(earlier, corpus_version=earlier.corpus_version + 1))
    with pytest.raises(ValueError, match="no configuration"):
        same.resume(dataclasses.replace(earlier, config=None))


def test_only_settings_after_retrieval_leave_the_retrieval_reusable():
    base = PipelineConfig()
    for change in ({"gate.signal": "dense"}, {"gate.confidence_threshold_rerank": 0.2}, {"generate.max_sources": 3},
                   {"validate.claim_threshold": 0.5}, {"validate.enabled": False}, {"cache.enabled": False}):
        assert retrieval_differences(base, base.with_overrides(change)) == (), change
    assert retrieval_differences(base, base.with_overrides({"retrieve.rrf_k": 10, "rerank.top_k": 5})) == \
        ("retrieve.rrf_k", "rerank.top_k")
    assert retrieval_differences(base, base.with_overrides({"rewrite.backend": "off"})) == ("rewrite.backend",)
    assert retrieval_differences(base, base.with_overrides({"embedding.batch_size": 8})) == ("embedding.batch_size",), \
        "every section before the gate counts, whether or not a query reads it"
    assert set(AFTER_RETRIEVAL) == {"gate", "generate", "validate", "cache"}


def test_with_rerank_early_stop_a_gate_change_that_moves_the_stop_score_changes_the_rerank():
    early = PipelineConfig().with_overrides({"rerank.early_stop": True, "gate.signal": "rerank"})
    assert retrieval_differences(early, early.with_overrides({"gate.confidence_threshold_rerank": 0.2})) == \
        ("gate (the rerank early-stop score it implies)",)
    assert retrieval_differences(early, early.with_overrides({"gate.confidence_threshold_dense": 0.2})) == (), \
        "the dense threshold does not move the rerank's stop score"
    assert retrieval_differences(early, early.with_overrides({"gate.signal": "fused"})) != (), "no stop at all"
