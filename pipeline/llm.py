"""The LLM protocol, and its backends (litellm, extractive, local SmolLM2).

One small protocol: messages + temperature + optional JSON schema -> reply text, usage, latency, error.
``complete`` never raises for a provider's failure (timeout, refused connection, 5xx, garbage): it returns
an ``LLMReply`` whose ``error_kind`` says what happened, and the calling stage records the degradation.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from pipeline.trace import Message

ErrorKind = Literal["", "timeout", "connection", "server", "bad_response", "other"]


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

    @property
    def ok(self) -> bool:
        return not self.error_kind


class LLM(Protocol):
    name: str

    def complete(self, request: LLMRequest) -> LLMReply:
        """One call; provider failures come back as an LLMReply with error_kind set, never as exceptions."""


def build_backend(backend: str, model: str, api_base: str, timeout_s: float, retries: int = 0) -> LLM:
    """The configured backend (implemented with the LLM layer)."""
    raise NotImplementedError(f"LLM backend {backend!r} is not implemented yet")
