"""The LLM protocol, and its backends: litellm (any provider) and local SmolLM2 (``pipeline.models.local_llm``).

One small protocol: messages + temperature + optional JSON schema -> reply text, usage, latency, error.
``complete`` never raises for a provider's failure (timeout, refused connection, 5xx, garbage): it returns
an ``LLMReply`` whose ``error_kind`` says what happened, and the calling stage records the degradation.
The extractive generator needs no model and is not a chat backend: it lives in ``pipeline.generation.extractive``.

Error mapping. litellm reports most transport failures as a generic ``InternalServerError`` (a refused
connection, a body that is not JSON and a truncated body all arrive as "500"), so the kind is read from the
whole exception chain, most specific first: a timeout anywhere in the chain -> ``timeout``; a body that
does not parse, is not UTF-8 or stops short -> ``bad_response``; a refused or dropped connection ->
``connection``; an HTTP 5xx -> ``server``; anything else (bad credentials, unknown model, 4xx) -> ``other``.

Retries. litellm's own retry wrapper needs ``tenacity`` (not a dependency) and the OpenAI client defaults to
two silent retries, so both are switched off and this module retries transient kinds (timeout, connection,
server) itself, exactly ``retries`` times: the number of requests a provider sees is bounded and testable.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from pipeline.trace import Message

ErrorKind = Literal["", "timeout", "connection", "server", "bad_response", "other"]

TRANSIENT_KINDS: frozenset[str] = frozenset({"timeout", "connection", "server"})
"""Provider failures worth retrying, and the ones that make generation fall back to the extractive answer."""


@dataclass(frozen=True)
class LLMRequest:
    messages: tuple[Message, ...]
    temperature: float = 0.0
    json_schema: dict[str, Any] | None = field(default=None, hash=False)
    max_tokens: int = 512


@dataclass(frozen=True)
class LLMReply:
    text: str = ""
    usage: dict[str, int] = field(default_factory=dict, hash=False)
    latency_ms: float = 0.0
    error: str = ""
    error_kind: ErrorKind = ""
    provider_attempts: int = 1        # requests sent for this call, retries included

    @property
    def ok(self) -> bool:
        return not self.error_kind


class LLM(Protocol):
    name: str

    def complete(self, request: LLMRequest) -> LLMReply:
        """One call; provider failures come back as an LLMReply with error_kind set, never as exceptions."""



# -- litellm -----------------------------------------------------------------------------------------------

def _import_litellm():
    # The local cost map keeps ``import litellm`` off the network (it fetches prices otherwise).
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    litellm.suppress_debug_info = True
    return litellm


class LiteLLMBackend:
    """Any litellm provider string: ``ollama/qwen2.5``, ``openai/<name>`` with ``api_base``, hosted models.

    API keys come from the environment, as litellm reads them (``OPENAI_API_KEY``, ...). For ``openai/...``
    with an ``api_base`` and no key in the environment a placeholder key is sent: self-hosted
    OpenAI-compatible servers (vLLM, llama.cpp, LM Studio) ignore it, and the OpenAI client refuses to send
    a request without one. ``completion_kwargs`` reach ``litellm.completion`` unchanged (tests pass
    ``mock_response`` there to run litellm's real code path without any server).
    """

    def __init__(self, model: str, api_base: str = "", timeout_s: float = 30.0, retries: int = 0,
                 completion_kwargs: dict[str, Any] | None = None) -> None:
        self.name = f"litellm:{model}"
        self.model = model
        self.api_base = api_base
        self.timeout_s = float(timeout_s)
        self.retries = max(0, int(retries))
        self.completion_kwargs = dict(completion_kwargs or {})

    def _kwargs(self, request: LLMRequest) -> dict[str, Any]:
        kwargs: dict[str, Any] = {
            "model": self.model,
            "messages": [{"role": m.role, "content": m.content} for m in request.messages],
            "temperature": request.temperature,
            "max_tokens": request.max_tokens,
            "timeout": self.timeout_s,
            "max_retries": 0,          # the OpenAI client's silent retries; see the module docstring
            "num_retries": 0,
            "drop_params": True,       # providers without response_format just ignore it
        }
        if request.json_schema is not None:
            kwargs["response_format"] = {"type": "json_object"}
        if self.api_base:
            kwargs["api_base"] = self.api_base
            if self.model.startswith("openai/") and not os.environ.get("OPENAI_API_KEY"):
                kwargs["api_key"] = "no-key"
        kwargs.update(self.completion_kwargs)
        return kwargs

    def complete(self, request: LLMRequest) -> LLMReply:
        started = time.perf_counter()
        reply = LLMReply(error="no attempt made", error_kind="other", provider_attempts=0)
        for attempt in range(self.retries + 1):
            if attempt:
                time.sleep(min(0.2 * 2 ** (attempt - 1), 2.0))
            reply = self._complete_once(request)
            if reply.ok or reply.error_kind not in TRANSIENT_KINDS:
                break
        elapsed = round((time.perf_counter() - started) * 1000, 3)
        return LLMReply(text=reply.text, usage=reply.usage, latency_ms=elapsed, error=reply.error,
                        error_kind=reply.error_kind, provider_attempts=attempt + 1)

    def _complete_once(self, request: LLMRequest) -> LLMReply:
        try:
            litellm = _import_litellm()
            response = litellm.completion(**self._kwargs(request))
        except Exception as exc:  # every provider failure is data for the stage, never a crash
            return LLMReply(error=_describe(exc), error_kind=classify_error(exc))
        return _reply_from_response(response)


def _reply_from_response(response: Any) -> LLMReply:
    try:
        content = response.choices[0].message.content
    except (AttributeError, IndexError, KeyError, TypeError) as exc:
        return LLMReply(error=f"reply has no message content: {exc}", error_kind="bad_response")
    return LLMReply(text=content if isinstance(content, str) else "", usage=_usage(response))


def _usage(response: Any) -> dict[str, int]:
    usage = getattr(response, "usage", None)
    out = {}
    for key in ("prompt_tokens", "completion_tokens", "total_tokens"):
        value = getattr(usage, key, None)
        if isinstance(value, int):
            out[key] = value
    return out


def _chain(exc: BaseException) -> list[BaseException]:
    out: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and all(current is not seen for seen in out):
        out.append(current)
        current = current.__cause__ or current.__context__
    return out


def classify_error(exc: BaseException) -> ErrorKind:
    """Map an exception from litellm (or below it) to an ErrorKind; see the module docstring for the order."""
    chain = _chain(exc)
    names = [type(e).__name__ for e in chain]
    texts = " | ".join(str(e) for e in chain).lower()
    if any(isinstance(e, TimeoutError) or "timeout" in n.lower() for e, n in zip(chain, names, strict=True)):
        return "timeout"
    # A body that is not JSON, or not even UTF-8 (litellm wraps that UnicodeDecodeError in a 500-like
    # InternalServerError), is the provider answering badly, not being down: retrying gets the same bytes.
    if (any(isinstance(e, (json.JSONDecodeError, UnicodeDecodeError)) for e in chain)
            or "complete message body" in texts or "no 'choices'" in texts or "codec can't decode" in texts):
        return "bad_response"
    if any(isinstance(e, ConnectionError) or n in ("ConnectError", "APIConnectionError", "RemoteProtocolError")
           for e, n in zip(chain, names, strict=True)):
        return "connection"
    if "missing credentials" in texts or "api_key" in texts:
        return "other"
    status = getattr(exc, "status_code", None)
    if isinstance(status, int) and 500 <= status < 600:
        return "server"
    return "other"


def _describe(exc: BaseException) -> str:
    """One line naming the root cause, e.g. "Timeout: Request timed out (ReadTimeout)"."""
    chain = _chain(exc)
    root = chain[-1]
    head = f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}"
    if root is not exc:
        head += f" (cause: {type(root).__name__}: {str(root).strip()[:160]})"
    return head[:400]
