"""Monitor: abstention, fallback, unsupported-claim, cache-hit and click-through rates over query_runs, with the
drift alarm (workbench/monitor.py; the same as `workbench monitor`)."""

import streamlit as st

from workbench.app import monitor_view, resources
from workbench.app.page import USER_ERRORS
from workbench.app.render import md

st.title("Monitor")
st.caption("Online signals over every logged run: they move within hours when retrieval degrades. The alarm "
           "compares the most recent runs with the runs before them.")
try:
    log = resources.run_log()
except USER_ERRORS as exc:
    st.error(md(f"Cannot open the store at {resources.home()}: {exc}"))
    st.stop()
monitor_view.render(log)
