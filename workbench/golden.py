"""Load and validate golden files: JSONL, one labelled case per line (shape in docs/ARCHITECTURE.md, "Golden files").

    {"id", "question", "history": [{"role", "content"}], "answerable": bool,
     "expected_doc_ids": [...], "expected_answer": str|null, "tags": [...]}

Each line is checked on its own (the same rules ``tests/workbench/test_golden_file.py`` applies to the bundled
set: types, a non-empty question, unique ids, history turns with text, an answerable case names at least one
expected document and an unanswerable one names none). A bad line becomes one problem string that names the
file, the line number and what is wrong; the other lines still load, so one typo does not hide the rest of
an evaluation. Unknown keys are allowed (docs/ARCHITECTURE.md: add keys freely). Only an unreadable file, or a file with
no valid case at all, raises :class:`GoldenError`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pipeline.config import ConfigError
from pipeline.trace import Message

REQUIRED_KEYS = ("id", "question", "answerable")


class GoldenError(ConfigError):
    """The golden file cannot be used at all; the message says why (the CLI prints it as one line)."""


@dataclass(frozen=True)
class GoldenCase:
    id: str
    question: str
    answerable: bool
    history: tuple[Message, ...] = ()
    expected_doc_ids: tuple[str, ...] = ()
    expected_answer: str | None = None
    tags: tuple[str, ...] = ()
    line: int = 0


@dataclass(frozen=True)
class GoldenSet:
    path: str
    cases: tuple[GoldenCase, ...]
    problems: tuple[str, ...] = ()   # one line each: "golden.jsonl line 7: ..."

    @property
    def tags(self) -> tuple[str, ...]:
        """Every tag used, most frequent first (ties alphabetical)."""
        counts: dict[str, int] = {}
        for case in self.cases:
            for tag in case.tags:
                counts[tag] = counts.get(tag, 0) + 1
        return tuple(sorted(counts, key=lambda t: (-counts[t], t)))


def _strings(value: Any, key: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
        raise ValueError(f"{key!r} must be a list of non-empty strings")
    if len(set(value)) != len(value):
        raise ValueError(f"{key!r} has duplicates")
    return tuple(value)


def _history(value: Any) -> tuple[Message, ...]:
    if not isinstance(value, list):
        raise ValueError("'history' must be a list of {\"role\", \"content\"} turns")
    turns = []
    for index, turn in enumerate(value, 1):
        if not isinstance(turn, dict) or not isinstance(turn.get("role"), str) \
                or not isinstance(turn.get("content"), str) or not turn["content"].strip():
            raise ValueError(f"history turn {index} must be {{\"role\": str, \"content\": non-empty str}}")
        turns.append(Message(role=turn["role"], content=turn["content"]))
    return tuple(turns)


def parse_case(record: Any, line: int = 0) -> GoldenCase:
    """One golden record → :class:`GoldenCase`; ``ValueError`` with a short reason when it is malformed."""
    if not isinstance(record, dict):
        raise ValueError("not a JSON object")
    missing = [k for k in REQUIRED_KEYS if k not in record]
    if missing:
        raise ValueError(f"missing key{'s' if len(missing) > 1 else ''} {', '.join(map(repr, missing))}")
    case_id, question, answerable = record["id"], record["question"], record["answerable"]
    if not isinstance(case_id, str) or not case_id.strip():
        raise ValueError("'id' must be a non-empty string")
    if not isinstance(question, str) or not question.strip():
        raise ValueError("'question' must be a non-empty string")
    if not isinstance(answerable, bool):
        raise ValueError(f"'answerable' must be true or false, got {answerable!r}")
    expected = _strings(record.get("expected_doc_ids", []), "expected_doc_ids")
    if answerable and not expected:
        raise ValueError("an answerable case must list its expected_doc_ids")
    if not answerable and expected:
        raise ValueError("an unanswerable case must have expected_doc_ids: []")
    answer = record.get("expected_answer")
    if answer is not None and not isinstance(answer, str):
        raise ValueError("'expected_answer' must be a string or null")
    return GoldenCase(id=case_id, question=question, answerable=answerable,
                      history=_history(record.get("history", [])), expected_doc_ids=expected,
                      expected_answer=answer, tags=_strings(record.get("tags", []), "tags"), line=line)


def parse_lines(lines: list[str], name: str = "golden") -> tuple[list[GoldenCase], list[str]]:
    """Parse JSONL text; blank lines are skipped; every bad line becomes one problem string."""
    cases: list[GoldenCase] = []
    problems: list[str] = []
    seen: dict[str, int] = {}
    for number, text in enumerate(lines, 1):
        if not text.strip():
            continue
        try:
            case = parse_case(json.loads(text), number)
        except json.JSONDecodeError as exc:
            problems.append(f"{name} line {number}: not valid JSON ({exc.msg} at column {exc.colno})")
            continue
        except ValueError as exc:
            problems.append(f"{name} line {number}: {exc}")
            continue
        if case.id in seen:
            problems.append(f"{name} line {number}: duplicate id {case.id!r} (first on line {seen[case.id]})")
            continue
        seen[case.id] = number
        cases.append(case)
    return cases, problems


def load_golden(path: str | Path) -> GoldenSet:
    """Read and validate a golden file; raise :class:`GoldenError` only when nothing usable is in it."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise GoldenError(f"golden file {path} not found") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise GoldenError(f"cannot read golden file {path}: {getattr(exc, 'strerror', None) or exc}") from None
    # split on \n only: str.splitlines() also breaks at U+2028, U+0085 ..., which JSON allows raw inside a string
    cases, problems = parse_lines([line.rstrip("\r") for line in text.split("\n")], path.name)
    if not cases:
        detail = f"; first problem: {problems[0]}" if problems else ""
        raise GoldenError(f"golden file {path} has no valid cases{detail}")
    return GoldenSet(path=str(path), cases=tuple(cases), problems=tuple(problems))


def subset(golden: GoldenSet, limit: int | None) -> GoldenSet:
    """The first ``limit`` cases (all when ``limit`` is None)."""
    if limit is None:
        return golden
    if limit < 1:
        raise GoldenError(f"--limit must be at least 1, got {limit}")
    return GoldenSet(path=golden.path, cases=golden.cases[:limit], problems=golden.problems)
