"""The "Answer correctness" section of BENCHMARKS.md: the correctness scorer (:mod:`workbench.correctness`)
against hand labels. NOT a test (``tests/benchmarks/test_correctness_report.py`` checks that the committed
section is what this script writes from the committed results file).

Two steps:

- ``python -m benchmarks.correctness_report --measure EVAL_DIR`` re-scores the traces of a ``workbench eval
  --out EVAL_DIR`` run with the current scorer (the packaged embedder; NLI as the run had it, normally
  unavailable offline), rebuilds the evaluation summary from the same traces, and writes
  ``benchmarks/results/correctness_handcheck.json``: for the first ``HANDCHECK_CASES`` answered answerable
  cases by id, the question, the expected answer, the answer, the scorer's verdict and signals, and the hand
  label (kept from the existing results file, or taken from ``--labels FILE``, ``{"id": "correct|partly|wrong"}``),
  plus the run's summary figures, the date, the machine, the load average, the git commit and the model.
- ``python -m benchmarks.correctness_report`` (no flag) rewrites the section of BENCHMARKS.md between
  ``<!-- correctness:start -->`` and ``<!-- correctness:end -->`` from that file: exact verdict agreement,
  the confusion matrix, and the summary figures, with the model that produced them.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import subprocess
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results" / "correctness_handcheck.json"
MARKDOWN = ROOT / "BENCHMARKS.md"
GOLDEN = ROOT / "golden" / "golden.jsonl"
START, END = "<!-- correctness:start -->", "<!-- correctness:end -->"
HANDCHECK_CASES = 50
MODEL = "extractive generator, packaged all-MiniLM-L6-v2"
VERDICTS = ("correct", "partly", "wrong")
SUMMARY_KEYS = ("cases", "answer_rate_answerable", "false_answer_rate_unanswerable", "citation_support_rate",
                "answers_fully_supported", "correct_answer_rate", "partly_answer_rate", "wrong_answer_rate",
                "supported_but_wrong_rate", "supported_but_wrong_rate_answerable", "trust_answerable",
                "trust_unanswerable", "correctness")


# -- the section (pure) ---------------------------------------------------------------------------------------

def _pct(value) -> str:
    return "n/a" if value is None else f"{value:.1%}"


def agreement(cases: list[dict]) -> dict:
    """Exact agreement and the confusion matrix {hand: {scorer: n}}."""
    matrix = {h: {s: 0 for s in VERDICTS} for h in VERDICTS}
    for case in cases:
        matrix[case["hand"]][case["scorer"]] += 1
    agree = sum(matrix[v][v] for v in VERDICTS)
    return {"cases": len(cases), "agree": agree, "rate": agree / len(cases) if cases else None, "matrix": matrix}


def _direction(matrix: dict) -> str:
    """Which way the scorer errs, in words generated from the confusion matrix."""
    lenient = matrix["wrong"]["correct"] + matrix["partly"]["correct"] + matrix["wrong"]["partly"]
    strict = matrix["correct"]["wrong"] + matrix["correct"]["partly"] + matrix["partly"]["wrong"]
    line = (f"The scorer is stricter than the hand labels on {strict} cases and more lenient on {lenient}; it "
            f"called {matrix['wrong']['correct']} hand-labelled wrong answers correct.")
    if strict > lenient:
        line += (" Expected answers carry more detail than a correct short answer states, so read"
                 " `correct_answer_rate` as a lower bound and `supported_but_wrong_rate` as an upper bound.")
    return line


def render_section(results: dict) -> str:
    cases = results["cases"]
    a = agreement(cases)
    s = results["summary"]
    hand = Counter(c["hand"] for c in cases)
    lines = [
        "## Answer correctness", "",
        "Does an answer say what the golden case's `expected_answer` says? The citation check cannot tell: with the "
        "extractive generator every quoted sentence is supported by the passage it quotes. `workbench eval` scores "
        "each answered case with `workbench/correctness.py` (token recall with exact numbers, versions and "
        "identifiers, a semantic match with the evaluation's embedder, NLI entailment when a model resolves) and "
        "gives one verdict: correct, partly or wrong.", "",
        f"Run: {results['date']}, git `{results['git_commit']}`, model: {results['model']}; NLI: "
        f"{results['nli']}. Machine: `{results['machine']}`, load average {results['load_average']}.", "",
        f"**Hand check.** The first {a['cases']} answered answerable golden cases by id, each labelled by hand "
        f"from the question, the expected answer and the answer (hand labels: "
        + ", ".join(f"{hand[v]} {v}" for v in VERDICTS)
        + f"). The scorer agrees exactly on {a['agree']} of {a['cases']} ({_pct(a['rate'])}).", "",
        "| hand \\ scorer | " + " | ".join(VERDICTS) + " |", "|---|" + "---:|" * len(VERDICTS),
        *(f"| {h} | " + " | ".join(str(a["matrix"][h][v]) for v in VERDICTS) + " |" for h in VERDICTS), "",
        _direction(a["matrix"]), "",
        f"**The golden set** ({s['cases']} cases, offline default stack, the same run):", "",
        "| metric | value |", "|---|---:|",
        f"| answered (answerable) | {_pct(s['answer_rate_answerable'])} |",
        f"| claims supported by their citation | {_pct(s['citation_support_rate'])} |",
        f"| answers with every claim supported | {_pct(s['answers_fully_supported'])} |",
        f"| correct answers (of answered answerable) | {_pct(s['correct_answer_rate'])} |",
        f"| partly correct (of answered answerable) | {_pct(s['partly_answer_rate'])} |",
        f"| wrong (of answered answerable) | {_pct(s['wrong_answer_rate'])} |",
        f"| supported but wrong (of all answered) | {_pct(s['supported_but_wrong_rate'])} |",
        f"| supported but wrong (of answered answerable) | {_pct(s['supported_but_wrong_rate_answerable'])} |", "",
        "Trust, over every case of the kind (on unanswerable every answer is wrong):", "",
        "| cases | answered correctly | answered partly | abstained | answered wrongly |", "|---|---:|---:|---:|---:|",
    ]
    for kind in ("answerable", "unanswerable"):
        t = s[f"trust_{kind}"]
        lines.append(f"| {kind} ({t['cases']}) | {_pct(t['answered_correctly'])} | {_pct(t['answered_partly'])} | "
                     f"{_pct(t['abstained'])} | {_pct(t['answered_wrongly'])} |")
    lines += ["", "Regenerate: `workbench eval golden/golden.jsonl --store STORE --no-nli --out DIR`, then "
              "`python -m benchmarks.correctness_report --measure DIR` and `python -m benchmarks.correctness_report`."]
    return "\n".join(lines)


def rewrite(markdown: str, section: str) -> str:
    """``markdown`` with the text between the markers replaced (the markers appended when absent)."""
    block = f"{START}\n{section}\n{END}"
    if START in markdown and END in markdown:
        head, rest = markdown.split(START, 1)
        return head + block + rest.split(END, 1)[1]
    return markdown.rstrip("\n") + "\n\n" + block + "\n"


# -- measuring ------------------------------------------------------------------------------------------------

def _git_commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def _uname() -> str:
    try:
        return subprocess.run(["uname", "-a"], capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return " ".join(platform.uname()).strip()


def measure(eval_dir: Path, labels: dict[str, str]) -> dict:
    from pipeline.config import PipelineConfig
    from pipeline.models.registry import default_models
    from workbench.correctness import score_case
    from workbench.evaluate import abstained_by, build_row, read_traces
    from workbench.golden import load_golden
    from workbench.summary import summarise

    golden = load_golden(GOLDEN)
    traces = read_traces(eval_dir / "traces.jsonl")
    cases = [c for c in golden.cases if c.id in traces]
    embedder = default_models().embedder(PipelineConfig().embedding)
    previous = json.loads((eval_dir / "summary.json").read_text(encoding="utf-8")).get("correctness", {})
    nli = previous.get("nli", "off") if previous.get("nli") != "ran" else "unavailable"
    verdicts = [score_case(c, traces[c.id], abstained=bool(abstained_by(traces[c.id])), embedder=embedder,
                           nli_status=nli) for c in cases]
    rows = [build_row(c, traces[c.id], v) for c, v in zip(cases, verdicts, strict=True)]
    summary = summarise(rows, [traces[c.id] for c in cases], tags=golden.tags)
    picked = sorted((c for c in cases if c.answerable and not abstained_by(traces[c.id])), key=lambda c: c.id)
    out = []
    for case in picked[:HANDCHECK_CASES]:
        verdict = verdicts[cases.index(case)]
        out.append({"id": case.id, "question": case.question, "expected_answer": case.expected_answer,
                    "answer": traces[case.id].answer, "hand": labels[case.id], "scorer": verdict.verdict,
                    "why": verdict.why, "token_recall": verdict.token_recall, "semantic": verdict.semantic,
                    "missing_facts": list(verdict.missing_facts),
                    "contradicted_facts": list(verdict.contradicted_facts)})
    return {"date": dt.date.today().isoformat(), "machine": _uname(),
            "load_average": " ".join(f"{x:.2f}" for x in os.getloadavg()), "git_commit": _git_commit(),
            "model": MODEL, "nli": nli, "summary": {k: summary[k] for k in SUMMARY_KEYS}, "cases": out}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--measure", metavar="EVAL_DIR", help="re-score an eval --out directory and write the "
                                                               "results file")
    parser.add_argument("--labels", metavar="FILE", help="hand labels {id: verdict} (default: the results file's)")
    args = parser.parse_args(argv)
    if args.measure:
        if args.labels:
            labels = json.loads(Path(args.labels).read_text(encoding="utf-8"))
        else:
            labels = {c["id"]: c["hand"] for c in json.loads(RESULTS.read_text(encoding="utf-8"))["cases"]}
        results = measure(Path(args.measure), labels)
        RESULTS.write_text(json.dumps(results, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        print(f"wrote {RESULTS}", file=sys.stderr)
    results = json.loads(RESULTS.read_text(encoding="utf-8"))
    MARKDOWN.write_text(rewrite(MARKDOWN.read_text(encoding="utf-8"), render_section(results)), encoding="utf-8")
    print(f"rewrote the Answer correctness section of {MARKDOWN}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
