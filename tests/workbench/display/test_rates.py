"""Rates print with their Wilson interval, one formatter for BENCHMARKS.md sections, reports and notebooks."""

from benchmarks.results_io import rate_ci as section_rate_ci
from workbench.display.rates import rate_ci, rates_ci


def test_a_rate_prints_with_its_interval_and_the_sections_print_it_the_same_way():
    assert rate_ci(0.58, 100) == "58.0 % [48.2–67.2]"
    assert rate_ci(0.06, 50, counts=True) == "6.0 % [2.1–16.2] (3/50)"
    assert section_rate_ci(0.58, 100) == rate_ci(0.58, 100)


def test_no_cases_or_no_rate_say_so_instead_of_inventing_an_interval():
    assert rate_ci(None, 10) == "—"
    assert rate_ci(0.5, 0) == "50.0 %"


def test_an_operating_point_prints_both_rates_over_their_own_cases():
    text = rates_ci({"answer_rate_answerable": 0.58, "false_answer_rate_unanswerable": 0.06}, 100, 50)
    assert text == "answered 58.0 % [48.2–67.2] / false answers 6.0 % [2.1–16.2]"
    assert rates_ci(None, 100, 50) == "—"
