"""LLM provider faults through an OpenAI-compatible stub on 127.0.0.1 that litellm really calls (issue 10,
part 3): timeout, refused connection, HTTP 500, garbage mid-body and mid-stream.

``tests/pipeline/test_litellm_path.py`` covers the backend's error mapping and the generate stage alone.
Here each fault goes through the whole Pipeline (and, for two of them, the real CLI) and the user-visible
result is checked: the extractive answer, cited, validated, flagged as a fallback with the reason, not
cached (so the next question after the provider recovers gets the model again), and a bounded number of
requests.
"""

from __future__ import annotations

import json
import re

import pytest

from pipeline.config import PipelineConfig
from pipeline.engine import Pipeline
from pipeline.models.registry import Models
from pipeline.testing import FakeEmbedder, FakeReranker
from tests.reliability.fault_stub import ChunkedGarbage, FaultStub, GarbageMidBody
from tests.reliability.rel_support import QUESTION, workbench
from tests.support.openai_stub import CloseConnection, Delay, Reply, ServerError, Truncated, free_port

GOOD = json.dumps({"answer": "The default request timeout of Marlin Gateway is 30 seconds [1].", "used_source_ids": [1],
                   "confidence": "HIGH", "limitations": []})

FAULTS = [
    pytest.param(Delay(5.0), "timeout", id="fault-llm-timeout"),
    pytest.param(ServerError(500), "server", id="fault-llm-http-500"),
    pytest.param(ServerError(503, "overloaded"), "server", id="fault-llm-http-503"),
    pytest.param(CloseConnection(), "connection", id="fault-llm-connection-dropped"),
    pytest.param(Truncated(), "bad_response", id="fault-llm-truncated-body"),
    pytest.param(GarbageMidBody(), "bad_response", id="fault-llm-garbage-mid-body"),
    pytest.param(ChunkedGarbage(), None, id="fault-llm-garbage-mid-stream"),
]


@pytest.fixture
def stub():
    with FaultStub() as running:
        yield running


def cfg_for(api_base: str, timeout_s: float = 10.0, retries: int = 1) -> PipelineConfig:
    return PipelineConfig().with_overrides({"generate.backend": "litellm", "generate.model": "openai/stub-model",
                                            "generate.api_base": api_base, "generate.timeout_s": timeout_s,
                                            "generate.retries": retries})


def pipeline(store, cfg, tmp_path) -> Pipeline:
    # Models() builds the real litellm backend from the config; only the embedder and reranker are fakes.
    from pipeline.storage.cache import AnswerCache

    return Pipeline(store, Models(embedder=FakeEmbedder(), reranker=FakeReranker()), cfg, log_runs=False,
                    cache=AnswerCache(tmp_path / "cache.sqlite"))


def assert_flagged_extractive_fallback(trace, kind: str | None) -> None:
    gen = trace.generation
    assert gen.status == "fallback" and gen.backend == "extractive" and gen.requested_backend == "litellm"
    if kind:
        assert gen.fallback_reason.startswith(f"provider {kind}"), gen.fallback_reason
    assert re.search(r"30 seconds.*\[1\]", trace.answer), "the cited passage, quoted"
    assert trace.validation.status == "ran" and trace.validation.supported >= 1 and not trace.validation.unsupported
    assert any(d.startswith("generation fell back to extractive: provider") for d in trace.degradations)
    assert any("The language model's answer could not be used" in lim for lim in trace.limitations)
    assert trace.confidence in ("MEDIUM", "LOW") and not trace.cache_hit


@pytest.mark.parametrize(("behaviour", "kind"), FAULTS)
def test_a_provider_fault_gives_the_cited_extractive_answer_flagged(benign_store, stub, tmp_path, behaviour, kind):
    stub.default = behaviour
    timeout_s = 0.5 if isinstance(behaviour, Delay) else 10.0
    p = pipeline(benign_store, cfg_for(stub.api_base, timeout_s=timeout_s, retries=1), tmp_path)
    trace = p.ask(QUESTION)
    assert_flagged_extractive_fallback(trace, kind)
    # Bounded by generate.retries=1: a transient kind is retried once, a bad body is not retried.
    expected = {"timeout": {2}, "server": {2}, "connection": {2}, "bad_response": {1}}.get(kind, {1, 2})
    assert len(stub.requests) in expected
    # The provider recovers: the fallback was not cached, the next ask reaches the model.
    stub.default = Reply(GOOD)
    stub.reset()
    again = p.ask(QUESTION)
    assert again.generation.status == "answered" and again.generation.backend == "litellm"
    assert len(stub.requests) == 1


def test_a_body_that_is_not_utf8_is_a_bad_response_and_not_retried(benign_store, stub, tmp_path):
    stub.default = GarbageMidBody()
    trace = pipeline(benign_store, cfg_for(stub.api_base, retries=1), tmp_path).ask(QUESTION)
    assert trace.generation.fallback_reason.startswith("provider bad_response")
    assert len(stub.requests) == 1


def test_a_refused_connection_gives_the_cited_extractive_answer_flagged(benign_store, tmp_path):
    dead = f"http://127.0.0.1:{free_port()}/v1"
    trace = pipeline(benign_store, cfg_for(dead, retries=1), tmp_path).ask(QUESTION)
    assert_flagged_extractive_fallback(trace, "connection")
    assert "refused" in trace.generation.fallback_reason.lower()


def test_a_provider_that_recovers_within_the_retry_budget_answers(benign_store, stub, tmp_path):
    stub.script(ServerError(502), Reply(GOOD))
    trace = pipeline(benign_store, cfg_for(stub.api_base, retries=1), tmp_path).ask(QUESTION)
    assert trace.generation.status == "answered" and len(stub.requests) == 2
    assert trace.degradations == ()


@pytest.mark.long
@pytest.mark.parametrize(("behaviour", "kind"), [
    pytest.param(Delay(5.0), "timeout", id="cli-fault-timeout"),
    pytest.param(ChunkedGarbage(), None, id="cli-fault-garbage-mid-stream"),
])
def test_through_the_cli_a_provider_fault_is_a_flagged_extractive_answer_not_an_error(cli_store, stub, behaviour, kind):
    stub.default = behaviour
    timeout_s = "0.5" if isinstance(behaviour, Delay) else "10"
    common = ["--store", str(cli_store), "--set", "generate.backend=litellm", "--set", "generate.model=openai/stub-model",
              "--set", f"generate.api_base={stub.api_base}", "--set", f"generate.timeout_s={timeout_s}",
              "--set", "generate.retries=0", "--set", "cache.enabled=false"]
    question = "How do I replay events from the dead-letter queue?"
    result = workbench("ask", question, *common, "--json", timeout=300)
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr
    trace = json.loads(result.stdout)
    assert trace["generation"]["status"] == "fallback" and trace["generation"]["backend"] == "extractive"
    if kind:
        assert trace["generation"]["fallback_reason"].startswith(f"provider {kind}")
    assert re.search(r"\[\d+\]", trace["answer"]) and trace["validation"]["supported"] >= 1
    assert any(d.startswith("generation fell back to extractive") for d in trace["degradations"])
    human = workbench("ask", question, *common, timeout=300)
    assert human.returncode == 0
    assert "generator: extractive (fallback from litellm: provider" in human.stdout, "the terminal says which ran"
