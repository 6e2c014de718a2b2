"""BENCHMARKS.md's "Answer correctness" section is exactly what benchmarks/correctness_report.py writes from the
committed results file, so the markdown cannot drift from the numbers."""

from __future__ import annotations

import json

from benchmarks import correctness_report as report


def test_the_benchmarks_section_is_generated_from_the_committed_results():
    results = json.loads(report.RESULTS.read_text(encoding="utf-8"))
    markdown = report.MARKDOWN.read_text(encoding="utf-8")
    assert report.rewrite(markdown, report.render_section(results)) == markdown, \
        "BENCHMARKS.md is stale: run python -m benchmarks.correctness_report"


def test_the_results_file_says_what_produced_it_and_holds_the_hand_check():
    results = json.loads(report.RESULTS.read_text(encoding="utf-8"))
    assert {"date", "machine", "load_average", "git_commit", "model", "summary", "cases"} <= set(results)
    assert results["model"] == report.MODEL
    assert len(results["cases"]) == report.HANDCHECK_CASES
    assert all(c["hand"] in report.VERDICTS and c["scorer"] in report.VERDICTS for c in results["cases"])
    ids = [c["id"] for c in results["cases"]]
    assert ids == sorted(ids), "the first cases by id"


def test_agreement_and_rewrite():
    cases = [{"hand": "correct", "scorer": "correct"}, {"hand": "wrong", "scorer": "partly"}]
    a = report.agreement(cases)
    assert a["agree"] == 1 and a["rate"] == 0.5 and a["matrix"]["wrong"]["partly"] == 1
    assert report.rewrite("# T\n", "S") == f"# T\n\n{report.START}\nS\n{report.END}\n"
    once = report.rewrite("a\n" + report.START + "\nold\n" + report.END + "\nb\n", "new")
    assert once == "a\n" + report.START + "\nnew\n" + report.END + "\nb\n"
