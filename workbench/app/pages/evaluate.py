"""Evaluate & tune: run the golden set, metrics, plots, the tuning heatmaps and a failure gallery."""

import streamlit as st

from workbench.app import page, resources
from workbench.app.eval_view import DEFAULT_GOLDEN, render_summary, render_tuning, run_golden, run_key, split_label
from workbench.app.gallery_view import render_gallery

RESULT = "eval.result"
REUSED = "eval.reused"
FRESH = "eval.fresh"   # "Run it again anyway": the next run asks every case from the start, reusing nothing

cfg, pipe = page.setup("Evaluate & tune", "Every golden case through the pipeline with the sidebar's "
                       "configuration (answer cache off, runs not logged), every trace kept.")
page.require_corpus(pipe)

path = st.text_input("Golden set (JSONL)", value=str(DEFAULT_GOLDEN), key="eval.golden")
limit = st.number_input("Only the first N cases (0 = all)", min_value=0, value=0, step=10, key="eval.limit")
key = run_key(path, int(limit), cfg, pipe)
if st.button("Run the golden set", type="primary", key="eval.run"):
    result, reused = run_golden(path, int(limit), cfg, pipe, reuse=not st.session_state.pop(FRESH, False))
    if result is not None:
        st.session_state[RESULT], st.session_state[REUSED] = result, reused
done = resources.evaluations()
if st.session_state.get(REUSED) and key in done:
    seconds = done[key].run.seconds
    st.info(f"Same golden set, configuration and corpus version as an earlier run in this server: its traces "
            f"were reused instead of asking every case again ({seconds:.0f} s saved).")
    if st.button("Run it again anyway", key="eval.rerun"):
        done.pop(key, None)
        st.session_state.pop(REUSED, None)
        st.session_state[FRESH] = True
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
