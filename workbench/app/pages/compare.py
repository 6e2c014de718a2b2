"""Compare: one question under two configurations, side by side, with what changed highlighted; and the two
configurations over the golden set, every rate beside the paired test of A against B."""

import streamlit as st

from pipeline.config import ConfigError
from workbench.app import page, resources
from workbench.app.answer_view import render_answer
from workbench.app.compare_view import b_config, parse_history, presets, render_diff, render_run_comparison
from workbench.app.eval_view import DEFAULT_GOLDEN, run_golden
from workbench.app.render import md
from workbench.app.trace_view import render_trace
from workbench.compare import compare_runs, diff_traces

RESULT = "compare.result"
GOLDEN_RESULT = "compare.golden.result"

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
        cfg_b = b_config(cfg, choices[preset], extra)
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

st.divider()
st.subheader("Over the golden set")
limit = st.number_input("Only the first N golden cases (0 = all)", min_value=0, value=0, step=10,
                        key="compare.golden.limit")
if st.button("Run A and B over the golden set", key="compare.golden.run"):
    st.session_state.pop(GOLDEN_RESULT, None)
    try:
        golden_b = b_config(cfg, choices[preset], extra)
    except (ConfigError, ValueError) as exc:
        st.error(md(str(exc)))
        golden_b = None
    if golden_b is not None:
        run_a, _ = run_golden(str(DEFAULT_GOLDEN), int(limit), cfg, pipe)
        run_b, _ = run_golden(str(DEFAULT_GOLDEN), int(limit), golden_b, pipe) if run_a is not None else (None, False)
        if run_a is not None and run_b is not None:
            st.session_state[GOLDEN_RESULT] = (run_a.rows, run_b.rows)

if GOLDEN_RESULT in st.session_state:
    rows_a, rows_b = st.session_state[GOLDEN_RESULT]
    render_run_comparison(compare_runs(rows_a, rows_b), len({r.id for r in rows_a} & {r.id for r in rows_b}),
                          key="compare.golden")
