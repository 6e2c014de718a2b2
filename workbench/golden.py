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
import random
from collections.abc import Sequence
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
        except RecursionError:
            problems.append(f"{name} line {number}: not valid JSON (nested too deeply to read)")
            continue
        except ValueError as exc:  # a bad case, or an integer longer than Python converts
            problems.append(f"{name} line {number}: {str(exc).splitlines()[0][:200]}")
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


# -- the tune / test split ----------------------------------------------------------------------------------
#
# A threshold chosen on some cases and reported on the same cases flatters itself, so the golden set has a
# fixed split, stored beside it (``golden.jsonl`` -> ``golden.split.json``): ``workbench tune`` fits on the
# ``tune`` part only, ``workbench eval --split test`` and the deploy gate measure the held-out ``test`` part.
#
# 1. **Groups.** Two cases are linked when any user turn of one (its question or a user turn of its history)
#    and any user turn of the other share at least half their content tokens (Jaccard >= ``LINK_JACCARD`` over
#    the project tokenizer's tokens, stop words dropped). Linked cases form one group (union-find): the
#    follow-ups of one conversation, a follow-up and a case asking its opening question, and near-duplicate
#    questions. A group is never split, so no part holds a near-copy of a case of the other.
# 2. **Order.** The groups are shuffled with ``random.Random(seed)``, then ordered largest first (stable).
# 3. **Greedy stratified assignment.** Each group goes to the part that most needs what it carries: summed
#    over every stratum the group has cases in — answerable or unanswerable (weight ``CLASS_WEIGHT``), and
#    each tag within that class (weight 1) — the part's shortfall against its share of the stratum, relative
#    to the stratum's size, times the group's cases in it. Ties go to the part furthest below its share of
#    all cases, then to tune.

SPLIT_PARTS = ("tune", "test")
SPLIT_CHOICES = ("all", *SPLIT_PARTS)
SPLIT_SEED = 0
TEST_FRACTION = 0.5
LINK_JACCARD = 0.5
CLASS_WEIGHT = 4.0


@dataclass(frozen=True)
class GoldenSplit:
    """Which part each golden case belongs to, as stored in a split file."""
    path: str
    seed: int
    test_fraction: float
    parts: dict[str, tuple[str, ...]]        # part -> case ids, in golden order
    groups: tuple[tuple[str, ...], ...] = ()  # the linked groups of two or more cases

    def part_of(self, case_id: str) -> str | None:
        for part, ids in self.parts.items():
            if case_id in ids:
                return part
        return None


def split_path(golden_path: str | Path) -> Path:
    """Where a golden file's split lives: ``golden.jsonl`` -> ``golden.split.json`` beside it."""
    path = Path(golden_path)
    return path.with_name(f"{path.stem}.split.json")


def _content_tokens(text: str) -> frozenset[str]:
    from pipeline.text.tokenize import STOP_WORDS, tokenize

    return frozenset(t for t in tokenize(text) if t not in STOP_WORDS)


def _turns(case: GoldenCase) -> list[frozenset[str]]:
    texts = [case.question, *(m.content for m in case.history if m.role == "user")]
    return [t for t in map(_content_tokens, texts) if t]


def linked(a: GoldenCase, b: GoldenCase) -> bool:
    """Same conversation or near-duplicates: some user turn of each shares >= ``LINK_JACCARD`` of its tokens."""
    return any(len(x & y) / len(x | y) >= LINK_JACCARD for x in _turns(a) for y in _turns(b))


def link_groups(cases: Sequence[GoldenCase]) -> list[tuple[str, ...]]:
    """The cases grouped by :func:`linked` (transitively), each group in golden order, groups by first case."""
    parent = list(range(len(cases)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    turns = [_turns(c) for c in cases]
    for i in range(len(cases)):
        for j in range(i + 1, len(cases)):
            if any(len(x & y) / len(x | y) >= LINK_JACCARD for x in turns[i] for y in turns[j]):
                parent[root(j)] = root(i)
    groups: dict[int, list[str]] = {}
    for i, case in enumerate(cases):
        groups.setdefault(root(i), []).append(case.id)
    return [tuple(g) for g in groups.values()]


def _strata(case: GoldenCase) -> list[tuple[str, float]]:
    kind = "answerable" if case.answerable else "unanswerable"
    return [(kind, CLASS_WEIGHT), *((f"{kind}:{tag}", 1.0) for tag in case.tags)]


def make_split(golden: GoldenSet, seed: int = SPLIT_SEED, test_fraction: float = TEST_FRACTION,
               path: str = "") -> GoldenSplit:
    """Split the cases into tune and test parts (the method is in the comment above ``SPLIT_PARTS``)."""
    if not 0.0 < test_fraction < 1.0:
        raise GoldenError(f"the test fraction must be between 0 and 1, got {test_fraction}")
    by_id = {c.id: c for c in golden.cases}
    groups = link_groups(golden.cases)
    random.Random(seed).shuffle(groups)
    groups.sort(key=len, reverse=True)
    share = {"tune": 1.0 - test_fraction, "test": test_fraction}
    totals: dict[str, float] = {}
    for case in golden.cases:
        for stratum, _ in _strata(case):
            totals[stratum] = totals.get(stratum, 0) + 1
    counts: dict[str, dict[str, float]] = {p: {} for p in SPLIT_PARTS}
    sizes = {p: 0 for p in SPLIT_PARTS}
    assigned: dict[str, str] = {}

    def need(part: str, group: tuple[str, ...]) -> tuple[float, float]:
        score = 0.0
        for case_id in group:
            for stratum, weight in _strata(by_id[case_id]):
                shortfall = share[part] * totals[stratum] - counts[part].get(stratum, 0)
                score += weight * shortfall / totals[stratum]
        return score, share[part] * len(golden.cases) - sizes[part]

    for group in groups:
        part = max(SPLIT_PARTS, key=lambda p: need(p, group))  # max keeps the first (tune) on a tie
        for case_id in group:
            assigned[case_id] = part
            for stratum, _ in _strata(by_id[case_id]):
                counts[part][stratum] = counts[part].get(stratum, 0) + 1
        sizes[part] += len(group)
    parts = {p: tuple(c.id for c in golden.cases if assigned[c.id] == p) for p in SPLIT_PARTS}
    linked_groups = tuple(sorted((g for g in groups if len(g) > 1), key=lambda g: g[0]))
    return GoldenSplit(path=path, seed=seed, test_fraction=test_fraction, parts=parts, groups=linked_groups)


SPLIT_ABOUT = ("The golden set's fixed tune / test split (golden/README.md, 'The tune / test split'). `workbench "
               "tune` fits the gate on the tune part only and reports the recommendation on the test part; "
               "`workbench eval --split test` and the deploy gate (golden/floors.json) measure the held-out test "
               "part. Written by `python -m workbench.golden split golden/golden.jsonl`; never edit by hand, never "
               "regenerate with another seed to get a friendlier split.")


def split_to_dict(split: GoldenSplit, golden_name: str) -> dict:
    return {"_about": SPLIT_ABOUT, "golden": golden_name, "seed": split.seed, "test_fraction": split.test_fraction,
            "link_jaccard": LINK_JACCARD, "sizes": {p: len(ids) for p, ids in split.parts.items()},
            "parts": {p: list(ids) for p, ids in split.parts.items()},
            "linked_groups": [list(g) for g in split.groups]}


def write_split(golden_path: str | Path, seed: int = SPLIT_SEED, test_fraction: float = TEST_FRACTION) -> Path:
    golden = load_golden(golden_path)
    if golden.problems:
        raise GoldenError(f"golden file {golden_path} has bad lines; fix them before splitting: {golden.problems[0]}")
    out = split_path(golden_path)
    split = make_split(golden, seed, test_fraction, str(out))
    out.write_text(json.dumps(split_to_dict(split, Path(golden_path).name), indent=1) + "\n", encoding="utf-8")
    return out


def load_split(path: str | Path) -> GoldenSplit:
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise GoldenError(f"split file {path} not found (write one with: python -m workbench.golden split "
                          "GOLDEN)") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise GoldenError(f"cannot read split file {path}: {exc}") from None
    parts = data.get("parts") if isinstance(data, dict) else None
    if not isinstance(parts, dict) or set(parts) != set(SPLIT_PARTS) \
            or not all(isinstance(v, list) and all(isinstance(i, str) for i in v) for v in parts.values()):
        raise GoldenError(f"split file {path} must have \"parts\": {{\"tune\": [ids], \"test\": [ids]}}")
    both = set(parts["tune"]) & set(parts["test"])
    if both:
        raise GoldenError(f"split file {path} puts {len(both)} cases in both parts, e.g. {sorted(both)[0]!r}")
    return GoldenSplit(path=str(path), seed=int(data.get("seed", 0)),
                       test_fraction=float(data.get("test_fraction", 0.0)),
                       parts={p: tuple(parts[p]) for p in SPLIT_PARTS},
                       groups=tuple(tuple(g) for g in data.get("linked_groups", [])))


def find_split(golden_path: str | Path, split_file: str | Path | None = None) -> GoldenSplit | None:
    """The split named by ``split_file``, else the one beside the golden file, else ``None`` (no split)."""
    if split_file:
        return load_split(split_file)
    path = split_path(golden_path)
    return load_split(path) if path.is_file() else None


def select(golden: GoldenSet, split: GoldenSplit | None, part: str) -> GoldenSet:
    """The cases of one part (``tune``/``test``), or all of them (``all``); a case the split does not assign is
    an error for a part (the split file is stale), never silently dropped or added."""
    if part not in SPLIT_CHOICES:
        raise GoldenError(f"--split must be one of {', '.join(SPLIT_CHOICES)}, got {part!r}")
    if part == "all":
        return golden
    if split is None:
        raise GoldenError(f"--split {part} needs a split file: {split_path(golden.path)} not found (write one with: "
                          f"python -m workbench.golden split {golden.path})")
    unassigned = [c.id for c in golden.cases if split.part_of(c.id) is None]
    if unassigned:
        raise GoldenError(f"split file {split.path} does not assign {len(unassigned)} cases of {golden.path} "
                          f"(e.g. {unassigned[0]!r}): regenerate it with python -m workbench.golden split "
                          f"{golden.path}")
    wanted = set(split.parts[part])
    return GoldenSet(path=golden.path, cases=tuple(c for c in golden.cases if c.id in wanted),
                     problems=golden.problems)


def split_table(golden: GoldenSet, split: GoldenSplit) -> str:
    """Markdown: cases per part, answerable and unanswerable, and per tag (golden/README.md's table)."""
    parts = {p: [c for c in golden.cases if split.part_of(c.id) == p] for p in SPLIT_PARTS}

    def cell(cases: list[GoldenCase]) -> str:
        return f"{len(cases)} ({sum(c.answerable for c in cases)} / {sum(not c.answerable for c in cases)})"

    lines = ["| cases (answerable / unanswerable) | tune | test |", "|---|---:|---:|",
             f"| all | {cell(parts['tune'])} | {cell(parts['test'])} |"]
    for tag in golden.tags:
        lines.append(f"| `{tag}` | " + " | ".join(cell([c for c in parts[p] if tag in c.tags]) for p in SPLIT_PARTS)
                     + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """``python -m workbench.golden split GOLDEN``: write the split file; ``table GOLDEN``: print its table."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m workbench.golden")
    parser.add_argument("action", choices=["split", "table"])
    parser.add_argument("golden", metavar="GOLDEN")
    parser.add_argument("--seed", type=int, default=SPLIT_SEED)
    parser.add_argument("--test-fraction", type=float, default=TEST_FRACTION)
    args = parser.parse_args(argv)
    if args.action == "split":
        print(f"wrote {write_split(args.golden, args.seed, args.test_fraction)}")
    golden = load_golden(args.golden)
    print(split_table(golden, load_split(split_path(args.golden))))
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
