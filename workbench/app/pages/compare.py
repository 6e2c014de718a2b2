"""Compare: one question under two configurations, side by side, with what changed highlighted."""

import streamlit as st

from pipeline.config import ConfigError
from workbench.app import page, resources
from workbench.app.answer_view import render_answer
from workbench.app.compare_view import parse_history, parse_overrides, presets, render_diff
from workbench.app.render import md
from workbench.app.trace_view import render_trace
from workbench.compare import diff_traces

RESULT = "compare.result"

cfg, pipe = page.setup("Compare", "Configuration A is the sidebar's; B is A plus the changes chosen here.")
page.require_corpus(pipe)

question = st.text_input("Question", key="compare.question")
history_text = st.text_area("Conversation before it (optional; one turn per line, `user:` or `assistant:`)",
                            key="compare.history", height=80)
status = resources.warm_status(cfg)
choices = presets(cfg, reranker_available=status is not None and status.reranker_loaded)
preset = st.selectbox("B changes", list(choices), key="compare.preset",
                      help="Built from A's configuration and what is installed here: no preset that would change "
                           "nothing; stricter and looser move the thresholds of the rule the gate applies.")
extra = st.text_area("More changes for B (one `stage.key=value` per line)", key="compare.overrides", height=80)

if st.button("Run both", type="primary", key="compare.run"):
    st.session_state.pop(RESULT, None)  # an error below must not leave the previous question's results up
    try:
        cfg_b = cfg.with_overrides({**choices[preset], **parse_overrides(extra)})
        history = parse_history(history_text)
    except (ConfigError, ValueError) as exc:
        st.error(md(str(exc)))
        cfg_b = None
    if cfg_b is not None and cfg_b.config_hash() == cfg.config_hash():
        st.error("B is the same configuration as A; choose a change for B.")
    elif cfg_b is not None:
        with st.spinner("Running A, then B ..."):
            pair = page.attempt(lambda: (pipe.ask(question, history, cfg), pipe.ask(question, history, cfg_b)))
        if pair is not None:
            st.session_state[RESULT] = pair

if RESULT in st.session_state:
    trace_a, trace_b = st.session_state[RESULT]
    render_diff(diff_traces(trace_a, trace_b), trace_a, trace_b, key="compare.diff")
    left, right = st.columns(2)
    for column, name, trace in ((left, "A", trace_a), (right, "B", trace_b)):
        with column:
            st.subheader(f"{name} · config {trace.config_hash}")
            render_answer(trace, key=f"compare.{name}")
            render_trace(trace, key=f"compare.{name}")
