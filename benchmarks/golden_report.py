"""The "Golden-set evaluation" section of BENCHMARKS.md: the demo golden set on the offline default stack,
headlined on the held-out test part of its fixed split (golden/README.md, "The tune / test split").

``python -m benchmarks.golden_report`` measures and writes ``benchmarks/results/golden.json``:

1. ingests ``golden/corpus`` into ``build/deploy-gate-store`` (incremental; the store ``make gate`` uses) and
   asks all 300 cases once with the shipped defaults (:func:`workbench.evaluate.evaluate`: answer cache off,
   nothing logged), or, with ``--from DIR``, reads the traces of a ``workbench eval --out DIR`` run and
   re-scores answer correctness with the packaged embedder;
2. computes the summary figures of each part (tune, test, all) from that one run;
3. replays the gate over the same traces (:func:`workbench.tune.tune_report`): the sweep fitted on the tune
   part, its recommendation's rates on the tune part (in-sample) and on the test part (held out), 5-fold
   cross-validation within the tune part; and the fitting procedure 5-fold cross-validated over all cases
   (folds keep linked cases together). It records whether the shipped defaults are the tune recommendation;
4. writes the test part's values of every metric ``golden/floors.json`` bounds into that file's ``_measured``
   (with ``_measured_on``), and the ends of their 95 % intervals into ``_interval``, so the floors' reference values
   are generated, never typed. ``python -m workbench.floor_history derive --reason ...`` sets the bounds to those
   interval ends, with an entry in golden/FLOORS.md.

:func:`render` turns the results file into the section: headline figures from the test part or
cross-validation only, each labelled with its part and the model.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from pathlib import Path

from benchmarks.results_io import (
    ROOT,
    Depends,
    load_average,
    load_results,
    meta_line,
    rate_ci,
    results_path,
    run_meta,
    write_results,
)

NAME = "golden"
GOLDEN = ROOT / "golden" / "golden.jsonl"
CORPUS = ROOT / "golden" / "corpus"
FLOORS = ROOT / "golden" / "floors.json"
STORE = ROOT / "build" / "deploy-gate-store"
MAX_FALSE_ANSWER_RATE = 0.05
# the answer path and everything that scores it (with --from, the traces were made by an earlier run whose
# configuration hash must equal the defaults'; the pipeline code is fingerprinted as it is at this run)
DEPENDS = Depends(("benchmarks/golden_report.py", "pipeline", "workbench/evaluate.py", "workbench/walk.py",
                   "workbench/summary.py", "workbench/metrics.py", "workbench/relevance.py", "workbench/correctness.py",
                   "workbench/tune.py", "workbench/sweep.py", "workbench/floors.py", "workbench/golden.py",
                   "golden/golden.jsonl", "golden/golden.split.json", "golden/corpus"),
                  ("chunking", "embedding", "keyword", "ingest", "retrieve", "rerank", "gate", "rewrite", "generate",
                   "validate"))
UNANSWERABLE_TAGS = ("off-topic", "hard-unanswerable", "retracted")


# -- the section (pure) ---------------------------------------------------------------------------------------

def _pct(value) -> str:
    return "n/a" if value is None else f"{100 * value:.1f} %"


def _num(value, digits: int = 3) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}"


def _ci(part: dict, key: str, pct: bool = False) -> str:
    """`` [low–high]`` from a part's intervals (empty for results measured before parts carried them)."""
    ci = (part.get("intervals") or {}).get(key)
    if not ci:
        return ""
    low, high = ci["ci95"]
    return f" [{100 * low:.1f}–{100 * high:.1f}]" if pct else f" [{low:.3f}–{high:.3f}]"


def _rates(point: dict | None) -> str:
    if not point:
        return "—"
    return f"{_pct(point.get('answer_rate_answerable'))} / {_pct(point.get('false_answer_rate_unanswerable'))}"


def _rates_ci(point: dict | None, part: dict) -> str:
    """Answered / false answers, each with its 95 % Wilson interval over the part's answerable / unanswerable
    cases (``part``: a dict with ``answerable`` and ``unanswerable`` counts)."""
    if not point:
        return "—"
    return (f"{rate_ci(point.get('answer_rate_answerable'), part['answerable'])} / "
            f"{rate_ci(point.get('false_answer_rate_unanswerable'), part['unanswerable'])}")


def _vs_shipped(pair: dict | None) -> str:
    """The rule minus the shipped defaults on the same test cases, or "—" for results measured without it."""
    if not pair:
        return "—"
    from workbench.tune import paired_line

    return paired_line(pair)


def _tag_rate(results: dict, tag: str) -> str:
    """A kind of unanswerable question's false-answer rate on the test part, with its Wilson interval when the
    results file has the count of such cases."""
    value = results["test_false_answer_by_tag"].get(tag)
    n = (results.get("test_unanswerable_by_tag") or {}).get(tag, 0)
    return rate_ci(value, n) if n else _pct(value)


def _setting(point: dict | None, keys: list[str]) -> str:
    if not point:
        return "none within the bound"
    return ", ".join(f"{k[2:]} ≥ {point[k]:.4g}" for k in keys)


def passage_rows(part: dict) -> list[str]:
    """The passage-level retrieval row (recall@10 and nDCG@10 against the chunks that state the expected answer,
    :mod:`workbench.relevance`; intervals: bootstrap over cases), or none for a results file measured before it."""
    if part.get("passage_recall_at_10") is None:
        return []
    return [f"| passage recall@10 / nDCG@10 (chunks that state the expected answer; interval: bootstrap over cases) "
            f"| {_num(part['passage_recall_at_10'])}{_ci(part, 'passage_recall_at_10')} / "
            f"{_num(part['passage_ndcg_at_10'])}{_ci(part, 'passage_ndcg_at_10')} |"]


def render(results: dict) -> str:
    """The BENCHMARKS.md section, from ``benchmarks/results/golden.json`` alone."""
    meta, split, parts = results["meta"], results["split"], results["parts"]
    test, tune_part = parts["test"], parts["tune"]
    d, t = results["defaults"], results["tune"]
    rec = t["recommendation"]
    answered_answerable = round((test["answer_rate_answerable"] or 0) * test["answerable"])
    answered_all = answered_answerable + round((test["false_answer_rate_unanswerable"] or 0) * test["unanswerable"])
    lines = [
        "## Golden-set evaluation", "",
        meta_line(meta) + f" Reproduce: `{results['reproduce']}`.", "",
        f"Stack: {results['stack']}. {results['cases']} cases ({results['answerable']} answerable, "
        f"{results['unanswerable']} unanswerable), multi-turn cases with their history, asked once in "
        f"{results['run_seconds']:.0f} s.", "",
        f"**Split** (`{split['file']}`, seed {split['seed']}; golden/README.md): tune {split['sizes']['tune']} "
        f"cases, test {split['sizes']['test']}. The gate defaults were fitted on the tune part only; every "
        "figure in the next table is from the held-out test part, which no threshold was chosen on.", "",
        f"Shipped defaults: `{d['description']}`"
        + (" — the tune part's recommendation." if d["is_tune_recommendation"] else
           f" — **not** what the tune part recommends now (`{' '.join(rec.get('settings', []))}`): "
           + (declined_because(results) or "nothing says why; run the benchmark again.")), "",
        f"| metric (test part, {test['cases']} cases: {test['answerable']} answerable, {test['unanswerable']} "
        "unanswerable) | value [95 % Wilson interval] (count) |", "|---|---:|",
        f"| answer rate on answerable | {rate_ci(test['answer_rate_answerable'], test['answerable'], True)} |",
        f"| false-answer rate on unanswerable | "
        f"{rate_ci(test['false_answer_rate_unanswerable'], test['unanswerable'], True)} |",
        f"| abstention precision / recall | {_num(test['abstention_precision'])}{_ci(test, 'abstention_precision')} / "
        f"{_num(test['abstention_recall'])}{_ci(test, 'abstention_recall')} |",
        f"| hit@10 (any expected document among the top-10 chunks' documents) / MRR@10 | "
        f"{_num(test['recall_at_10'])}{_ci(test, 'recall_at_10')} / {_num(test['mrr'])}{_ci(test, 'mrr')} |",
        *passage_rows(test),
        f"| claims supported by their citation (interval: bootstrap over answers) | "
        f"{_pct(test['citation_support_rate'])}{_ci(test, 'citation_support_rate', pct=True)} |",
        f"| correct answers (of answered answerable) | "
        f"{rate_ci(test['correct_answer_rate'], answered_answerable, True)} |",
        f"| supported but wrong (of all answered) | "
        f"{rate_ci(test['supported_but_wrong_rate'], answered_all, True)} |",
        "| false-answer rate: " + " / ".join(UNANSWERABLE_TAGS) + " | "
        + " / ".join(_tag_rate(results, tag) for tag in UNANSWERABLE_TAGS) + " |", "",
    ]
    cv_all = results["cross_validated_all"]
    lines += [
        "**How the defaults were fitted, and how that transfers.** `workbench tune` searched every threshold pair "
        f"on the tune part for the most answerable questions answered with at most "
        f"{results['max_false_answer_rate']:.0%} false answers. The same procedure was also 5-fold "
        f"cross-validated over all {results['cases']} cases (fit on four fifths, apply to the fifth; linked "
        "cases share a fold). Answered / false answers, each with its 95 % Wilson interval; beside the test part, "
        "each rule against the shipped defaults on the same test cases, answered (of the answerable) and false "
        "answers (of the unanswerable) separately: the rule minus the defaults in points with its 95 % paired "
        "bootstrap interval, and the exact McNemar p on the cases where the two decide differently:", "",
        "| rule | fitted on the tune part | tune part (in-sample) | 5-fold CV within the tune part | "
        "**test part (held out)** | test part: rule minus the shipped defaults (paired) | 5-fold CV, all cases |",
        "|---|---|---:|---:|---:|---|---:|",
    ]
    everything = {"answerable": results["answerable"], "unanswerable": results["unanswerable"]}
    for name, x in t["rules"].items():
        lines.append(f"| {name} | {_setting(x['best'], x['keys'])} | {_rates_ci(x['best'], tune_part)} | "
                     f"{_rates_ci(x['cross_validated'], tune_part)} | **{_rates_ci(x['test'], test)}** | "
                     f"{_vs_shipped(x.get('test_vs_shipped'))} | {_rates_ci(cv_all.get(name), everything)} |")
    lines += [""]
    if rec.get("signal"):
        lines.append(f"The recommendation (`{' '.join(rec['settings'])}`) answers {_rates_ci(rec, tune_part)} on the "
                     f"tune part it was fitted on and **{_rates_ci(rec['test'], test)}** on the test part"
                     + (f" (against the shipped defaults on the same cases: {_vs_shipped(rec['test_vs_current'])})"
                        if rec.get("test_vs_current") else "") + ". "
                     + _transfer(rec, results["max_false_answer_rate"], t["current_on_tune"]["unanswerable"]))
    else:
        lines.append(rec.get("why", ""))
    f = results.get("fit") or {}
    if f:
        cv = f["cross_validated"]
        lines += ["", f"**Learned rule** (`workbench tune --fit`, fitted on the tune part; the shipped coefficients "
                  f"{'are' if d['is_tune_recommendation'] else 'are **not**'} this fit): 5-fold cross-validated "
                  f"within the tune part {_rates_ci(cv, tune_part)} (held-out ROC-AUC {_num(cv.get('roc_auc'))}); "
                  f"on the held-out test part **{_rates_ci(f.get('test'), test)}**"
                  + (f" (against the shipped defaults on the same cases: {_vs_shipped(f['test_vs_current'])})"
                     if f.get("test_vs_current") else "") + "; coefficients: "
                  + ", ".join(f"{k.removeprefix('learned_')} {v:g}" for k, v in f["coefficients"].items())
                  + f"; threshold {f['threshold']:g}."]
    evidence = results.get("evidence_on_tune") or {}
    if evidence:
        lines += ["", "Each evidence signal alone on the tune part, ROC-AUC [95 % bootstrap interval, resampling each "
                  "class]: " + ", ".join(f"{n} {x['roc_auc']:.3f}" + (
                      f" [{x['roc_auc_ci95'][0]:.3f}–{x['roc_auc_ci95'][1]:.3f}]" if x.get("roc_auc_ci95") else "")
                      for n, x in evidence.items() if x.get("roc_auc") is not None)
                  + "."]
    lines += ["", f"For comparison only — in-sample, not an estimate: the tune part at the defaults answers "
              f"{_rates_ci(tune_part, tune_part)}; all {parts['all']['cases']} cases "
              f"{_rates_ci(parts['all'], parts['all'])}.", ""]
    if results.get("nli_reason"):
        lines += [f"NLI: {results['nli_reason']}", ""]
    return "\n".join(lines)


def declined_because(results: dict) -> str | None:
    """Why the shipped defaults are not the tune part's recommendation, or None when nothing justifies it.

    The one accepted reason: the recommendation's false-answer rate, 5-fold cross-validated within the tune
    part, is above the target the search was bounded by; shipping it would trade the bound for answers."""
    if results["defaults"]["is_tune_recommendation"]:
        return None
    rec = results["tune"]["recommendation"]
    bound = results["max_false_answer_rate"]
    cv_false = (rec.get("cross_validated") or {}).get("false_answer_rate_unanswerable")
    if cv_false is None or cv_false <= bound:
        return None
    return (f"cross-validated within the tune part it gives {_pct(cv_false)} false answers, above the "
            f"{bound:.0%} bound it was searched under, so the shipped gate keeps its earlier coefficients.")


def _transfer(rec: dict, bound: float, unanswerable: int) -> str:
    far = rec["test"].get("false_answer_rate_unanswerable")
    if far is None:
        return ""
    if far > bound:
        return (f"Its held-out false-answer rate is above the {bound:.0%} bound it was fitted to: the exact search "
                "finds the corner of the tune part's scores, and with "
                f"{unanswerable} unanswerable cases one false answer is {1 / unanswerable:.0%}, so the "
                "in-sample figure flatters it. Read the held-out and cross-validated columns.")
    return f"Its held-out false-answer rate stays within the {bound:.0%} bound it was fitted to."


# -- measuring ------------------------------------------------------------------------------------------------

def _stack(cfg, summary: dict) -> str:
    stack = summary["stack"]
    rerank = ("no cross-encoder (it does not resolve offline, so the rerank stage is skipped)"
              if not stack.get("rerank_ran") else f"cross-encoder {cfg.rerank.model}")
    nli = summary.get("correctness", {}).get("nli", "off")
    return (f"the offline default — embedder {summary['run']['embedder']}, {rerank}, "
            f"`rewrite.backend={cfg.rewrite.backend}`, `generate.backend={cfg.generate.backend}`, "
            f"answer cache off, NLI {nli}")


def _run_live(golden, split, cfg, store_dir: Path, progress: bool):
    from pipeline.ingestion.ingest import ingest_paths
    from pipeline.models.registry import default_models
    from pipeline.storage.store import Store
    from workbench.evaluate import evaluate

    models = default_models()
    with Store.open(store_dir) as store:
        ingest_paths(store, [CORPUS], cfg, models, progress=progress)
        return evaluate(golden, store, models, cfg, progress=progress, split=split, part="all")


def _relevance(cases, cfg, models, store_dir: Path):
    from pipeline.ingestion.ingest import ingest_paths
    from pipeline.storage.store import Store
    from workbench.relevance import case_relevance

    with Store.open(store_dir) as store:
        ingest_paths(store, [CORPUS], cfg, models, progress=False)
        return case_relevance(cases, store)


def _run_from(eval_dir: Path, golden, split, cfg, store_dir: Path):
    """An evaluation rebuilt from a ``workbench eval --out DIR`` run's traces (correctness re-scored; the passage
    labels, :mod:`workbench.relevance`, read from ``store_dir`` with ``golden/corpus`` ingested into it)."""
    from pipeline.models.registry import default_models
    from workbench.evaluate import Evaluation, GoldenRun, eval_config, read_traces, score_correctness, split_block
    from workbench.evaluate import per_split as per_split_figures
    from workbench.summary import summarise

    traces = read_traces(eval_dir / "traces.jsonl")
    expected = eval_config(cfg).config_hash()
    other = sorted({t.config_hash for t in traces.values()} - {expected})
    if other:
        raise SystemExit(f"{eval_dir} was run with another config (hash {other[0]}, the defaults are "
                         f"{expected}): run `workbench eval golden/golden.jsonl --out DIR` again, or leave "
                         "--from out")
    cases = tuple(c for c in golden.cases if c.id in traces)
    if len(cases) < len(golden.cases):
        raise SystemExit(f"{eval_dir} has traces for {len(cases)} of {len(golden.cases)} cases: evaluate all of them "
                         "(workbench eval golden/golden.jsonl --split all --out DIR)")
    previous = json.loads((eval_dir / "summary.json").read_text(encoding="utf-8"))
    run = GoldenRun(cases=cases, traces=tuple(traces[c.id] for c in cases), generated=True, golden=golden.path,
                    config_hash=cfg.config_hash(), seconds=previous.get("run", {}).get("seconds", 0.0))
    models = default_models()
    embedder = models.embedder(cfg.embedding)
    verdicts, judged = score_correctness(run, embedder, models, cfg.validate.nli_model, nli=False)
    run = dataclasses.replace(run, correctness=verdicts, relevant=_relevance(cases, cfg, models, store_dir))
    summary = summarise(run.rows, run.traces, tags=golden.tags, nli=previous.get("nli"))
    summary["correctness"] = {**summary["correctness"], **judged}
    summary["run"] = {**previous.get("run", {}), "embedder": getattr(embedder, "name", "")}
    summary["split"] = split_block("all", split, len(run.rows))
    summary["per_split"] = per_split_figures(run.rows, split)
    return Evaluation(run=run, summary=summary)


def _with_auc_intervals(evidence: dict, scores, split) -> dict:
    """Each evidence signal's tune-part ROC-AUC with its bootstrap interval (:func:`workbench.metrics.roc_auc_ci`)."""
    import numpy as np

    from workbench.metrics import roc_auc_ci

    tune = scores.take(np.array([i for i, cid in enumerate(scores.ids) if split.part_of(cid) == "tune"]))
    out = {}
    for name, x in evidence.items():
        values = tune.evidence().get(name)
        ci = None
        if x.get("roc_auc") is not None and values is not None:
            ci = roc_auc_ci(np.where(np.isfinite(values), values, -np.inf), tune.answerable)
        out[name] = {**x, "roc_auc_ci95": None if ci is None else [round(v, 4) for v in ci]}
    return out


def measure(evaluation, golden, split, cfg) -> dict:
    """Everything the section shows, from one evaluation of all cases (pure apart from the clock)."""
    from pipeline.gate.learned import reader_fitted
    from workbench.floors import interval_bounds
    from workbench.golden import link_groups
    from workbench.summary import lookup, part_figures, summarise
    from workbench.sweep import RULE_KEYS, at_setting, cross_validate, extract
    from workbench.tune import tune_report

    run = evaluation.run
    by_id = run.by_id()
    rows = run.rows
    report, _ = tune_report(list(run.cases), by_id, cfg, split=split, max_false_answer_rate=MAX_FALSE_ANSWER_RATE,
                            fit_rule=True)
    held = report["held_out"]
    rules = {name: {"keys": list(RULE_KEYS[name]), "best": x["best"], "cross_validated": x["cross_validated"],
                    "test": held["rules"].get(name), "test_vs_shipped": held["vs_current"].get(name)}
             for name, x in report["rules"].items()}
    scores = extract([c.id for c in run.cases], [c.answerable for c in run.cases], run.traces, cfg.gate)
    label = {i: n for n, group in enumerate(link_groups(run.cases)) for i in group}
    groups = [label[c.id] for c in run.cases]
    cv_all = {name: cross_validate(scores, name, cfg.gate, MAX_FALSE_ANSWER_RATE, groups=groups)
              for name in report["rules"]}
    rec = report["recommendation"]
    gate = cfg.gate
    shipped = {"t_rerank": gate.confidence_threshold_rerank, "t_fused": gate.confidence_threshold_fused,
               "t_dense": gate.confidence_threshold_dense, "t_learned": gate.confidence_threshold_learned}
    fit = report.get("fit") or {}
    # the shipped learned rule is the tune part's --fit: the same coefficients and threshold
    is_rec = gate.signal == "auto" and fit.get("threshold") is not None and \
        abs(fit["threshold"] - gate.confidence_threshold_learned) < 1e-12 and all(
            abs(v - getattr(gate, k)) < 1e-9 for k, v in fit["coefficients"].items())
    test_ids = set(split.parts["test"])
    test_rows = [r for r in rows if r.id in test_ids]
    test_traces = [by_id[r.id] for r in test_rows]
    test_summary = summarise(test_rows, test_traces, tags=golden.tags)
    floors = json.loads(FLOORS.read_text(encoding="utf-8"))
    bounded = sorted({*floors.get("floors", {}), *floors.get("ceilings", {})})
    summary = evaluation.summary
    return {
        "stack": _stack(cfg, summary), "cases": len(rows), "answerable": sum(r.answerable for r in rows),
        "unanswerable": sum(not r.answerable for r in rows), "run_seconds": summary["run"].get("seconds", 0.0),
        "max_false_answer_rate": MAX_FALSE_ANSWER_RATE,
        "split": {"file": "golden/golden.split.json", "seed": split.seed,
                  "sizes": {p: len(ids) for p, ids in split.parts.items()}},
        "parts": {**summary["per_split"], "all": part_figures(rows)},
        "test_false_answer_by_tag": {tag: test_summary["per_tag"].get(tag, {}).get("false_answer_rate_unanswerable")
                                     for tag in UNANSWERABLE_TAGS},
        "test_unanswerable_by_tag": {tag: sum(1 for r in test_rows if not r.answerable and tag in r.tags)
                                     for tag in UNANSWERABLE_TAGS},
        "defaults": {"signal": gate.signal, **shipped, "is_tune_recommendation": is_rec,
                     "description": f"gate.signal={gate.signal}: the learned rule (probability ≥ "
                                    f"{gate.confidence_threshold_learned:g}) "
                                    + ("reading the reader's best sentence score beside the similarity signals"
                                       if reader_fitted(gate) else
                                       "on the similarity signals (its reader set is not fitted); the reader "
                                       f"acts after the gate, quoting only sentences scoring ≥ "
                                       f"{cfg.generate.reader_min_score:g}"),
                     "test": at_setting(extract([r.id for r in test_rows], [r.answerable for r in test_rows],
                                                test_traces, gate), gate.signal, {}, gate)},
        "fit": fit,
        "evidence_on_tune": _with_auc_intervals(report.get("evidence", {}), scores, split),
        "tune": {"recommendation": rec, "rules": rules,
                 "current_on_tune": {**report["current_gate"],
                                     **{k: report[k] for k in ("cases", "answerable", "unanswerable")}},
                 "current_on_test": held["current_gate"]},
        "cross_validated_all": cv_all,
        "floors_measured": {k: lookup(test_summary, k) for k in bounded},
        "floors_interval": interval_bounds(test_summary, floors),
        "nli_reason": summary.get("nli", {}).get("reason", "") if summary.get("nli", {}).get("status") != "ran" else "",
    }


def update_floors_measured(results: dict) -> None:
    """Write the test part's measured values and their interval ends into golden/floors.json (``_measured``,
    ``_interval``); the bounds are left as they are (``python -m workbench.floor_history derive`` sets them from
    ``_interval`` with a history entry)."""
    data = json.loads(FLOORS.read_text(encoding="utf-8"))
    data["_measured"] = results["floors_measured"]
    data["_interval"] = results.get("floors_interval", {})
    data["_measured_on"] = {"part": "test", "results": "benchmarks/results/golden.json",
                            "date": results["meta"]["date"], "git_commit": results["meta"]["git_commit"],
                            "model": results["meta"]["model"]}
    FLOORS.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    from pipeline.config import PipelineConfig
    from workbench.golden import find_split, load_golden

    parser = argparse.ArgumentParser(prog="python -m benchmarks.golden_report", description=__doc__.splitlines()[0])
    parser.add_argument("--from", dest="from_dir", type=Path, help="read a `workbench eval --out DIR` run of all "
                        "cases instead of running the evaluation")
    parser.add_argument("--store", type=Path, default=STORE)
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    parser.add_argument("--print", action="store_true", help="only print the section from the results file")
    args = parser.parse_args(argv)
    if not args.print:
        from pipeline.models.encoders import set_torch_threads

        set_torch_threads(args.threads)
        cfg = PipelineConfig()
        golden, split = load_golden(GOLDEN), find_split(GOLDEN)
        meta = run_meta(model="pending", depends=DEPENDS)
        started = time.perf_counter()
        evaluation = (_run_from(args.from_dir, golden, split, cfg, args.store) if args.from_dir
                      else _run_live(golden, split, cfg, args.store, sys.stderr.isatty()))
        results = {"meta": meta, **measure(evaluation, golden, split, cfg)}
        meta["model"] = results["stack"].replace("the offline default — ", "")
        meta["seconds"] = round(time.perf_counter() - started, 1)
        meta["load_average_end"] = load_average()
        results["reproduce"] = (".venv/bin/python -m benchmarks.golden_report"
                                + (f" --from {args.from_dir}" if args.from_dir else ""))
        write_results(NAME, results)
        update_floors_measured(results)
        print(f"wrote {results_path(NAME)} and the measured values in {FLOORS}", file=sys.stderr)
    print(render(load_results(NAME)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
