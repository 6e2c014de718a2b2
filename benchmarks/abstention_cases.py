"""Does an abstention say the right case — off-topic, on-topic but unanswered, or retracted (issue #16)?

``python -m benchmarks.abstention_cases`` searches every unanswerable demo golden case once (retrieve and gate,
no generation, the shipped defaults) against the store ``make gate`` builds (``build/deploy-gate-store``,
ingested incrementally) and reads the case :func:`pipeline.gate.stage.abstention_case` gives it. The golden tags
are the truth: ``off-topic`` questions are off-topic, ``retracted`` ones retracted, every other
``hard-unanswerable`` question is on-topic (the corpus covers its topic, no passage states the answer).

The two cut-offs (query-term coverage and best window cosine below which a question reads off-topic) are also
chosen on the golden set's *tune* part (a grid, best balanced accuracy between off-topic and on-topic), and both
the shipped cut-offs and the chosen ones are reported on the held-out *test* part. Writes
``benchmarks/results/abstention_cases.json``; :func:`render` is the section.
"""

from __future__ import annotations

import argparse
import itertools
import sys
from collections import Counter

from benchmarks.results_io import (
    ROOT,
    SEARCH_CONFIG,
    SEARCH_PATH,
    Depends,
    configured_models,
    load_average,
    load_results,
    meta_line,
    rate_ci,
    results_path,
    run_meta,
    write_results,
)

NAME = "abstention_cases"
GOLDEN = ROOT / "golden" / "golden.jsonl"
STORE = ROOT / "build" / "deploy-gate-store"
DEPENDS = Depends(("benchmarks/abstention_cases.py", *SEARCH_PATH,
                   "golden/golden.jsonl", "golden/golden.split.json", "golden/corpus"), SEARCH_CONFIG)
CASES = ("off-topic", "on-topic", "retracted")
COVERAGE_GRID = tuple(round(0.05 * i, 2) for i in range(0, 21))
COSINE_GRID = tuple(round(0.05 * i, 2) for i in range(0, 17))


def truth(tags: tuple[str, ...] | list[str]) -> str:
    """The case a golden unanswerable question is, from its tags."""
    if "off-topic" in tags:
        return "off-topic"
    if "retracted" in tags:
        return "retracted"
    return "on-topic"


def _balanced(pairs) -> float | None:
    """The mean of the off-topic and on-topic recalls (the classes present)."""
    counts = Counter(pairs)
    recalls = [counts[(t, t)] / n for t in ("off-topic", "on-topic") if (n := sum(v for (tt, _), v in counts.items()
                                                                                   if tt == t))]
    return sum(recalls) / len(recalls) if recalls else None


def confusion(pairs: list[tuple[str, str]], interval: bool = False) -> dict:
    """``pairs``: (truth, said). Counts per truth and said case, accuracy, and the balanced accuracy between
    off-topic and on-topic (the mean of their recalls); with ``interval``, its 95 % bootstrap interval resampling
    the questions (:func:`workbench.metrics.cluster_bootstrap`)."""
    counts = Counter(pairs)
    table = {t: {s: counts[(t, s)] for s in (*CASES, "no-retrieval")} for t in CASES}
    out = {"table": table, "cases": len(pairs), "correct": sum(counts[(t, t)] for t in CASES),
           "accuracy": sum(counts[(t, t)] for t in CASES) / len(pairs) if pairs else None,
           "balanced_accuracy": _balanced(pairs)}
    if interval and pairs:
        from workbench.metrics import cluster_bootstrap

        low, high = cluster_bootstrap([str(i) for i in range(len(pairs))],
                                      lambda idx: _balanced([pairs[i] for i in idx]))
        out["balanced_accuracy_ci95"] = [round(low, 4), round(high, 4)]
    return out


def choose(rows: list[dict]) -> dict:
    """The (coverage, cosine) cut-offs with the best balanced accuracy on ``rows`` (ties: the smaller cut-offs,
    which call fewer questions off-topic)."""
    from pipeline.gate.stage import abstention_case

    best = None
    for coverage, cosine in itertools.product(COVERAGE_GRID, COSINE_GRID):
        score = confusion([(r["truth"], abstention_case(r["inputs"], coverage, cosine)) for r in rows])
        key = (score["balanced_accuracy"] or 0.0, -coverage, -cosine)
        if best is None or key > best[0]:
            best = (key, {"coverage": coverage, "cosine": cosine})
    return best[1]


def _pct(x) -> str:
    return "—" if x is None else f"{100 * x:.1f} %"


def _balanced_ci(c: dict) -> str:
    ci = c.get("balanced_accuracy_ci95")
    return _pct(c["balanced_accuracy"]) + (f" [{100 * ci[0]:.1f}–{100 * ci[1]:.1f}]" if ci else "")


def _table(name: str, c: dict) -> list[str]:
    lines = [f"**{name}** — {c['correct']} of {c['cases']} right ({rate_ci(c['accuracy'], c['cases'])}; balanced "
             f"accuracy off-topic vs on-topic {_balanced_ci(c)}, bootstrap over the questions)", "",
             "| truth \\ said | " + " | ".join(CASES) + " | no retrieval |", "|---|" + "---:|" * (len(CASES) + 1)]
    for t in CASES:
        row = c["table"][t]
        lines.append(f"| {t} | " + " | ".join(str(row[s]) for s in (*CASES, "no-retrieval")) + " |")
    return lines + [""]


def _paired(results: dict) -> list[str]:
    """The chosen cut-offs against the shipped ones on the same test questions (right or not): exact McNemar."""
    shipped, chosen = results["test_shipped"], results["test_chosen"]
    if "ids" not in shipped:
        return []
    from workbench.metrics import paired_binary

    p = paired_binary([i in set(chosen["right"]) for i in chosen["ids"]],
                      [i in set(shipped["right"]) for i in shipped["ids"]])
    return [f"Chosen against shipped cut-offs on the same {p.n} test questions: right only with the chosen ones "
            f"{p.a_only}, only with the shipped ones {p.b_only} (exact McNemar p {p.p_value:.2g}).", ""]


def render(results: dict) -> str:
    shipped, chosen = results["shipped"], results["chosen"]
    lines = ["## Abstention cases", "",
             meta_line(results["meta"]) + f" Reproduce: `{results['reproduce']}`.", "",
             f"Every abstention says first which case it is. Truth from the golden tags, on the "
             f"{results['unanswerable']} unanswerable demo golden questions: `off-topic` → off-topic, `retracted` → "
             "retracted, every other `hard-unanswerable` question → on-topic. A question reads off-topic when the "
             "IDF-weighted share of its terms found in the top passages is below the coverage cut-off, or the best "
             "sentence-window cosine is below the cosine cut-off. Intervals are 95 %: Wilson for the share right, a "
             "bootstrap resampling the questions for the balanced accuracy.", "",
             f"Shipped cut-offs: coverage {shipped['coverage']:g}, cosine {shipped['cosine']:g}. Chosen on the tune "
             f"part ({results['tune_unanswerable']} questions; grid, best balanced accuracy): coverage "
             f"{chosen['coverage']:g}, cosine {chosen['cosine']:g}. Both on the held-out test part "
             f"({results['test_unanswerable']} questions):", ""]
    lines += _table("shipped cut-offs, test part", results["test_shipped"])
    lines += _table("cut-offs chosen on the tune part, test part", results["test_chosen"])
    lines += _paired(results)
    lines += [f"On all {results['unanswerable']} questions the shipped cut-offs say the right case for "
              f"{results['all_shipped']['correct']} "
              f"({rate_ci(results['all_shipped']['accuracy'], results['all_shipped']['cases'])}).", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.abstention_cases", description=__doc__.splitlines()[0])
    parser.add_argument("--print", action="store_true", help="only print the section from the results file")
    args = parser.parse_args(argv)
    if not args.print:
        from pipeline.config import PipelineConfig
        from pipeline.gate.stage import OFF_TOPIC_COSINE, OFF_TOPIC_COVERAGE, abstention_case, gate_inputs
        from pipeline.ingestion.ingest import ingest_paths
        from pipeline.models.registry import Models
        from pipeline.storage.store import Store
        from workbench.evaluate import eval_pipeline, run_cases
        from workbench.golden import find_split, load_golden

        meta = run_meta(model=configured_models(generation=False), depends=DEPENDS)
        golden = load_golden(GOLDEN)
        split = find_split(GOLDEN, None)
        unanswerable = [c for c in golden.cases if not c.answerable]
        models, cfg = Models(), PipelineConfig()
        with Store.open(STORE) as store:
            ingest_paths(store, [ROOT / "golden" / "corpus"], cfg, models)
            run = run_cases(unanswerable, eval_pipeline(store, models, cfg), generate=False)
        rows = [{"id": c.id, "part": split.part_of(c.id), "truth": truth(c.tags),
                 "inputs": gate_inputs(t.retrieval, t.rerank)} for c, t in zip(run.cases, run.traces, strict=True)]
        tune = [r for r in rows if r["part"] == "tune"]
        test = [r for r in rows if r["part"] == "test"]
        chosen = choose(tune)

        def said(part: list[dict], coverage: float, cosine: float) -> dict:
            pairs = [(r["truth"], abstention_case(r["inputs"], coverage, cosine)) for r in part]
            right = [r["id"] for r, (t, x) in zip(part, pairs, strict=True) if t == x]
            return {**confusion(pairs, interval=True), "right": right, "ids": [r["id"] for r in part]}

        meta["load_average_end"] = load_average()
        results = {"meta": meta, "reproduce": ".venv/bin/python -m benchmarks.abstention_cases",
                   "unanswerable": len(rows), "tune_unanswerable": len(tune), "test_unanswerable": len(test),
                   "shipped": {"coverage": OFF_TOPIC_COVERAGE, "cosine": OFF_TOPIC_COSINE}, "chosen": chosen,
                   "test_shipped": said(test, OFF_TOPIC_COVERAGE, OFF_TOPIC_COSINE),
                   "test_chosen": said(test, chosen["coverage"], chosen["cosine"]),
                   "all_shipped": said(rows, OFF_TOPIC_COVERAGE, OFF_TOPIC_COSINE)}
        write_results(NAME, results)
        print(f"wrote {results_path(NAME)}", file=sys.stderr)
    print(render(load_results(NAME)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
