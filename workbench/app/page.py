"""What every page does first (title, sidebar, the pipeline) and how it reports errors a user can fix.

User-fixable problems (an empty question, a bad setting, a busy or empty store, a model that is not
installed) become one ``st.error`` line; anything else is a bug and is raised, so Streamlit shows it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import streamlit as st

from pipeline.config import ConfigError, PipelineConfig
from pipeline.engine import Pipeline, QuestionError
from pipeline.models.resolve import ModelUnavailable
from pipeline.storage.store import StoreError
from workbench.app import resources
from workbench.app.render import md
from workbench.app.sidebar import render_sidebar

T = TypeVar("T")
USER_ERRORS = (QuestionError, ConfigError, ModelUnavailable, StoreError)


def setup(title: str, caption: str) -> tuple[PipelineConfig, Pipeline]:
    """Title, the configuration sidebar and the shared pipeline; stops the page with st.error if the
    store cannot be opened."""
    st.title(title)
    st.caption(caption)
    cfg = render_sidebar()
    try:
        pipe = resources.pipeline()
    except USER_ERRORS as exc:
        st.error(md(f"Cannot open the store at {resources.home()}: {exc}"))
        st.stop()
    if resources.models_kind() == "fake":
        st.info(f"{resources.MODELS_ENV}=fake: deterministic fake models (hashing embedder, term-overlap "
                "reranker) for tests and UI demos; scores are not those of the real models.")
    return cfg, pipe


def require_corpus(pipe: Pipeline) -> None:
    if pipe.store.is_empty():
        st.error(f"The store at {md(pipe.store.home)} is empty: upload documents on the Corpus page, or run "
                 "`make ingest` (the demo corpus).")
        st.stop()


def attempt(fn: Callable[[], T]) -> T | None:
    """Run ``fn``; a user-fixable error becomes one st.error line and None."""
    try:
        return fn()
    except USER_ERRORS as exc:
        st.error(md(str(exc)))
        return None
