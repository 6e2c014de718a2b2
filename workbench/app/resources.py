"""The app's long-lived objects, each built once per process in an ``st.cache_resource`` function.

Nothing else in the app loads a model or opens the store. Two environment variables choose what is built:

- ``WORKBENCH_HOME``: the data directory (default ``.workbench``), as for the CLI (``make app`` sets it).
- ``WORKBENCH_APP_MODELS``: ``default`` (the configured models, resolved by :mod:`pipeline.models.registry`),
  ``fake`` (the deterministic fakes of :mod:`pipeline.testing`: hashing embedder, term-overlap reranker,
  no LLM) or ``fake-offline`` (the same fakes without a reranker, as on a machine where the cross-encoder
  is not installed). ``fake`` is the test hook: AppTest sets it with a temporary ``WORKBENCH_HOME`` so page
  tests are fast and need no model files. It is also usable for a UI demo on a machine without the models,
  and every page says when it is on. A store must be ingested with the same kind of embedder it is queried
  with.

A golden-set run holds torch to :data:`EVAL_THREADS` intra-op threads while it runs (:func:`eval_threads`), as
``workbench eval`` does by default: the evaluation runs one small forward at a time, and on shared cores two
threads wait on each other whenever the host takes one core away; and with the CLI's thread count its sums run
in the CLI's order, so its scores are the CLI's to the last bit (two threads move the dense cosine in the last
place). benchmarks/results/app_timings.json has the app's and the CLI's times.

Models load lazily, so without a warm-up the first question would also pay for loading them. :func:`warm_up`
loads the embedder and the reranker once per process and configuration, before the first question, with a
line per model for the page's progress box, and records which one is unavailable and why (the pages show
that once, as a banner).

The embedded Qdrant store takes an exclusive lock, so one process opens one ``Store`` per data directory;
pages, the Corpus page's ingest and the run log all share the objects cached here.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import streamlit as st

from pipeline.config import PipelineConfig
from pipeline.engine import Pipeline
from pipeline.models.registry import Models, default_models
from pipeline.storage.runs import RunLog
from pipeline.storage.store import Store, StoreError, data_dir

MODELS_ENV = "WORKBENCH_APP_MODELS"
MODEL_KINDS = ("default", "fake", "fake-offline")
EVAL_THREADS = 1   # torch threads during a golden run: `workbench eval --threads`' default


def home() -> Path:
    """The data directory this process serves (``$WORKBENCH_HOME`` or ``.workbench``), absolute."""
    return data_dir().resolve()


def models_kind() -> str:
    kind = os.environ.get(MODELS_ENV, "default").strip().lower() or "default"
    if kind not in MODEL_KINDS:
        raise StoreError(f"{MODELS_ENV}={kind!r} is not one of {', '.join(MODEL_KINDS)}")
    return kind


@st.cache_resource(show_spinner="Opening the store ...")
def _store(home_dir: str) -> Store:
    return Store.open(home_dir)


@st.cache_resource(show_spinner=False)
def _models(kind: str) -> Models:
    if kind in ("fake", "fake-offline"):
        from pipeline.testing import fake_models

        return fake_models(reranker=kind == "fake")
    return default_models()


@st.cache_resource(show_spinner=False)
def _pipeline(home_dir: str, kind: str) -> Pipeline:
    store = _store(home_dir)
    return Pipeline(store, _models(kind), runs=RunLog(Path(home_dir) / "runs.sqlite"))


def store() -> Store:
    """The open store; raises :class:`StoreError` (user-fixable: busy, unreadable) with a message."""
    return _store(str(home()))


def models() -> Models:
    return _models(models_kind())


def pipeline() -> Pipeline:
    """The answerer over :func:`store` with :func:`models`; pass the session's config to each call."""
    return _pipeline(str(home()), models_kind())


@st.cache_resource(show_spinner=False)
def _evaluations(home_dir: str, kind: str) -> dict:
    return {}


def evaluations() -> dict:
    """Golden-set evaluations of this process, keyed by ``workbench.app.eval_view.run_key`` (the golden file
    and its version, the limit, the evaluation's config hash, the corpus version): a run with the same key
    would produce the same traces (the pipeline is deterministic with the cache off)."""
    return _evaluations(str(home()), models_kind())


_threads_lock = threading.Lock()
_threads_held = {"runs": 0, "before": 0}


@contextmanager
def eval_threads(threads: int = EVAL_THREADS) -> Iterator[None]:
    """Torch's intra-op threads set to ``threads`` while golden runs are in progress in this process, then put
    back (the setting is process-wide: the first run to start sets it, the last to finish restores it)."""
    import torch

    with _threads_lock:
        if _threads_held["runs"] == 0:
            _threads_held["before"] = torch.get_num_threads()
            torch.set_num_threads(threads)
        _threads_held["runs"] += 1
    try:
        yield
    finally:
        with _threads_lock:
            _threads_held["runs"] -= 1
            if _threads_held["runs"] == 0:
                torch.set_num_threads(_threads_held["before"])


def run_log() -> RunLog:
    """The audit log the pipeline writes to (one connection per process)."""
    return pipeline().runs


# -- loading the models before the first question ------------------------------------------------------------

@dataclass(frozen=True)
class ModelStatus:
    """What :func:`warm_up` found: "" for a model that loaded, else why it is unavailable."""
    embedder_error: str = ""
    reranker_error: str = ""
    reranker_model: str = ""
    seconds: dict[str, float] = field(default_factory=dict)

    @property
    def reranker_loaded(self) -> bool:
        """The reranker was loaded and scored (False when it is unavailable or rerank is off)."""
        return "reranker" in self.seconds and not self.reranker_error


@st.cache_resource(show_spinner=False)
def _warmed() -> dict[tuple, ModelStatus]:
    return {}


def _warm_key(cfg: PipelineConfig) -> tuple:
    r = cfg.rerank
    return (models_kind(), cfg.embedding.model, cfg.embedding.precision, cfg.embedding.batch_size, r.enabled,
            r.model, r.precision, r.max_tokens, r.batch_size)


def warm_status(cfg: PipelineConfig) -> ModelStatus | None:
    """The status of an earlier warm-up for ``cfg``'s models, or None when they have not been loaded yet."""
    return _warmed().get(_warm_key(cfg))


def warm_up(cfg: PipelineConfig, step: Callable[[str], None] = lambda line: None) -> ModelStatus:
    """Load (and run once) the embedder and, when enabled, the reranker; ``step`` hears one line per model."""
    key = _warm_key(cfg)
    done = _warmed().get(key)
    if done is not None:
        return done
    m, seconds, errors = models(), {}, {"embedder": "", "reranker": ""}
    step(f"Embedder {cfg.embedding.model} ...")
    started = time.perf_counter()
    try:
        m.embedder(cfg.embedding).encode(["warm-up"])
    except Exception as exc:  # a model that cannot load is reported on the page, never a crash
        errors["embedder"] = f"{type(exc).__name__}: {exc}"
    seconds["embedder"] = time.perf_counter() - started
    step(f"Embedder ready ({seconds['embedder']:.1f} s)" if not errors["embedder"] else "Embedder unavailable")
    if cfg.rerank.enabled:
        step(f"Reranker {cfg.rerank.model} ({cfg.rerank.precision}) ...")
        started = time.perf_counter()
        try:
            m.reranker(cfg.rerank).score("warm-up", ["warm-up"])
        except Exception as exc:
            errors["reranker"] = str(exc) or type(exc).__name__
        seconds["reranker"] = time.perf_counter() - started
        step(f"Reranker ready ({seconds['reranker']:.1f} s)" if not errors["reranker"] else
             "Reader not available. " + _gate_summary(cfg))
    status = ModelStatus(errors["embedder"], errors["reranker"], cfg.rerank.model, seconds)
    _warmed()[key] = status
    return status


def _gate_summary(cfg: PipelineConfig) -> str:
    from workbench.app.explain import gate_summary

    return gate_summary(cfg, reader_available=False)
