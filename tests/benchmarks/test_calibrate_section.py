"""The label-free calibration section (benchmarks/results/calibrate.json): rendered from its file alone, every figure
the file's, both sets reported with which cases they were measured on, and the verdicts following from the rows."""

from __future__ import annotations

import copy

from benchmarks import calibrate
from benchmarks.results_io import load_results, meta_line


def test_the_section_is_deterministic_and_shows_both_sets_from_the_results_file():
    results = load_results(calibrate.NAME)
    text = calibrate.render(results)
    assert text == calibrate.render(copy.deepcopy(results))
    assert text.startswith("## Label-free gate calibration") and meta_line(results["meta"]) in text
    assert results["meta"]["model"] in text
    assert [s["key"] for s in results["sets"]] == ["golden", "squad2"]
    for s in results["sets"]:
        assert f"**{s['name']}**" in text and s["labelled"]["what"] in text
        for r in s["runs"]:
            line = next(ln for ln in text.splitlines() if ln.startswith(f"| {r['seed']} | ")
                        and f"{100 * r['measured_current']['false_answer_rate']:.1f} %" in ln)
            assert f"{100 * r['current']['false_answer_rate']:.1f} %" in line
            assert f"{r['error_current_points']:+.1f}" in line
    assert "held-out test part" in results["sets"][0]["labelled"]["what"]
    changed = copy.deepcopy(results)
    changed["sets"][1]["runs"][0]["current"]["false_answer_rate"] = 0.4321
    assert "43.2 %" in calibrate.render(changed)


def test_errors_and_verdicts_follow_from_the_rows():
    results = load_results(calibrate.NAME)
    for s in results["sets"]:
        for r in s["runs"]:
            expected = 100 * (r["current"]["false_answer_rate"] - r["measured_current"]["false_answer_rate"])
            assert abs(r["error_current_points"] - expected) < 0.01
        summary = calibrate._summary(s["runs"], results["target_points"])
        assert summary == s["summary"]
        met = "met" if summary["met"] else "missed"
        assert f"(≤ {results['target_points']:g} points) {met}." in calibrate.render(results)
    assert results["verdict"] == calibrate.verdict(results["sets"], results["target_points"])


def test_a_missed_target_is_said_so():
    results = copy.deepcopy(load_results(calibrate.NAME))
    for s in results["sets"]:
        for r in s["runs"]:
            r["error_current_points"] = 12.0
        s["summary"] = calibrate._summary(s["runs"], results["target_points"])
    results["verdict"] = calibrate.verdict(results["sets"], results["target_points"])
    text = calibrate.render(results)
    assert text.count("missed.") >= 2 and "Within the target on neither set" in text
