"""The reader's training section re-scores the shipped int8 graph on the held-apart pairs with bootstrap intervals
(benchmarks/train_answerability.py); here on the toy training data, so the sets are small but real."""

import dataclasses

from benchmarks import train_answerability


def test_held_apart_scores_carry_intervals_around_their_points(data_dir, toy_settings):
    held = train_answerability.held_apart_scores(data_dir, dataclasses.asdict(toy_settings), resamples=200)
    assert held["pool_questions"] > 0 and held["squad_questions"] > 0
    for name in ("pool_pair_auc", "pool_mrr"):
        low, high = held[f"{name}_interval"]
        assert 0.0 <= low <= held[name] <= high <= 1.0, name
    if held["squad_question_auc"] is not None:
        low, high = held["squad_question_auc_interval"]
        assert low <= held["squad_question_auc"] <= high


def test_the_section_prints_each_interval_next_to_its_value():
    results = {"meta": {"date": "2026-12-07 00:00 UTC", "machine": "x", "git_commit": "abc", "model": "m"}, "commit": "abc",
               "settings": {"layers": 6, "max_tokens": 64, "epochs": 2, "neg_per_pos": 2.0},
               "counts": {"pairs_per_epoch": 10, "train_pairs": 20}, "pairs_seen": 20, "training_seconds": 60,
               "onnx_bytes": 2_000_000, "learning_curve": [], "selected_step": 1,
               "validation_fp32": {"val_pool": {"pair_auc": 0.9}, "val_squad": {"question_auc": 0.6}},
               "validation_int8": {"val_pool": {"pair_auc": 0.89}, "val_squad": {"question_auc": 0.59}},
               "held_apart": {"resamples": 200, "pool_pairs": 30, "pool_questions": 10, "squad_pairs": 12,
                              "squad_questions": 6, "squad_answerable": 3, "pool_pair_auc": 0.891,
                              "pool_pair_auc_interval": [0.812, 0.954], "pool_mrr": 0.7,
                              "pool_mrr_interval": [0.55, 0.85], "squad_question_auc": 0.593,
                              "squad_question_auc_interval": [0.301, 0.862]}}
    text = train_answerability.render(results)
    assert "pair AUC 0.891 [0.812–0.954]" in text and "question AUC 0.593 [0.301–0.862]" in text
    assert "MRR 0.700 [0.550–0.850]" in text
