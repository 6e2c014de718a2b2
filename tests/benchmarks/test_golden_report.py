"""BENCHMARKS.md's "Golden-set evaluation" comes from benchmarks/results/golden.json: headline figures from the
held-out test part, labelled so; the shipped defaults are the tune part's recommendation; golden/floors.json's
_measured is the same run's test part, written by the script."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

from benchmarks import golden_report
from benchmarks.results_io import load_results, meta_line
from pipeline.config import PipelineConfig
from workbench.golden import load_split

ROOT = Path(__file__).resolve().parents[2]


def test_the_section_is_deterministic_and_shows_the_files_numbers():
    results = load_results(golden_report.NAME)
    text = golden_report.render(results)
    assert text == golden_report.render(copy.deepcopy(results))
    assert text.startswith("## Golden-set evaluation") and meta_line(results["meta"]) in text
    test = results["parts"]["test"]
    assert f"| metric (test part, {test['cases']} cases" in text
    assert f"| answer rate on answerable | {100 * test['answer_rate_answerable']:.1f} % [" in text
    assert f"| false-answer rate on unanswerable | {100 * test['false_answer_rate_unanswerable']:.1f} % [" in text
    rec = results["tune"]["recommendation"]
    assert " ".join(rec["settings"]) in text
    assert (f"**{100 * rec['test']['answer_rate_answerable']:.1f} % [") in text
    assert re.search(rf"\*\*{100 * rec['test']['answer_rate_answerable']:.1f} % \[[\d.]+–[\d.]+\] / "
                     rf"{100 * rec['test']['false_answer_rate_unanswerable']:.1f} % \[[\d.]+–[\d.]+\]\*\* on the "
                     "test part", text), "the recommendation's held-out rates with their Wilson intervals"
    changed = copy.deepcopy(results)
    changed["parts"]["test"].update(answer_rate_answerable=0.12, answerable=100, false_answer_rate_unanswerable=0.1,
                                    unanswerable=50, correct_answer_rate=0.5, supported_but_wrong_rate=4 / 17)
    shown = golden_report.render(changed)
    assert "| answer rate on answerable | 12.0 % [7.0–19.8] (12/100) |" in shown, "a rate, its Wilson interval, its count"
    assert "| false-answer rate on unanswerable | 10.0 % [4.3–21.4] (5/50) |" in shown
    assert "| correct answers (of answered answerable) | 50.0 % [25.4–74.6] (6/12) |" in shown
    assert "| supported but wrong (of all answered) | 23.5 % [9.6–47.3] (4/17) |" in shown, "over 12 + 5 answered"
    changed["parts"]["tune"]["answer_rate_answerable"] = 0.9876
    assert "answer rate on answerable | 98.8 %" not in golden_report.render(changed), "the tune part is no headline"


def test_the_results_are_of_the_shipped_defaults_and_the_committed_split():
    results = load_results(golden_report.NAME)
    gate = PipelineConfig().gate
    d = results["defaults"]
    assert (d["signal"], d["t_fused"], d["t_dense"]) == (gate.signal, gate.confidence_threshold_fused,
                                                         gate.confidence_threshold_dense), \
        "the gate defaults changed since golden.json was measured: run python -m benchmarks.golden_report"
    assert d["is_tune_recommendation"] or golden_report.declined_because(results), \
        "the shipped defaults must be what the tune part recommends, unless its cross-validated false answers " \
        "are above the bound"
    split = load_split(ROOT / "golden" / "golden.split.json")
    assert results["split"]["sizes"] == {p: len(ids) for p, ids in split.parts.items()}
    assert results["parts"]["test"]["cases"] == len(split.parts["test"])
    # the headline held-out figures are the shipped defaults' (the recommendation's only when they are it)
    shipped = results["tune"]["recommendation"]["test"] if d["is_tune_recommendation"] else d["test"]
    for key in ("answer_rate_answerable", "false_answer_rate_unanswerable"):
        assert round(shipped[key], 4) == results["parts"]["test"][key]
    assert results["meta"]["model"] and "extractive" in results["meta"]["model"]


def test_a_declined_recommendation_needs_its_cross_validated_false_answers_above_the_bound():
    results = copy.deepcopy(load_results(golden_report.NAME))
    results["defaults"]["is_tune_recommendation"] = False
    bound = results["max_false_answer_rate"]
    results["tune"]["recommendation"]["cross_validated"]["false_answer_rate_unanswerable"] = bound + 0.09
    reason = golden_report.declined_because(results)
    assert reason and f"{100 * (bound + 0.09):.1f} %" in reason
    assert reason in golden_report.render(results)
    results["tune"]["recommendation"]["cross_validated"]["false_answer_rate_unanswerable"] = bound
    assert golden_report.declined_because(results) is None, "within the bound the defaults must be the fit"


def test_the_floors_reference_values_are_the_runs_test_part():
    results = load_results(golden_report.NAME)
    floors = json.loads((ROOT / "golden" / "floors.json").read_text(encoding="utf-8"))
    assert floors["_measured"] == results["floors_measured"]
    assert floors["_measured_on"]["part"] == "test" and floors["_measured_on"]["date"] == results["meta"]["date"]
    assert floors["_measured"]["answer_rate_answerable"] == results["parts"]["test"]["answer_rate_answerable"]


def test_each_rule_is_compared_paired_with_the_shipped_defaults_on_the_test_cases():
    """The held-out comparison of a rule with the shipped defaults is paired: both arms on the same test cases,
    the defaults' arm being the headline test figures, answered and false answers tested separately."""
    results = load_results(golden_report.NAME)
    test, shipped = results["parts"]["test"], results["defaults"]["test"]
    text = golden_report.render(results)
    rows = {line.split("|")[1].strip(): line for line in text.splitlines() if line.startswith("| ")}
    for name, rule in results["tune"]["rules"].items():
        pair = rule["test_vs_shipped"]
        if pair is None:
            continue
        answered, false = pair["answered"], pair["false_answers"]
        assert (answered["n"], false["n"]) == (test["answerable"], test["unanswerable"])
        assert answered["rate_b"] == shipped["answer_rate_answerable"] and \
            false["rate_b"] == shipped["false_answer_rate_unanswerable"], "B is the shipped defaults"
        assert answered["rate_a"] == rule["test"]["answer_rate_answerable"]
        assert f"McNemar p {answered['mcnemar_p']:.2g} ({answered['a_only']} vs {answered['b_only']} discordant)" \
            in rows[name]


def test_the_section_calls_the_document_metric_hit_and_shows_passage_level_retrieval_when_measured():
    results = load_results(golden_report.NAME)
    text = golden_report.render(results)
    assert "| hit@10 (any expected document" in text and "recall@10 (any expected document)" not in text
    changed = copy.deepcopy(results)
    test = changed["parts"]["test"]
    test["passage_recall_at_10"], test["passage_ndcg_at_10"] = 0.6123, 0.5432
    test.setdefault("intervals", {}).update({"passage_recall_at_10": {"ci95": [0.55, 0.67]},
                                             "passage_ndcg_at_10": {"ci95": [0.48, 0.6]}})
    assert "| passage recall@10 / nDCG@10 (chunks that state the expected answer; interval: bootstrap over cases) " \
           "| 0.612 [0.550–0.670] / 0.543 [0.480–0.600] |" in golden_report.render(changed)
