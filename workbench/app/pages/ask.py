"""Ask: chat with the corpus; under each answer its coloured citations and the whole trace, stage by stage."""

import streamlit as st

from workbench.app import page
from workbench.app.ask_view import (
    TURNS,
    ask_pending,
    ask_with_mode,
    keep_newest_in_view,
    render_examples,
    render_turns,
)
from workbench.app.conversation import DEFAULT_MODE, MODES

cfg, pipe = page.setup("Ask", "Answers cite their sources or abstain. Markers: emerald = the cited passage "
                       "supports the sentence, rose = it does not (or the source was never offered).")
page.require_corpus(pipe)
turns = st.session_state.setdefault(TURNS, [])

left, right = st.columns([3, 1])
mode = left.radio("Send the earlier turns with a question", list(MODES), format_func=MODES.get,
                  index=list(MODES).index(DEFAULT_MODE), horizontal=True, key="ask.history_mode",
                  help="Only for follow-ups: sent when the question opens like a continuation (\"and ...\", "
                       "\"what about ...\"), points back (it, that, those), is elliptical (\"in 3.2?\") or shares "
                       "a topic word with the previous question; the line under the question says which. The same "
                       "rule as `workbench ask --history`. Always: every question carries the conversation's terms.")
if right.button("New conversation", key="ask.clear", disabled=not turns):
    turns.clear()
    st.rerun()

if ask_pending(pipe, turns, cfg, mode, page.attempt):
    st.rerun()
if not turns:
    render_examples(pipe)
render_turns(turns)
keep_newest_in_view(turns)

asked = st.chat_input("Ask a question about the documents", key="ask.query")
if asked is not None:
    turn = ask_with_mode(pipe, asked, turns, cfg, mode, page.attempt)
    if turn is not None:
        turns.append(turn)
        st.rerun()
