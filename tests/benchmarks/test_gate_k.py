"""The k-robustness section renders the numbers of its results file, and they are of the shipped defaults."""

import copy

from benchmarks import gate_k
from benchmarks.results_io import load_results


def test_the_section_shows_every_k_from_the_results_file():
    results = load_results(gate_k.NAME)
    text = gate_k.render(results)
    assert text.startswith("## Gate operating point across the fusion constant k")
    assert [r["rrf_k"] for r in results["by_k"]] == list(gate_k.KS)
    for r in results["by_k"]:
        line = next(ln for ln in text.splitlines() if ln.startswith(f"| {r['rrf_k']} |"))
        assert f"{100 * r['shipped_all']['answer_rate_answerable']:.1f} %" in line
    changed = copy.deepcopy(results)
    changed["by_k"][0]["shipped_all"]["answer_rate_answerable"] = 0.4321
    assert "43.2 %" in gate_k.render(changed)


def test_the_spread_is_computed_from_the_rows():
    results = load_results(gate_k.NAME)
    answered = [r["shipped_all"]["answer_rate_answerable"] for r in results["by_k"]]
    assert results["spread"]["shipped_answer_rate"] == max(answered) - min(answered)
