"""The real litellm client code path against an OpenAI-compatible HTTP stub on 127.0.0.1.

``openai/<name>`` with ``api_base`` makes litellm speak HTTP to the stub, so timeouts, refused connections,
5xx and broken bodies exercise the same client, exception mapping and retry bounds as a real provider.
"""

from __future__ import annotations

import json
import re

import pytest

from pipeline.config import GenerateConfig
from pipeline.generation import generate
from pipeline.models.llm import LiteLLMBackend, LLMRequest
from pipeline.models.registry import Models
from pipeline.trace import Candidate, Message
from tests.support.openai_stub import (
    CloseConnection,
    Delay,
    Malformed,
    OpenAIStub,
    Reply,
    ServerError,
    Truncated,
    free_port,
)

HELLO = (Message("user", "Say hello."),)
SOURCE = Candidate(chunk_id="err-queue-full#1", doc_id="err-queue-full", title="ERR_QUEUE_FULL",
                   text="Ingest answers 503 ERR_QUEUE_FULL when the delivery queue is at capacity. "
                        "The default capacity is 100000 entries per node.")
ANSWER = json.dumps({"answer": "The default capacity is 100000 entries per node [1].", "used_source_ids": [1],
                     "confidence": "HIGH", "limitations": []})


SHORT_TIMEOUT_S = 0.5   # only with Delay(3.0): a reply that cannot arrive in time
TIMEOUT_S = 10.0        # everything else: generous, so a loaded CI machine never turns a reply into a timeout


def backend(stub, timeout_s=None, retries=0) -> LiteLLMBackend:
    timeout_s = timeout_s or (SHORT_TIMEOUT_S if any(isinstance(b, Delay) for b in stub.upcoming())
                              else TIMEOUT_S)
    return LiteLLMBackend("openai/stub-model", api_base=stub.api_base, timeout_s=timeout_s, retries=retries)


@pytest.fixture
def openai_stub():
    with OpenAIStub() as stub:
        yield stub


@pytest.fixture(autouse=True)
def _api_key(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-the-environment")


# -- the error mapping over the wire ---------------------------------------------------------------------

def test_a_normal_reply_carries_text_and_usage(openai_stub):
    openai_stub.script(Reply("hello", prompt_tokens=11, completion_tokens=2))
    reply = backend(openai_stub).complete(LLMRequest(messages=HELLO, temperature=0.1, max_tokens=64))
    assert reply.ok and reply.text == "hello"
    assert reply.usage == {"prompt_tokens": 11, "completion_tokens": 2, "total_tokens": 13}
    sent = openai_stub.requests[0]
    assert sent.path.endswith("/chat/completions")
    assert sent.body["model"] == "stub-model" and sent.body["temperature"] == 0.1
    assert sent.body["max_tokens"] == 64 and sent.messages == [{"role": "user", "content": "Say hello."}]


def test_the_api_key_comes_from_the_environment(openai_stub):
    backend(openai_stub).complete(LLMRequest(messages=HELLO))
    assert openai_stub.requests[0].headers.get("authorization") == "Bearer sk-from-the-environment"


def test_a_self_hosted_server_works_without_any_key(openai_stub, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY")
    reply = backend(openai_stub).complete(LLMRequest(messages=HELLO))
    assert reply.ok, reply.error


def test_a_json_schema_asks_for_json_output(openai_stub):
    backend(openai_stub).complete(LLMRequest(messages=HELLO, json_schema={"type": "object"}))
    assert openai_stub.requests[0].body["response_format"] == {"type": "json_object"}


@pytest.mark.parametrize(("behaviour", "kind"), [
    (Delay(3.0), "timeout"),
    (ServerError(500), "server"),
    (ServerError(503), "server"),
    (Malformed(), "bad_response"),
    (Malformed('{"unexpected": "shape"}'), "bad_response"),
    (Truncated(), "bad_response"),
    (CloseConnection(), "connection"),
])
def test_failures_map_to_error_kinds(openai_stub, behaviour, kind):
    openai_stub.script(behaviour)
    reply = backend(openai_stub).complete(LLMRequest(messages=HELLO))
    assert reply.error_kind == kind, reply.error
    assert not reply.ok and reply.error and reply.text == ""


def test_a_refused_connection_is_a_connection_error():
    dead = LiteLLMBackend("openai/stub-model", api_base=f"http://127.0.0.1:{free_port()}/v1", timeout_s=TIMEOUT_S)
    reply = dead.complete(LLMRequest(messages=HELLO))
    assert reply.error_kind == "connection" and "refused" in reply.error.lower()


# -- retries are bounded by config -------------------------------------------------------------------------

@pytest.mark.parametrize("retries", [0, 1, 2])
def test_a_failing_provider_sees_exactly_one_plus_retries_requests(openai_stub, retries):
    openai_stub.default = ServerError(500)
    reply = backend(openai_stub, retries=retries).complete(LLMRequest(messages=HELLO))
    assert reply.error_kind == "server"
    assert len(openai_stub.requests) == 1 + retries == reply.provider_attempts


def test_a_transient_failure_is_retried_and_then_succeeds(openai_stub):
    openai_stub.script(ServerError(502), Reply("second time lucky"))
    reply = backend(openai_stub, retries=1).complete(LLMRequest(messages=HELLO))
    assert reply.ok and reply.text == "second time lucky" and reply.provider_attempts == 2


def test_a_bad_body_is_not_retried(openai_stub):
    openai_stub.script(Malformed(), Reply("never asked for"))
    reply = backend(openai_stub, retries=2).complete(LLMRequest(messages=HELLO))
    assert reply.error_kind == "bad_response" and len(openai_stub.requests) == 1


# -- the generate stage over HTTP, built from config ---------------------------------------------------------

def _generate(stub, **overrides):
    """Through Models().llm -> build_backend, as the engine does (each stub's new port is a new cache key)."""
    delayed = any(isinstance(b, Delay) for b in stub.upcoming())
    cfg = GenerateConfig(backend="litellm", model="openai/stub-model", api_base=stub.api_base,
                         timeout_s=SHORT_TIMEOUT_S if delayed else TIMEOUT_S,
                         retries=0, **overrides)
    return generate.run("What is the default queue capacity?", "", (SOURCE,), cfg, Models())


def test_generate_answers_through_the_stub(openai_stub):
    openai_stub.script(Reply(ANSWER))
    trace = _generate(openai_stub)
    assert trace.status == "answered" and trace.answer.endswith("[1].")
    body = openai_stub.requests[0].body
    assert body["temperature"] == 0.1
    assert body["messages"][0]["role"] == "system" and "untrusted data" in body["messages"][0]["content"]
    assert "100000 entries per node" in body["messages"][-1]["content"]


def test_generate_repairs_a_malformed_reply_over_http(openai_stub):
    openai_stub.script(Reply("The capacity is 100000."), Reply(ANSWER))
    trace = _generate(openai_stub)
    assert trace.status == "answered" and trace.llm_calls == 2
    assert "could not be used" in openai_stub.requests[1].messages[-1]["content"]


@pytest.mark.parametrize(("behaviour", "kind"), [
    (Delay(3.0), "timeout"), (ServerError(500), "server"), (CloseConnection(), "connection"),
    (Truncated(), "bad_response"),
])
def test_provider_down_gives_the_cited_extractive_answer(openai_stub, behaviour, kind):
    openai_stub.default = behaviour
    trace = _generate(openai_stub)
    assert trace.status == "fallback" and trace.backend == "extractive"
    assert kind in trace.fallback_reason
    assert re.search(r"100000 entries per node \[1\]\.", trace.answer)
    assert trace.attempts[0].error.startswith(kind)


def test_generate_with_a_dead_server_falls_back():
    cfg = GenerateConfig(backend="litellm", model="openai/stub-model", timeout_s=TIMEOUT_S, retries=0,
                         api_base=f"http://127.0.0.1:{free_port()}/v1")
    trace = generate.run("What is the default queue capacity?", "", (SOURCE,), cfg, Models())
    assert trace.status == "fallback" and "connection" in trace.fallback_reason
    assert "[1]" in trace.answer
