"""Drift alarm: how many logged runs after a retrieval degradation it takes ``workbench monitor``'s alarm to fire,
and how often it fires with nothing changed (BENCHMARKS.md, "Drift alarm").

``python -m benchmarks.monitor_drift`` measures and writes ``benchmarks/results/monitor_drift.json``. Per trial
(a seed):

1. a fresh copy of the demo store (``golden/corpus`` ingested with the offline default stack into
   ``build/monitor-drift-store``, git-ignored, reused: ingestion is incremental) and an empty run log;
2. the baseline batch: the golden set's single-turn questions in a seeded order, asked one by one through the
   pipeline (every run logged in ``query_runs``, answer cache off so that a question's second asking is a real
   run); once the log holds a full baseline plus recent window, the alarm (:func:`workbench.monitor.check`,
   the defaults of ``workbench monitor``) is run after every run, and every alarm here is a false alarm;
3. the degradation, one of :data:`DEGRADATIONS`: ``delete-third`` deletes a third of the documents, drawn with
   the seed, through the store's delete path; ``broken-embedder`` swaps the embedder for a hashing one of the
   same size (pipeline.testing.FakeEmbedder: questions and claims land in another vector space than the
   stored passages, as after a model swap without a re-index);
4. the next questions, one by one, the alarm after each, until it fires (or ``--max-after`` runs): the number
   of runs after the change it took, which metrics fired, and every metric's rates in the last check.

:func:`render` turns the results file into the section.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.results_io import (
    ANSWER_CONFIG,
    ANSWER_PATH,
    ROOT,
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
from workbench.monitor import runs_to_detect

DEPENDS = Depends(("benchmarks/monitor_drift.py", "workbench/monitor.py", *ANSWER_PATH, "golden/golden.jsonl",
                   "golden/corpus"), ANSWER_CONFIG)
NAME = "monitor_drift"
GOLDEN = ROOT / "golden" / "golden.jsonl"
CORPUS = ROOT / "golden" / "corpus"
STORE = ROOT / "build" / "monitor-drift-store"
SEEDS = (1, 2, 3)
DEGRADATIONS = {"delete-third": "a third of the documents (drawn with the seed) deleted",
                "broken-embedder": "the embedder swapped for a hashing embedder of the same size"}
BASELINE_BATCH = 150
MAX_AFTER = 100
DEGRADED_FRACTION = 1 / 3


# -- the section (pure) ---------------------------------------------------------------------------------------

def _pct(value) -> str:
    return "–" if value is None else f"{100 * value:.1f} %"


def render(results: dict) -> str:
    """The BENCHMARKS.md section, from ``benchmarks/results/monitor_drift.json`` alone."""
    w, trials = results["windows"], results["trials"]
    lines = [
        "## Drift alarm", "",
        meta_line(results["meta"]) + f" Reproduce: `{results['reproduce']}`.", "",
        f"Stack: {results['stack']}. Store: {results['corpus']}. Rule: {results['rule']}; windows of "
        f"{w['baseline']} baseline and {w['recent']} recent runs, alpha {w['alpha']:g}. Per trial, "
        f"{results['baseline_batch']} golden questions (single-turn, seeded order, answer cache off) are logged "
        "with the alarm run after each once both windows are full, then the degradation, then questions are "
        f"logged one by one with the alarm run after each (at most {results['max_after']}). Degradations: "
        + "; ".join(f"`{k}`: {v}" for k, v in results["degradations"].items()) + ".", "",
        "| degradation | seed | false alarms before the change (checks) | runs after the change to the alarm "
        "| metrics that fired | abstention rate | unsupported-claim rate |",
        "|---|---:|---:|---:|---|---|---|",
    ]
    for t in trials:
        after = str(t["runs_to_alarm"]) if t["runs_to_alarm"] is not None else f"no alarm in {t['runs_after']}"
        rates = t["rates"]
        lines.append(f"| {t['degradation']} | {t['seed']} | {t['false_alarms']} ({t['baseline_checks']}) | {after} | "
                     f"{', '.join(t['alarm']['metrics']) if t['alarm'] else '–'} | "
                     f"{_rates(rates.get('abstention'), t)} | {_rates(rates.get('unsupported'), t)} |")
    m = results["metrics_tested"]
    for t in trials:
        a = t["rates"]["abstention"]
        if t["runs_to_alarm"] is None and a["before"] is not None and a["after"] is not None:
            n = runs_to_detect(a["before"], a["after"], w["alpha"] / m) if a["after"] > a["before"] else None
            lines += ["", f"`{t['degradation']}` seed {t['seed']}: the abstention rate moved "
                      f"{_pct(a['before'])} → {_pct(a['after'])}; " + (
                          f"a one-sided test at {w['alpha']:g}/{m} would need about {n} runs in each window to see "
                          f"that with 80 % power (the recent window holds {w['recent']})." if n else
                          "it did not rise.")]
    lines += ["", "Rates: every run logged before the change → every run after it, each with its 95 % Wilson interval "
              "over those runs (before and after are different runs, so the alarm's own Fisher test is the "
              "comparison). "
              + " ".join(f"Deleted with seed {t['seed']}: {len(t['deleted'])} of {t['documents']} documents."
                         for t in trials if t["deleted"])]
    for name, s in results["summary"].items():
        when = (f", after {s['runs_to_alarm_text']} run(s) after the change (median {s['median_runs_to_alarm']})"
                if s["fired"] else f" within {results['max_after']} runs after the change")
        lines += ["", f"`{name}`: the alarm fired in {s['fired']} of {s['trials']} trials{when}; "
                  f"{s['false_alarms']} false alarm(s) in {s['baseline_checks']} checks before the change."]
    lines += ["", f"The rule bounds one check's false-alarm probability by {w['alpha']:g}; consecutive checks share "
              "most of their runs, so they are not independent trials. Generator in the runs: "
              f"{', '.join(results['generators'])}."]
    return "\n".join(lines)


def _rates(test: dict | None, trial: dict | None = None) -> str:
    """``59.3 % [51.3–66.8] → 74.0 % [64.6–81.6]``: a rate over the runs logged before the change and over those after
    it, each with its 95 % Wilson interval (the counts are the trial's runs)."""
    if not test:
        return "–"
    if trial is None:
        return f"{_pct(test['before'])} → {_pct(test['after'])}"
    after = trial["runs_after"]
    return f"{rate_ci(test['before'], trial['runs_logged'] - after)} → {rate_ci(test['after'], after)}"


# -- the measurement ------------------------------------------------------------------------------------------

def _single_turn_questions() -> list[str]:
    from workbench.golden import load_golden

    return [c.question for c in load_golden(GOLDEN).cases if not c.history]


def _check(log, windows: dict):
    from workbench import monitor

    return monitor.check(log.monitor_rows(), baseline=windows["baseline"], recent=windows["recent"],
                         alpha=windows["alpha"])


class BrokenEmbedderModels:
    """The caller's models with the embedder swapped for a hashing one of the same size; the rest delegated."""

    def __init__(self, inner, cfg) -> None:
        from pipeline.testing import FakeEmbedder

        real = inner.embedder(cfg.embedding)
        self.inner = inner
        self.broken = FakeEmbedder(dim=int(getattr(real, "dim", 384)), name=getattr(real, "name", "broken"))

    def embedder(self, cfg):
        return self.broken

    def reranker(self, cfg):
        return self.inner.reranker(cfg)

    def llm(self, *args, **kwargs):
        return self.inner.llm(*args, **kwargs)

    def nli(self, name: str):
        return self.inner.nli(name)


def run_trial(degradation: str, seed: int, template: Path, work: Path, questions: list[str], cfg, models,
              windows: dict, baseline_batch: int, max_after: int) -> dict:
    from pipeline.engine import Pipeline
    from pipeline.ingestion.ingest import delete_document
    from pipeline.storage.store import Store
    from workbench import monitor

    rng = random.Random(seed)
    order = questions[:]
    rng.shuffle(order)
    home = work / f"{degradation}-{seed}"
    shutil.copytree(template, home)
    generators: set[str] = set()
    with Store.open(home) as store:
        pipe = Pipeline(store, models, cfg)
        log = pipe.runs
        docs = sorted(d.doc_id for d in store.documents())
        deleted = sorted(rng.sample(docs, round(len(docs) * DEGRADED_FRACTION))) \
            if degradation == "delete-third" else []
        checks = false_alarms = 0
        rule = ""
        started = time.perf_counter()
        for i in range(baseline_batch):
            generators.add(pipe.ask(order[i % len(order)]).generation.backend or "none (gate abstained)")
            result = _check(log, windows)
            if result.ready:
                rule = result.reason
                checks += 1
                false_alarms += result.alarm
        for doc_id in deleted:
            delete_document(store, doc_id)
        if degradation == "broken-embedder":
            pipe = Pipeline(store, BrokenEmbedderModels(models, cfg), cfg, runs=log)
        fired, runs_to_alarm, j = None, None, 0
        for j in range(1, max_after + 1):
            generators.add(pipe.ask(order[(baseline_batch + j - 1) % len(order)]).generation.backend
                           or "none (gate abstained)")
            result = _check(log, windows)
            last = result
            if result.alarm:
                runs_to_alarm = j
                tests = {t.name: t for t in result.tests}
                fired = {"metrics": [t.name for t in result.alarmed],
                         "p_values": {t.name: t.p_value for t in result.alarmed},
                         "abstention_baseline_rate": tests["abstention"].baseline_rate,
                         "abstention_recent_rate": tests["abstention"].recent_rate,
                         "runs_behind": len(result.runs_behind)}
                break
        tested = sum(t.p_value is not None for t in last.tests)
        last_check = [{"name": t.name, "baseline_rate": t.baseline_rate, "recent_rate": t.recent_rate,
                       "p_value": t.p_value, "alarm": t.alarm} for t in last.tests]
        seconds = time.perf_counter() - started
        runs_logged = log.count()
        rows = log.monitor_rows()
        before, after = rows[:baseline_batch], rows[baseline_batch:]
        rates = {m.name: {"before": monitor.rate(before, m), "after": monitor.rate(after, m)} for m in monitor.METRICS}
    print(f"{degradation} seed {seed}: deleted {len(deleted)}; {false_alarms} false alarm(s) in {checks} checks; "
          f"alarm after {runs_to_alarm} run(s); {seconds:.0f} s", file=sys.stderr)
    return {"degradation": degradation, "seed": seed, "deleted": deleted, "rates": rates, "metrics_tested": tested,
            "last_check": last_check,
            "documents": len(docs), "baseline_checks": checks,
            "false_alarms": int(false_alarms), "runs_to_alarm": runs_to_alarm, "runs_after": j, "alarm": fired,
            "runs_logged": runs_logged, "rule": rule, "seconds": round(seconds, 1), "generators": sorted(generators)}


def summarise(trials: list[dict]) -> dict:
    runs = sorted(t["runs_to_alarm"] for t in trials if t["runs_to_alarm"] is not None)
    median = None if not runs else (runs[len(runs) // 2] if len(runs) % 2 else
                                    (runs[len(runs) // 2 - 1] + runs[len(runs) // 2]) / 2)
    text = "–" if not runs else (str(runs[0]) if runs[0] == runs[-1] else f"{runs[0]} to {runs[-1]}")
    return {"trials": len(trials), "fired": len(runs),
            "runs_to_alarm": runs, "runs_to_alarm_text": text, "median_runs_to_alarm": median,
            "false_alarms": sum(t["false_alarms"] for t in trials),
            "baseline_checks": sum(t["baseline_checks"] for t in trials)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.monitor_drift", description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=list(SEEDS), help="one trial per seed and degradation")
    parser.add_argument("--degradations", nargs="+", choices=list(DEGRADATIONS), default=list(DEGRADATIONS))
    parser.add_argument("--store", type=Path, default=STORE, help="the reused demo store (copied for each trial)")
    parser.add_argument("--baseline-batch", type=int, default=BASELINE_BATCH, help="runs logged before the change")
    parser.add_argument("--max-after", type=int, default=MAX_AFTER, help="give up after this many runs")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    parser.add_argument("--print", action="store_true", help="only print the section from the results file")
    args = parser.parse_args(argv)
    if not args.print:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        from pipeline.config import PipelineConfig
        from pipeline.ingestion.ingest import ingest_paths
        from pipeline.models.encoders import set_torch_threads
        from pipeline.models.registry import default_models
        from pipeline.storage.store import Store
        from workbench import monitor

        set_torch_threads(args.threads)
        windows = {"baseline": monitor.DEFAULT_BASELINE, "recent": monitor.DEFAULT_RECENT,
                   "alpha": monitor.DEFAULT_ALPHA}
        if args.baseline_batch < windows["baseline"] + windows["recent"]:
            raise SystemExit(f"--baseline-batch must be at least {windows['baseline'] + windows['recent']}")
        cfg = PipelineConfig().with_overrides(["cache.enabled=false"])
        models = default_models()
        meta = run_meta(depends=DEPENDS, model=configured_models(cfg) + "; the offline default stack, answer cache off")
        questions = _single_turn_questions()
        with Store.open(args.store) as store:
            ingest_paths(store, [CORPUS], cfg, models, progress=False)
            corpus = f"golden/corpus, {len(store.documents())} documents"
        for leftover in ("runs.sqlite", "runs.sqlite-wal", "runs.sqlite-shm", "cache.sqlite"):
            (args.store / leftover).unlink(missing_ok=True)
        with tempfile.TemporaryDirectory(prefix="monitor-drift-") as tmp:
            trials = [run_trial(kind, seed, args.store, Path(tmp), questions, cfg, models, windows,
                                args.baseline_batch, args.max_after)
                      for kind in args.degradations for seed in args.seeds]
        meta["load_average_end"] = load_average()
        results = {"meta": meta, "stack": "offline default stack (extractive generator, MiniLM embedder, no "
                   "cross-encoder), answer cache off", "corpus": corpus, "windows": windows,
                   "rule": trials[0]["rule"], "metrics_tested": min(t["metrics_tested"] for t in trials),
                   "baseline_batch": args.baseline_batch, "max_after": args.max_after,
                   "degradations": {k: DEGRADATIONS[k] for k in args.degradations},
                   "questions": len(questions), "trials": trials,
                   "summary": {k: summarise([t for t in trials if t["degradation"] == k]) for k in args.degradations},
                   "generators": sorted({g for t in trials for g in t["generators"]}),
                   "reproduce": ".venv/bin/python -m benchmarks.monitor_drift"}
        write_results(NAME, results)
        print(f"wrote {results_path(NAME)}", file=sys.stderr)
    print(render(load_results(NAME)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
