"""What every page does first (title, models, sidebar, the pipeline) and how it reports errors a user can fix.

User-fixable problems (an empty question, a bad setting, a busy or empty store, a model that is not
installed) become one ``st.error`` line; anything else is a bug and is raised, so Streamlit shows it.

The models are loaded before the first question, with a progress box that names each one (the first
page load of a server pays for it once), and what is not available is said once per page, in one banner,
instead of inside every answer.
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
from workbench.app.explain import gate_summary
from workbench.app.models_view import render_models
from workbench.app.render import md
from workbench.app.sidebar import render_sidebar, state_config

T = TypeVar("T")
USER_ERRORS = (QuestionError, ConfigError, ModelUnavailable, StoreError)


def setup(title: str, caption: str) -> tuple[PipelineConfig, Pipeline]:
    """Title, the models (loaded once, with progress), the configuration sidebar and the shared pipeline;
    stops the page with st.error if the store cannot be opened."""
    st.title(title)
    st.caption(caption)
    wanted = state_config()
    status = load_models(wanted)
    notes = {}
    if status.reranker_error:
        notes["rerank.enabled"] = "Not available here. " + gate_summary(wanted, reader_available=False)
    cfg = render_sidebar(notes)
    st.sidebar.caption(md(gate_summary(cfg, reader_available=not status.reranker_error)))
    render_models(cfg)
    try:
        pipe = resources.pipeline()
    except USER_ERRORS as exc:
        st.error(md(f"Cannot open the store at {resources.home()}: {exc}"))
        st.stop()
    kind = resources.models_kind()
    if kind != "default":
        fakes = "hashing embedder, term-overlap reranker" if kind == "fake" else "hashing embedder"
        st.info(f"{resources.MODELS_ENV}={kind}: deterministic fake models ({fakes}) for tests and UI demos; "
                "scores are not those of the real models.")
    banner = model_banner(status, cfg)
    if banner:
        st.info(md(banner))
    return cfg, pipe


def load_models(cfg: PipelineConfig) -> resources.ModelStatus:
    """The models' status; the first time for these models, load them with a progress box."""
    status = resources.warm_status(cfg)
    if status is not None:
        return status
    with st.status("Loading the models (once per server start) ...", expanded=True) as box:
        status = resources.warm_up(cfg, step=box.write)
        box.update(label="Models loaded" + (f" in {sum(status.seconds.values()):.1f} s" if status.seconds else ""),
                   state="complete", expanded=False)
    return status


def model_banner(status: resources.ModelStatus, cfg: PipelineConfig) -> str:
    """One line on what is not available, or ""."""
    if status.embedder_error:
        return (f"The embedding model {cfg.embedding.model} could not be loaded, so no question can be answered: "
                f"{status.embedder_error}")
    if status.reranker_error and cfg.rerank.enabled:
        return (f"The reader ({status.reranker_model}) could not be loaded here, so the sources keep their fused "
                "order, the gate reads the similarity signals alone, and the extractive answer quotes the sentences "
                "sharing most of the question's terms, not ones the reader says answer (the Rerank tab of any "
                "answer says why).")
    return ""


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
