"""The hand-check results behind BENCHMARKS.md's "Answer correctness" section: what produced them, and the
agreement arithmetic. (That the committed section is what render() gives is tests/benchmarks/test_report.py.)"""

from __future__ import annotations

from benchmarks import correctness_report as report
from benchmarks.results_io import load_results


def test_the_results_file_says_what_produced_it_and_holds_the_hand_check():
    results = load_results(report.NAME)
    assert {"date", "machine", "load_average_start", "git_commit", "model"} <= set(results["meta"])
    assert results["meta"]["model"] == report.MODEL
    assert {"nli", "summary", "cases"} <= set(results)
    assert len(results["cases"]) >= 150, "the scorer is validated on at least 150 hand-labelled answers"
    assert all(c["hand"] in report.VERDICTS and c["scorer"] in report.VERDICTS for c in results["cases"])
    ids = [c["id"] for c in results["cases"]]
    assert ids == sorted(ids) and len(set(ids)) == len(ids)


def test_the_hand_labels_are_the_committed_ones():
    import json

    from benchmarks.results_io import ROOT

    committed = json.loads((ROOT / "benchmarks" / "labels" / "correctness_2026-12-07_gate-open.json").read_text())
    results = load_results(report.NAME)
    assert {c["id"]: c["hand"] for c in results["cases"]} == committed["labels"]
    assert {c["id"] for c in results["cases"] if c["first_pass"]} == set(committed["first_pass"])


def test_agreement():
    cases = [{"hand": "correct", "scorer": "correct"}, {"hand": "wrong", "scorer": "partly"}]
    a = report.agreement(cases)
    assert a["agree"] == 1 and a["rate"] == 0.5 and a["matrix"]["wrong"]["partly"] == 1


def test_the_section_counts_the_hand_labels_it_is_given():
    results = load_results(report.NAME)
    for case in results["cases"]:
        case["hand"] = case["scorer"]
    text = report.render(results)
    n = len(results["cases"])
    assert f"The scorer agrees exactly on {n} of {n} (100.0%, 95 % Wilson interval" in text
    assert "Cohen's kappa 1.00" in text, "agreement beyond chance is perfect when every label matches"
    assert "stricter than the hand labels on 0 cases and more lenient on 0" in text


def test_the_scorers_are_compared_on_the_labels_written_after_the_choice():
    results = load_results(report.NAME)
    later = [c for c in results["cases"] if not c["first_pass"]]
    text = report.render(results)
    assert f"These are the {len(later)} labels written after the choice was made" in text
    assert "By labelling pass" in text
    for case in results["cases"]:
        case["first_pass"] = False
    text = report.render(results)
    assert "By labelling pass" not in text and "so its kappa here is not out of sample" in text
