"""pipeline.engine: one stage contract, and the engine as the one place that times stages and hands one stage
what it needs from another's config."""

from __future__ import annotations

import inspect

from pipeline.config import GateConfig, PipelineConfig
from pipeline.engine import Pipeline, rerank_stop_at
from pipeline.gate import stage as gate
from pipeline.generation import generate, rewrite
from pipeline.retrieval import rerank, retrieve
from pipeline.validation import citations, trust

QUESTION = "What does ERR_TIMEOUT_502 mean?"


def test_every_stage_takes_only_its_own_config_section():
    sections = {retrieve: "RetrieveConfig", rerank: "RerankConfig", gate: "GateConfig", rewrite: "RewriteConfig",
                generate: "GenerateConfig", citations: "ValidateConfig"}
    for module, section in sections.items():
        params = inspect.signature(module.run).parameters
        annotations = [str(p.annotation) for p in params.values()]
        assert section in annotations, f"{module.__name__}.run takes its {section}"
        assert not any("PipelineConfig" in a for a in annotations), f"{module.__name__}.run takes the whole config"
        assert sum("Config" in a for a in annotations) == 1, f"{module.__name__}.run reads another stage's section"
    assert "cfg" not in inspect.signature(trust.run).parameters  # pure: no section, no context


def test_the_engine_times_each_stage_once_and_stamps_it_on_the_record(demo_store_fake, models):
    cfg = PipelineConfig().with_overrides({"cache.enabled": False})
    trace = Pipeline(demo_store_fake, models, cfg, log_runs=False).ask(QUESTION)
    assert trace.gate.decision == "answer"
    for stage, record in (("rewrite", trace.rewrite), ("rerank", trace.rerank), ("generate", trace.generation),
                          ("validate", trace.validation)):
        assert record.latency_ms == trace.timings_ms[stage], stage
    assert "total" not in trace.retrieval.timings_ms and trace.timings_ms["total"] >= trace.timings_ms["retrieve"]


def test_the_rerank_early_stop_threshold_comes_from_the_gate_config_via_the_engine(demo_store_fake, models):
    assert rerank_stop_at(GateConfig(signal="rerank")) == GateConfig().confidence_threshold_rerank
    assert rerank_stop_at(GateConfig(signal="fused")) is None
    assert rerank_stop_at(GateConfig()) is None, "auto reads the learned rule: every sentence must be read"
    stop = PipelineConfig().with_overrides({"cache.enabled": False, "rerank.early_stop": True, "gate.signal": "rerank",
                                            "rerank.batch_size": 2, "rerank.top_k": 2})
    stopped = Pipeline(demo_store_fake, models, stop, log_runs=False).search(QUESTION)
    assert stopped.rerank.early_stopped and stopped.rerank.scored < stopped.rerank.candidates_in
    ignored = Pipeline(demo_store_fake, models, stop.with_overrides({"gate.signal": "fused"}),
                       log_runs=False).search(QUESTION)
    assert not ignored.rerank.early_stopped and "early stop not applied" in ignored.rerank.reason


def test_history_is_capped_like_the_question_and_nothing_is_logged(demo_store_fake, models, tmp_path):
    from pipeline.engine import MAX_HISTORY_TURNS, MAX_TURN_CHARS, QuestionError
    from pipeline.storage.runs import RunLog

    runs = RunLog(tmp_path / "runs.sqlite")
    pipeline = Pipeline(demo_store_fake, models, PipelineConfig(), runs=runs)
    too_many = [{"role": "user", "content": "hi"}] * (MAX_HISTORY_TURNS + 1)
    too_long = [{"role": "user", "content": "x" * (MAX_TURN_CHARS + 1)}]
    for history, message in ((too_many, "turns; the limit is"), (too_long, "characters long; the limit is")):
        try:
            pipeline.ask(QUESTION, history=history)
        except QuestionError as exc:
            assert message in str(exc) and "\n" not in str(exc)
        else:
            raise AssertionError("an oversized history was accepted")
    assert runs.count() == 0
    ok = pipeline.ask(QUESTION, history=[{"role": "user", "content": "x" * MAX_TURN_CHARS}] * MAX_HISTORY_TURNS)
    assert len(ok.history) == MAX_HISTORY_TURNS and runs.count() == 1
