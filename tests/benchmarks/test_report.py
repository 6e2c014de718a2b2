"""BENCHMARKS.md is exactly what benchmarks/report.py renders from the committed results files, and each section
shows its file's numbers: change a value in a copy of the results and the rendered text changes with it."""

from __future__ import annotations

import copy
import importlib

import pytest

from benchmarks import report
from benchmarks.results_io import load_results, meta_line


def test_benchmarks_md_is_generated_from_the_committed_results():
    expected = report.render_all()
    actual = report.MARKDOWN.read_text(encoding="utf-8")
    assert actual == expected, f"BENCHMARKS.md is stale: {report.first_difference(expected, actual)}; run make report"


@pytest.mark.long
def test_check_exits_1_on_a_stale_file_and_0_on_a_current_one(tmp_path, capsys):
    out = tmp_path / "BENCHMARKS.md"
    out.write_text(report.render_all().replace("Every figure", "Some figure"), encoding="utf-8")
    assert report.main(["--check", "--out", str(out)]) == 1
    err = capsys.readouterr().err
    assert "stale" in err and "line 3" in err and len(err.strip().splitlines()) == 1
    assert report.main(["--out", str(out)]) == 0
    assert report.main(["--check", "--out", str(out)]) == 0


def test_a_missing_results_file_renders_a_placeholder_and_still_compares_exactly(monkeypatch, tmp_path):
    monkeypatch.setattr(report, "results_path", lambda name: tmp_path / f"{name}.json")
    text = report.render_all()
    for section in report.SECTIONS:
        assert f"## {section.title}\n\nNot measured yet: run `{section.command}`" in text
    assert report.render_all() == text
    out = tmp_path / "B.md"
    out.write_text(text, encoding="utf-8")
    assert report.main(["--check", "--out", str(out)]) == 0


def test_the_sections_come_in_the_documented_order():
    assert [s.results for s in report.SECTIONS] == [
        "train_answerability", "train_reproduce", "train_nli", "nli_perturb", "scifact", "golden_retrieval", "golden", "gate_k", "calibrate", "abstention_cases", "followups", "correctness_handcheck", "week_one", "tiers", "ood",
        "external", "squad2", "validation", "screening", "late_chunking", "embed_onnx", "eval_speed", "perf", "store_sharing", "reader_latency", "rerank_tradeoff", "monitor_drift", "app_timings",
        "local_llm_demo"]


def _set(results: dict, path: tuple, value) -> None:
    node = results
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value


def _first_size(results: dict) -> str:
    return min(results["sizes"], key=int)


# (module, results file, where to change a value, the value, what the section must then show)
CHANGES = [
    ("scifact", "scifact", ("rows", 0, "ndcg10"), 0.4321, "| keyword leg (BM25) | 0.432"),
    ("scifact", "scifact", ("tuned_test", "ndcg10"), 0.9876, "nDCG@10 0.988"),
    ("validation", "validation", ("rows", 0, "p50_ms"), 12345.67, "| 12345.7 |"),
    ("perf", "perf", ("validation", "stored passages", "ratio_p50"), 1.234, "**1.23×**"),
    ("rerank_tradeoff", "rerank_tradeoff", ("rows", 0, "p95_ms"), 98765.4, "/ 98765 |"),
    ("app_timings", "app_timings", ("evaluation", "app_s"), 4321.5, "| app: click → every tab drawn | 4321.5 s |"),
    ("local_llm_demo", "local_llm_demo", ("summary", "mean_seconds"), 77.7, "| mean seconds per question | 77.7 |"),
    # ~30 s (the section bootstraps its agreement statistics three times here); its own tests are in
    # tests/benchmarks/test_correctness_report.py, so the default path leaves this one out
    pytest.param("correctness_report", "correctness_handcheck", ("summary", "correct_answer_rate"), 0.777,
                 "| correct answers (of answered answerable) | 77.7%", marks=pytest.mark.long),
]


@pytest.mark.parametrize("module, name, path, value, shown", CHANGES,
                         ids=[f"{v[0]}:{v[2][-1]}" for v in (getattr(c, "values", c) for c in CHANGES)])
def test_a_section_is_deterministic_and_shows_its_files_numbers(module, name, path, value, shown):
    render = importlib.import_module(f"benchmarks.{module}").render
    results = load_results(name)
    text = render(results)
    assert text == render(copy.deepcopy(results)), "render() must be deterministic"
    assert text.startswith("## ") and meta_line(results["meta"]) in text
    assert shown not in text
    changed = copy.deepcopy(results)
    _set(changed, path, value)
    assert shown in render(changed)


def test_perf_stage_table_shows_each_measured_size():
    from benchmarks import perf

    results = load_results("perf")
    size = _first_size(results)
    changed = copy.deepcopy(results)
    changed["sizes"][size]["stages_ms"]["path"]["p50"] = 4321.09
    assert " | 4321.1 / " in perf.render(changed)


def test_perf_goals_say_at_which_size_they_were_measured():
    from benchmarks import perf

    results = load_results("perf")
    top = max(results["sizes"], key=int)
    small = copy.deepcopy(results)
    small["sizes"] = {"1000": dict(results["sizes"][top], chunks=1000)}
    small["sizes"]["1000"]["stages_ms"]["path"]["p95"] = 10.0
    goal = perf.goals(small)[0]
    assert goal[1].endswith("at 1,000 chunks") and goal[2].startswith("not measured at 100,000")
    big = copy.deepcopy(small)
    big["sizes"]["1000"]["chunks"] = 100_005
    assert perf.goals(big)[0][2] == "met"
    big["sizes"]["1000"]["stages_ms"]["path"]["p95"] = 999.0
    assert perf.goals(big)[0][2] == "**not met**"


def test_rerank_goal_lists_the_settings_that_meet_it():
    from benchmarks import rerank_tradeoff

    results = load_results("rerank_tradeoff")
    changed = copy.deepcopy(results)
    for row in changed["rows"]:
        row["p95_ms"] = 5000.0
    assert "Met by no setting" in rerank_tradeoff.render(changed)
    changed["rows"][0]["p95_ms"] = 10.0
    assert "Met by " + changed["rows"][0]["label"] + " (10 ms)" in rerank_tradeoff.render(changed)
