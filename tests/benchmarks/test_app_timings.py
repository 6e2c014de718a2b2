"""The App timings section is rendered from its results file alone: every number shown is the file's."""

from __future__ import annotations

import copy

from benchmarks.app_timings import SECTION, render
from benchmarks.results_io import meta_line

META = {"date": "2026-01-02 03:04 UTC", "machine": "x86_64, 2 CPUs, Linux 6, Python 3.11.7",
        "load_average_start": [1.0, 1.0, 1.0], "load_average_end": [2.0, 1.5, 1.0], "git_commit": "abc1234",
        "model": "embedder m, no cross-encoder (not resolvable offline), generate.backend=extractive"}
HEADLINE = {"answered (answerable)": "56.0%", "recall@10": "98.5%"}


def results() -> dict:
    return {
        "meta": META, "reproduce": ".venv/bin/python -m benchmarks.app_timings", "loads": 3,
        "store": {"documents": 94, "chunks": 647},
        "server": {"health_s": 1.31, "first_page_interactive_s": 17.04},
        "ask": {"questions": ["q1", "q2"], "first_s": 3.61, "first_answer_since_start_s": 20.93, "second_s": 5.84},
        "pages": {"Ask": {"p50_s": 2.1, "samples_s": [2.1, 2.4, 1.9]},
                  "Corpus": {"p50_s": 2.04, "samples_s": [2.04, 2.7, 1.8]}},
        "evaluation": {"app_shown_s": 41.2, "app_s": 49.5, "app_reported_s": 32.0, "rerun_s": 2.04, "cli_s": 33.0,
                       "cli_eval_s": 26.6, "cases": 300, "headline_match": {"equal": True, "app": HEADLINE, "cli": HEADLINE}},
    }


def test_the_section_shows_the_files_numbers():
    text = render(results())
    assert text.startswith(SECTION + "\n") and meta_line(META) in text
    assert text == render(copy.deepcopy(results())), "deterministic"
    for shown in ("| server start → health check answers | 1.3 s |",
                  "| server start → first page interactive (loads the models) | 17.0 s |",
                  "| first question on a fresh server (Enter → answer drawn) | 3.6 s |",
                  "| server start → first answer drawn | 20.9 s |", "| second question | 5.8 s |",
                  "p50 of 3 loads", "| Ask | 2.1 s | 2.4 s |", "| Corpus | 2.0 s | 2.7 s |",
                  "**Golden evaluation, 300 cases**",
                  "| app: Evaluate & tune, click → first results shown (the Summary tab) | 41.2 s |",
                  "| app: click → every tab drawn | 49.5 s |", "| app: asking the cases, as the page reports it | 32.0 s |",
                  "| CLI: `run_eval`, the whole call (models loaded beforehand) | 33.0 s |",
                  "| CLI: asking the cases, as `run_eval` reports it | 26.6 s |",
                  "| app: the same run again, configuration unchanged (result reused) | 2.0 s |",
                  "**App / CLI: 1.25×** to the first results (1.50× to every tab drawn; 1.20× for asking the cases)", "(94 documents, 647 chunks)",
                  "equal the CLI's summary (answered (answerable) 56.0%, recall@10 98.5%)"):
        assert shown in text, shown


def test_a_changed_value_changes_the_text_and_a_mismatch_is_said():
    changed = results()
    changed["evaluation"]["app_shown_s"] = 66.0
    changed["evaluation"]["app_reported_s"] = None
    changed["evaluation"]["headline_match"] = {"equal": False, "app": {"recall@10": "98.5%"},
                                               "cli": {"recall@10": "97.0%"}}
    text = render(changed)
    assert "**App / CLI: 2.00×** to the first results (1.50× to every tab drawn). " in text
    assert "| app: asking the cases, as the page reports it | n/a |" in text
    assert "**The app's headline figures differ from the CLI's**: app recall@10 98.5%; CLI recall@10 97.0%." in text
