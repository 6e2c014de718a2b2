"""Rich display of an evaluation in Jupyter (see :mod:`workbench.display.jupyter`): the summary and the rows to look at.

Built from the same pieces as the trace display (:mod:`workbench.display.trace_html`): every string from the golden
file or a trace is escaped, numbers are rounded to 3 decimals, and the run's seconds and latencies are left
out so the same evaluation renders to the same HTML (stored notebook outputs compare equal under nbval).

Each row gets one **outcome** (:func:`outcome`), worst first: a *false answer* (an unanswerable question
answered), a *false abstention* (an answerable one abstained on), *supported but wrong* (every claim
supported by its citation, yet the answer's correctness verdict, :mod:`workbench.correctness`, is wrong: the
failure the citation check cannot see), *unsupported* (answered, but a claim's verdict is unsupported or a
marker is fabricated; an uncited sentence alone is not this), *wrong answer* (any other answer judged
wrong), then *answered* / *abstained*. The table lists the rows with a failure outcome first.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from workbench.display.trace_html import (
    AMBER,
    AMBER_BG,
    EMERALD,
    EMERALD_BG,
    ROSE,
    ROSE_BG,
    SLATE,
    SLATE_BG,
    chip,
    esc,
    num,
    table,
)
from workbench.summary import LABELS

OUTCOMES = ("false answer", "false abstention", "supported but wrong", "unsupported", "wrong answer", "answered",
            "abstained")
FAILURES = OUTCOMES[:5]
OUTCOME_STYLE = {"false answer": (ROSE, ROSE_BG), "false abstention": (AMBER, AMBER_BG),
                 "supported but wrong": (ROSE, ROSE_BG), "unsupported": (ROSE, ROSE_BG),
                 "wrong answer": (ROSE, ROSE_BG), "answered": (EMERALD, EMERALD_BG), "abstained": (SLATE, SLATE_BG)}
HEADLINE = ("cases", "answerable", "unanswerable", "answer_rate_answerable", "false_answer_rate_unanswerable",
            "recall_at_10", "mrr", "citation_support_rate", "fabricated_marker_rate", "correct_answer_rate",
            "supported_but_wrong_rate", "llm_calls_made", "llm_calls_saved")
ROW_LIMIT = 20


def outcome(row) -> str:
    """The row's outcome (module docstring); ``row`` is a :class:`workbench.evaluate.EvalRow`."""
    if not row.answerable and not row.abstained:
        return "false answer"
    if row.answerable and row.abstained:
        return "false abstention"
    wrong = not row.abstained and row.correctness is not None and row.correctness.verdict == "wrong"
    if wrong and row.supported:
        return "supported but wrong"
    if not row.abstained and (row.unsupported_claims or row.fabricated_markers):
        return "unsupported"
    if wrong:
        return "wrong answer"
    return "abstained" if row.abstained else "answered"


def outcome_chip(name: str) -> str:
    colour, background = OUTCOME_STYLE[name]
    return chip(name, colour, background, css=f"wb-outcome wb-{name.replace(' ', '-')}")


def _value(value) -> str:
    if value is None:
        return "n/a"
    return num(value) if isinstance(value, float) else esc(value)


def _interval(summary: dict, key: str) -> str:
    """A rate's 95 % interval and the counts behind it, from the summary's ``intervals`` block ("" without one)."""
    ci = (summary.get("intervals") or {}).get(key)
    if not ci:
        return ""
    counts = f" ({ci['k']}/{ci['n']})" if "k" in ci else ""
    return f"{num(ci['ci95'][0])}–{num(ci['ci95'][1])}{counts}"


def evaluation_html(summary: dict, rows: Sequence, limit: int = ROW_LIMIT) -> str:
    """Headline metrics with their 95 % intervals, outcome counts, the NLI status, and up to ``limit`` rows
    (failures first)."""
    metrics = table(("metric", "value", "95 % interval"),
                    ((esc(LABELS.get(k, k)), _value(summary.get(k)), esc(_interval(summary, k))) for k in HEADLINE
                     if k in summary))
    counts = Counter(outcome(r) for r in rows)
    tally = table(("outcome", "cases"), ((outcome_chip(o), str(counts[o])) for o in OUTCOMES))
    nli = summary.get("nli") or {}
    nli_line = (f"<div>NLI check: {esc(nli.get('status', 'off'))}"
                + (f" — support {_value(nli.get('support_rate'))}, agreement with the embedding check "
                   f"{_value(nli.get('agreement'))}" if nli.get("status") == "ran" else
                   f" — {esc(nli.get('reason', ''))}" if nli.get("reason") else "") + "</div>")
    ordered = sorted(rows, key=lambda r: OUTCOMES.index(outcome(r)))
    shown = [(esc(r.id), outcome_chip(outcome(r)), esc(r.question), esc(r.gate_scale), num(r.gate_score, 4),
              _value(r.hit_at_10), f"{r.supported_claims}/{r.claims}", str(r.fabricated_markers),
              esc(r.correctness.verdict) if r.correctness is not None else "–")
             for r in ordered[:limit]]
    more = f"<div>… {len(rows) - limit} more rows (all rows: evaluation.rows)</div>" if len(rows) > limit else ""
    return ('<div class="wb-evaluation"><div style="font-weight:700">Evaluation</div>' + metrics + tally + nli_line
            + table(("id", "outcome", "question", "gate scale", "gate score", "hit@10", "supported claims",
                     "fabricated markers", "correctness"), shown) + more + "</div>")


def evaluation_text(summary: dict, rows: Sequence) -> str:
    """One short line for a plain-text display (the dataclass repr holds every trace)."""
    counts = Counter(outcome(r) for r in rows)
    return (f"Evaluation({len(rows)} cases: " + ", ".join(f"{counts[o]} {o}" for o in OUTCOMES) + ")")
