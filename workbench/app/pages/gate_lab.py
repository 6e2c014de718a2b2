"""Gate lab: one question's gate scores with what-if thresholds replayed on the stored trace (no retrieval,
no model), and the golden set's answer-rate vs false-answer trade-off with the current point marked."""

import streamlit as st

from workbench.app import page
from workbench.app.gate_view import load_trace, render_golden_tradeoff, render_whatif

cfg, pipe = page.setup("Gate lab", "Move a threshold and the gate is replayed on the stored scores: nothing "
                       "is retrieved or reranked again.")
page.require_corpus(pipe)

question = st.text_input("Question", key="gate.question")
left, right = st.columns(2)
if left.button("Retrieve and score (no generation)", type="primary", key="gate.search"):
    trace = page.attempt(lambda: pipe.search(question, cfg))
    if trace is not None:
        load_trace(trace, cfg)
asked = st.session_state.get("ask.turns") or []
if right.button("Use the last Ask answer", key="gate.use_ask", disabled=not asked):
    load_trace(asked[-1][1], cfg)

render_whatif(cfg, key="gate.whatif")
render_golden_tradeoff(cfg, pipe, key="gate.golden")
