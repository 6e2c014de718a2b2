"""Retrieval on the demo golden set: hit@k with Wilson intervals, passage recall and nDCG with bootstrap
intervals, and the two settings compared on the same questions."""

from __future__ import annotations

from benchmarks import golden_retrieval as gr
from benchmarks.results_io import run_meta


def _setting(label: str, per_case: dict) -> dict:
    return {"label": label, "description": label, "overrides": {}, **gr.summarise(per_case), "per_case": per_case}


def _case(hit10: bool, recall10: float, ndcg: float) -> dict:
    hits = [False, False, hit10, hit10, True]
    return {"hit": hits, "passage_recall": [0.0, 0.0, recall10, recall10, 1.0], "ndcg10": ndcg}


def _results() -> dict:
    base = {f"g{i:03d}": _case(i % 4 != 0, 0.5, 0.4) for i in range(40)}
    other = {f"g{i:03d}": _case(True, 1.0 if i % 2 else 0.5, 0.6) for i in range(40)}
    settings = [_setting("default", base), _setting("tuned on SciFact", other)]
    return {"meta": run_meta("test"), "questions": 40, "ks": list(gr.KS), "settings": settings,
            "comparison": gr.compare(settings[0], settings[1])}


def test_passage_scores_rank_the_chunks_against_the_relevant_ones():
    scores = gr.passage_scores(["a", "b", "c"], ("b", "z"))
    assert scores["passage_recall"][gr.KS.index(1)] == 0.0 and scores["passage_recall"][gr.KS.index(3)] == 0.5


def test_the_comparison_is_mcnemar_on_hit_at_10_and_paired_differences():
    c = _results()["comparison"]
    assert (c["hit_at_10"]["only_first"], c["hit_at_10"]["only_second"]) == (0, 10)
    assert c["hit_at_10"]["p"] < 0.01
    assert c["ndcg10"]["better"] == 40 and abs(c["ndcg10"]["mean_difference"] - 0.2) < 1e-9
    assert c["passage_recall_at_10"]["tied"] == 20


def test_the_section_shows_intervals_and_the_paired_tests():
    text = gr.render(_results())
    assert "| default | 0.0 % [0.0–8.8] | 0.0 % [0.0–8.8] | 75.0 % [59.8–85.8] |" in text
    assert "| default | 0.000 [0.000–0.000] | 0.000 [0.000–0.000] | 0.500 [0.500–0.500]" in text
    assert "gained on 10 and lost on 0 (McNemar exact p = 0.00195)" in text
    assert "| passage nDCG@10 | +0.2000 | [+0.2000, +0.2000] | 40 / 0 / 0 | " in text
