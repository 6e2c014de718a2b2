"""Evaluate & tune: run the golden set, metrics, plots, the tuning heatmap and a failure gallery."""

import streamlit as st

from workbench.app import page

cfg, pipe = page.setup("Evaluate & tune", "Run the golden set with the sidebar's configuration.")
st.info("Arrives with workbench.evaluate, workbench.sweep and workbench.figures.")
