"""The ranking metrics and the paired comparison shared by the evaluation and the benchmarks."""

from __future__ import annotations

import numpy as np
import pytest

from workbench.metrics import ndcg_at_k, paired_difference


def test_ndcg_is_one_for_the_ideal_order_and_discounts_a_late_relevant_item():
    assert ndcg_at_k(["a", "b", "x"], {"a", "b"}) == pytest.approx(1.0)
    assert ndcg_at_k(["x", "a"], {"a"}) == pytest.approx(1 / np.log2(3))
    assert ndcg_at_k(["x"] * 10 + ["a"], {"a"}, k=10) == 0.0


def test_ndcg_uses_graded_gains_and_counts_a_repeated_item_once():
    assert ndcg_at_k(["b", "a"], {"a": 2, "b": 1}) == pytest.approx((1 + 2 / np.log2(3)) / (2 + 1 / np.log2(3)))
    assert ndcg_at_k(["a", "a", "b"], {"a", "b"}) == pytest.approx(1.0)


def test_ndcg_without_a_relevant_item_is_none_not_a_number():
    assert ndcg_at_k(["a"], set()) is None
    assert ndcg_at_k(["a"], {"a": 0}) is None


def test_a_paired_difference_counts_cases_and_brackets_the_mean():
    before = [0.2, 0.5, 0.5, 0.1, 0.9, 0.3, 0.4, 0.0]
    after = [0.4, 0.5, 0.7, 0.3, 0.8, 0.6, 0.9, 0.2]
    p = paired_difference(before, after)
    assert (p["cases"], p["better"], p["worse"], p["tied"]) == (8, 6, 1, 1)
    assert p["mean_difference"] == pytest.approx(np.mean(np.subtract(after, before)))
    assert p["interval"][0] <= p["mean_difference"] <= p["interval"][1] and p["interval"][0] > 0
    assert 0 < p["wilcoxon_p"] < 0.1


def test_identical_arms_differ_by_nothing_with_p_one():
    p = paired_difference([0.1, 0.2], [0.1, 0.2])
    assert p["mean_difference"] == 0 and p["interval"] == [0.0, 0.0] and p["wilcoxon_p"] == 1.0
    with pytest.raises(ValueError, match="one value per case"):
        paired_difference([0.1], [0.1, 0.2])
