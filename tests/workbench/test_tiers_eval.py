"""Tiered generation in the evaluation (workbench/evaluate.py tier_summary, the eval text) and the arm comparison
(workbench/compare.py): the same cases answered cheap-only, expensive-only and tiered through an OpenAI-compatible
stub serving two models with scripted replies."""

from __future__ import annotations

import contextlib
import json

import pytest

from benchmarks.tiers import offered_sources
from pipeline.config import PipelineConfig
from tests.support.openai_stub import OpenAIStub, RecordedRequest, Reply
from workbench.compare import compare_arms, diff_traces, expensive_model, tier_arms, tiering_verdict
from workbench.evaluate import evaluate, run_eval
from workbench.golden import GoldenCase, GoldenSet

CHEAP, EXPENSIVE = "openai/gpt-4o-mini", "openai/gpt-4o"
FABRICATES_ON = "ERR_TIMEOUT_502"
CASES = GoldenSet(path="inline", cases=(
    GoldenCase(id="t1", question="What does ERR_TIMEOUT_502 mean?", answerable=True),
    GoldenCase(id="t2", question="How long are dead-letter entries kept by default?", answerable=True)))


def _quote_source_one(request: RecordedRequest) -> str:
    sources = offered_sources(str(request.messages[-1]["content"]))
    sentence = " ".join(sources[1].split()).split(". ")[0].rstrip(".")
    return json.dumps({"answer": f"{sentence} [1].", "used_source_ids": [1], "confidence": "HIGH",
                       "limitations": []})


def cheap(request: RecordedRequest) -> Reply:
    if FABRICATES_ON in str(request.messages[-1]["content"]).split("Question")[-1]:
        return Reply(json.dumps({"answer": "It means the gateway timed out [42].", "used_source_ids": [42],
                                 "confidence": "HIGH", "limitations": []}), prompt_tokens=1000, completion_tokens=50)
    return Reply(_quote_source_one(request), prompt_tokens=1000, completion_tokens=50)


def expensive(request: RecordedRequest) -> Reply:
    return Reply(_quote_source_one(request), prompt_tokens=1000, completion_tokens=50)


@pytest.fixture
def stub(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    with OpenAIStub() as s:
        s.respond("gpt-4o-mini", cheap).respond("gpt-4o", expensive)
        yield s


def tiered_config(stub) -> PipelineConfig:
    # the gate on the fake reranker's score (gate.signal=rerank) answers both cases: this test is about the tiers
    return PipelineConfig().with_overrides({"gate.signal": "rerank", "generate.tiers": json.dumps([
        {"backend": "litellm", "model": CHEAP, "api_base": stub.api_base},
        {"backend": "litellm", "model": EXPENSIVE, "api_base": stub.api_base}])})


def test_tiered_makes_fewer_expensive_calls_than_expensive_only_on_the_same_cases(stub, demo_store_fake, models):
    arms = tier_arms(tiered_config(stub))
    assert [len(c.generate.tiers) for c in arms.values()] == [1, 1, 2]
    summaries = {arm: evaluate(CASES, demo_store_fake, models, cfg, nli=False).summary for arm, cfg in arms.items()}
    rows = {r["arm"]: r for r in compare_arms(summaries, expensive_model(arms["tiered"]))}
    assert [r.model for r in stub.requests].count("gpt-4o") == rows["expensive only"]["expensive_calls"] + \
        rows["tiered"]["expensive_calls"]
    assert rows["cheap only"]["expensive_calls"] == 0
    assert rows["expensive only"]["expensive_calls"] == 2 and rows["tiered"]["expensive_calls"] == 1
    block = summaries["tiered"]["tiers"]
    assert block["escalation_rate"] == 0.5 and block["generated"] == 2
    assert block["per_tier"][0]["escalate_reasons"]["fabricated"] == 1
    assert [t["kept"] for t in block["per_tier"]] == [1, 1]
    # litellm list prices on the stub's token counts: tiered costs less than expensive-only, more than cheap-only
    assert rows["cheap only"]["cost_usd"] < rows["tiered"]["cost_usd"] < rows["expensive only"]["cost_usd"]
    assert block["cost_per_answered_usd"] == pytest.approx(block["cost_usd"] / block["answered"], rel=1e-6)
    assert tiering_verdict(list(rows.values()))["fewer_expensive_calls"] is True
    assert "tiers" not in evaluate(CASES, demo_store_fake, models, PipelineConfig(), nli=False).summary


def test_workbench_eval_prints_the_escalation_rate_and_cost(stub, demo_store_fake, models, tmp_path, capsys):
    golden = tmp_path / "golden.jsonl"
    golden.write_text("\n".join(json.dumps({"id": c.id, "question": c.question, "answerable": True,
                                            "expected_doc_ids": [doc], "expected_answer": None, "tags": []})
                                for c, doc in zip(CASES.cases, ("err-timeout-502", "concept-dead-letter-queue"),
                                                  strict=True)) + "\n", encoding="utf-8")
    status = run_eval(golden, tiered_config(stub), open_store=lambda: contextlib.nullcontext(demo_store_fake),
                      models=models, nli=False)
    out = capsys.readouterr().out
    assert status == 0
    assert "tiered generation (2 tiers" in out and "escalation rate 50.0 % of 2 generated answers" in out
    assert "calls to the expensive tier (2): 1" in out and "tier 1 openai/gpt-4o-mini: tried 2, kept 1" in out


def test_compare_puts_cheap_only_beside_tiered(stub, demo_store_fake, models):
    from pipeline.engine import Pipeline

    tiered = tiered_config(stub).with_overrides({"cache.enabled": False})
    pipe = Pipeline(demo_store_fake, models, tiered, log_runs=False)
    a = pipe.ask(CASES.cases[0].question)
    b = pipe.ask(CASES.cases[0].question, cfg=tier_arms(tiered)["cheap only"])
    diff = diff_traces(a, b)
    assert [c.key for c in diff.config_changes] == ["generate.tiers"]
    assert "(escalated: unsupported, fabricated)" in diff.tiers_a and "(kept)" in diff.tiers_b
    assert any(line.startswith("tiers tried: 1 openai/gpt-4o-mini (escalated") for line in diff.summary())
    assert diff.cost_b < diff.cost_a
    with pytest.raises(ValueError, match="two or more tiers"):
        tier_arms(PipelineConfig())


def test_the_terminal_answer_says_which_tiers_were_tried(stub, demo_store_fake, models):
    from pipeline.engine import Pipeline
    from workbench.report import render_answer

    cfg = tiered_config(stub).with_overrides({"cache.enabled": False})
    escalated = render_answer(Pipeline(demo_store_fake, models, cfg, log_runs=False).ask(CASES.cases[0].question))
    line = next(x for x in escalated.splitlines() if x.startswith("tiers tried: "))
    assert line.startswith("tiers tried: 1 openai/gpt-4o-mini (escalated: ") and "fabricated" in line
    assert "→ 2 openai/gpt-4o (kept) · $" in line
    plain = render_answer(Pipeline(demo_store_fake, models, PipelineConfig(), log_runs=False).ask(
        CASES.cases[0].question))
    assert "tiers tried" not in plain
