"""The deploy gate: ``workbench eval GOLDEN --check FLOORS`` fails when a summary metric is out of bounds.

A floors file is JSON with two optional tables — ``floors`` (the metric must be at least this: rates where
higher is better) and ``ceilings`` (at most this: rates where lower is better, such as
``false_answer_rate_unanswerable``) — plus any keys starting with ``_`` for notes:

    {"_about": "...", "floors": {"recall_at_10": 0.9}, "ceilings": {"false_answer_rate_unanswerable": 0.2}}

An optional ``split`` (``"test"``, ``"tune"`` or ``"all"``) names the part of the golden set's split
(:mod:`workbench.golden`) the bounds were set on and apply to: ``eval --check`` then evaluates that part (an
explicit ``--split`` naming another part is an error), and a summary measured on another part fails the gate.
The bundled ``golden/floors.json`` gates the held-out ``test`` part, which ``workbench tune`` never fits on, so
a change that over-fits the tune part cannot pass by looking good on the cases it was tuned on.

A metric is a top-level summary key (:data:`workbench.summary.SUMMARY_METRICS`), an NLI number
(``nli.agreement``) or a per-tag rate (``per_tag.off-topic.false_answer_rate_unanswerable``). The file is
checked before the evaluation runs, so a typo fails in a second with the valid names, not after minutes.
A bounded metric that the run could not measure (``None``: NLI unavailable, no case with that tag) fails the
gate: an unmeasured number is not a passing one.
"""

from __future__ import annotations

import difflib
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from pipeline.config import ConfigError
from workbench.summary import CORRECTNESS_METRICS, NESTED_METRICS, SUMMARY_METRICS, TAG_METRICS, lookup

TABLES = ("floors", "ceilings")
SPLITS = ("all", "tune", "test")


class FloorsError(ConfigError):
    """The floors file cannot be used; the message says why (the CLI prints it as one line)."""


@dataclass(frozen=True)
class Gate:
    floors: dict[str, float]
    ceilings: dict[str, float]
    split: str | None = None  # the golden part the bounds apply to; None: whatever was evaluated


@dataclass(frozen=True)
class Failure:
    metric: str
    kind: str                 # "floor" | "ceiling" | "split"
    bound: float
    value: float | None
    note: str = ""            # for "split": which part was measured and which the bounds apply to


def known_metrics(tags: Sequence[str] = ()) -> list[str]:
    return [*SUMMARY_METRICS, *CORRECTNESS_METRICS, *NESTED_METRICS,
            *(f"per_tag.{t}.{m}" for t in tags for m in TAG_METRICS)]


def _check_metric(name: str, key: str, tags: Sequence[str]) -> None:
    known = known_metrics(tags)
    if key in known:
        return
    if key.startswith("per_tag."):
        tag = key.split(".")[1] if key.count(".") >= 2 else ""
        if tag and tag not in tags:
            raise FloorsError(f"floors file {name}: no case in the golden set has the tag {tag!r} ({key})")
    near = difflib.get_close_matches(key, known, n=1)
    hint = f" (did you mean {near[0]!r}?)" if near else ""
    raise FloorsError(f"floors file {name}: unknown metric {key!r}{hint}; metrics: {', '.join(SUMMARY_METRICS)}, "
                      f"{', '.join(CORRECTNESS_METRICS)}, {', '.join(NESTED_METRICS)}, "
                      f"per_tag.<tag>.<{'|'.join(TAG_METRICS)}>")


def parse_floors(data, name: str = "floors", tags: Sequence[str] = ()) -> Gate:
    if not isinstance(data, dict):
        raise FloorsError(f"floors file {name} must be a JSON object with \"floors\" and/or \"ceilings\"")
    unknown = [k for k in data if k not in (*TABLES, "split") and not k.startswith("_")]
    if unknown:
        raise FloorsError(f"floors file {name}: unknown top-level key {unknown[0]!r}; use \"floors\" (minimums), "
                          "\"ceilings\" (maximums), \"split\" (the golden part they apply to), and \"_...\" keys "
                          "for notes")
    split = data.get("split")
    if split is not None and split not in SPLITS:
        raise FloorsError(f"floors file {name}: \"split\" must be one of {', '.join(SPLITS)}, got {split!r}")
    tables = {}
    for table in TABLES:
        values = data.get(table, {})
        if not isinstance(values, dict):
            raise FloorsError(f"floors file {name}: {table!r} must be an object of metric: number")
        for key, bound in values.items():
            _check_metric(name, key, tags)
            if isinstance(bound, bool) or not isinstance(bound, (int, float)) or not math.isfinite(bound):
                raise FloorsError(f"floors file {name}: {table}.{key} must be a number, got {bound!r}")
        tables[table] = {k: float(v) for k, v in values.items()}
    if not tables["floors"] and not tables["ceilings"]:
        raise FloorsError(f"floors file {name} sets no floor and no ceiling")
    return Gate(floors=tables["floors"], ceilings=tables["ceilings"], split=split)


def load_floors(path: str | Path, tags: Sequence[str] = ()) -> Gate:
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise FloorsError(f"floors file {path} not found") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise FloorsError(f"cannot read floors file {path}: {getattr(exc, 'strerror', None) or exc}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise FloorsError(f"floors file {path} is not valid JSON: {exc.msg} at line {exc.lineno}") from None
    return parse_floors(data, str(path), tags)


def _value(summary: dict, key: str) -> float | None:
    try:
        value = lookup(summary, key)
    except KeyError:
        return None
    return None if isinstance(value, bool) or not isinstance(value, (int, float)) else float(value)


def check(summary: dict, gate: Gate) -> list[Failure]:
    """Every bound the summary violates (an unmeasured metric violates its bound)."""
    failures = []
    measured = (summary.get("split") or {}).get("part", "all")
    if gate.split is not None and measured != gate.split:
        failures.append(Failure("split", "split", 0.0, None,
                                f"the bounds apply to the {gate.split!r} part; this run measured {measured!r}"))
    for kind, table in (("floor", gate.floors), ("ceiling", gate.ceilings)):
        for key, bound in table.items():
            value = _value(summary, key)
            if value is None or (value < bound if kind == "floor" else value > bound):
                failures.append(Failure(key, kind, bound, value))
    return failures


def interval_bounds(summary: dict, bounded: dict) -> dict:
    """Each bound of ``bounded`` (``{"floors": {metric: ...}, "ceilings": {...}}``) as this measurement's 95 %
    interval makes it: the lower end for a floor, the upper end for a ceiling (``summary["intervals"]``,
    :func:`workbench.summary.intervals`); a metric without an interval is left out."""
    cis = summary.get("intervals") or {}
    out = {"floors": {}, "ceilings": {}}
    for table, end in (("floors", 0), ("ceilings", 1)):
        for key in bounded.get(table, {}):
            if key in cis:
                out[table][key] = round(cis[key]["ci95"][end], 4)
    return out


def report_lines(failures: Sequence[Failure], gate: Gate, name: str) -> list[str]:
    if not failures:
        part = f" on the {gate.split} part" if gate.split else ""
        return [f"deploy gate passed: {len(gate.floors)} floors and {len(gate.ceilings)} ceilings in {name} "
                f"hold{part}"]
    lines = [f"deploy gate FAILED: {len(failures)} of {len(gate.floors) + len(gate.ceilings)} bounds in {name}"]
    for f in failures:
        if f.kind == "split":
            lines.append(f"  split: {f.note}")
        elif f.value is None:
            lines.append(f"  {f.metric}: not measured in this run ({f.kind} {f.bound:g})")
        else:
            sign = "<" if f.kind == "floor" else ">"
            lines.append(f"  {f.metric} {f.value:.4f} {sign} {f.kind} {f.bound:g}")
    return lines
