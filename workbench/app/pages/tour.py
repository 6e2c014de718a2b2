"""Demo tour: one click per scenario on the demo corpus, each with a line on what it just showed."""

import streamlit as st

from pipeline.config import PipelineConfig
from workbench.app import page
from workbench.app.answer_view import render_answer
from workbench.app.explain import gate_summary
from workbench.app.render import md
from workbench.app.scenarios import SCENARIOS, TOUR_OVERRIDES, run_scenario
from workbench.app.trace_view import render_trace

RESULTS = "tour.results"
TOUR_CONFIG = PipelineConfig().with_overrides(TOUR_OVERRIDES)

_, pipe = page.setup("Demo tour", "The answerer would rather say \"I don't know\" than answer without a source. "
                     "Seven scenarios on the bundled Harbor Relay documents, one click each.")
page.require_corpus(pipe)
st.info("The tour runs with the default configuration, not the sidebar's"
        + ("" if not TOUR_OVERRIDES else " plus " + ", ".join(f"`{k} = {v}`" for k, v in TOUR_OVERRIDES.items()))
        + ". " + gate_summary(TOUR_CONFIG, reader_available=not page.load_models(TOUR_CONFIG).reranker_error))
results = st.session_state.setdefault(RESULTS, {})


def run(scenario):
    outcome = page.attempt(lambda: run_scenario(pipe, scenario))
    if outcome is not None:
        results[scenario.slug] = outcome


if st.button("Run all seven", key="tour.run_all"):
    for scenario in SCENARIOS:
        run(scenario)

for number, scenario in enumerate(SCENARIOS, start=1):
    st.divider()
    st.subheader(f"{number}. {scenario.title}")
    for turn in scenario.history:
        st.caption(md(f"earlier, {turn.role}: {turn.content}"))
    st.text(f"Q: {scenario.question}")
    extra = (" · LLM provider: litellm on a closed 127.0.0.1 port (refused)" if scenario.provider_down else "")
    st.caption(md(f"golden case {scenario.golden_id}{extra}"))
    if st.button("Run this scenario", key=f"tour.{scenario.slug}"):
        run(scenario)
    if scenario.slug in results:
        trace, problems = results[scenario.slug]
        render_answer(trace, key=f"tour.{scenario.slug}")
        st.success(f"What you just saw: {scenario.saw}")
        if problems:
            st.warning(md("This run did not behave as described: " + "; ".join(problems)))
        if st.toggle("Show the whole trace", key=f"tour.{scenario.slug}.trace"):
            render_trace(trace, key=f"tour.{scenario.slug}")
