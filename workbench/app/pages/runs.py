"""Runs: the query_runs audit log; open any run's full trace, export it, or import a trace JSON to view."""

import pandas as pd
import streamlit as st

from pipeline.trace import Trace
from workbench.app import page, resources
from workbench.app.answer_view import render_answer
from workbench.app.render import md
from workbench.app.trace_view import render_trace

cfg, pipe = page.setup("Runs", "Every question asked (app, CLI, evaluation) is one row of query_runs with its "
                       "exact trace. Deleting a document never rewrites this history.")
log = resources.run_log()

tab_log, tab_import = st.tabs(["Audit log", "Import a trace"])
with tab_log:
    limit = st.number_input("Most recent runs", min_value=10, max_value=5000, value=200, step=50, key="runs.limit")
    runs = log.list(limit=int(limit))
    if not runs:
        st.info("No runs yet: ask a question on the Ask page.")
    else:
        st.caption(f"{log.count()} runs in {md(log.path)}")
        st.dataframe(pd.DataFrame([r.to_dict() for r in runs]), hide_index=True, key="runs.table")
        labels = {r.run_id: f"{r.created_at} · {r.gate_decision} · {r.question[:80]}" for r in runs}
        run_id = st.selectbox("Open run", list(labels), format_func=labels.get, key="runs.select")
        trace = log.get(run_id)
        if trace is not None:
            st.subheader(md(trace.question, limit=150))
            render_answer(trace, key="runs.open")
            render_trace(trace, key="runs.open")

with tab_import:
    uploaded = st.file_uploader("Trace JSON (from Export trace, `workbench ask --json` or `workbench runs show`)",
                                type=["json"], key="runs.import")
    if uploaded is not None:
        try:
            imported = Trace.from_json(uploaded.getvalue().decode("utf-8-sig"))
        except (ValueError, TypeError, UnicodeDecodeError) as exc:
            st.error(md(f"{uploaded.name} is not a trace: {type(exc).__name__}: {exc}"))
        else:
            st.subheader(md(imported.question, limit=150))
            render_answer(imported, key="runs.imported")
            render_trace(imported, key="runs.imported")
