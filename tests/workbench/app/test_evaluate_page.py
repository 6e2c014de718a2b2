"""Evaluate & tune: the golden set runs with a progress bar, then metrics, figures and the failure gallery;
the Gate lab's golden trade-off marks the sidebar's and the what-if operating points."""

from __future__ import annotations

import json
from contextlib import nullcontext
from types import SimpleNamespace

import pytest
import torch
from conftest import errors_of, open_app, unmark

from pipeline.config import PipelineConfig
from pipeline.testing import FAKE_WORLD, fake_models
from workbench import evaluate
from workbench.app import resources
from workbench.app.eval_view import DEFAULT_GOLDEN, run_key
from workbench.app.gallery_view import GALLERY


@pytest.fixture
def driver_calls(monkeypatch) -> list[dict]:
    """Every call of the golden-set driver (workbench.evaluate.run_cases), with the progress it reported."""
    calls, real = [], evaluate.run_cases

    def spy(golden, pipeline, *, generate=True, on_progress=None):
        call = {"generate": generate, "progress": [], "torch_threads": torch.get_num_threads()}
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
    assert set(metrics) >= {"answered (answerable)", "false answers (unanswerable)", "hit@10", "MRR@10",
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
    assert list(points["label"]) == ["sidebar (rerank)", "what-if (rerank)"], "the fake world's gate.signal"
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
    for rate, interval in zip(points.value["answered (answerable)"], points.value["95 % interval"], strict=True):
        low, high = (float(x) / 100 for x in interval.removesuffix(" %").split("–"))
        assert low <= rate <= high, "each rate beside its 95 % interval"
    assert any(a.value.startswith(("Recommended within", "The recommendation within")) for a in (*at.success, *at.info))


def test_offline_the_tune_tab_hides_the_rerank_grid_and_says_why(offline_env):
    at = _run(open_app("evaluate"), 30)
    keys = {c.key for c in at.get("plotly_chart") if c.key}
    assert "eval.tune.heatmap.auto" not in keys and "eval.tune.heatmap.fused_and_dense" in keys
    captions = [unmark(c.value) for c in at.caption]
    assert any("No rerank scores in this run" in c for c in captions)
    assert any("grid (fused × rerank thresholds) is hidden" in c for c in captions)
    assert any("× marks settings with more than" in m.value for m in at.markdown), "the × marks are explained"


# -- issue 17: the app's golden run is the CLI's, at the CLI's speed, and is not repeated ------------------------

def _rows(rows: list[dict]) -> list[dict]:
    """Rows as JSON, without the one field that is a wall-clock time."""
    return [{k: v for k, v in row.items() if k != "latency_ms"} for row in json.loads(json.dumps(rows))]


def test_the_apps_rows_are_the_clis_rows_and_an_unchanged_rerun_reuses_them(app_env, driver_calls, tmp_path):
    at = _run(open_app("evaluate"), 30)
    app = at.session_state["eval.result"]
    cfg = PipelineConfig().with_overrides(FAKE_WORLD)   # the settings open_app gave the sidebar
    # The app holds the store open (one process, one Store), so the CLI's run_eval gets that same store.
    status = evaluate.run_eval(DEFAULT_GOLDEN, cfg, open_store=lambda: nullcontext(resources.store()),
                               models=fake_models(), limit=30, nli=False, out=tmp_path / "cli")
    assert status == 0
    cli = json.loads((tmp_path / "cli" / "eval.json").read_text(encoding="utf-8"))
    assert app.run.config_hash == cli["summary"]["run"]["config_hash"] == evaluate.eval_config(cfg).config_hash()
    assert _rows([r.to_dict() for r in app.rows]) == _rows(cli["rows"])
    for name in ("answer_rate_answerable", "false_answer_rate_unanswerable", "recall_at_10", "mrr",
                 "citation_support_rate", "correct_answer_rate", "supported_but_wrong_rate"):
        assert app.summary[name] == cli["summary"][name], name
    assert app.summary["split"] == cli["summary"]["split"], "labelled as `workbench eval --split all` labels it"

    at.button(key="eval.run").click().run()
    assert not at.exception, [e.value for e in at.exception]
    assert len([c for c in driver_calls if c["generate"]]) == 2, "the page's run and the CLI's, no third"
    assert at.session_state["eval.result"] is app, "the earlier result, not a new run"
    assert any("were reused" in i.value for i in at.info)
    at.button(key="eval.rerun").click().run()
    at.button(key="eval.run").click().run(timeout=300)
    assert len([c for c in driver_calls if c["generate"]]) == 3, "'Run it again anyway' asks every case again"
    assert _rows([r.to_dict() for r in at.session_state["eval.result"].rows]) == _rows(cli["rows"])


def test_the_golden_run_uses_one_torch_thread_and_puts_the_setting_back(app_env, driver_calls):
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        _run(open_app("evaluate"), 10)
        assert [c["torch_threads"] for c in driver_calls] == [resources.EVAL_THREADS] == [1], \
            "the CLI's setting: on shared cores two intra-op threads wait on each other"
        assert torch.get_num_threads() == 2, "the process's own setting is restored afterwards"
    finally:
        torch.set_num_threads(before)


def test_what_a_golden_run_is_keyed_on():
    pipe = SimpleNamespace(store=SimpleNamespace(corpus_version=3))
    cfg = PipelineConfig()
    key = run_key(str(DEFAULT_GOLDEN), 0, cfg, pipe)
    assert run_key(str(DEFAULT_GOLDEN), 0, cfg.with_overrides({"cache.enabled": False}), pipe) == key, \
        "the evaluation turns the answer cache off, so that setting does not make a new run"
    assert run_key(str(DEFAULT_GOLDEN), 10, cfg, pipe) != key
    assert run_key(str(DEFAULT_GOLDEN), 0, cfg.with_overrides({"gate.confidence_threshold_dense": 0.9}), pipe) != key
    assert run_key(str(DEFAULT_GOLDEN), 0, cfg, SimpleNamespace(store=SimpleNamespace(corpus_version=4))) != key


# -- issue 19: batched evaluation; a new gate threshold re-runs from the earlier retrieval ---------------------------

def test_a_new_gate_threshold_reruns_from_the_earlier_retrieval_with_the_fresh_runs_rows(app_env, tmp_path):
    from workbench.app.sidebar import widget_key

    at = _run(open_app("evaluate"), 30)
    first = at.session_state["eval.result"]
    assert first.summary["run"]["batched"] and first.summary["run"]["cases_per_s"] > 0
    assert any("cases/s" in unmark(c.value) for c in at.caption), "the page says how fast it went"
    at.sidebar.number_input(key=widget_key("gate.confidence_threshold_rerank")).set_value(0.9).run()
    at.button(key="eval.run").click().run(timeout=300)
    assert not at.exception, [e.value for e in at.exception]
    second = at.session_state["eval.result"]
    assert second is not first and second.summary["run"]["reused_retrieval"] == 30
    assert any("retrieval of 30 cases reused" in unmark(c.value) for c in at.caption)
    stricter = PipelineConfig().with_overrides({**FAKE_WORLD, "gate.confidence_threshold_rerank": 0.9})
    status = evaluate.run_eval(DEFAULT_GOLDEN, stricter, open_store=lambda: nullcontext(resources.store()),
                               models=fake_models(), limit=30, nli=False, out=tmp_path / "cli")
    cli = json.loads((tmp_path / "cli" / "eval.json").read_text(encoding="utf-8"))
    assert status == 0 and _rows([r.to_dict() for r in second.rows]) == _rows(cli["rows"]), \
        "the reused run's rows are a fresh run's rows"
    assert cli["summary"]["run"]["reused_retrieval"] == 0


def test_run_it_again_anyway_reuses_nothing(app_env):
    from workbench.app.sidebar import widget_key

    at = _run(open_app("evaluate"), 10)
    at.sidebar.number_input(key=widget_key("gate.confidence_threshold_rerank")).set_value(0.9).run()
    _run(at, 10)
    assert at.session_state["eval.result"].summary["run"]["reused_retrieval"] == 10
    at.button(key="eval.run").click().run()
    at.button(key="eval.rerun").click().run()
    at.button(key="eval.run").click().run(timeout=300)
    assert at.session_state["eval.result"].summary["run"]["reused_retrieval"] == 0, "every case asked from the start"
