"""Evaluate & tune: the golden set runs with a progress bar, then metrics, figures and the failure gallery;
the Gate lab's golden trade-off marks the sidebar's and the what-if operating points."""

from __future__ import annotations

import pytest
from conftest import errors_of, open_app, unmark

from workbench import evaluate
from workbench.app.gallery_view import GALLERY


@pytest.fixture
def driver_calls(monkeypatch) -> list[dict]:
    """Every call of the golden-set driver (workbench.evaluate.run_cases), with the progress it reported."""
    calls, real = [], evaluate.run_cases

    def spy(golden, pipeline, *, generate=True, on_progress=None):
        call = {"generate": generate, "progress": []}
        calls.append(call)

        def progress(done, total, case_id):
            call["progress"].append((done, total, case_id))
            if on_progress is not None:
                on_progress(done, total, case_id)
        return real(golden, pipeline, generate=generate, on_progress=progress)

    monkeypatch.setattr(evaluate, "run_cases", spy)
    return calls


def _run(at, limit: int):
    at.number_input(key="eval.limit").set_value(limit)
    at.button(key="eval.run").click().run(timeout=300)
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_golden_run_shows_metrics_figures_and_a_gallery_that_opens_traces(app_env, driver_calls):
    at = _run(open_app("evaluate"), 40)
    assert [c["generate"] for c in driver_calls] == [True], "the page asks through the CLI's driver, once"
    named = [case_id for _, _, case_id in driver_calls[0]["progress"] if case_id]
    assert len(named) == len(set(named)) == 40 and driver_calls[0]["progress"][-1] == (40, 40, "")
    metrics = {m.label: m.value for m in at.metric}
    assert set(metrics) >= {"answered (answerable)", "false answers (unanswerable)", "recall@10", "MRR@10",
                            "claims supported", "LLM calls saved"}
    assert metrics["answered (answerable)"].endswith("%")
    assert any("40 cases of golden.jsonl" in c.value.replace("\\", "") for c in at.caption)
    charts = [c for c in at.get("plotly_chart") if c.key and c.key.startswith("eval.tune.")]
    assert {c.key for c in charts} >= {"eval.tune.tradeoff", "eval.tune.distributions", "eval.tune.heatmap.auto"}
    gallery = [t.label for t in at.tabs if any(t.label.startswith(name + " (") for name, _ in GALLERY)]
    assert len(gallery) == len(GALLERY)
    opened = [s for s in at.selectbox if s.key and s.key.startswith("eval.gallery.")]
    assert opened, "the fake models get some golden cases wrong, so the gallery has something to open"
    assert sum(t.label == "Retrieval" for t in at.tabs) == len(opened), "each failure kind opens a full trace"
    assert {"correct answers", "supported but wrong"} <= set(metrics)
    wrong_tab = next(t for t in at.tabs if t.label.startswith("supported but wrong ("))
    if wrong_tab.label != "supported but wrong (0)":
        table = next(df.value for df in at.dataframe if "expected answer" in df.value.columns)
        assert {"answer", "why wrong"} <= set(table.columns) and table["expected answer"].str.len().min() > 0
        assert any(m.value == "**Expected answer**" for m in at.markdown), "the expected answer beside the answer"


def test_a_missing_golden_file_is_one_error_line(app_env):
    at = open_app("evaluate")
    at.text_input(key="eval.golden").set_value("/nonexistent/golden.jsonl")
    at.button(key="eval.run").click().run()
    assert len(at.error) == 1 and "not found" in errors_of(at)[0]


def test_gate_lab_golden_tradeoff_marks_both_operating_points(app_env, driver_calls):
    at = open_app("gate_lab")
    at.text_input(key="gate.question").set_value("What does ERR_TIMEOUT_502 mean?")
    at.button(key="gate.search").click().run()
    at.slider(key="gate.whatif.rerank").set_value(0.9).run()
    at.button(key="gate.golden.run").click().run(timeout=300)
    assert not at.exception, [e.value for e in at.exception]
    assert [c["generate"] for c in driver_calls] == [False], "the Gate lab searches through the CLI's driver"
    points = next(df.value for df in at.dataframe if "label" in df.value.columns)
    assert list(points["label"]) == ["sidebar (auto)", "what-if (auto)"]
    assert points["answer_rate_answerable"][1] <= points["answer_rate_answerable"][0], \
        "a stricter what-if threshold cannot answer more"
    assert any(c.key == "gate.golden.tradeoff" for c in at.get("plotly_chart"))


# -- issue 17: a failure gallery a researcher can act on, a readable Tune tab ---------------------------------

def test_the_gallery_shows_what_was_expected_and_opens_a_case_in_ask(app_env):
    at = _run(open_app("evaluate"), 60)
    tables = [df.value for df in at.dataframe if "expected documents" in df.value.columns]
    assert tables, "every failure kind with cases has a table"
    for table in tables:
        assert {"expected answer", "expected documents", "conversation before", "verdict", "gate"} <= set(table.columns)
        assert table["gate"].str.contains(r"\d\.\d{3,5} (?:≥|<) \d\.\d{3,5}").all(), "full conditions, not truncated"
        assert table["expected documents"].str.contains("✓|✗|–").all()
    result = at.session_state["eval.result"].run
    follow_ups = {c.question for c in result.cases if c.history}
    shown = [q for t in tables for q, before in zip(t["question"], t["conversation before"], strict=True)
             if q in follow_ups and before]
    assert shown or not any(q in follow_ups for t in tables for q in t["question"]), \
        "a follow-up is shown with the conversation before it"
    button = next(b for b in at.button if b.key and b.key.endswith(".open_in_ask"))
    chosen = next(s for s in at.selectbox if s.key and s.key.startswith("eval.gallery.")).value
    case, trace = result.cases[chosen], result.traces[chosen]
    button.click().run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.title[0].value == "Ask"
    turn = at.session_state["ask.turns"][-1]
    assert turn.question == case.question and turn.trace.history == case.history
    assert turn.trace.config_hash == trace.config_hash, "asked with the evaluation's configuration"


def test_the_tune_tab_says_what_it_measured_in_percentages_and_sentences(app_env):
    at = _run(open_app("evaluate"), 50)
    captions = [unmark(c.value) for c in at.caption]
    assert any(c.startswith("Measured on ") and "cases" in c for c in captions), "which cases the sweep used"
    assert any(c.startswith("Replay check: replaying the gate rule") for c in captions), "a sentence, not a dict"
    points = next(df for df in at.dataframe if "false answers (unanswerable)" in df.value.columns)
    assert points.value["answered (answerable)"].between(0, 1).all()
    assert any(a.value.startswith(("Recommended within", "The recommendation within")) for a in (*at.success, *at.info))


def test_offline_the_tune_tab_hides_the_rerank_grid_and_says_why(offline_env):
    at = _run(open_app("evaluate"), 30)
    keys = {c.key for c in at.get("plotly_chart") if c.key}
    assert "eval.tune.heatmap.auto" not in keys and "eval.tune.heatmap.fused_and_dense" in keys
    captions = [unmark(c.value) for c in at.caption]
    assert any("No rerank scores in this run" in c for c in captions)
    assert any("grid (fused × rerank thresholds) is hidden" in c for c in captions)
    assert any("× marks settings with more than" in m.value for m in at.markdown), "the × marks are explained"
