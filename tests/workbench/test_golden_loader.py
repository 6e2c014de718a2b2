"""workbench.golden: a golden file loads with every bad line reported by number, and the rest still runs."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.trace import Message
from workbench.golden import GoldenError, load_golden, parse_lines, subset

ROOT = Path(__file__).resolve().parents[2]
GOOD = {"id": "q1", "question": "What does ERR_TIMEOUT_502 mean?", "history": [], "answerable": True,
        "expected_doc_ids": ["err-timeout-502"], "expected_answer": "The endpoint did not respond.",
        "tags": ["error-code"]}


def line(**changes) -> str:
    record = {**GOOD, **changes}
    return json.dumps({k: v for k, v in record.items() if v is not ...})


def test_the_bundled_golden_set_loads_clean():
    golden = load_golden(ROOT / "golden" / "golden.jsonl")
    assert len(golden.cases) == 300 and not golden.problems
    assert sum(not c.answerable for c in golden.cases) == 100
    assert {"hard-unanswerable", "off-topic", "multi-turn", "identifier", "version-conflict", "injection"} \
        <= set(golden.tags)
    multi = [c for c in golden.cases if "multi-turn" in c.tags]
    assert multi and all(c.history and isinstance(c.history[0], Message) for c in multi)


def test_each_bad_line_is_one_problem_with_its_number_and_the_rest_load():
    lines = [
        line(),
        "{not json",
        line(id="q3", answerable="yes"),
        line(id="q4", expected_doc_ids=[]),
        line(id="q5", answerable=False),                       # unanswerable but names documents
        line(id="q1"),                                          # duplicate id
        "",
        line(id="q8", question=...),                            # missing key
        line(id="q9", history=[{"role": "user"}]),
        line(id="q10", answerable=False, expected_doc_ids=[], expected_answer=None, tags=["off-topic"]),
        "[1, 2]",
    ]
    cases, problems = parse_lines(lines, "g.jsonl")
    assert [c.id for c in cases] == ["q1", "q10"]
    assert len(problems) == 8
    by_line = {int(p.split(" line ")[1].split(":")[0]): p for p in problems}
    assert set(by_line) == {2, 3, 4, 5, 6, 8, 9, 11}
    assert "not valid JSON" in by_line[2]
    assert "'answerable' must be true or false" in by_line[3]
    assert "must list its expected_doc_ids" in by_line[4]
    assert "unanswerable case must have expected_doc_ids: []" in by_line[5]
    assert "duplicate id 'q1' (first on line 1)" in by_line[6]
    assert "missing key 'question'" in by_line[8]
    assert "history turn 1" in by_line[9]
    assert "not a JSON object" in by_line[11]
    assert all("\n" not in p and p.startswith("g.jsonl line ") for p in problems)


def test_a_missing_or_empty_golden_file_is_a_golden_error(tmp_path):
    with pytest.raises(GoldenError, match="not found"):
        load_golden(tmp_path / "nope.jsonl")
    bad = tmp_path / "bad.jsonl"
    bad.write_text("{oops\n", encoding="utf-8")
    with pytest.raises(GoldenError, match="no valid cases; first problem: bad.jsonl line 1"):
        load_golden(bad)


def test_subset_keeps_the_first_cases_and_rejects_a_non_positive_limit(tmp_path):
    path = tmp_path / "g.jsonl"
    path.write_text("\n".join(line(id=f"q{i}") for i in range(5)) + "\n", encoding="utf-8")
    golden = load_golden(path)
    assert [c.id for c in subset(golden, 2).cases] == ["q0", "q1"]
    assert subset(golden, None) is golden
    with pytest.raises(GoldenError, match="--limit must be at least 1"):
        subset(golden, 0)


def test_cli_rejects_a_golden_file_with_no_valid_line_in_one_line(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": 3}\n', encoding="utf-8")
    result = subprocess.run([sys.executable, "-m", "workbench.cli", "eval", str(bad), "--store", str(tmp_path / "s")],
                            cwd=ROOT, capture_output=True, text=True, timeout=300,
                            env={"HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin"})
    assert result.returncode == 2
    lines = [ln for ln in result.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "Traceback" not in result.stderr
    assert "has no valid cases" in lines[0] and "line 1" in lines[0]


def test_a_golden_line_with_a_raw_line_separator_inside_the_question_is_one_case(tmp_path):
    cases = [{"id": f"c{i}", "question": f"What{sep} is the retry limit?", "history": [], "answerable": False,
              "expected_doc_ids": [], "expected_answer": None, "tags": []}
             for i, sep in enumerate(("\u2028", "\u0085"))]
    path = tmp_path / "golden.jsonl"
    path.write_text("\r\n".join(json.dumps(c, ensure_ascii=False) for c in cases) + "\n", encoding="utf-8")
    golden = load_golden(path)
    assert [c.id for c in golden.cases] == ["c0", "c1"] and not golden.problems


def test_a_line_nested_too_deeply_or_with_a_huge_integer_is_one_problem_and_the_rest_load():
    lines = [line(), "[" * 100_000 + "]" * 100_000, '{"id": 1' + "0" * 5000 + "}", line(id="q4")]
    cases, problems = parse_lines(lines, "g.jsonl")
    assert [c.id for c in cases] == ["q1", "q4"]
    assert len(problems) == 2 and all(len(p.splitlines()) == 1 for p in problems)
    assert problems[0].startswith("g.jsonl line 2: not valid JSON (nested too deeply")
    assert problems[1].startswith("g.jsonl line 3: ")
