"""Ask page: a question shows the answer with coloured markers and every stage of its trace."""

from __future__ import annotations

import dataclasses

from conftest import ask, html_of, markdown_of, open_app, texts_of

from tests.support.traces import answered_trace
from workbench.app.trace_view import STAGE_TABS


def test_page_renders_with_the_config_sidebar(app_env):
    at = open_app()
    assert at.title[0].value == "Ask"
    assert at.chat_input(key="ask.query") is not None
    assert any("config hash" in m.value for m in at.sidebar.markdown)
    assert not at.error


def test_an_answer_shows_coloured_markers_and_every_stage(app_env):
    at = ask(open_app(), "What does ERR_TIMEOUT_502 mean?")
    page = html_of(at)
    assert 'class="wb-answer"' in page
    assert "wb-marker wb-supported" in page, "a supported marker is coloured emerald"
    assert "#047857" in page
    assert "generator: extractive" in page, "the UI says which generator ran"
    assert [t.label for t in at.tabs][: len(STAGE_TABS)] == list(STAGE_TABS)
    shown = texts_of(at)
    for column in ("dense rank", "keyword rank", "dense contribution", "keyword contribution", "fused score",
                   "rerank score", "matched terms"):
        assert column in shown, column
    assert "err-timeout-502" in shown
    assert any("Fused score = sum over legs" in m for m in markdown_of(at)), "the fused-scale note is shown"
    charts = at.get("plotly_chart")
    assert len(charts) >= 3, "contributions, gate gauge and timings charts"
    assert any("Citations — " in m and "unsupported claim" in m for m in markdown_of(at))
    assert "decision" in page and "data-decision=" in page


def test_uncited_sources_are_dimmed_and_superseded_ones_badged(app_env):
    trace = answered_trace(doc_ids=("err-timeout-502", "config-delivery-2-4"))
    old = dataclasses.replace(trace.retrieval.candidates[1], superseded_by=("config-delivery-3-1#2",),
                              superseded_reason="config-delivery-3-1 (v3.1) states timeout_ms: 15000 "
                                                "(this chunk: 10000)")
    trace = dataclasses.replace(trace, retrieval=dataclasses.replace(
        trace.retrieval, candidates=(trace.retrieval.candidates[0], old)))
    at = open_app("runs")
    at.file_uploader(key="runs.import").set_value(("t.json", trace.to_json().encode(), "application/json")).run()
    lines = {h.value.split("data-source=\"")[1][0]: h.value for h in at.html if "wb-source" in h.value}
    assert "wb-cited" in lines["1"] and "opacity" not in lines["1"] and "wb-superseded" not in lines["1"]
    assert "wb-uncited" in lines["2"] and "opacity:0.45" in lines["2"]
    assert "superseded in part" in lines["2"] and "timeout_ms: 15000 (this chunk: 10000)" in lines["2"]


def test_follow_up_is_rewritten_with_history_and_both_turns_stay(app_env):
    at = ask(open_app(), "what's the default max_retries in 3.1?")
    at = ask(at, "and what about the backoff?")
    assert len(at.chat_message) == 4
    rewrites = [h.value for h in at.html if "wb-rewrite" in h.value]
    assert any("expanded with history terms" in r and "max_retries" in r for r in rewrites)


def test_empty_question_is_a_one_line_error(app_env):
    at = ask(open_app(), "   ")
    assert len(at.error) == 1
    assert "empty" in at.error[0].value
    assert not at.chat_message


def test_new_conversation_clears_the_chat(app_env):
    at = ask(open_app(), "What does ERR_TIMEOUT_502 mean?")
    at.button(key="ask.clear").click().run()
    assert not at.chat_message


def test_gate_abstention_shows_the_fixed_sentence_and_closest_documents(app_env):
    at = open_app()
    at.sidebar.number_input(key="sidebar.gate.confidence_threshold_rerank").set_value(1.0).run()
    at = ask(at, "What does ERR_TIMEOUT_502 mean?")
    page = html_of(at)
    assert "wb-abstention" in page and "I don&#x27;t know" in page
    assert any("LLM calls saved: 1" in m for m in markdown_of(at))
    assert any("document" in df.value.columns for df in at.dataframe)
