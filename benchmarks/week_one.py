"""The "Week-one citation errors" section of BENCHMARKS.md: how often a citation is wrong with the citation
validator off (the design's week-one setting), and the difference the validator makes, on the demo golden set.

``python -m benchmarks.week_one`` measures and writes ``benchmarks/results/week_one.json``:

1. ingests ``golden/corpus`` into ``build/week-one-store`` (incremental; its own store, so it never waits for
   another process holding the deploy-gate store);
2. runs :func:`workbench.week_one.week_one` over all golden cases with the shipped defaults (the offline stack:
   packaged MiniLM, the reader, ``generate.backend=extractive``): both arms, every citation judged by the NLI
   model trained here (``validate.nli_model``); the validator under test runs without it (``validate.nli=off``),
   so the judge is not the validator;
3. with ``--local N``, also the same report for the first ``N`` answerable cases the gate answers, with
   SmolLM2 generating (``generate.backend=local``): a subset, because one SmolLM2 answer takes tens of seconds
   on a shared 2-core machine; the file says how many cases, which generators actually answered (SmolLM2
   falls back to the extractive answer when its reply is unusable) and how long it took.

:func:`render` turns the file into the section; every number comes from the file, each labelled with the
generator that produced it.
"""

from __future__ import annotations

import argparse
import sys
import time

from benchmarks.results_io import (
    ANSWER_CONFIG,
    ANSWER_PATH,
    ROOT,
    Depends,
    load_average,
    meta_line,
    run_meta,
    write_results,
)

DEPENDS = Depends(("benchmarks/week_one.py", "workbench/week_one.py", "workbench/correctness.py", "workbench/nli.py",
                   *ANSWER_PATH, "golden/golden.jsonl", "golden/corpus"), ANSWER_CONFIG)
NAME = "week_one"
GOLDEN = ROOT / "golden" / "golden.jsonl"
CORPUS = ROOT / "golden" / "corpus"
STORE = ROOT / "build" / "week-one-store"
EXAMPLES = 5
def model_line(cfg) -> str:
    """Which models produced the numbers, from the configuration that ran."""
    return (f"embedder {cfg.embedding.model} (retrieval and the validator's cosine), reader {cfg.rerank.model} "
            f"(rerank {'on' if cfg.rerank.enabled else 'off'}), `generate.backend={cfg.generate.backend}`, judge: "
            f"NLI {cfg.validate.nli_model} (the validator under test runs with `validate.nli=off`)")
LOCAL_MODEL = "SmolLM2-135M-Instruct (generate.backend=local, CPU)"


def _local_cases(golden, store, models, cfg, n: int):
    """The first ``n`` answerable cases, in golden order, that the gate lets through (an abstention never
    reaches the model)."""
    from pipeline.engine import Pipeline
    from workbench.evaluate import eval_config
    from workbench.golden import GoldenSet

    picker = Pipeline(store, models, eval_config(cfg), log_runs=False)
    picked = []
    for case in golden.cases:
        if len(picked) == n:
            break
        history = [{"role": m.role, "content": m.content} for m in case.history]
        if case.answerable and picker.search(case.question, history=history).gate.decision == "answer":
            picked.append(case)
    return GoldenSet(path=golden.path, cases=tuple(picked))


def _slim(report: dict) -> dict:
    return {k: v for k, v in report.items() if k != "problems"}


def measure(local: int = 0, examples: int = EXAMPLES) -> dict:
    from pipeline.config import PipelineConfig
    from pipeline.ingestion.ingest import ingest_paths
    from pipeline.models.registry import default_models
    from pipeline.storage.store import Store
    from workbench.golden import load_golden
    from workbench.week_one import week_one

    cfg = PipelineConfig()
    models = default_models()
    golden = load_golden(GOLDEN)
    results = {"meta": run_meta(depends=DEPENDS, model=model_line(cfg)),
               "golden": "golden/golden.jsonl", "store": "build/week-one-store",
               "reproduce": ".venv/bin/python -m benchmarks.week_one"
                            + (f" --local {local}" if local else "")}
    with Store.open(STORE) as store:
        ingest_paths(store, [CORPUS], cfg, models, progress=False)
        started = time.perf_counter()
        results["extractive"] = _slim(week_one(golden, store, models, cfg, nli=True, examples=examples).report)
        results["extractive"]["seconds"] = round(time.perf_counter() - started, 1)
        if local:
            local_cfg = cfg.with_overrides({"generate.backend": "local", "generate.model": "local"})
            subset = _local_cases(golden, store, models, cfg, local)
            started = time.perf_counter()
            report = week_one(subset, store, models, local_cfg, nli=True, examples=examples).report
            results["smollm2"] = {**_slim(report), "model": LOCAL_MODEL, "subset": f"the first {len(subset.cases)} "
                                  "answerable cases the gate answers, in golden order",
                                  "seconds": round(time.perf_counter() - started, 1)}
    results["meta"]["load_average_end"] = load_average()
    return results


# -- the section (pure) ---------------------------------------------------------------------------------------

def _block(title: str, report: dict) -> list[str]:
    from workbench.display.markdown import md
    from workbench.week_one import REASON_WORDS, arm_table, headline

    off = report["arms"]["off"]
    reasons = "; ".join(f"{REASON_WORDS[r]}: {n}" for r, n in off["reasons"].items() if n) or "none"
    lines = [f"### {title}", "", arm_table(report), "", *[f"- {line}" for line in headline(report)],
             f"- why citations were judged wrong (validation off): {reasons}", ""]
    if report["examples"]:
        lines += [f"Examples ({len(report['examples'])} of {off['wrong']['k']}):", ""]
        for ex in report["examples"]:
            flag = {True: "flagged", False: "not flagged", None: "not shown"}[ex["flagged_with_validation_on"]]
            source = md(ex["doc_id"] or "a source never offered")
            lines.append(f"- {md(ex['case_id'])}: “{md(ex['claim'], 160)}” cites \\[{ex['marker']}\\] {source}; "
                         f"{md(ex['why'], 200)} (validation on: {flag})")
        lines.append("")
    return lines


def render(results: dict) -> str:
    from workbench.week_one import judge_line

    ext = results["extractive"]
    judge = ext["judge"]
    lines = [
        "## Week-one citation errors", "",
        meta_line(results["meta"]), "",
        f"The design's week-one question: with retrieval and citations shipped and no citation validator, how often "
        f"is a citation wrong, and how much does the validator change that? `workbench eval --week-one` "
        f"(workbench/week_one.py) runs the golden set twice, with `validate.enabled=false` and `true`, and judges "
        f"every citation on its own. {judge_line(judge)} A claim stating a value that the golden answer contradicts "
        f"is wrong too. Intervals are Wilson 95 %; the difference is paired (the same citations in both arms): a "
        f"bootstrap interval resampling cases and the exact McNemar test on the citations where the arms disagree. "
        f"The validator never rewrites an answer: what it changes is which wrong citations reach the reader "
        f"flagged.", "",
        *_block(f"Extractive generator (the offline default), all {ext['cases']} golden cases, "
                f"{ext['seconds']:.0f} s for both arms", ext),
    ]
    local = results.get("smollm2")
    if local:
        gens = ", ".join(local["arms"]["off"]["generators"]) or "none"
        lines += _block(f"{local['model']}: {local['subset']} ({local['cases']} cases, {local['seconds']:.0f} s; "
                        f"answers came from: {gens})", local)
    else:
        lines += ["SmolLM2 (`generate.backend=local`) was not measured for this section: one SmolLM2 answer takes "
                  "tens of seconds on the shared 2-core machine (see \"Local SmolLM2-135M-Instruct on demo "
                  "questions\"); run with `--local N` for the first N answered cases.", ""]
    lines.append(f"Reproduce: `{results['reproduce']}`.")
    return "\n".join(lines).rstrip() + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--local", type=int, default=0, metavar="N",
                        help="also run SmolLM2 on the first N answerable cases the gate answers (default 0: not run)")
    parser.add_argument("--examples", type=int, default=EXAMPLES, help="wrong citations kept as examples per run")
    args = parser.parse_args(argv)
    if args.local < 0 or args.examples < 0:
        print("error: --local and --examples must be at least 0", file=sys.stderr)
        return 2
    if args.local:
        from pipeline.models.local_llm import INSTALL_HINT, is_installed

        if not is_installed():
            print(f"error: SmolLM2 is not installed: {INSTALL_HINT}", file=sys.stderr)
            return 2
    results = measure(args.local, args.examples)
    path = write_results(NAME, results)
    print(render(results))
    print(f"wrote {path.relative_to(ROOT)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
