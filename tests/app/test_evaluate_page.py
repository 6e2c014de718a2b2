"""Evaluate & tune: the golden set runs with a progress bar, then metrics, figures and the failure gallery;
the Gate lab's golden trade-off marks the sidebar's and the what-if operating points."""

from __future__ import annotations

import pytest
from conftest import errors_of, open_app

from workbench import evaluate
from workbench.app.eval_view import GALLERY


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
