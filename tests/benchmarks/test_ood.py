"""The out-of-domain table (benchmarks/results/ood.json) and the SQuAD 2.0 section (benchmarks/results/squad2.json):
each rendered from its file alone, deterministic, showing the file's numbers; both measured with the shipped
gate defaults; SQuAD's row in the table is the one benchmarks.squad2 measured; and the scoring helpers count what
they say they count."""

from __future__ import annotations

import copy

from benchmarks import ood, squad2
from benchmarks.results_io import load_results, meta_line
from pipeline.config import PipelineConfig


def test_the_ood_table_is_deterministic_and_shows_every_rows_numbers():
    results = load_results(ood.NAME)
    text = ood.render(results)
    assert text == ood.render(copy.deepcopy(results))
    assert text.startswith("## ") and meta_line(results["meta"]) in text
    assert [r["set"] for r in results["rows"]] == ["SQuAD 2.0 dev", "Samsung Galaxy S10 manual",
                                                   "Samsung Smart TV / Remote manual"]
    for row in results["rows"]:
        line = next(ln for ln in text.splitlines() if ln.startswith(f"| {row['set']} |"))
        assert f"| {100 * row['answer_rate_answerable']:.1f} % [" in line, "a rate with its interval"
        if row["correct_rate"] is not None:
            assert f"| {100 * row['correct_rate']:.1f} % [" in line
    changed = copy.deepcopy(results)
    changed["rows"][1]["answer_rate_answerable"] = 0.4321
    assert "| 43.2 % [" in ood.render(changed)


def test_both_files_are_of_the_shipped_defaults_and_agree_on_squad():
    gate = ood.gate_settings(PipelineConfig())
    squad, table = load_results(squad2.NAME), load_results(ood.NAME)
    assert table["gate"] == gate and squad["gate_settings"] == gate, \
        "the gate defaults changed since these files were measured: run make bench-ood"
    row = table["rows"][0]
    for key, value in squad["ood"].items():
        assert row[key] == value, key
    assert row["questions"] == squad["questions"] and row["unanswerable"] == squad["unanswerable"] > 0


def test_the_squad_section_is_deterministic_and_shows_its_files_numbers():
    results = load_results(squad2.NAME)
    text = squad2.render(results)
    assert text == squad2.render(copy.deepcopy(results))
    assert text.startswith("## Abstention on SQuAD 2.0") and meta_line(results["meta"]) in text
    dense = results["analysis"]["signals"]["dense"]
    assert f"| dense | {dense['roc_auc']:.3f} [" in text
    changed = copy.deepcopy(results)
    changed["analysis"]["signals"]["dense"]["roc_auc"] = 0.9876
    assert "| dense | 0.988 [" in squad2.render(changed)
    assert f"{results['questions']:,} of {results['all_questions']:,} dev questions" in text


def test_figures_count_answers_hits_and_verdicts():
    rows = [
        {"answerable": True, "answered": True, "hit_at_10": True, "verdict": "correct"},
        {"answerable": True, "answered": True, "hit_at_10": False, "verdict": "wrong"},
        {"answerable": True, "answered": False, "hit_at_10": None, "verdict": None},
        {"answerable": False, "answered": True, "hit_at_10": None, "verdict": "wrong"},
        {"answerable": False, "answered": False, "hit_at_10": None, "verdict": None},
    ]
    f = ood.figures(rows)
    assert (f["questions"], f["answerable"], f["unanswerable"]) == (5, 3, 2)
    assert f["answer_rate_answerable"] == round(2 / 3, 4) and f["false_answer_rate_unanswerable"] == 0.5
    assert f["hit_at_10"] == 0.5 and f["hit_at_10_questions"] == 2, "only questions with gold documents"
    assert (f["correct_rate"], f["wrong_rate"], f["partly_rate"]) == (0.5, 0.5, 0.0)
    assert f["answered_correctly"] == round(1 / 3, 4)


def test_the_best_verdict_over_several_gold_answers_counts():
    from pipeline.testing import FakeEmbedder

    q = ood.Question(qid="q", text="Where is the Eiffel Tower?", answerable=True,
                     answers=("Berlin", "Paris, France"))
    assert ood.best_verdict(q, "The Eiffel Tower stands in Paris, France [1].", FakeEmbedder()) == "correct"
    assert ood.best_verdict(q, "It is a wrought-iron lattice tower [1].", FakeEmbedder()) == "wrong"
