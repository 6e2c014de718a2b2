"""Does the default gate keep its operating point when the fusion constant changes (issue #16)?

``python -m benchmarks.gate_k`` searches every demo golden case (retrieve and gate, no generation) with the
shipped defaults at ``retrieve.rrf_k`` = 10, 60 and 100, against the store ``make gate`` builds
(``build/deploy-gate-store``; ingested incrementally), and records per k the answer rate on answerable and the
false-answer rate on unanswerable questions of the held-out test part and of all cases, for the shipped rule
(``gate.signal=auto``: the learned rule without a cross-encoder) and, for comparison, the previous default rule
(fused AND dense at fused >= 0.0314, dense >= 0.595, a raw-RRF threshold). Writes
``benchmarks/results/gate_k.json``; :func:`render` is the section.
"""

from __future__ import annotations

import argparse
import sys

from benchmarks.results_io import (
    ROOT,
    SEARCH_CONFIG,
    SEARCH_PATH,
    Depends,
    configured_models,
    load_average,
    load_results,
    meta_line,
    pair_ci,
    results_path,
    run_meta,
    write_results,
)

NAME = "gate_k"
KS = (10, 60, 100)
GOLDEN = ROOT / "golden" / "golden.jsonl"
STORE = ROOT / "build" / "deploy-gate-store"
DEPENDS = Depends(("benchmarks/gate_k.py", "workbench/sweep.py", *SEARCH_PATH,
                   "golden/golden.jsonl", "golden/golden.split.json", "golden/corpus"), SEARCH_CONFIG)
PREVIOUS = {"signal": "fused_and_dense", "confidence_threshold_fused": 0.0314, "confidence_threshold_dense": 0.595}


def render(results: dict) -> str:
    rows = results["by_k"]
    lines = ["## Gate operating point across the fusion constant k", "",
             meta_line(results["meta"]) + f" Reproduce: `{results['reproduce']}`.", "",
             f"All {results['cases']} demo golden cases searched once per k (test part: {results['test_cases']}). "
             "Answered / false answers, each with its 95 % Wilson interval:", "",
             "| rrf_k | shipped (`auto` → learned), test part | shipped, all cases | previous default (fused AND "
             "dense, raw RRF threshold), all cases |", "|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r['rrf_k']} | {pair_ci(r['shipped_test'])} | {pair_ci(r['shipped_all'])} | "
                     f"{pair_ci(r['previous_all'])} |")
    lines += _paired(results)
    s = results["spread"]
    lines += ["", f"Largest move of the shipped operating point between any two k (all cases): "
              f"{100 * s['shipped_answer_rate']:.1f} points answered, "
              f"{100 * s['shipped_false_answer_rate']:.1f} points false answers; previous default: "
              f"{100 * s['previous_answer_rate']:.1f} / "
              f"{100 * s['previous_false_answer_rate']:.1f} points. The learned rule reads each leg's own top "
              "candidates and does not fit the fused score, so k changes the fused order but not what it reads.", ""]
    return "\n".join(lines)


def _mcnemar(a: set, b: set, group: list[str]) -> str:
    from workbench.metrics import paired_binary

    p = paired_binary([i in a for i in group], [i in b for i in group])
    return f"{p.a_only} / {p.b_only} (p {p.p_value:.2g})"


def _paired(results: dict) -> list[str]:
    """Paired tests on the same cases (all of them): each k against the shipped k under the shipped rule, and at
    each k the previous default rule against the shipped one; exact McNemar on the cases only one side answered,
    answerable and unanswerable apart. Empty for a results file without per-case decisions."""
    from pipeline.config import PipelineConfig

    rows, ids = results["by_k"], results.get("case_ids")
    shipped_k = PipelineConfig().retrieve.rrf_k
    base = next((r for r in rows if r["rrf_k"] == shipped_k and "answered" in r), None)
    if ids is None or base is None:
        return []
    answerable = set(ids["answerable"])
    # an unanswerable case nobody answered cannot be discordant, so the answered ones are all a test needs
    every = answerable | {i for r in rows for arm in r["answered"].values() for i in arm}
    groups = (sorted(every & answerable), sorted(every - answerable))
    out = ["", "Paired, on the same cases (all of them; exact McNemar on the cases only one side answered — only "
           f"this / only the other (p)): each k against the shipped k = {shipped_k} under the shipped rule, and the "
           "previous default rule against the shipped rule at the same k:", "",
           "| rrf_k | k vs shipped k: answerable | k vs shipped k: unanswerable | previous vs shipped rule: "
           "answerable | previous vs shipped rule: unanswerable |", "|---:|---|---|---|---|"]
    for r in rows:
        mine, prev, ship = (set(r["answered"]["shipped"]), set(r["answered"]["previous"]),
                            set(base["answered"]["shipped"]))
        vs_k = ["—", "—"] if r is base else [_mcnemar(mine, ship, g) for g in groups]
        vs_rule = [_mcnemar(prev, mine, g) for g in groups]
        out.append(f"| {r['rrf_k']} | {vs_k[0]} | {vs_k[1]} | {vs_rule[0]} | {vs_rule[1]} |")
    return out


def _spread(values: list[float]) -> float:
    return max(values) - min(values)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.gate_k", description=__doc__.splitlines()[0])
    parser.add_argument("--print", action="store_true", help="only print the section from the results file")
    args = parser.parse_args(argv)
    if not args.print:
        import dataclasses

        import numpy as np

        from pipeline.config import PipelineConfig
        from pipeline.ingestion.ingest import ingest_paths
        from pipeline.models.registry import Models
        from pipeline.storage.store import Store
        from workbench.evaluate import eval_pipeline, run_cases
        from workbench.golden import find_split, load_golden
        from workbench.sweep import at_setting, extract, thresholds_of

        meta = run_meta(model=configured_models(generation=False), depends=DEPENDS)
        golden = load_golden(GOLDEN)
        split = find_split(GOLDEN, None)
        models = Models()
        rows = []
        with Store.open(STORE) as store:
            ingest_paths(store, [ROOT / "golden" / "corpus"], PipelineConfig(), models)
            for k in KS:
                cfg = PipelineConfig().with_overrides([f"retrieve.rrf_k={k}"])
                run = run_cases(golden, eval_pipeline(store, models, cfg), generate=False)
                cases = list(run.cases)
                test = [i for i, c in enumerate(cases) if split.part_of(c.id) == "test"]
                s = extract([c.id for c in cases], [c.answerable for c in cases], run.traces, cfg.gate)
                previous = dataclasses.replace(cfg.gate, **PREVIOUS)
                shipped = s.answers("auto", **thresholds_of(cfg.gate))
                before = s.answers("fused_and_dense", **thresholds_of(previous))
                rows.append({"rrf_k": k, "shipped_all": at_setting(s, "auto", {}, cfg.gate),
                             "shipped_test": at_setting(s.take(np.array(test)), "auto", {}, cfg.gate),
                             "previous_all": at_setting(s, "fused_and_dense", {}, previous),
                             # per case, for the paired comparison of one k against another
                             "answered": {"shipped": [c.id for c, a in zip(cases, shipped, strict=True) if a],
                                          "previous": [c.id for c, a in zip(cases, before, strict=True) if a]}})
                print(f"k={k}: {rows[-1]['shipped_all']}", file=sys.stderr)
        meta["load_average_end"] = load_average()
        results = {"meta": meta, "reproduce": ".venv/bin/python -m benchmarks.gate_k", "cases": len(golden.cases),
                   "test_cases": len(split.parts["test"]), "by_k": rows,
                   "case_ids": {"answerable": [c.id for c in cases if c.answerable],
                                "test": [cases[i].id for i in test]},
                   "spread": {"shipped_answer_rate": _spread(
                                  [r["shipped_all"]["answer_rate_answerable"] for r in rows]),
                              "shipped_false_answer_rate": _spread(
                                  [r["shipped_all"]["false_answer_rate_unanswerable"] for r in rows]),
                              "previous_answer_rate": _spread([r["previous_all"]["answer_rate_answerable"]
                                                               for r in rows]),
                              "previous_false_answer_rate": _spread(
                                  [r["previous_all"]["false_answer_rate_unanswerable"] for r in rows])}}
        write_results(NAME, results)
        print(f"wrote {results_path(NAME)}", file=sys.stderr)
    print(render(load_results(NAME)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
