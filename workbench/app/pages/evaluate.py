"""Evaluate & tune: run the golden set, metrics, plots, the tuning heatmaps and a failure gallery."""

import streamlit as st

from workbench.app import page, resources
from workbench.app.eval_view import DEFAULT_GOLDEN, progress_bar, render_gallery, render_summary, render_tuning
from workbench.app.render import md
from workbench.evaluate import evaluate
from workbench.golden import GoldenError, load_golden, subset

RESULT = "eval.result"

cfg, pipe = page.setup("Evaluate & tune", "Every golden case through the pipeline with the sidebar's "
                       "configuration (answer cache off, runs not logged), every trace kept.")
page.require_corpus(pipe)

path = st.text_input("Golden set (JSONL)", value=str(DEFAULT_GOLDEN), key="eval.golden")
limit = st.number_input("Only the first N cases (0 = all)", min_value=0, value=0, step=10, key="eval.limit")
if st.button("Run the golden set", type="primary", key="eval.run"):
    try:
        golden = subset(load_golden(path), int(limit) or None)
    except GoldenError as exc:
        st.error(md(str(exc)))
    else:
        result = page.attempt(lambda: evaluate(golden, pipe.store, resources.models(), cfg, nli=False,
                                               on_progress=progress_bar("asking")))
        if result is not None:
            st.session_state[RESULT] = result

result = st.session_state.get(RESULT)
if result is not None:
    tab_summary, tab_tune, tab_gallery = st.tabs(["Summary", "Tune the gate", "Failure gallery"])
    with tab_summary:
        render_summary(result, key="eval.summary")
    with tab_tune:
        render_tuning(result.run, cfg, key="eval.tune")
    with tab_gallery:
        render_gallery(result.run, key="eval.gallery")
