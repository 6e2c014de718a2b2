"""A rate with its 95 % Wilson interval as text, the one way BENCHMARKS.md, the reports and the notebooks print it."""

from __future__ import annotations


def rate_ci(rate: float | None, n: int, counts: bool = False) -> str:
    """``58.0 % [48.2–67.2]``: a rate over ``n`` cases with its 95 % Wilson interval (:func:`workbench.metrics.wilson`);
    the count behind it is ``round(rate * n)``, shown as ``(58/100)`` with ``counts``. A missing rate: ``—``; no
    cases: the rate alone."""
    if rate is None:
        return "—"
    if not n:
        return f"{100 * rate:.1f} %"
    from workbench.metrics import wilson

    k = int(round(rate * n))
    low, high = wilson(k, n)
    return f"{100 * rate:.1f} % [{100 * low:.1f}–{100 * high:.1f}]" + (f" ({k}/{n})" if counts else "")


def rates_ci(point: dict | None, answerable: int, unanswerable: int) -> str:
    """``answered … / false answers …`` of a gate operating point (``answer_rate_answerable``,
    ``false_answer_rate_unanswerable``), each over its own cases, with intervals."""
    if not point:
        return "—"
    return (f"answered {rate_ci(point.get('answer_rate_answerable'), answerable)} / false answers "
            f"{rate_ci(point.get('false_answer_rate_unanswerable'), unanswerable)}")
