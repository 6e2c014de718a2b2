"""benchmarks/abstention_cases.py: the truth read off the golden tags, the confusion counts, the cut-offs chosen on
the tune part, and the section rendered from the committed results file."""

from __future__ import annotations

import copy

from benchmarks import abstention_cases as ac
from benchmarks.results_io import load_results, meta_line
from pipeline.gate.stage import GateInputs, abstention_case
from pipeline.trace import EvidenceSignals


def _inputs(coverage: float, window: float, superseded: bool = False) -> GateInputs:
    return GateInputs(best_fused=("c", 0.03), top_superseded=superseded,
                      signals=EvidenceSignals(coverage=coverage, window=window))


def test_the_truth_comes_from_the_golden_tags():
    assert ac.truth(("off-topic",)) == "off-topic"
    assert ac.truth(("advisory", "hard-unanswerable", "retracted")) == "retracted"
    assert ac.truth(("config", "hard-unanswerable")) == "on-topic"


def test_an_abstention_reads_off_topic_below_either_cut_off_and_retracted_first():
    assert abstention_case(_inputs(0.3, 0.9), coverage=0.5, cosine=0.4) == "off-topic"
    assert abstention_case(_inputs(0.9, 0.3), coverage=0.5, cosine=0.4) == "off-topic"
    assert abstention_case(_inputs(0.9, 0.9), coverage=0.5, cosine=0.4) == "on-topic"
    assert abstention_case(_inputs(0.1, 0.1, superseded=True)) == "retracted"
    assert abstention_case(GateInputs()) == "no-retrieval"


def test_confusion_counts_and_balanced_accuracy_by_hand():
    c = ac.confusion([("off-topic", "off-topic"), ("off-topic", "on-topic"), ("on-topic", "on-topic"),
                      ("retracted", "retracted")])
    assert c["correct"] == 3 and c["accuracy"] == 0.75
    assert c["balanced_accuracy"] == (0.5 + 1.0) / 2
    assert c["table"]["off-topic"] == {"off-topic": 1, "on-topic": 1, "retracted": 0, "no-retrieval": 0}


def test_the_chosen_cut_offs_separate_what_the_tune_rows_separate():
    rows = [{"truth": "off-topic", "inputs": _inputs(0.2, 0.7)}, {"truth": "off-topic", "inputs": _inputs(0.3, 0.8)},
            {"truth": "on-topic", "inputs": _inputs(0.8, 0.75)}, {"truth": "on-topic", "inputs": _inputs(0.9, 0.7)}]
    chosen = ac.choose(rows)
    said = [abstention_case(r["inputs"], chosen["coverage"], chosen["cosine"]) for r in rows]
    assert said == ["off-topic", "off-topic", "on-topic", "on-topic"]


def test_the_section_shows_the_files_numbers():
    results = load_results(ac.NAME)
    text = ac.render(results)
    assert text == ac.render(copy.deepcopy(results)) and text.startswith("## Abstention cases")
    assert meta_line(results["meta"]) in text
    changed = copy.deepcopy(results)
    changed["test_chosen"]["table"]["on-topic"]["on-topic"] = 987
    assert "| on-topic | " in text and "| 987 |" in ac.render(changed)
