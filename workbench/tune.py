"""``workbench tune GOLDEN`` / ``make tune``: get traces once, sweep the gate thresholds, write the report.

Traces: ``--traces FILE`` (an evaluation's ``traces.jsonl``) is replayed as given. Otherwise
``OUT/traces.jsonl`` is reused when ``OUT/traces.meta.json`` says it was made from the same store, corpus
version, retrieval settings and golden cases; else every case runs once through ``Pipeline.search``
(rewrite, retrieve, rerank, gate: the gate decides before generation, so nothing else is needed) and the
traces are saved there for the next run. The sweep itself (:mod:`workbench.sweep`) never retrieves.

Out of sample by construction: when the golden file has a split (``golden.split.json`` beside it, or
``--split-file``; :mod:`workbench.golden`), the sweep, the recommendation and its cross-validation see only the
**tune** part; the recommendation and the current gate are then measured on the held-out **test** part, and
the report says which figure came from which part (``report["split"]``, ``report["held_out"]``,
``recommendation["test"]``). Without a split every figure is in-sample except the cross-validated ones, and
the report says that too. Cross-validation folds keep linked cases (one conversation, near-duplicates:
:func:`workbench.golden.link_groups`) together.

Writes under ``--out``: ``report.md``, ``report.json``, ``tradeoff.html``, ``distributions.html`` and
``heatmap.html`` (plotly; ``plotly.min.js`` is written once beside them so they open offline). It prints
the markdown report (``--json``: the JSON report) and never rewrites the config. ``workbench.cli`` parses the
flags and calls :func:`run_tune`; the searches go through the golden-set driver
:func:`workbench.evaluate.run_cases`; :func:`tune_report` is the pure part (scores in, report out) that the
app can call too.
"""

from __future__ import annotations

import hashlib
import json
import sys
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path

import numpy as np

from pipeline.config import ConfigError, PipelineConfig
from pipeline.models.registry import Models, default_models
from pipeline.storage.store import Store
from pipeline.trace import Trace
from workbench import figures
from workbench.evaluate import eval_pipeline, read_traces, run_cases, tqdm_progress, write_traces
from workbench.golden import (
    GoldenCase,
    GoldenSet,
    GoldenSplit,
    find_split,
    link_groups,
    load_golden,
    split_path,
)
from workbench.metrics import PairedTest, paired_binary, wilson
from workbench.sweep import (
    FIELDS,
    RULE_KEYS,
    SIGNALS,
    Scores,
    at_setting,
    configured_rule,
    extract,
    fit_learned,
    gate_with,
    rates,
    recommend,
    sweep,
    thresholds_of,
)

RETRIEVAL_SECTIONS = ("embedding", "keyword", "retrieve", "rerank", "rewrite")
UNANSWERABLE_TAGS = ("off-topic", "hard-unanswerable", "retracted")


class TuneError(ConfigError):
    """A tune argument or traces file the user must fix (printed as one line)."""


def retrieval_fingerprint(cfg: PipelineConfig) -> str:
    data = {k: v for k, v in cfg.to_dict().items() if k in RETRIEVAL_SECTIONS}
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:12]


def traces_meta(store, cfg: PipelineConfig, golden: GoldenSet) -> dict:
    ids = ",".join(f"{c.id}:{c.question}" for c in golden.cases)
    return {"store": str(Path(store.home).resolve()), "corpus_version": store.corpus_version,
            "retrieval": retrieval_fingerprint(cfg), "golden": hashlib.sha256(ids.encode()).hexdigest()[:12]}


def _stored(out: Path, meta: dict) -> dict[str, Trace] | None:
    try:
        if json.loads((out / "traces.meta.json").read_text(encoding="utf-8")) == meta:
            return read_traces(out / "traces.jsonl")
    except (OSError, ValueError, KeyError):
        return None
    return None


def collect_traces(golden: GoldenSet, cfg: PipelineConfig, *, out: str | Path, traces: str | Path | None = None,
                   open_store: Callable[[], AbstractContextManager[Store]] | None = None,
                   models: Models | None = None, progress: bool = False) -> tuple[dict[str, Trace], str]:
    """{case id: trace} and where they came from: ``traces`` replayed, ``OUT/traces.jsonl`` reused, or every case
    searched once (:func:`~workbench.evaluate.run_cases`, ``generate=False``) and saved under ``out``."""
    if traces:
        try:
            return read_traces(Path(traces)), f"replayed {traces}"
        except FileNotFoundError:
            raise TuneError(f"traces file {traces} not found (write one with: workbench eval GOLDEN --out DIR)") \
                from None
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise TuneError(f"traces file {traces} is not a workbench traces.jsonl: {exc}") from None
    if open_store is None:
        raise TuneError("no traces file and no store to search")
    out = Path(out)
    with open_store() as store:
        meta = traces_meta(store, cfg, golden)
        stored = _stored(out, meta)
        if stored is not None:
            return stored, f"reused {out / 'traces.jsonl'} (same store, corpus version and retrieval settings)"
        run = run_cases(golden, eval_pipeline(store, models or default_models(), cfg), generate=False,
                        on_progress=tqdm_progress("search") if progress else None)
    for problem in run.rejected:
        print(f"problem: {problem}", file=sys.stderr)
    write_traces(out / "traces.jsonl", run.cases, run.traces)
    (out / "traces.meta.json").write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
    return run.by_id(), f"searched {len(run.cases)} cases in {run.seconds:.1f} s"


def by_tag(scores, tags: list[tuple[str, ...]], rule: str, thresholds: dict, cfg) -> dict:
    """Answer / false-answer rates per tag at one setting (which questions does it still get wrong?)."""
    fixed = {k: getattr(cfg, f) for k, f in FIELDS.items() if k not in thresholds}
    answered = scores.answers(rule, **thresholds, **fixed)
    out = {}
    for tag in sorted({t for ts in tags for t in ts}):
        mask = np.array([tag in ts for ts in tags])
        if mask.any():
            ar, far = rates(answered[mask], scores.answerable[mask])
            out[tag] = {"cases": int(mask.sum()), "unanswerable": int((mask & ~scores.answerable).sum()),
                        "answer_rate_answerable": None if np.isnan(ar) else float(ar),
                        "false_answer_rate_unanswerable": None if np.isnan(far) else float(far)}
    return out


def _pct(value) -> str:
    return "—" if value is None else f"{100 * value:.1f} %"


def _setting(point: dict | None, keys) -> str:
    if not point:
        return "none reaches the bound"
    return ", ".join(f"{k[2:]} ≥ {point[k]:.4f}" for k in keys)


def _rates(point: dict | None) -> str:
    if not point:
        return "—"
    return f"{_pct(point.get('answer_rate_answerable'))} / {_pct(point.get('false_answer_rate_unanswerable'))}"


def _rate_ci(value, n: int) -> str:
    """``58.0 % [48.2–67.2]``: a rate over ``n`` cases with its 95 % Wilson interval."""
    if value is None or not n:
        return _pct(value)
    low, high = wilson(int(round(value * n)), n)
    return f"{100 * value:.1f} % [{100 * low:.1f}–{100 * high:.1f}]"


def _rates_ci(point: dict | None, answerable: int, unanswerable: int) -> str:
    """Answered / false answers, each with its Wilson interval over the part's answerable / unanswerable cases."""
    if not point:
        return "—"
    return (f"{_rate_ci(point.get('answer_rate_answerable'), answerable)} / "
            f"{_rate_ci(point.get('false_answer_rate_unanswerable'), unanswerable)}")


def paired_line(pair: dict | None) -> str:
    """``answered −8.0 points [−14.0 to −2.0], McNemar p 0.0078 (0 vs 8 discordant); false answers ...``: a setting
    minus the current gate on the same cases (:meth:`workbench.metrics.PairedTest.describe`)."""
    if not pair:
        return "—"
    return "; ".join(f"{label} {PairedTest.from_dict(pair[key]).describe()}"
                     for label, key in (("answered", "answered"), ("false answers", "false_answers")))


def _split_line(r: dict) -> str:
    sp = r["split"]
    if sp["fitted_on"] == "all":
        return (f"No split file ({sp['missing']}): the sweep ran on all {r['cases']} cases, so every figure below is "
                "in-sample except the cross-validated ones.")
    held = r.get("held_out") or {}
    return (f"Fitted on the **tune** part only: {r['cases']} cases ({r['answerable']} answerable, "
            f"{r['unanswerable']} unanswerable) of `{sp['file']}` (seed {sp['seed']}). Measured on the held-out "
            f"**test** part: {held.get('cases', 0)} cases ({held.get('answerable', 0)} answerable, "
            f"{held.get('unanswerable', 0)} unanswerable), never seen by the sweep.")


def render_markdown(report: dict) -> str:
    r, rec = report, report["recommendation"]
    bound = r["max_false_answer_rate"]
    held = r.get("held_out")
    fit = "tune part" if r["split"]["fitted_on"] == "tune" else "all cases, in-sample"
    lines = ["# Gate threshold sweep", "", _split_line(r), "",
             f"Traces: {r['source']}. False-answer bound: {bound:.0%}. Sweep time: {r['sweep_ms']:.0f} ms.", "",
             f"Current gate (`signal={r['current_gate']['signal']}`), answered / false answers [95 % Wilson "
             f"intervals]: {_rates_ci(r['current_gate'], r['answerable'], r['unanswerable'])} on the {fit}"
             + (f"; {_rates_ci(held['current_gate'], held['answerable'], held['unanswerable'])} on the held-out "
                "test part." if held else "."), "",
             f"Per rule, on the {fit}" + ("; 5-fold CV within the tune part; the last column applies the rule's "
                                          "best point to the held-out test part:" if held else ":"), "",
             "| rule | ROC-AUC | current setting → answered / false | best at ≤ bound | answered / false | "
             "5-fold CV answered / false | best at ≤ 10 % | best at ≤ 20 % | test answered / false [95 % Wilson] | "
             "test: best minus the current gate, same cases [95 % paired bootstrap], exact McNemar p |",
             "|---|---:|---|---|---|---|---|---|---|---|"]
    n_ans, n_un = r["answerable"], r["unanswerable"]
    for name, x in r["rules"].items():
        keys = RULE_KEYS[name]
        auc = "—" if x.get("roc_auc") is None else f"{x['roc_auc']:.3f}"
        cur, best, cv = x["current"], x["best"], x["cross_validated"]

        def at(b, x=x, keys=keys):
            p = x["at_bounds"].get(f"{b:g}")
            return f"{_setting(p, keys)} → {_pct(p['answer_rate_answerable'])}" if p else "none"

        if held:
            test = _rates_ci(held.get("rules", {}).get(name), held["answerable"], held["unanswerable"])
            paired = paired_line((held.get("vs_current") or {}).get(name))
        else:
            test, paired = "— (no split)", "—"
        lines.append(f"| {name} | {auc} | {_setting(cur, keys)} → {_rates_ci(cur, n_ans, n_un)} | "
                     f"{_setting(best, keys)} | {_rates_ci(best, n_ans, n_un)} | {_rates_ci(cv, n_ans, n_un)} | "
                     f"{at(0.10)} | {at(0.20)} | {test} | {paired} |")
    lines += ["", "## Recommendation", ""]
    if rec.get("signal"):
        cv = rec["cross_validated"]
        if held and rec.get("test"):
            lines.append(f"Set `{' '.join(rec['settings'])}`: on the held-out **test** part it answers "
                         f"{_rate_ci(rec['test']['answer_rate_answerable'], held['answerable'])} of answerable "
                         f"questions with "
                         f"{_rate_ci(rec['test']['false_answer_rate_unanswerable'], held['unanswerable'])} false "
                         "answers (95 % Wilson intervals); against the current gate on the same test cases: "
                         f"{paired_line(rec.get('test_vs_current'))}. On the tune part it "
                         f"was fitted on: {_rates_ci(rec, n_ans, n_un)} (in-sample); 5-fold cross-validated within "
                         f"the tune part: {_rates_ci(cv, n_ans, n_un)}.")
        else:
            lines.append(f"Set `{' '.join(rec['settings'])}`: answers {_rate_ci(rec['answer_rate_answerable'], n_ans)}"
                         f" of answerable with {_rate_ci(rec['false_answer_rate_unanswerable'], n_un)} false answers "
                         f"on these cases (in-sample; 5-fold cross-validated {_rates_ci(cv, n_ans, n_un)}).")
    else:
        lines.append(rec.get("why", ""))
    where = "the held-out test part" if held else "all cases"
    lines += ["", f"False-answer rate by kind of unanswerable question, on {where} [95 % Wilson interval]:", "",
              "| setting | " + " | ".join(UNANSWERABLE_TAGS) + " |", "|---|" + "---:|" * len(UNANSWERABLE_TAGS)]
    for label, tags in r["by_tag"].items():
        lines.append(f"| {label} | " + " | ".join(_rate_ci(tags.get(t, {}).get("false_answer_rate_unanswerable"),
                                                            tags.get(t, {}).get("unanswerable", 0))
                                                   for t in UNANSWERABLE_TAGS) + " |")
    lines += _evidence_lines(r) + _fit_lines(r)
    lines += ["", "This report never changes the config; apply a setting with `--set` or a config file.", ""]
    return "\n".join(lines)


def _evidence_lines(r: dict) -> list[str]:
    evidence = r.get("evidence") or {}
    if not evidence:
        return []
    lines = ["", f"Evidence signals, on the {'tune part' if r['split']['fitted_on'] == 'tune' else 'cases'}: how "
             "many cases have a value (under a single-signal rule the others abstain). Each signal is a gate rule "
             "of its own in the table above; the learned rule combines them.", "",
             "| signal | cases with a value | ROC-AUC |", "|---|---:|---:|"]
    for name, x in evidence.items():
        auc = "—" if x.get("roc_auc") is None else f"{x['roc_auc']:.3f}"
        lines.append(f"| {name} | {x['cases_with_score']} | {auc} |")
    return lines


def _fit_lines(r: dict) -> list[str]:
    f = r.get("fit")
    if not f:
        return []
    cv = f["cross_validated"]
    auc = "—" if cv.get("roc_auc") is None else f"{cv['roc_auc']:.3f}"
    lines = ["", "## Learned rule (`--fit`)", "",
             f"A logistic model over the evidence signals, fitted on {f['cases']} cases "
             f"({'the tune part' if r['split']['fitted_on'] == 'tune' else 'all cases'}; L2 {f['l2']:g}, "
             f"{'chosen by cross-validated log-loss' if f.get('l2_chosen_by') == 'cross-validation' else 'given'}). "
             f"{f['folds']}-fold cross-validated (coefficients and threshold chosen on the other folds): answered / "
             f"false {_rates_ci(cv, r['answerable'], r['unanswerable'])}, held-out ROC-AUC {auc}; in-sample at the "
             f"chosen threshold {_rates_ci(f['in_sample'], r['answerable'], r['unanswerable'])}."]
    held = r.get("held_out") or {}
    if f.get("test"):
        lines.append(f"On the held-out **test** part: "
                     f"{_rates_ci(f['test'], held.get('answerable', 0), held.get('unanswerable', 0))}; against the "
                     f"current gate on the same cases: {paired_line(f.get('test_vs_current'))}.")
    lines += ["", "| coefficient | value |", "|---|---:|"]
    lines += [f"| {name} | {value:g} |" for name, value in f["coefficients"].items()]
    lines += ["", f"Settings: `{' '.join(f['settings'])}`"]
    return lines


def vs_current(answered: np.ndarray, current: np.ndarray, answerable: np.ndarray) -> dict:
    """A setting against the current gate on the same cases, paired (:func:`workbench.metrics.paired_binary`):
    answered on the answerable cases and answered (a false answer) on the unanswerable ones, each with its exact
    McNemar p and the paired bootstrap interval of the difference (the setting minus the current gate)."""
    return {"answered": paired_binary(answered[answerable], current[answerable]).to_dict(),
            "false_answers": paired_binary(answered[~answerable], current[~answerable]).to_dict()}


def _scores(cases: list[GoldenCase], by_id: dict[str, Trace], gate=None) -> Scores:
    return extract([c.id for c in cases], [c.answerable for c in cases], [by_id[c.id] for c in cases], gate)


def _group_labels(cases: list[GoldenCase]) -> list[int]:
    label = {case_id: n for n, group in enumerate(link_groups(cases)) for case_id in group}
    return [label[c.id] for c in cases]


def tune_report(cases: list[GoldenCase], by_id: dict[str, Trace], cfg: PipelineConfig, *,
                split: GoldenSplit | None = None, max_false_answer_rate: float = 0.05, grid: int = 20,
                missing_split: str = "", fit_rule: bool = False) -> tuple[dict, Scores]:
    """The sweep on the tune part (all cases without a split), the recommendation, and both measured on the
    held-out test part: ``(report, the tune part's scores)``. Pure: traces in, plain data out."""
    fit_cases = [c for c in cases if split is None or split.part_of(c.id) == "tune"]
    held = [c for c in cases if split is not None and split.part_of(c.id) == "test"]
    if not fit_cases:
        raise TuneError(f"none of the {len(cases)} cases with a trace is in the tune part of {split.path}"
                        if split else "no case to tune on")
    scores = _scores(fit_cases, by_id, cfg.gate)
    started = time.perf_counter()
    report = sweep(scores, cfg.gate, max_false_answer_rate, grid, groups=_group_labels(fit_cases))
    report["sweep_ms"] = (time.perf_counter() - started) * 1000
    report["split"] = ({"fitted_on": "tune", "file": split.path, "seed": split.seed, "tune_cases": len(fit_cases),
                        "test_cases": len(held)} if split else
                       {"fitted_on": "all", "file": None, "missing": missing_split or "none given"})
    rec = report["recommendation"] = recommend(report, scores)
    rec["fitted_on"] = report["split"]["fitted_on"]
    rule = configured_rule(cfg.gate)
    tagged = fit_cases
    if held:
        test = _scores(held, by_id, cfg.gate)
        current = at_setting(test, rule, {}, cfg.gate)
        report["held_out"] = {"part": "test", **{k: current[k] for k in ("cases", "answerable", "unanswerable")},
                              "current_gate": current}
        report["held_out"]["rules"] = {name: at_setting(test, name, {k: x["best"][k] for k in RULE_KEYS[name]},
                                                        cfg.gate) if x.get("best") else None
                                       for name, x in report["rules"].items()}
        shipped = test.answers(rule, **thresholds_of(cfg.gate))
        report["held_out"]["vs_current"] = {
            name: vs_current(test.answers(name, **{**thresholds_of(cfg.gate),
                                                   **{k: x["best"][k] for k in RULE_KEYS[name]}}), shipped,
                             test.answerable) if x.get("best") else None
            for name, x in report["rules"].items()}
        if rec.get("signal"):
            rec["test"] = at_setting(test, rec["rule"], {k: rec[k] for k in RULE_KEYS[rec["rule"]]}, cfg.gate)
            rec["test_vs_current"] = vs_current(
                test.answers(rec["rule"], **{**thresholds_of(cfg.gate), **{k: rec[k] for k in RULE_KEYS[rec["rule"]]}}),
                shipped, test.answerable)
        tagged, scores_for_tags = held, test
    else:
        scores_for_tags = scores
    rec_gate, rec_scores = cfg.gate, scores_for_tags
    if fit_rule:
        fitted = report["fit"] = fit_learned(scores, cfg.gate, max_false_answer_rate, groups=_group_labels(fit_cases))
        if fitted["threshold"] is not None:
            # with --fit the recommendation is the fitted learned rule: its coefficients and threshold
            rec_gate = gate_with(cfg.gate, fitted)
            rec_scores = scores_for_tags.with_gate(rec_gate)
            signal = "auto" if "rerank" not in report["rules"] else "learned"
            rec = report["recommendation"] = {
                "signal": signal, "rule": "learned", "t_learned": fitted["threshold"],
                "threshold": fitted["threshold"], "fitted_on": report["split"]["fitted_on"],
                **(fitted["in_sample"] or {}), "cross_validated": fitted["cross_validated"],
                "settings": [f"gate.signal={signal}", *fitted["settings"]]}
            if held:
                fitted["test"] = rec["test"] = at_setting(rec_scores, "learned", {}, rec_gate)
                fitted["test_vs_current"] = rec["test_vs_current"] = vs_current(
                    rec_scores.answers("learned", **thresholds_of(rec_gate)), shipped, test.answerable)
    tags = [c.tags for c in tagged]
    report["by_tag_part"] = "test" if held else "all"
    report["by_tag"] = {f"current ({cfg.gate.signal})": by_tag(scores_for_tags, tags, rule, {}, cfg.gate)}
    if rec.get("signal"):
        report["by_tag"][f"recommended {rec['rule']}"] = by_tag(
            rec_scores, tags, rec["rule"], {k: rec[k] for k in RULE_KEYS[rec["rule"]]}, rec_gate)
    return report, scores


def write_figures(out: Path, report: dict, scores) -> None:
    rules = report["rules"]
    part = "tune part" if report["split"]["fitted_on"] == "tune" else "in-sample"
    points = [{"label": f"current ({part})", **report["current_gate"]}]
    rec = report["recommendation"]
    if rec.get("signal"):
        points.append({"label": f"recommended ({rec['rule']}, {part})", **rec})
    if rec.get("test"):
        points.append({"label": f"recommended ({rec['rule']}, held-out test part)", **rec["test"]})
    curves = {n: x["curve"] for n, x in rules.items() if "curve" in x}
    thresholds = {n: {"current": rules[n]["current"][f"t_{n}"],
                      "recommended": (rules[n]["best"] or {}).get(f"t_{n}")} for n in curves}
    html = {"tradeoff.html": figures.tradeoff_figure(curves, points, report["max_false_answer_rate"]),
            "distributions.html": figures.score_distributions_figure(
                {n: scores.signal(n).tolist() for n in SIGNALS}, scores.answerable.tolist(), thresholds,
                {n: x.get("roc_auc") for n, x in rules.items()}),
            "heatmap.html": figures.heatmap_figure(report["grids"]["fused_and_dense"], report["max_false_answer_rate"])}
    for name, fig in html.items():
        fig.write_html(out / name, include_plotlyjs="directory")
    if rules.get("rerank"):
        figures.heatmap_figure(report["grids"]["auto"], report["max_false_answer_rate"]).write_html(
            out / "heatmap_auto.html", include_plotlyjs="directory")


def run_tune(golden: str | Path, cfg: PipelineConfig, *, out: str | Path = "tune-output",
             max_false_answer_rate: float = 0.05, grid: int = 20, traces: str | Path | None = None,
             json_output: bool = False, open_store: Callable[[], AbstractContextManager[Store]] | None = None,
             models: Models | None = None, progress: bool = False, split_file: str | Path | None = None,
             fit: bool = False) -> int:
    """``workbench tune`` (``workbench.cli`` parses the flags): 0, or 2 when the golden file has bad lines.
    ``open_store()`` gives the store as a context manager; it is not opened when ``traces`` is given."""
    if not 0.0 <= max_false_answer_rate <= 1.0:
        raise TuneError(f"--max-false-answer-rate must be between 0 and 1, got {max_false_answer_rate}")
    if grid < 2:
        raise TuneError(f"--grid must be at least 2, got {grid}")
    golden_set = load_golden(golden)
    split = find_split(golden, split_file)
    for problem in golden_set.problems:
        print(f"problem: {problem}", file=sys.stderr)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    by_id, source = collect_traces(golden_set, cfg, out=out, traces=traces, open_store=open_store, models=models,
                                   progress=progress)
    cases = [c for c in golden_set.cases if c.id in by_id]
    if not cases:
        raise TuneError(f"none of the {len(golden_set.cases)} golden cases has a trace ({source})")
    if len(cases) < len(golden_set.cases):
        print(f"note: {len(golden_set.cases) - len(cases)} golden cases have no trace and are left out",
              file=sys.stderr)
    if split is not None:
        unassigned = [c.id for c in cases if split.part_of(c.id) is None]
        if unassigned:
            raise TuneError(f"split file {split.path} does not assign {len(unassigned)} cases (e.g. "
                            f"{unassigned[0]!r}): regenerate it with python -m workbench.golden split {golden}")
    report, scores = tune_report(cases, by_id, cfg, split=split, max_false_answer_rate=max_false_answer_rate,
                                 grid=grid, missing_split=str(split_path(golden)), fit_rule=fit)
    report["source"] = source
    markdown = render_markdown(report)
    (out / "report.json").write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    (out / "report.md").write_text(markdown, encoding="utf-8")
    write_figures(out, report, scores)
    print(json.dumps(report, indent=2) if json_output else markdown)
    print(f"wrote report.md, report.json and plots to {out}", file=sys.stderr)
    return 2 if golden_set.problems else 0
