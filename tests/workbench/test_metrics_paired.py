"""The paired test of two arms on the same cases: the counts a reader checks, McNemar's exact p, the interval."""

from __future__ import annotations

import pytest
from scipy.stats import binomtest

from workbench.metrics import PairedTest, paired_binary


def test_counts_rates_and_the_difference_come_from_the_same_cases():
    a = [True] * 6 + [False] * 2 + [True] * 1 + [False] * 1
    b = [True] * 6 + [True] * 2 + [False] * 1 + [False] * 1
    t = paired_binary(a, b)
    assert (t.n, t.both, t.a_only, t.b_only, t.neither) == (10, 6, 1, 2, 1)
    assert t.rate_a == pytest.approx(0.7) and t.rate_b == pytest.approx(0.8)
    assert t.difference == pytest.approx(-0.1)
    low, high = t.difference_ci95
    assert low <= t.difference <= high


def test_mcnemar_reads_only_the_discordant_cases():
    """Adding cases both arms agree on changes neither the p-value nor the discordant counts."""
    a, b = [True] * 9 + [False], [False] * 9 + [True]
    small = paired_binary(a, b)
    large = paired_binary(a + [True] * 50 + [False] * 40, b + [True] * 50 + [False] * 40)
    assert small.p_value == pytest.approx(binomtest(9, 10).pvalue) == pytest.approx(large.p_value)
    assert small.p_value < 0.05
    assert large.difference < small.difference, "the same 8-case margin over more cases is a smaller difference"


def test_identical_arms_have_no_difference_and_p_one():
    t = paired_binary([True, False, True], [True, False, True])
    assert t.p_value == 1.0 and t.difference == 0.0 and t.difference_ci95 == (0.0, 0.0)


def test_a_clear_difference_has_an_interval_away_from_zero():
    t = paired_binary([True] * 40 + [False] * 60, [False] * 40 + [False] * 60)
    assert t.difference_ci95[0] > 0.2 and t.p_value < 1e-6
    assert "+40.0 points" in t.describe() and "40 vs 0 discordant" in t.describe()


def test_clustered_pairs_resample_whole_groups_and_widen_the_interval():
    """Ten cases of ten pairs each, the pairs of a case agreeing: resampling cases (the independent unit) gives a
    wider interval than pretending the 100 pairs were independent."""
    a = [i % 2 == 0 for i in range(10) for _ in range(10)]
    b = [False] * 100
    groups = [str(i) for i in range(10) for _ in range(10)]
    flat = paired_binary(a, b)
    clustered = paired_binary(a, b, groups=groups)
    width = lambda t: t.difference_ci95[1] - t.difference_ci95[0]  # noqa: E731
    assert width(clustered) > width(flat)


def test_no_cases_means_no_rates_and_mismatched_arms_are_refused():
    t = paired_binary([], [])
    assert t.rate_a is None and t.difference is None and t.difference_ci95 is None and t.p_value == 1.0
    assert t.describe() == "no paired cases"
    with pytest.raises(ValueError, match="one outcome per case"):
        paired_binary([True, False], [True])


def test_a_results_file_round_trip_keeps_the_test():
    t = paired_binary([True, True, False, True], [False, True, False, False])
    assert PairedTest.from_dict(t.to_dict()) == t
