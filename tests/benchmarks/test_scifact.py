"""SciFact scoring: trec_eval semantics (every judged claim counts) and the shipped-chunking section."""

from __future__ import annotations

import copy

import pytest

from benchmarks import scifact
from benchmarks.results_io import load_results

QRELS = {"1": {"d1": 1}, "2": {"d2": 1}, "3": {"d3": 1, "d4": 1}}


def test_a_judged_claim_missing_from_the_run_scores_zero():
    run = {"1": ["d1"], "2": ["d2"]}     # claim 3 is judged but absent
    ndcg, recall = scifact.evaluate(run, QRELS)
    assert ndcg == pytest.approx(2 / 3) and recall == pytest.approx(2 / 3)
    assert scifact.per_query(run, QRELS, "ndcg10") == [1.0, 1.0, 0.0]


def test_recall_at_100_is_the_share_of_a_claims_judged_documents():
    assert scifact.per_query({"3": ["d4", "x"]}, {"3": QRELS["3"]}, "recall100") == [0.5]


def test_the_paired_comparison_runs_over_every_judged_claim():
    before = {"1": ["d1"], "2": ["x", "d2"]}
    after = {"1": ["d1"], "2": ["d2"], "3": ["d3"]}
    p = scifact.paired(before, after, QRELS)
    assert p["queries"] == 3 and (p["better"], p["worse"], p["tied"]) == (2, 0, 1)


def _with_shipped(results: dict) -> dict:
    out = copy.deepcopy(results)
    row = {"key": "shipped_fused", "label": "fused, default (RRF k = 60)", "ndcg10": 0.6123, "recall100": 0.9,
           "ndcg10_ci95": [0.5611, 0.6604]}
    paired = {"queries": 300, "mean_difference": -0.0321, "interval": [-0.05, -0.01], "better": 40, "worse": 70,
              "tied": 190, "wilcoxon_p": 0.004, "resamples": 10000, "seed": 0}
    out["scoring"] = scifact.SCORING
    out["rows"][0]["ndcg10_ci95"] = [0.61, 0.72]
    out["shipped_chunking"] = {"max_tokens": 220, "overlap_tokens": 30, "chunks": 7107, "rows": [row],
                               "paired": {"fused, default": paired}}
    return out


def test_the_section_shows_the_shipped_chunking_with_intervals_and_its_paired_test():
    text = scifact.render(_with_shipped(load_results("scifact")))
    assert "**The shipped chunking** (`chunking.max_tokens=220`" in text and "→ 7,107 chunks" in text
    assert "| fused, default (RRF k = 60) | 0.612 [0.561–0.660] | 0.900 |" in text
    assert "| fused, default | -0.0321 | [-0.0500, -0.0100] | 40 / 70 / 190 | 0.004 |" in text
    assert "trec_eval semantics" in text and "| nDCG@10 [95 % bootstrap interval over claims] |" in text
    assert "| keyword leg (BM25) | " in text and " [0.610–0.720] | " in text


def test_a_file_measured_before_the_intervals_claims_neither_intervals_nor_trec_eval_scoring():
    results = copy.deepcopy(load_results("scifact"))
    results.pop("scoring", None)
    for row in results["rows"]:
        row.pop("ndcg10_ci95", None)
    text = scifact.render(results)
    assert "trec_eval semantics" not in text and "bootstrap interval over claims" not in text
