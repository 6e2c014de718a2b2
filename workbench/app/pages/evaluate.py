"""Evaluate & tune: run the golden set, metrics, plots, the tuning heatmaps and a failure gallery."""

import streamlit as st

from workbench.app import page, resources
from workbench.app.eval_view import DEFAULT_GOLDEN, progress_bar, render_summary, render_tuning, split_label
from workbench.app.gallery_view import render_gallery
from workbench.app.render import md
from workbench.evaluate import evaluate
from workbench.golden import GoldenError, load_golden, subset

RESULT = "eval.result"
REUSED = "eval.reused"

cfg, pipe = page.setup("Evaluate & tune", "Every golden case through the pipeline with the sidebar's "
                       "configuration (answer cache off, runs not logged), every trace kept.")
page.require_corpus(pipe)

path = st.text_input("Golden set (JSONL)", value=str(DEFAULT_GOLDEN), key="eval.golden")
limit = st.number_input("Only the first N cases (0 = all)", min_value=0, value=0, step=10, key="eval.limit")
run_key = (str(path), int(limit), cfg.config_hash(), pipe.store.corpus_version)
done = resources.evaluations()
if st.button("Run the golden set", type="primary", key="eval.run"):
    if run_key in done:
        # Same golden set, configuration and corpus version: every trace would be the same; reuse them.
        st.session_state[RESULT] = done[run_key]
        st.session_state[REUSED] = True
    else:
        try:
            golden = subset(load_golden(path), int(limit) or None)
        except GoldenError as exc:
            st.error(md(str(exc)))
        else:
            result = page.attempt(lambda: evaluate(golden, pipe.store, resources.models(), cfg, nli=False,
                                                   on_progress=progress_bar("asking")))
            if result is not None:
                done[run_key] = st.session_state[RESULT] = result
                st.session_state[REUSED] = False
if st.session_state.get(REUSED) and run_key in done:
    seconds = done[run_key].run.seconds
    st.info(f"Same golden set, configuration and corpus version as an earlier run in this server: its traces "
            f"were reused instead of asking every case again ({seconds:.0f} s saved).")
    if st.button("Run it again anyway", key="eval.rerun"):
        done.pop(run_key, None)
        st.session_state.pop(REUSED, None)
        st.rerun()

result = st.session_state.get(RESULT)
if result is not None:
    tab_summary, tab_tune, tab_gallery = st.tabs(["Summary", "Tune the gate", "Failure gallery"])
    with tab_summary:
        render_summary(result, key="eval.summary")
    with tab_tune:
        render_tuning(result.run, cfg, key="eval.tune", measured_on=split_label(result.summary, len(result.run.rows)))
    with tab_gallery:
        render_gallery(result.run, key="eval.gallery")
