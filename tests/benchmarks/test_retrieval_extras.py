"""The golden hit@k and late-chunking sections show their results files' numbers (change one, the text changes)."""

from __future__ import annotations

import copy

from benchmarks import golden_retrieval, late_chunking
from benchmarks.golden_retrieval import hits_at
from benchmarks.results_io import load_results, meta_line


def test_hit_at_k_counts_a_question_once_any_expected_document_is_in_the_first_k():
    assert hits_at(["a", "b", "c"], ("c", "z")) == {1: False, 3: True, 5: True, 10: True, 20: True}
    assert not any(hits_at(["a"], ("z",)).values())


def test_the_golden_hit_section_shows_its_files_numbers():
    results = load_results("golden_retrieval")
    text = golden_retrieval.render(results)
    assert text.startswith("## ") and meta_line(results["meta"]) in text
    changed = copy.deepcopy(results)
    changed["settings"][1]["hit_at"]["5"] = 0.1234
    assert "| 12.3 % [" in golden_retrieval.render(changed) and "| 12.3 % [" not in text


def test_the_late_chunking_section_shows_its_files_numbers_and_verdicts():
    results = load_results("late_chunking")
    text = late_chunking.render(results)
    assert text.startswith("## ") and meta_line(results["meta"]) in text
    changed = copy.deepcopy(results)
    changed["agreement"]["agreement"] = 0.5
    assert "**50.0 % [" in late_chunking.render(changed) and "not met" in late_chunking.render(changed)
    changed["agreement"]["agreement"] = 0.99
    assert "needs 98%: met" in late_chunking.render(changed)
    faster = copy.deepcopy(results)
    faster["speed"]["late"]["chunks_per_s"] = faster["speed"]["raw"]["chunks_per_s"]
    assert "(target 80%: met)" in late_chunking.render(faster)
