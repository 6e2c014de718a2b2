"""Ask page: a question shows the answer with coloured markers and every stage of its trace."""

from __future__ import annotations

import dataclasses

from conftest import ask, html_of, markdown_of, open_app, texts_of, unmark

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
                   "rerank score", "matched terms", "RRF score", "dense normalised"):
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


# -- issue 17: conversation mode, abstention order, clutter ----------------------------------------------------

def _latest_trace(at):
    return at.session_state["ask.turns"][-1].trace


def test_an_unrelated_second_question_does_not_carry_the_first_turns_terms(app_env):
    at = ask(open_app(), "what's the default max_retries in 3.1?")
    at = ask(at, "What is the capital of France?")
    trace = _latest_trace(at)
    assert trace.history == () and trace.rewrite.query == "What is the capital of France?"
    assert "max_retries" not in trace.retrieval.query
    assert any("Read as a new question" in c and "not sent" in c for c in markdown_of(at)), \
        "the chat says why the history was not sent"
    rewrite = [h.value for h in at.html if "wb-rewrite" in h.value]
    assert len(rewrite) == 1 and "max_retries" not in rewrite[0], "only the latest turn's trace is open"
    assert any("Conversation: Read as a new question" in m for m in markdown_of(at)), "the Rewrite tab says why"


def test_always_mode_sends_the_history_even_to_an_unrelated_question(app_env):
    at = ask(open_app(), "what's the default max_retries in 3.1?")
    at.radio(key="ask.history_mode").set_value("always").run()
    at = ask(at, "What is the capital of France?")
    assert "max_retries" in _latest_trace(at).rewrite.query


def test_the_newest_answer_ends_the_page_with_its_trace_one_toggle_away(app_env):
    at = ask(open_app(), "What does ERR_TIMEOUT_502 mean?", trace=False)
    assert at.toggle(key="ask.show_trace.0.latest").value is False
    assert not any(t.label == "Retrieval" for t in at.tabs), "no trace below the answer until it is asked for"
    assert 'class="wb-answer"' in html_of(at) or "wb-abstention" in html_of(at)
    at.toggle(key="ask.show_trace.0.latest").set_value(True).run()
    assert sum(t.label == "Retrieval" for t in at.tabs) == 1


def test_earlier_turns_collapse_to_question_and_answer(app_env):
    at = ask(open_app(), "What does ERR_TIMEOUT_502 mean?")
    at = ask(at, "What's the default lifetime of an API token?")
    at = ask(at, "Can you give me a good recipe for sourdough starter?")
    assert len(at.chat_message) == 6
    assert sum(t.label == "Retrieval" for t in at.tabs) == 1, "one full trace: the latest turn's"
    toggles = {t.key: t.value for t in at.toggle if t.key.startswith("ask.show_trace.")}
    assert toggles == {"ask.show_trace.0.earlier": False, "ask.show_trace.1.earlier": False,
                       "ask.show_trace.2.latest": True}
    assert html_of(at).count('class="wb-answer"') >= 1, "earlier answers are still shown, compactly"
    at.toggle(key="ask.show_trace.0.earlier").set_value(True).run()
    assert sum(t.label == "Retrieval" for t in at.tabs) == 2


def test_the_empty_chat_offers_example_questions_that_ask_with_one_click(app_env):
    at = open_app()
    examples = [b for b in at.button if b.key and b.key.startswith("ask.example.")]
    assert 4 <= len(examples) <= 6
    labels = {b.label for b in examples}
    assert {"An error code", "Off topic", "On topic, not in the documents", "A follow-up"} <= labels
    next(b for b in examples if b.label == "A follow-up").click().run()
    assert not at.exception
    turns = at.session_state["ask.turns"]
    assert [t.question for t in turns] == ["what's the default max_retries in 3.1?", "and what about the backoff?"]
    assert turns[1].trace.history and "max_retries" in turns[1].trace.rewrite.query, "the follow-up used the first"
    assert not [b for b in at.button if b.key and b.key.startswith("ask.example.")], "examples only in an empty chat"


def test_an_abstention_reads_reason_first_then_closest_documents_then_details(offline_env):
    at = ask(open_app(), "Can you give me a good recipe for sourdough starter?")
    box = next(h.value for h in at.html if "wb-abstention" in h.value)
    assert "I don&#x27;t know" in box and "wb-abstention-reason" in box
    reason = box.split("wb-abstention-reason")[1]
    assert "Nothing in the documents" in reason or "no passage is a clear match" in reason
    for noise in ("HF_HUB_OFFLINE", "huggingface", "cross-encoder", "pip install"):
        assert noise not in box, "no model-availability text in the abstention itself"
    closest = next(df.value for df in at.dataframe if "how close" in df.value.columns)
    assert list(closest.columns[:2]) == ["document", "how close"], "a readable score next to the document"
    assert closest["how close"].between(0, 100).all()
    details = next(e for e in at.expander if e.label == "Technical details of the gate")
    assert "LLM calls saved: 1" in "".join(unmark(c.value) for c in details.caption)
    banners = [i.value for i in at.info if "could not be loaded here" in i.value]
    assert len(banners) == 1 and "reader" in banners[0], "a missing reader is said once, as a banner"


def test_sources_of_one_document_are_one_line(app_env):
    trace = answered_trace(doc_ids=("err-timeout-502", "err-timeout-502", "faq-limits-3-1"))
    at = open_app("runs")
    at.file_uploader(key="runs.import").set_value(("t.json", trace.to_json().encode(), "application/json")).run()
    lines = [h.value for h in at.html if "wb-source " in h.value]
    assert len(lines) == 2, "two documents, two lines"
    assert 'data-sources="1 2"' in lines[0] and "[1][2]" in lines[0] and "not cited: [2]" in lines[0]
    assert any(e.label.startswith("[1] [2] 1 claim citing it, and its 2 passages") for e in at.expander)


def _candidates(at):
    return next(df.value for df in at.dataframe if "matched terms" in df.value.columns)


def test_the_retrieval_tab_puts_scores_first_shows_the_top_20_and_timings_as_a_table(app_env):
    at = ask(open_app(), "What does ERR_TIMEOUT_502 mean?")
    table = _candidates(at)
    assert list(table.columns[:5]) == ["rank", "fused score", "dense cosine", "BM25", "rerank score"]
    total = len(_latest_trace(at).retrieval.candidates)
    assert total > 20 and len(table) == 20, "the top 20 by default"
    at.toggle(key="ask.t0.retrieval.show_all").set_value(True).run()
    assert len(_candidates(at)) == total
    timings = [df.value for df in at.dataframe if list(df.value.columns) == ["stage", "ms"]]
    assert len(timings) == 2, "retrieval's own times and the run's, as tables"
    fields = texts_of(at)
    assert "timings ms" not in fields, "no timings as a JSON string"
    labels = [e.label for e in at.expander]
    assert "all fields (JSON)" not in labels
    assert labels.count("Raw trace (JSON): every field of every stage") == 1, "one raw trace per answer"


def test_a_cache_hit_says_whose_times_are_shown(app_env):
    at = ask(open_app(), "How long are dead-letter entries kept by default?")
    at = ask(at, "How long are dead-letter entries kept by default?")
    assert _latest_trace(at).cache_hit
    infos = [unmark(i.value) for i in at.info]
    assert any(i.startswith("Served from the answer cache in") for i in infos)
    assert any("those of the run that first produced it" in i for i in infos)


def test_the_trace_shows_the_readers_score_per_sentence_coloured_and_which_it_quoted(app_env):
    # the shipped settings: the rerank stage reads sentences (here the fake reranker's term overlap per sentence)
    at = ask(open_app(settings=None), "What does ERR_TIMEOUT_502 mean?")
    tables = [df for df in at.dataframe if "verdict" in df.value.columns]
    assert tables, "the Rerank tab has the reader's sentence table"
    rows = tables[0].value
    assert {"sentence", "reader score", "verdict", "quoted"} <= set(rows.columns)
    assert set(rows["verdict"]) <= {"answers", "close", "does not answer"} and len(rows) > 3
    assert rows["quoted"].any(), "the answer quotes sentences the reader scored"
    quoted = next(df.value for df in at.dataframe[1:] if "verdict" in df.value.columns and df.value["quoted"].all())
    assert (quoted["verdict"] == "answers").all(), "what is quoted is what the reader says answers"
    assert any("The reader, sentence by sentence" in m for m in markdown_of(at))
    styles = [df.proto.arrow_data.styler.styles for df in tables if df.proto.arrow_data.HasField("styler")]
    assert styles and "background-color" in styles[0], "scores are coloured by verdict"
