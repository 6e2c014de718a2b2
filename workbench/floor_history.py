"""The history of the deploy gate's bounds and of the gate's thresholds, each change with its reason.

``golden/floors_history.json`` is a list of entries, oldest first: ``{date, commit, reason, floors, ceilings,
thresholds}``, each a full snapshot of ``golden/floors.json``'s bounds and of the shipped operating-point settings
(:func:`thresholds`: every ``gate.confidence_threshold_*``, ``validate.claim_threshold`` and
``generate.reader_min_score``) after the change. ``golden/FLOORS.md`` is generated from it (:func:`render`): what
moved in each entry, from what to what, and why. ``tests/workbench/test_floor_history.py`` fails when
``golden/floors.json`` or a threshold differs from the last entry — a bound that moves without a recorded reason —
and when FLOORS.md is not what :func:`render` gives.

The entries before this history existed were read back from the git history of ``golden/floors.json`` (the
commit's subject is the reason); their thresholds were not recorded (``null``).

    python -m workbench.floor_history record --reason "why the bounds or thresholds moved"
    python -m workbench.floor_history derive --reason "..."   # bounds := the measured intervals' ends, recorded
    python -m workbench.floor_history render          # rewrite golden/FLOORS.md
    python -m workbench.floor_history check           # exit 1 when a change has no entry or FLOORS.md is stale
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import json
import subprocess
import sys
from pathlib import Path

GOLDEN = Path(__file__).resolve().parents[1] / "golden"
HISTORY = GOLDEN / "floors_history.json"
FLOORS = GOLDEN / "floors.json"
MARKDOWN = GOLDEN / "FLOORS.md"
TABLES = ("floors", "ceilings", "thresholds")


def thresholds(cfg=None) -> dict[str, float]:
    """The operating-point settings that ship: every gate confidence threshold, the validator's claim threshold and
    the reader's minimum score (``cfg``: default :class:`pipeline.config.PipelineConfig`)."""
    from pipeline.config import PipelineConfig

    cfg = cfg or PipelineConfig()
    out = {f"gate.{f.name}": float(getattr(cfg.gate, f.name)) for f in dataclasses.fields(cfg.gate)
           if f.name.startswith("confidence_threshold_")}
    out["validate.claim_threshold"] = float(cfg.validate.claim_threshold)
    out["generate.reader_min_score"] = float(cfg.generate.reader_min_score)
    return dict(sorted(out.items()))


def snapshot(floors_path: Path | None = None, cfg=None) -> dict:
    """The current bounds and thresholds, as an entry holds them."""
    data = json.loads((floors_path or FLOORS).read_text(encoding="utf-8"))
    return {"floors": dict(sorted(data.get("floors", {}).items())),
            "ceilings": dict(sorted(data.get("ceilings", {}).items())), "thresholds": thresholds(cfg)}


def load_history(path: Path = HISTORY) -> list[dict]:
    entries = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(entries, list) or not all(isinstance(e, dict) and e.get("reason") for e in entries):
        raise ValueError(f"{path}: expected a list of entries, each with a reason")
    return entries


def changes(before: dict | None, after: dict) -> list[tuple[str, str, float | None, float | None]]:
    """(table, key, old, new) for every value that differs; a table ``None`` in either entry (not recorded) is
    compared with nothing."""
    out = []
    for table in TABLES:
        old, new = (before or {}).get(table), after.get(table)
        if new is None or (old is None and before is not None):
            continue
        old = old or {}
        for key in sorted(set(old) | set(new)):
            if old.get(key) != new.get(key):
                out.append((table, key, old.get(key), new.get(key)))
    return out


def unrecorded(history: list[dict], current: dict) -> list[tuple[str, str, float | None, float | None]]:
    """What differs between the last entry and ``current`` (a recorded table only)."""
    last = {t: next((e[t] for e in reversed(history) if e.get(t) is not None), None) for t in TABLES}
    return [c for c in changes(last, current) if last[c[0]] is not None]


def _commit() -> str:
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=GOLDEN, capture_output=True, text=True,
                             timeout=10)
        return out.stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def record(reason: str, history_path: Path = HISTORY, floors_path: Path | None = None, cfg=None) -> dict:
    """Append the current snapshot with ``reason`` (refused when nothing changed or no reason is given)."""
    if not reason.strip():
        raise ValueError("an entry needs a reason")
    history = load_history(history_path)
    current = snapshot(floors_path, cfg)
    first_time = [t for t in TABLES if not any(e.get(t) is not None for e in history)]
    if history and not unrecorded(history, current) and not first_time:
        raise ValueError("nothing changed since the last entry")
    entry = {"date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d"), "commit": _commit(), "reason": reason.strip(),
             **current}
    history_path.write_text(json.dumps([*history, entry], indent=1) + "\n", encoding="utf-8")
    return entry


def derive(reason: str, history_path: Path = HISTORY, floors_path: Path | None = None) -> dict:
    """Set every bound of floors.json that has an interval end in its ``_interval`` (written by
    ``benchmarks/golden_report.py`` from the test part's 95 % intervals: the lower end for a floor, the upper end for
    a ceiling) to that end, and record the change with ``reason``. Bounds without an interval stay as they are."""
    path = floors_path or FLOORS
    data = json.loads(path.read_text(encoding="utf-8"))
    derived = data.get("_interval") or {}
    if not any(derived.get(t) for t in ("floors", "ceilings")):
        raise ValueError(f"{path} has no _interval: run python -m benchmarks.golden_report first")
    for table in ("floors", "ceilings"):
        for key, bound in (derived.get(table) or {}).items():
            if key in data.get(table, {}):
                data[table][key] = bound
    path.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return record(reason, history_path, path)


def _value(v: float | None) -> str:
    return "—" if v is None else f"{v:g}"


_KIND = {"floors": "floor", "ceilings": "ceiling", "thresholds": "threshold"}


def render(history: list[dict]) -> str:
    lines = ["# Deploy-gate floors and gate thresholds: history", "",
             "Generated from `golden/floors_history.json` by `python -m workbench.floor_history render`; do not edit. "
             "Every change of a bound in `golden/floors.json` or of a shipped threshold has an entry with its "
             "reason (`python -m workbench.floor_history record --reason ...`); a test fails when one moves "
             "without. Entries before the history existed were read back from git (the commit's subject is the "
             "reason; thresholds were not recorded then). Newest first.", ""]
    previous = [None, *history[:-1]]
    for entry, before in reversed(list(zip(history, previous, strict=True))):
        lines += [f"## {entry['date']} · `{entry['commit']}`", "", entry["reason"], ""]
        moved = changes(before, entry)
        if before is not None and before.get("thresholds") is None and entry.get("thresholds"):
            moved += [("thresholds", k, None, v) for k, v in entry["thresholds"].items()]   # first recorded
        if before is None:
            lines.append(f"First entry: {len(entry['floors'])} floors, {len(entry['ceilings'])} ceilings"
                         + (f", {len(entry['thresholds'])} thresholds" if entry.get("thresholds") else "") + ".")
        elif moved:
            lines += ["| what | old | new |", "|---|---:|---:|"]
            lines += [f"| {_KIND[table]} `{key}` | {_value(old)} | {_value(new)} |" for table, key, old, new in moved]
        else:
            lines.append("No bound or threshold moved.")
        lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m workbench.floor_history", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    rec = sub.add_parser("record", help="append the current bounds and thresholds with a reason")
    rec.add_argument("--reason", required=True)
    der = sub.add_parser("derive", help="set the bounds to the ends of the measured 95 % intervals (floors.json "
                                        "_interval) and record it")
    der.add_argument("--reason", required=True)
    sub.add_parser("render", help="rewrite golden/FLOORS.md")
    sub.add_parser("check", help="fail when a change has no entry or FLOORS.md is stale")
    args = parser.parse_args(argv)
    try:
        if args.command in ("record", "derive"):
            entry = (record if args.command == "record" else derive)(args.reason)
            MARKDOWN.write_text(render(load_history()), encoding="utf-8")
            print(f"recorded {len(changes(None, entry))} values; {MARKDOWN} rewritten", file=sys.stderr)
        elif args.command == "render":
            MARKDOWN.write_text(render(load_history()), encoding="utf-8")
        else:
            history = load_history()
            missing = unrecorded(history, snapshot())
            stale = MARKDOWN.read_text(encoding="utf-8") != render(history)
            for table, key, old, new in missing:
                print(f"error: {table} {key} moved {_value(old)} -> {_value(new)} without an entry", file=sys.stderr)
            if stale:
                print(f"error: {MARKDOWN} is not generated from {HISTORY}", file=sys.stderr)
            return 1 if missing or stale else 0
    except (OSError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
