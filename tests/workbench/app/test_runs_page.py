"""Runs page: the audit log, any run's full trace, export, and importing a trace JSON to view."""

from __future__ import annotations

from conftest import ask, errors_of, html_of, open_app

from pipeline.trace import Trace
from tests.support.traces import answered_trace


def test_an_asked_question_is_listed_and_opens_with_its_trace(scratch_env):
    at = open_app("runs")
    assert any("No runs yet" in i.value for i in at.info)
    at.switch_page("workbench/app/pages/ask.py").run()
    ask(at, "What does ERR_TIMEOUT_502 mean?")
    at.switch_page("workbench/app/pages/runs.py").run()
    table = next(df.value for df in at.dataframe if "run_id" in df.value.columns)
    assert list(table["question"]) == ["What does ERR_TIMEOUT_502 mean?"]
    assert at.selectbox(key="runs.select").value == table["run_id"][0]
    assert 'class="wb-answer"' in html_of(at)
    assert "Retrieval" in [t.label for t in at.tabs]
    export = [b for b in at.get("download_button") if b.key == "runs.open.run.export"]
    assert export and export[0].proto.label == "Export trace as JSON"


def test_an_imported_trace_is_rendered_and_a_bad_one_is_an_error(app_env):
    trace = answered_trace("What is the default delivery timeout?")
    at = open_app("runs")
    at.file_uploader(key="runs.import").set_value(("trace.json", trace.to_json().encode(), "application/json"))
    at.run()
    assert not at.error
    assert "The default is 15000 ms" in html_of(at)
    assert "wb-marker wb-supported" in html_of(at)
    at.file_uploader(key="runs.import").set_value(("nope.json", b'{"question": 3}', "application/json"))
    at.run()
    assert len(at.error) == 1 and errors_of(at)[0].startswith("nope.json is not a trace")
    assert Trace.from_json(trace.to_json()) == trace
