"""Ask: chat with the corpus; under each answer its coloured citations and the whole trace, stage by stage."""

import streamlit as st

from pipeline.trace import Message
from workbench.app import page
from workbench.app.answer_view import render_answer
from workbench.app.trace_view import render_trace

TURNS = "ask.turns"

cfg, pipe = page.setup("Ask", "Answers cite their sources or abstain. Markers: emerald = the cited passage "
                       "supports the sentence, rose = it does not (or the source was never offered).")
page.require_corpus(pipe)
turns = st.session_state.setdefault(TURNS, [])

left, right = st.columns([3, 1])
use_history = left.toggle("Send the conversation so far with each question (follow-ups are rewritten)",
                          value=True, key="ask.use_history")
if right.button("New conversation", key="ask.clear", disabled=not turns):
    turns.clear()
    st.rerun()

for i, (question, trace) in enumerate(turns):
    with st.chat_message("user"):
        st.text(question)
    with st.chat_message("assistant"):
        render_answer(trace, key=f"ask.t{i}")
        if st.toggle("Show the trace", value=i == len(turns) - 1, key=f"ask.show_trace.{i}"):
            render_trace(trace, key=f"ask.t{i}")

asked = st.chat_input("Ask a question about the documents", key="ask.query")
if asked is not None:
    history = [m for q, t in turns for m in (Message("user", q), Message("assistant", t.answer))] if use_history else []
    trace = page.attempt(lambda: pipe.ask(asked, history, cfg))
    if trace is not None:
        turns.append((asked, trace))
        st.rerun()
