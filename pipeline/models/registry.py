"""``Models``: what stages receive. It loads lazily through the process-wide cache
(:func:`pipeline.models.resolve.cached`), and accepts injected fakes for tests and notebooks
(``pipeline.testing``). :func:`build_backend` picks the LLM backend a config names.
"""

from __future__ import annotations

import threading
from typing import Any

from pipeline.config import ConfigError, EmbeddingConfig, RerankConfig
from pipeline.models.embed_onnx import load_int8_embedder
from pipeline.models.encoders import CrossEncoderReranker, Embedder, NLIClassifier, Reranker, SentenceEmbedder
from pipeline.models.llm import LLM, LiteLLMBackend
from pipeline.models.local_llm import load_local_llm
from pipeline.models.rerank_onnx import load_int8_reranker
from pipeline.models.resolve import PROJECT_MODELS, ModelUnavailable, cached


class Models:
    """The models a pipeline run uses; lazily loaded and cached, or injected (tests, notebooks)."""

    def __init__(self, *, embedder: Embedder | None = None, reranker: Reranker | None = None,
                 llm: Any = None, rewrite_llm: Any = None, nli: Any = None,
                 reranker_unavailable: str | None = None) -> None:
        self._embedder = embedder
        self._reranker = reranker
        self._llm = llm
        self._rewrite_llm = rewrite_llm
        self._nli = nli
        self._reranker_unavailable = reranker_unavailable

    def embedder(self, cfg: EmbeddingConfig) -> Embedder:
        """The bi-encoder ``cfg`` names: PyTorch (fp32) or ONNX Runtime int8 (``embedding.precision``), or
        ModelUnavailable with one line saying why (an int8 export that fails names the fp32 fallback)."""
        if self._embedder is not None:
            return self._embedder
        if cfg.precision == "int8":
            return cached(("embedder-int8", cfg.model, cfg.batch_size),
                          lambda: load_int8_embedder(cfg.model, cfg.batch_size))
        return cached(("embedder", cfg.model, cfg.batch_size), lambda: SentenceEmbedder(cfg.model, cfg.batch_size))

    def reranker(self, cfg: RerankConfig) -> Reranker:
        """The cross-encoder, or ModelUnavailable (the rerank stage records the skip)."""
        if self._reranker_unavailable:
            raise ModelUnavailable(self._reranker_unavailable)
        if self._reranker is not None:
            return self._reranker
        if cfg.precision == "int8" or shipped_as_onnx(cfg.model):
            return cached(("reranker-int8", cfg.model, cfg.max_tokens, cfg.batch_size),
                           lambda: load_int8_reranker(cfg.model, cfg.max_tokens, cfg.batch_size))
        return cached(("reranker", cfg.model, cfg.max_tokens, cfg.batch_size),
                       lambda: CrossEncoderReranker(cfg.model, cfg.max_tokens, cfg.batch_size))

    def llm(self, purpose: str, backend: str, model: str, api_base: str, timeout_s: float, retries: int = 0):
        """An LLM backend for ``purpose`` ("generate" or "rewrite"); injected fakes win."""
        injected = self._rewrite_llm if purpose == "rewrite" and self._rewrite_llm is not None else self._llm
        if injected is not None:
            return injected
        key = ("llm", backend, model, api_base, float(timeout_s), int(retries))
        return cached(key, lambda: build_backend(backend=backend, model=model, api_base=api_base,
                                                  timeout_s=timeout_s, retries=retries))

    def nli(self, name: str) -> NLIClassifier:
        """The entailment classifier (all label probabilities), or ModelUnavailable; injected fakes win."""
        if self._nli is not None:
            return self._nli
        return cached(("nli", name), lambda: NLIClassifier(name, max_tokens=512))


def shipped_as_onnx(name: str) -> bool:
    """The project's own models ship as int8 ONNX only: they run in ONNX Runtime whatever ``precision`` says."""
    return name in PROJECT_MODELS


_DEFAULT: Models | None = None
_DEFAULT_LOCK = threading.Lock()


def default_models() -> Models:
    """The process-wide Models with nothing injected (the CLI and the app use this)."""
    global _DEFAULT
    with _DEFAULT_LOCK:
        if _DEFAULT is None:
            _DEFAULT = Models()
        return _DEFAULT

def build_backend(backend: str, model: str, api_base: str, timeout_s: float, retries: int = 0) -> LLM:
    """The configured backend. Raises ConfigError for a setting the user must fix, and
    :class:`ModelUnavailable` when the local model is not installed (callers record a fallback)."""
    if backend == "litellm":
        if not model.strip():
            raise ConfigError("generate.model is empty; name a litellm model, e.g. "
                              "--set generate.model=ollama/qwen2.5 (or openai/<name> with generate.api_base)")
        return LiteLLMBackend(model=model, api_base=api_base, timeout_s=timeout_s, retries=retries)
    if backend == "local":
        return load_local_llm(model=model, timeout_s=timeout_s)
    if backend == "extractive":
        raise ConfigError("the extractive generator is not a chat model; generate.run calls it directly")
    raise ConfigError(f"unknown LLM backend {backend!r}; use litellm or local")
