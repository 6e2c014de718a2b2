"""Tiered generation (pipeline/generation/tiers.py) through the real litellm client against an OpenAI-compatible
stub serving two models: a cheap one that cites the wrong source on some questions and an expensive one that
cites right. Prices are litellm's offline list prices for the model names."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.config import (
    ESCALATION_TRIGGERS,
    ConfigError,
    GenerateConfig,
    PipelineConfig,
    TierConfig,
    ValidateConfig,
    get_value,
    parse_tiers,
    parse_triggers,
    tunables,
)
from pipeline.context import StageContext
from pipeline.engine import Pipeline
from pipeline.generation import tiers
from pipeline.generation.prompts import ABSTENTION_MESSAGE
from pipeline.models.registry import Models
from pipeline.testing import FakeEmbedder
from pipeline.trace import Candidate, ClaimCheck, GenerationTrace, LLMAttempt, Trace, ValidationTrace
from tests.support.openai_stub import OpenAIStub, RecordedRequest, Reply, ServerError

CHEAP, EXPENSIVE = "openai/gpt-4o-mini", "openai/gpt-4o"
QUEUE = Candidate(chunk_id="queue#1", doc_id="queue", title="Queue capacity",
                  text="The default delivery queue capacity is 100000 entries per node.")
TLS = Candidate(chunk_id="tls#1", doc_id="tls", title="TLS certificates",
                text="Certificates rotate automatically every ninety days through the control plane.")
CANDIDATES = (QUEUE, TLS)
QUESTION = "What is the default queue capacity?"


def answer(text: str, ids: list[int]) -> str:
    return json.dumps({"answer": text, "used_source_ids": ids, "confidence": "HIGH", "limitations": []})


RIGHT = answer("The default delivery queue capacity is 100000 entries per node [1].", [1])
WRONG = answer("The default delivery queue capacity is 100000 entries per node [2].", [2])   # cites TLS


@pytest.fixture
def stub(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    with OpenAIStub() as s:
        yield s


def tiered(stub, *tier_list, escalate_on=ESCALATION_TRIGGERS) -> GenerateConfig:
    return GenerateConfig(tiers=tuple(TierConfig(**t) if isinstance(t, dict) else t for t in tier_list),
                          escalate_on=tuple(escalate_on), timeout_s=10.0, retries=0)


def two_tiers(stub, **kw) -> GenerateConfig:
    return tiered(stub, {"backend": "litellm", "model": CHEAP, "api_base": stub.api_base},
                  {"backend": "litellm", "model": EXPENSIVE, "api_base": stub.api_base}, **kw)


def ctx() -> StageContext:
    return StageContext(models=Models(embedder=FakeEmbedder()))


def run(cfg: GenerateConfig) -> tiers.TieredResult:
    return tiers.run(QUESTION, QUESTION, CANDIDATES, cfg, ValidateConfig(), ctx())


# -- the attempts ------------------------------------------------------------------------------------------

def test_a_cheap_answer_that_cites_the_wrong_source_goes_to_the_expensive_tier(stub):
    stub.script_model("gpt-4o-mini", Reply(WRONG, prompt_tokens=800, completion_tokens=40))
    stub.script_model("gpt-4o", Reply(RIGHT, prompt_tokens=800, completion_tokens=40))
    result = run(two_tiers(stub))
    gen = result.generation
    assert [r.model for r in stub.requests] == ["gpt-4o-mini", "gpt-4o"]
    assert gen.kept_tier == 2 and gen.answer.endswith("[1].") and result.validation.unsupported == 0
    first, second = gen.tiers
    # unsupported by the source it cites, and stated word for word by the one it should have cited
    assert first.escalate_reasons == ("unsupported", "misattributed") and first.unsupported == 1 and not first.kept
    assert first.misattributed == 1
    assert second.kept and second.escalate_reasons == () and second.supported == 1
    assert (first.prompt_tokens, first.completion_tokens) == (800, 40)
    assert gen.llm_calls == 2
    # litellm's list prices: the expensive model costs more for the same tokens, and both are known
    assert 0 < first.cost_usd < second.cost_usd
    assert tiers.total_cost(gen) == pytest.approx(first.cost_usd + second.cost_usd)


def test_a_good_cheap_answer_is_kept_and_the_expensive_model_is_never_called(stub):
    stub.script_model("gpt-4o-mini", Reply(RIGHT))
    gen = run(two_tiers(stub)).generation
    assert [r.model for r in stub.requests] == ["gpt-4o-mini"]
    assert gen.kept_tier == 1 and len(gen.tiers) == 1 and gen.tiers[0].kept and gen.llm_calls == 1


def test_a_trigger_left_out_of_escalate_on_keeps_the_cheap_answer(stub):
    stub.script_model("gpt-4o-mini", Reply(WRONG))
    gen = run(two_tiers(stub, escalate_on=("fabricated",))).generation
    assert gen.kept_tier == 1 and [r.model for r in stub.requests] == ["gpt-4o-mini"]


def test_a_fabricated_marker_and_a_malformed_reply_each_escalate(stub):
    stub.script_model("gpt-4o-mini", Reply(answer("The default delivery queue capacity is 100000 entries [7].", [7])))
    stub.script_model("gpt-4o", Reply(RIGHT))
    fabricated = run(two_tiers(stub)).generation
    assert "fabricated" in fabricated.tiers[0].escalate_reasons and fabricated.kept_tier == 2
    stub.reset()
    stub.script_model("gpt-4o-mini", Reply("not json"), Reply("still not json"))
    stub.script_model("gpt-4o", Reply(RIGHT))
    gen = run(two_tiers(stub)).generation
    assert gen.tiers[0].escalate_reasons == ("malformed",) and gen.tiers[0].llm_calls == 2
    assert gen.kept_tier == 2 and gen.llm_calls == 3


def test_a_dead_cheap_provider_escalates_as_a_provider_error(stub):
    stub.script_model("gpt-4o-mini", ServerError(500))
    stub.script_model("gpt-4o", Reply(RIGHT))
    gen = run(two_tiers(stub)).generation
    assert gen.tiers[0].escalate_reasons == ("provider_error",) and gen.tiers[0].status == "fallback"
    assert gen.kept_tier == 2 and gen.status == "answered"


def test_the_last_tier_is_kept_even_when_it_too_would_escalate(stub):
    stub.script_model("gpt-4o-mini", Reply(WRONG))
    stub.script_model("gpt-4o", Reply(WRONG))
    gen = run(two_tiers(stub)).generation
    assert gen.kept_tier == 2 and gen.tiers[1].kept and gen.tiers[1].unsupported == 1


def test_extractive_is_a_free_tier_one_and_an_unknown_model_has_an_unknown_cost(stub):
    stub.script_model("house-model", Reply(RIGHT))
    cfg = tiered(stub, {"backend": "extractive"},
                 {"backend": "litellm", "model": "openai/house-model", "api_base": stub.api_base})
    gen = run(cfg).generation
    assert gen.tiers[0].backend == "extractive" and gen.tiers[0].cost_usd == 0.0
    if gen.kept_tier == 2:  # the extractive answer escalated: the house model's price is not on litellm's list
        assert gen.tiers[1].cost_usd is None and tiers.total_cost(gen) is None
    assert tiers.token_cost("litellm", "openai/house-model", 100, 10) is None
    assert tiers.token_cost("litellm", CHEAP, 1000, 0) > 0


def test_the_expensive_tier_can_be_the_final_fallback_to_extractive(stub):
    stub.script_model("gpt-4o-mini", Reply(WRONG))
    cfg = tiered(stub, {"backend": "litellm", "model": CHEAP, "api_base": stub.api_base}, {"backend": "extractive"})
    gen = run(cfg).generation
    assert gen.kept_tier == 2 and gen.backend == "extractive" and gen.tiers[1].cost_usd == 0.0


# -- the one escalation rule -------------------------------------------------------------------------------

def _gen(**kw) -> GenerationTrace:
    return GenerationTrace(status=kw.pop("status", "answered"), **kw)


@pytest.mark.parametrize("gen, val, fired", [
    (_gen(), ValidationTrace(status="ran", supported=2), ()),
    (_gen(), ValidationTrace(status="ran", unsupported=1, uncited=1), ("unsupported", "uncited")),
    (_gen(), ValidationTrace(status="ran", supported=1, fabricated_markers=(9,)), ("fabricated",)),
    (_gen(), ValidationTrace(status="ran", claims=(ClaimCheck("x", (1,), verdict="supported"),), supported=1,
                             misattributed=1), ("misattributed",)),
    (_gen(answer="```\nharborctl backup create\n``` [1]"), ValidationTrace(status="ran"), ("unchecked",)),
    (_gen(status="abstained", is_abstention=True), ValidationTrace(), ("abstained",)),
    (_gen(status="fallback", attempts=(LLMAttempt(parse_error="x"), LLMAttempt(parse_error="y"))),
     ValidationTrace(status="ran", supported=1), ("malformed",)),
    (_gen(status="fallback", attempts=(LLMAttempt(error="timeout: t"),)), ValidationTrace(), ("provider_error",)),
    (_gen(status="fallback"), ValidationTrace(), ("provider_error",)),
])
def test_should_escalate_names_every_trigger_that_fires(gen, val, fired):
    assert tiers.should_escalate(gen, val, ESCALATION_TRIGGERS) == fired
    assert tiers.should_escalate(gen, val, ()) == ()


# -- the engine, the config and the stored trace ------------------------------------------------------------

def test_the_engine_runs_the_tiers_and_records_them_and_an_empty_list_changes_nothing(stub, demo_store_fake,
                                                                                      models):
    def cites_a_source_never_offered(request: RecordedRequest) -> Reply:
        return Reply(answer("Queue capacity is set per node [42].", [42]))

    stub.respond("gpt-4o-mini", cites_a_source_never_offered)
    stub.respond("gpt-4o", lambda request: Reply(answer(ABSTENTION_MESSAGE, [])))
    base = PipelineConfig().with_overrides({"cache.enabled": False})
    cfg = base.with_overrides({"generate.tiers": json.dumps([
        {"backend": "litellm", "model": CHEAP, "api_base": stub.api_base},
        {"backend": "litellm", "model": EXPENSIVE, "api_base": stub.api_base}, {"backend": "extractive"}])})
    question = "What does ERR_TIMEOUT_502 mean?"
    trace = Pipeline(demo_store_fake, models, cfg, log_runs=False).ask(question)
    assert trace.gate.decision == "answer"
    gen = trace.generation
    assert [a.escalate_reasons for a in gen.tiers] == [("unsupported", "fabricated"), ("abstained",), ()]
    assert gen.kept_tier == 3 and gen.backend == "extractive" and trace.answer == gen.answer
    assert trace.llm_calls == 2 and trace.timings_ms["generate"] == gen.latency_ms
    assert trace.timings_ms["validate"] == trace.validation.latency_ms
    assert sum(a.latency_ms for a in gen.tiers) >= trace.timings_ms["validate"]
    assert Trace.from_json(trace.to_json()) == trace
    plain = Pipeline(demo_store_fake, models, base, log_runs=False).ask(question)
    assert plain.generation.tiers == () and plain.generation.kept_tier == 0


def test_a_trace_stored_before_tiers_still_loads():
    old = Trace(question="q").to_dict()
    del old["generation"]["tiers"], old["generation"]["kept_tier"]
    loaded = Trace.from_dict(old)
    assert loaded.generation.tiers == () and loaded.generation.kept_tier == 0


def test_tiers_round_trip_through_set_the_config_json_and_the_sidebar_text():
    text = json.dumps([{"backend": "extractive"}, {"backend": "litellm", "model": EXPENSIVE, "max_tokens": 256}])
    cfg = PipelineConfig().with_overrides([f"generate.tiers={text}", "generate.escalate_on=unsupported,fabricated"])
    assert cfg.generate.tiers[1] == TierConfig(backend="litellm", model=EXPENSIVE, max_tokens=256)
    assert cfg.generate.escalate_on == ("unsupported", "fabricated")
    assert PipelineConfig.from_json(cfg.to_json()) == cfg
    assert cfg.config_hash() != PipelineConfig().config_hash()
    # the sidebar holds the JSON text and rebuilds the same config from it
    shown = {t.key: get_value(cfg, t.key) for t in tunables()}
    assert isinstance(shown["generate.tiers"], str)
    assert PipelineConfig().with_overrides(shown) == cfg
    assert {t.key: t.type for t in tunables()}["generate.tiers"] == "json"


@pytest.mark.parametrize("text, message", [
    ("[{", "generate.tiers must be a JSON list"),
    ('{"backend": "extractive"}', "must be a JSON list of tiers"),
    ('[{"backend": "extractive", "modle": "x"}]', r"generate.tiers\[1\]: unknown key modle"),
    ('[{"backend": "gpt"}]', "backend must be one of extractive, litellm, local"),
    ('[{"backend": "litellm"}]', "needs a model"),
    ('[{"backend": "extractive", "max_tokens": 4}]', "max_tokens must be an integer between 16 and 8192"),
    ('["extractive"]', r"generate.tiers\[1\] must be an object"),
])
def test_a_bad_tiers_value_is_one_config_error_naming_the_tier(text, message):
    with pytest.raises(ConfigError, match=message):
        PipelineConfig().with_overrides([f"generate.tiers={text}"])
    with pytest.raises(ConfigError, match=message):
        PipelineConfig.from_json(json.dumps({"generate": {"tiers": json.loads(text) if text != "[{" else "[{"}}))


def test_an_unknown_trigger_is_refused():
    with pytest.raises(ConfigError, match="unknown trigger sometimes; use any of unsupported"):
        PipelineConfig().with_overrides(["generate.escalate_on=unsupported,sometimes"])


_json = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=10),
                     lambda c: st.lists(c, max_size=3) | st.dictionaries(
                         st.sampled_from(["backend", "model", "api_base", "max_tokens", "x"]) | st.text(max_size=5),
                         c, max_size=4), max_leaves=10)


@given(st.one_of(_json.map(json.dumps), st.text(max_size=40)))
@settings(max_examples=300, deadline=None)
def test_any_tiers_text_parses_to_valid_tiers_or_is_one_config_error(text):
    try:
        parsed = parse_tiers(text)
    except ConfigError as exc:
        assert "\n" not in str(exc) and str(exc).startswith("generate.tiers")
    else:
        assert all(isinstance(t, TierConfig) for t in parsed)
        assert parse_tiers(json.dumps([vars(t) for t in parsed])) == parsed   # what it shows, it reads back
        cfg = PipelineConfig().with_overrides({"generate.tiers": text})
        assert PipelineConfig.from_json(cfg.to_json()) == cfg


@given(st.one_of(st.lists(st.sampled_from([*ESCALATION_TRIGGERS, "sometimes", ""]), max_size=5).map(",".join),
                 _json.map(json.dumps), st.text(max_size=30)))
@settings(max_examples=300, deadline=None)
def test_any_escalate_on_text_parses_to_known_triggers_or_is_one_config_error(text):
    try:
        parsed = parse_triggers(text)
    except ConfigError as exc:
        assert "\n" not in str(exc) and str(exc).startswith("generate.escalate_on")
    else:
        assert set(parsed) <= set(ESCALATION_TRIGGERS) and len(parsed) == len(set(parsed))
        assert parse_triggers(",".join(parsed)) == parsed == parse_triggers(json.dumps(list(parsed)))
