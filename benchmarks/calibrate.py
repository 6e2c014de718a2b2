"""How well does label-free calibration (``workbench calibrate``, issue #16) predict the gate's real operating point?

``python -m benchmarks.calibrate`` runs :func:`workbench.calibrate.calibrate` (pseudo-questions and unanswerable
probes written from the corpus, no labels) with the shipped defaults on two corpora, for a few seeds, and measures
the two settings it reports on the corpus's labelled questions:

- **demo golden set**: the demo corpus in ``build/calib-store`` (ingested incrementally), measured on the golden
  split's held-out test part (the tune part fitted the learned rule's coefficients; also reported: all cases, and
  the test part's off-topic and on-topic unanswerable questions apart, by tag);
- **SQuAD 2.0 dev**: the corpus and seeded question sample of :mod:`benchmarks.squad2` (its store under ``build/``,
  reused; its loader, sampler and search-only asking), never used to fit anything.

Per set and seed: the estimated false-answer rate at the configured threshold against the measured one, and the
calibrated threshold (the estimate's setting for at most 5 % false answers) with its estimated false-answer rate
against the rate measured there; errors are estimate minus measurement, in percentage points. Retrieve, rerank
and gate only (no generation), torch on one thread. Writes ``benchmarks/results/calibrate.json``; :func:`render`
is the section.
"""

from __future__ import annotations

import argparse
import sys
import time

from benchmarks.results_io import (
    ROOT,
    SEARCH_CONFIG,
    SEARCH_PATH,
    Depends,
    load_average,
    load_results,
    meta_line,
    rate_ci,
    results_path,
    run_meta,
    write_results,
)

NAME = "calibrate"
SECTION = "## Label-free gate calibration"
SEEDS = (0, 1, 2)
PROBES = 200
SQUAD_SAMPLE = 1000
TARGET_POINTS = 5.0
GOLDEN = ROOT / "golden" / "golden.jsonl"
DEPENDS = Depends(("benchmarks/calibrate.py", "benchmarks/squad2.py", "workbench/calibrate.py", "workbench/sweep.py",
                   *SEARCH_PATH, "golden/golden.jsonl", "golden/golden.split.json", "golden/corpus"), SEARCH_CONFIG)
GOLDEN_STORE = ROOT / "build" / "calib-store"
SQUAD_STORE = ROOT / "build" / "squad2-store"
def model_line() -> str:
    """What measured: the embedder, the rerank stage as configured (offline: the reader) and the rule the gate reads."""
    from pipeline.config import PipelineConfig

    r = PipelineConfig().rerank
    return (f"embedder all-MiniLM-L6-v2 (packaged); rerank {r.model} ({r.precision}, {r.granularity} granularity, top "
            f"{r.candidates}); the gate reads the learned rule with the shipped coefficients; retrieve + rerank + gate "
            "only (no generation)")


def _pct(x) -> str:
    return "—" if x is None else f"{100 * x:.1f} %"


def _pts(x) -> str:
    return "—" if x is None else f"{x:+.1f}"


def render(results: dict) -> str:
    """The BENCHMARKS.md section, from ``benchmarks/results/calibrate.json`` alone."""
    w = results["weights"]
    lines = [SECTION, "",
             meta_line(results["meta"]) + f" Reproduce: `{results['reproduce']}`.", "",
             f"`workbench calibrate` writes {results['probes']} pseudo-questions per run (a sentence of a random "
             "chunk with a run of its words left out as the answer) and unanswerable probes: off-corpus questions "
             "from a built-in pool, and pseudo-questions whose key term is swapped for one the corpus never uses "
             "(swapped-out), for one of another document (swapped-in) or for another word of the same passage "
             "(swapped-near, the adversarial kind: shown, weighted 0 by default), and pseudo-questions asked with "
             "the chunks that state their answer left out of the candidates (answer-removed). It searches each once "
             "and "
             "estimates the false-answer rate as "
             + ", ".join(f"{k} × {v:g}" for k, v in w.items()) + " of each kind's answered share — no labels. "
             f"Seeds {', '.join(str(s) for s in results['seeds'])}; the calibrated setting is the lowest threshold "
             f"whose estimate is at most {_pct(results['target'])} false answers. Error = estimate − measured, in "
             "percentage points; the target is |error| ≤ "
             f"{results['target_points']:g} points on both sets.", ""]
    for s in results["sets"]:
        lab = s["labelled"]
        lines += [f"**{s['name']}** — corpus: {s['corpus']}; measured on {lab['what']}: {lab['answerable']:,} "
                  f"answerable, {lab['unanswerable']:,} unanswerable.", "",
                  "| seed | configured threshold | estimated answered / false answers | measured answered / false "
                  "answers | error (points) | calibrated threshold | estimated false answers | measured answered "
                  "/ false answers | error (points) |", "|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
        def measured(m: dict, lab: dict = lab) -> str:
            return (f"{rate_ci(m['answer_rate'], lab['answerable'])} / "
                    f"{rate_ci(m['false_answer_rate'], lab['unanswerable'])}")

        for r in s["runs"]:
            cal, mc = r["calibrated"], r["measured_calibrated"]
            lines.append(
                f"| {r['seed']} | {r['current']['threshold']:g} | {_pct(r['current']['answer_rate'])} / "
                f"{_pct(r['current']['false_answer_rate'])} | {measured(r['measured_current'])} | "
                f"{_pts(r['error_current_points'])} | "
                + (f"{cal['threshold']:g} | {_pct(cal['false_answer_rate'])} | {measured(mc)} | "
                   f"{_pts(r['error_calibrated_points'])} |" if cal else "none | — | — | — |"))
        lines += ["", "Measured rates carry their 95 % Wilson interval over the labelled cases; an estimate is a "
                  "weighted sum of the probe kinds' shares, each shown below with its interval over that kind's "
                  "probes (all seeds pooled)."]
        kinds = mean_by_kind(s["runs"])
        probes = {k: sum(r["probes"].get(k, 0) for r in s["runs"]) for k in kinds}
        measured = s["runs"][0]["measured_current"]["false_answer_rate"]
        near, removed = kinds.get("swapped-near"), kinds.get("answer-removed")
        lines += ["", "Each probe kind's answered share at the configured threshold, mean over the seeds: "
                  + ", ".join(f"{name} {rate_ci(v, probes[name])}" for name, v in kinds.items()) + "."]
        if near is not None:
            lines.append(f"The adversarial kind alone (`--weights swapped-near=1`, a mix chosen here knowing the "
                         f"set) would have estimated {_pct(near)} against the measured {_pct(measured)} "
                         f"({_pts(100 * (near - measured))} points).")
        if removed is not None:
            lines.append(f"The answer-removed kind alone (`--weights answer-removed=1`) would have estimated "
                         f"{_pct(removed)} ({_pts(100 * (removed - measured))} points).")
        if s.get("by_tag"):
            lines.append("Measured false answers at the configured threshold by kind of unanswerable question (test "
                         "part, by tag): " + ", ".join(f"{t} {rate_ci(x['false_answer_rate'], x['cases'])} of "
                                                      f"{x['cases']}" for t, x in s["by_tag"].items()) + ".")
        if s.get("other"):
            o = s["other"]
            lines.append(f"On {o['what']}: measured false answers "
                         f"{rate_ci(o['false_answer_rate'], o.get('unanswerable', 0))} at the configured "
                         f"threshold (mean error {_pts(o['mean_error_current_points'])} points) and "
                         f"{_pct(o['false_answer_rate_calibrated_mean'])} on average at the calibrated thresholds.")
        m = s["summary"]
        cal = m["mean_abs_error_calibrated_points"]
        lines += ["", f"Mean |error| over the seeds: {m['mean_abs_error_current_points']:.1f} points at the configured "
                  f"threshold, {'—' if cal is None else f'{cal:.1f}'} points at the calibrated one; target "
                  f"(≤ {results['target_points']:g} points) {'met' if m['met'] else 'missed'}.", ""]
    lines += [results["verdict"], ""]
    return "\n".join(lines)


def mean_by_kind(runs: list[dict]) -> dict[str, float]:
    """Each kind's answered share at the configured threshold, averaged over the runs (seeds)."""
    names = list(runs[0]["current"]["by_kind"])
    return {k: sum(r["current"]["by_kind"][k] for r in runs) / len(runs) for k in names}


def verdict(sets: list[dict], target_points: float) -> str:
    met = [s["name"] for s in sets if s["summary"]["met"]]
    missed = [s["name"] for s in sets if not s["summary"]["met"]]
    out = (f"Within {target_points:g} points on {' and '.join(met)}" if met else "Within the target on neither set")
    out += f"; missed on {' and '.join(missed)}." if missed else "."
    out += (" The probes measure how the gate treats each kind of unanswerable question on this corpus; which kinds "
            "a corpus's users will ask is what no corpus can say. The default mix (half off-topic, half on-topic "
            "questions about something the corpus lacks) is close to the demo golden set's; SQuAD 2.0's unanswerable "
            "questions were all written against a passage of the corpus with its own entities, the swapped-near "
            "kind, which the default weighs 0. Read the per-kind shares as the range the false-answer rate can take "
            "on this corpus, and the single figure as the estimate for support-style traffic.")
    return out


# -- measuring ---------------------------------------------------------------------------------------------------

def _rates(x: dict) -> dict:
    return {"answer_rate": x["answer_rate_answerable"], "false_answer_rate": x["false_answer_rate_unanswerable"]}


def _run_row(seed: int, result, labelled, gate) -> dict:
    from workbench import calibrate

    e = result.estimate
    c = calibrate.compare(e, labelled, gate)

    def point(p):
        return None if p is None else {"threshold": next(iter(p.thresholds.values())), "answer_rate": p.answer_rate,
                                       "false_answer_rate": p.false_answer_rate, "by_kind": dict(p.by_kind)}

    return {"seed": seed, "rule": e.rule, "probes": dict(e.probes), "current": point(e.current),
            "calibrated": point(e.calibrated), "measured_current": _rates(c.measured_current),
            "measured_calibrated": None if c.measured_calibrated is None else _rates(c.measured_calibrated),
            "error_current_points": c.error_current_points, "error_calibrated_points": c.error_calibrated_points}


def _summary(runs: list[dict], target_points: float) -> dict:
    cur = [abs(r["error_current_points"]) for r in runs]
    cal = [abs(r["error_calibrated_points"]) for r in runs if r["error_calibrated_points"] is not None]
    mean_cur = round(sum(cur) / len(cur), 2)
    mean_cal = round(sum(cal) / len(cal), 2) if cal else None
    return {"mean_abs_error_current_points": mean_cur, "mean_abs_error_calibrated_points": mean_cal,
            "max_abs_error_current_points": max(cur),
            "met": mean_cur <= target_points and mean_cal is not None and mean_cal <= target_points}


def _calibrations(store, models, cfg, seeds, n) -> list:
    from workbench import calibrate

    out = []
    for seed in seeds:
        t0 = time.perf_counter()
        out.append(calibrate.calibrate(store, models, cfg, n=n, seed=seed))
        print(f"  seed {seed}: {time.perf_counter() - t0:.0f} s; " + calibrate.report_lines(out[-1])[2],
              file=sys.stderr)
    return out


def golden_set(models, cfg, seeds, n) -> dict:
    import numpy as np

    from pipeline.ingestion.ingest import ingest_paths
    from pipeline.storage.store import Store
    from workbench import sweep
    from workbench.evaluate import eval_pipeline, run_cases
    from workbench.golden import find_split, load_golden

    golden = load_golden(GOLDEN)
    split = find_split(GOLDEN, None)
    with Store.open(GOLDEN_STORE) as store:
        ingest_paths(store, [ROOT / "golden" / "corpus"], cfg, models, progress=False)
        documents, chunks = len(store.documents()), store.chunk_count()
        results = _calibrations(store, models, cfg, seeds, n)
        run = run_cases(golden, eval_pipeline(store, models, cfg), generate=False)
    cases = list(run.cases)
    every = sweep.extract([c.id for c in cases], [c.answerable for c in cases], run.traces, cfg.gate)
    test = every.take(np.array([i for i, c in enumerate(cases) if split.part_of(c.id) == "test"]))
    runs = [_run_row(seed, r, test, cfg.gate) for seed, r in zip(seeds, results, strict=True)]
    rule = results[0].estimate.rule
    by_tag = {}
    for tag in ("off-topic", "hard-unanswerable"):
        idx = np.array([i for i, c in enumerate(cases) if split.part_of(c.id) == "test" and not c.answerable
                        and tag in c.tags])
        if len(idx):
            answered = every.take(idx).answers(rule, **sweep.thresholds_of(cfg.gate))
            by_tag[tag] = {"cases": int(len(idx)), "false_answer_rate": float(np.mean(answered))}
    all_runs = [_run_row(seed, r, every, cfg.gate) for seed, r in zip(seeds, results, strict=True)]
    calibrated = [r["measured_calibrated"]["false_answer_rate"] for r in all_runs if r["measured_calibrated"]]
    return {"name": "Demo golden set", "key": "golden", "corpus": f"the demo corpus, {documents} documents → "
            f"{chunks} chunks", "labelled": {"what": f"the held-out test part of golden/golden.jsonl "
                                              f"({len(test.ids)} of {len(every.ids)} cases, split seed {split.seed})",
                                              "cases": len(test.ids), "answerable": int(test.answerable.sum()),
                                              "unanswerable": int((~test.answerable).sum())},
            "runs": runs, "by_tag": by_tag,
            "other": {"what": f"all {len(every.ids)} golden cases", "unanswerable": int((~every.answerable).sum()),
                      "false_answer_rate": all_runs[0]["measured_current"]["false_answer_rate"],
                      "mean_error_current_points": round(sum(r["error_current_points"] for r in all_runs)
                                                         / len(all_runs), 2),
                      "false_answer_rate_calibrated_mean": sum(calibrated) / len(calibrated) if calibrated else None}}


def squad_set(models, cfg, seeds, n, sample_size: int, sample_seed: int) -> dict:
    from benchmarks.ood import ask_questions
    from benchmarks.squad2 import load, locate_data, sample, to_scores
    from pipeline.ingestion.ingest import ingest_documents
    from pipeline.storage.store import Store
    from workbench.evaluate import eval_pipeline

    documents, questions = load(locate_data())
    chosen = sample(questions, sample_size or None, sample_seed)
    with Store.open(SQUAD_STORE) as store:
        ingest_documents(store, documents, cfg, models, progress=False)
        chunks = store.chunk_count()
        results = _calibrations(store, models, cfg, seeds, n)
        t0 = time.perf_counter()
        rows = ask_questions(eval_pipeline(store, models, cfg), chosen, desc="squad2", search_only=True)
        print(f"  SQuAD sample searched in {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    labelled = to_scores(rows)
    runs = [_run_row(seed, r, labelled, cfg.gate) for seed, r in zip(seeds, results, strict=True)]
    what = (f"a seeded sample of {len(rows):,} of the {len(questions):,} dev questions (seed {sample_seed}, "
            "the sample of benchmarks/squad2.py)" if len(rows) < len(questions) else
            f"all {len(rows):,} dev questions")
    return {"name": "SQuAD 2.0 dev", "key": "squad2",
            "corpus": f"{len(documents):,} paragraphs (dev + test-file distractors) → {chunks:,} chunks",
            "labelled": {"what": what, "cases": len(rows), "answerable": int(labelled.answerable.sum()),
                         "unanswerable": int((~labelled.answerable).sum())}, "runs": runs}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.calibrate", description=__doc__.splitlines()[0])
    parser.add_argument("--probes", type=int, default=PROBES, help=f"pseudo-questions per run (default {PROBES})")
    parser.add_argument("--seeds", type=int, nargs="+", default=list(SEEDS), help="calibration seeds (default 0 1 2)")
    parser.add_argument("--squad-sample", type=int, default=SQUAD_SAMPLE,
                        help=f"SQuAD dev questions to measure on (default {SQUAD_SAMPLE}, seed 0; 0: all)")
    parser.add_argument("--print", action="store_true", help="only print the section from the results file")
    args = parser.parse_args(argv)
    if not args.print:
        from pipeline.config import PipelineConfig
        from pipeline.models.encoders import set_torch_threads
        from pipeline.models.registry import Models
        from workbench import calibrate

        set_torch_threads(1)
        meta = run_meta(model=model_line(), depends=DEPENDS)
        cfg, models = PipelineConfig(), Models()
        seeds = tuple(args.seeds)
        print("golden:", file=sys.stderr)
        sets = [golden_set(models, cfg, seeds, args.probes)]
        print("squad2:", file=sys.stderr)
        sets.append(squad_set(models, cfg, seeds, args.probes, args.squad_sample, 0))
        for s in sets:
            s["summary"] = _summary(s["runs"], TARGET_POINTS)
        meta["load_average_end"] = load_average()
        reproduce = ".venv/bin/python -m benchmarks.calibrate"
        if args.probes != PROBES or seeds != SEEDS or args.squad_sample != SQUAD_SAMPLE:
            reproduce += (f" --probes {args.probes} --seeds {' '.join(map(str, seeds))} "
                          f"--squad-sample {args.squad_sample}")
        results = {"meta": meta, "reproduce": reproduce, "probes": args.probes, "seeds": list(seeds),
                   "target": calibrate.DEFAULT_TARGET, "target_points": TARGET_POINTS,
                   "weights": dict(calibrate.WEIGHTS), "sets": sets, "verdict": verdict(sets, TARGET_POINTS)}
        write_results(NAME, results)
        print(f"wrote {results_path(NAME)}", file=sys.stderr)
    print(render(load_results(NAME)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
