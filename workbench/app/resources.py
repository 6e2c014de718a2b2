"""The app's long-lived objects, each built once per process in an ``st.cache_resource`` function.

Nothing else in the app loads a model or opens the store. Two environment variables choose what is built:

- ``WORKBENCH_HOME``: the data directory (default ``.workbench``), as for the CLI (``make app`` sets it).
- ``WORKBENCH_APP_MODELS``: ``default`` (the configured models, resolved by :mod:`pipeline.models.registry`) or
  ``fake`` (the deterministic fakes of :mod:`pipeline.testing`: hashing embedder, term-overlap reranker,
  no LLM). ``fake`` is the test hook: AppTest sets it with a temporary ``WORKBENCH_HOME`` so page tests are
  fast and need no model files. It is also usable for a UI demo on a machine without the models, and every
  page says when it is on. A store must be ingested with the same kind of embedder it is queried with.

The embedded Qdrant store takes an exclusive lock, so one process opens one ``Store`` per data directory;
pages, the Corpus page's ingest and the run log all share the objects cached here.
"""

from __future__ import annotations

import os
from pathlib import Path

import streamlit as st

from pipeline.engine import Pipeline
from pipeline.models.registry import Models, default_models
from pipeline.storage.runs import RunLog
from pipeline.storage.store import Store, StoreError, data_dir

MODELS_ENV = "WORKBENCH_APP_MODELS"
MODEL_KINDS = ("default", "fake")


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
    if kind == "fake":
        from pipeline.testing import fake_models

        return fake_models()
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


def run_log() -> RunLog:
    """The audit log the pipeline writes to (one connection per process)."""
    return pipeline().runs
