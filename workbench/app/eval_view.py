"""Evaluate & tune and the Gate lab's golden-set part: the golden set run with a progress bar, then the
evaluation's summary and the threshold sweep's figures (``workbench.evaluate``, ``workbench.sweep``,
``workbench.figures`` do the work; this module only renders them; the failure gallery is ``gallery_view``).
Both pages walk the golden set with the CLI's driver: :func:`workbench.evaluate.evaluate` (ask, measured) on
Evaluate & tune, :func:`workbench.evaluate.run_cases` (search only) in the Gate lab; :func:`progress_bar` is
their progress.

:func:`run_golden` is Evaluate & tune's run: the CLI's :func:`workbench.evaluate.evaluate` with the CLI's
settings (the golden file's split labelling the summary as ``workbench eval --split all`` does, one torch
thread while it runs: :func:`workbench.app.resources.eval_threads`), so its rows are the CLI's rows; a run
whose :func:`run_key` matches an earlier one of this server (same golden file, limit, evaluation config and
corpus version) reuses that result instead of asking every case again. A run whose configuration differs from an
earlier one's only after retrieval (a new gate threshold, another generator, validation settings:
:func:`pipeline.engine.retrieval_differences`) reuses that run's retrieval and its encoded vectors
(:func:`reusable_evaluation`; ``evaluate(reuse=...)``) and asks only the gate onwards."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
import streamlit as st

from pipeline.config import GateConfig, PipelineConfig
from pipeline.engine import Pipeline, retrieval_differences
from workbench import figures, sweep
from workbench.app import page, resources, thresholds
from workbench.app.render import md
from workbench.evaluate import Evaluation, GoldenRun, eval_config, evaluate
from workbench.golden import GoldenError, find_split, load_golden, subset
from workbench.metrics import wilson
from workbench.summary import speed_line

DEFAULT_GOLDEN = Path(__file__).resolve().parents[2] / "golden" / "golden.jsonl"
HEADLINE = (("answer_rate_answerable", "answered (answerable)"),
            ("false_answer_rate_unanswerable", "false answers (unanswerable)"),
            ("recall_at_10", "hit@10"), ("mrr", "MRR@10"), ("citation_support_rate", "claims supported"),
            ("correct_answer_rate", "correct answers"), ("supported_but_wrong_rate", "supported but wrong"),
            ("llm_calls_saved", "LLM calls saved"))


HEADLINE_PER_ROW = 4     # at 1024 px five metrics in a row already cut "answered (answerable)" and "59.0 %"
PROGRESS_EVERY_S = 0.2   # at most five redraws a second: each one is a message to the browser and a repaint


def progress_bar(label: str) -> Callable[[int, int, str], None]:
    """A progress bar that names the case and, once a few are done, how long the rest should take; redrawn at
    most every :data:`PROGRESS_EVERY_S` seconds (and always at the start and the end)."""
    bar = st.progress(0.0, text=label)
    started = time.perf_counter()
    drawn = [0.0]

    def update(done: int, total: int, case_id: str) -> None:
        now = time.perf_counter()
        if 0 < done < total and now - drawn[0] < PROGRESS_EVERY_S:
            return
        drawn[0] = now
        elapsed = now - started
        left = eta_text(elapsed, done, total)
        bar.progress(done / max(total, 1), text=f"{label}: {done}/{total}" + (f" ({case_id})" if case_id else "")
                     + left)
    return update


def eta_text(elapsed_s: float, done: int, total: int) -> str:
    """`` · about 40 s left``: the rest at the pace so far, once a tenth of the cases (at least three) and two
    seconds have passed; never "0 s" while cases remain (a pace read off the fast first cases is rounded up)."""
    if done >= total or done < max(3, total // 10) or elapsed_s < 2:
        return ""
    left = elapsed_s / done * (total - done)
    if left < 10:
        return " · a few seconds left"
    return f" · about {left:.0f} s left" if left < 120 else f" · about {left / 60:.0f} min left"


def run_key(path: str, limit: int, cfg: PipelineConfig, pipe: Pipeline) -> tuple:
    """What a golden run's traces depend on: the golden file (and its size and modification time, so an edited
    file runs again), the case limit, the evaluation's config hash (the answer cache setting does not count:
    the evaluation turns it off) and the corpus version."""
    golden = Path(path).expanduser()
    try:
        stat = golden.stat()
        version = (stat.st_size, stat.st_mtime_ns)
    except OSError:
        version = None
    return (str(golden.resolve()), version, int(limit), eval_config(cfg).config_hash(), pipe.store.corpus_version)


def reusable_evaluation(done: dict, key: tuple, cfg: PipelineConfig) -> Evaluation | None:
    """The latest of ``done`` (:func:`resources.evaluations`) over the same golden file, limit and corpus version as
    ``key`` whose configuration differs from ``cfg`` only after retrieval, so its retrieval can stand for a run
    under ``cfg``; None when there is none."""
    same_cases = (key[0], key[1], key[2], key[4])
    cfg = eval_config(cfg)
    for earlier_key, evaluation in reversed(list(done.items())):
        if (earlier_key[0], earlier_key[1], earlier_key[2], earlier_key[4]) != same_cases or not evaluation.traces:
            continue
        if all(t.config is not None and not retrieval_differences(t.config, cfg) for t in evaluation.traces):
            return evaluation
    return None


def run_golden(path: str, limit: int, cfg: PipelineConfig, pipe: Pipeline, reuse: bool = True
               ) -> tuple[Evaluation | None, bool]:
    """(the evaluation, whether it was reused): an earlier result of this server with the same :func:`run_key`,
    else every case asked as ``workbench eval --no-nli`` asks it, with a progress bar; with ``reuse``, from an
    earlier run's retrieval when one qualifies (:func:`reusable_evaluation`). A bad golden file or a
    user-fixable error is one ``st.error`` line and ``(None, False)``."""
    done = resources.evaluations()
    key = run_key(path, limit, cfg, pipe)
    if key in done:
        return done[key], True
    earlier = reusable_evaluation(done, key, cfg) if reuse else None
    try:
        golden = subset(load_golden(path), int(limit) or None)
        split = find_split(path)
    except GoldenError as exc:
        st.error(md(str(exc)))
        return None, False
    with resources.eval_threads():
        result = page.attempt(lambda: evaluate(golden, pipe.store, resources.models(), cfg, nli=False,
                                               on_progress=progress_bar("asking"), split=split, part="all",
                                               reuse=earlier))
    if result is not None:
        done[key] = result
    return result, False


# -- summary and figures ---------------------------------------------------------------------------------

def _pct(value) -> str:
    return "–" if value is None else (f"{value:.1%}" if isinstance(value, float) else str(value))


def _span(ci: dict) -> str:
    """``48.2%–67.2%``: an interval of the summary's ``intervals`` block."""
    return f"{_pct(ci['ci95'][0])}–{_pct(ci['ci95'][1])}"


def rate_columns(columns) -> dict:
    """Rates (and recall, precision) as percentages; other numbers to three decimals."""
    return {c: st.column_config.NumberColumn(format="percent" if any(w in c for w in ("rate", "recall", "precision"))
                                             else "%.3f") for c in columns}


def render_summary(evaluation: Evaluation, key: str) -> None:
    s, result = evaluation.summary, evaluation.run
    st.caption(md(f"{len(result.rows)} cases of {Path(result.golden).name} · config {result.config_hash} · "
                  f"corpus version {result.corpus_version} · "
                  f"{speed_line(s.get('run') or {}) or f'asked in {result.seconds:.1f} s'} · "
                  "answer cache off, runs not logged"))
    cis = s.get("intervals") or {}
    rows = [HEADLINE[i:i + HEADLINE_PER_ROW] for i in range(0, len(HEADLINE), HEADLINE_PER_ROW)]
    placed = [(c, m) for row in rows for c, m in zip(st.columns(HEADLINE_PER_ROW), row, strict=False)]
    for column, (name, label) in placed:
        ci = cis.get(name)
        column.metric(label, _pct(s.get(name)),
                      help=f"95 % interval {_span(ci)} ({ci['method']}; {ci['k']:g} of {ci['n']})" if ci else None)
        if ci:
            column.caption(f"95 % CI {_span(ci)}")
    nli = s.get("nli") or {}
    if nli.get("status") == "ran":
        left, middle, right = st.columns(3)
        left.metric("NLI support rate", _pct(nli.get("support_rate")),
                    help="Cited claims a cited passage entails, by the NLI model (the validator's own reading)")
        middle.metric("NLI vs embedding check: agreement", _pct(nli.get("agreement")),
                      help="Cited claims on which the embedding check's verdict equals the NLI model's")
        right.metric("passed by embedding, not entailed", _pct(nli.get("embedding_only")),
                     help="How often the cheap check alone would have called a claim supported that NLI does not")
    else:
        st.caption(md(f"NLI check: {nli.get('status', 'off')} {nli.get('reason', '')}"))
    for problem in result.problems:
        st.warning(md(problem))
    with st.expander("every summary number"):
        st.dataframe(pd.DataFrame([{"metric": k, "value": _pct(v),
                                    "95 % interval": _span(cis[k]) if k in cis else "",
                                    "counts": f"{cis[k]['k']:g}/{cis[k]['n']}" if k in cis else "",
                                    "method": cis[k]["method"] if k in cis else ""}
                                   for k, v in s.items() if not isinstance(v, dict)]), hide_index=True,
                     key=f"{key}.all")
        if s.get("per_tag"):
            tags = pd.DataFrame(s["per_tag"]).T
            st.dataframe(tags, key=f"{key}.tags", column_config=rate_columns(tags.columns))
        if s.get("latency_ms"):
            st.dataframe(pd.DataFrame(s["latency_ms"]).T, key=f"{key}.latency")
            st.caption(md(s.get("latency_note", "")))
        st.json({k: v for k, v in s.items() if isinstance(v, dict) and k not in ("per_tag", "latency_ms",
                                                                                 "intervals")},
                expanded=False)


def tune_report(result: GoldenRun, gate: GateConfig, max_far: float) -> dict:
    return sweep.sweep(result.scores(), gate, max_far=max_far)


def operating_point(result: GoldenRun, gate: GateConfig, label: str) -> dict:
    rates = sweep.current_rates(result.scores(), sweep.configured_rule(gate), gate)
    return {"label": label, **rates}


def tradeoff(result: GoldenRun, report: dict, points: list[dict]) -> object:
    curves = {name: r["curve"] for name, r in report["rules"].items() if "curve" in r}
    return figures.tradeoff_figure(curves, points=points, max_far=report["max_false_answer_rate"])


def split_label(summary: dict, cases: int) -> str:
    """Which cases the figures were measured on, from the summary's ``split`` block when the evaluation
    labels it (``{"part", "file", "seed", "cases"}``), else "all N cases"."""
    split = summary.get("split") or {}
    part, file = split.get("part"), split.get("file")
    if not part or part == "all":
        return f"all {cases} cases of the golden set" + (f" (split file {Path(file).name} not applied)" if file else "")
    seed = f", seed {split['seed']}" if split.get("seed") is not None else ""
    source = Path(file).name if file else "–"
    return f"the {part} part of the golden set: {split.get('cases', cases)} cases ({source}{seed})"


def _same_setting(best: dict, gate: GateConfig) -> bool:
    """The recommendation is the configured rule with the configured thresholds (at their precision)."""
    if best.get("signal") != gate.signal:
        return False
    for key_name in sweep.RULE_KEYS.get(best.get("rule") or "", ()):
        signal = key_name[2:]
        if thresholds.fmt(signal, best[key_name]) != thresholds.fmt(signal, getattr(gate, sweep.FIELDS[key_name])):
            return False
    return True


def replay_check(result: GoldenRun, fallback: GateConfig) -> tuple[int, int]:
    """(cases whose stored gate decision the sweep's replay does not reproduce, cases) under the run's own
    gate settings: the sweep is only as good as this agreement."""
    configs = [t.config for t in result.traces if t.config is not None]
    gate = configs[0].gate if configs else fallback
    replayed = result.scores().answers(sweep.configured_rule(gate), **sweep.thresholds_of(gate))
    stored = np.array([t.gate.decision == "answer" for t in result.traces], dtype=bool)
    return int((np.asarray(replayed, dtype=bool) != stored).sum()), len(stored)


# the thresholds a point's row names: rerank, fused, dense, and a single-signal rule's own
POINT_KEYS = ("t_learned", "t_rerank", "t_fused", "t_dense", *(f"t_{name}" for name in thresholds.EVIDENCE))


def interval_text(rate: float | None, n: int) -> str:
    """``48.2–67.2 %``: the 95 % Wilson interval of a rate over ``n`` cases (its count is ``round(rate * n)``)."""
    if rate is None or not n:
        return "–"
    low, high = wilson(int(round(rate * n)), n)
    return f"{100 * low:.1f}–{100 * high:.1f} %"


def _points_table(points: list[dict], key: str, answerable: int, unanswerable: int) -> None:
    rows = []
    for p in points:
        setting = ", ".join(f"{k[2:]} {thresholds.fmt(k[2:], p[k])}" for k in POINT_KEYS if k in p)
        rows.append({"": p["label"], "thresholds": setting, "answered (answerable)": p["answer_rate_answerable"],
                     "95 % interval": interval_text(p["answer_rate_answerable"], answerable),
                     "false answers (unanswerable)": p["false_answer_rate_unanswerable"],
                     "95 % interval ": interval_text(p["false_answer_rate_unanswerable"], unanswerable)})
    st.dataframe(pd.DataFrame(rows), hide_index=True, key=key, column_config={
        "answered (answerable)": st.column_config.NumberColumn(format="percent"),
        "false answers (unanswerable)": st.column_config.NumberColumn(format="percent")})


def _separate_labels(fig) -> None:
    """Current and recommended threshold labels on either side of their lines, so they never overlap each
    other, and inside the panel, below its title."""
    for annotation in fig.layout.annotations:
        text = annotation.text or ""
        if text.startswith("current"):
            annotation.update(xanchor="right", yanchor="top")
        elif text.startswith("recommended"):
            annotation.update(xanchor="left", yanchor="top")


def render_tuning(result: GoldenRun, cfg: PipelineConfig, key: str, measured_on: str = "") -> None:
    """The threshold sweep of one golden run; ``measured_on`` says which cases (the split label)."""
    if measured_on:
        st.caption(md(f"Measured on {measured_on}."))
    max_far = st.select_slider("False-answer bound", options=[0.0, 0.02, 0.05, 0.1, 0.2, 0.3], value=0.05,
                               key=f"{key}.max_far", format_func=lambda v: f"{v:.0%}")
    report = tune_report(result, cfg.gate, max_far)
    best = sweep.recommend(report)
    current = operating_point(result, cfg.gate, f"current ({cfg.gate.signal})")
    points = [current]
    if best.get("signal"):
        cv = best["cross_validated"]
        rates = (f"answers {best['answer_rate_answerable']:.1%} of answerable with "
                 f"{best['false_answer_rate_unanswerable']:.1%} false answers (5-fold cross-validated: "
                 f"{cv['answer_rate_answerable']:.1%} / {cv['false_answer_rate_unanswerable']:.1%})")
        if _same_setting(best, cfg.gate):
            current["label"] = f"current = recommended ({cfg.gate.signal})"
            st.info(md(f"The recommendation within {max_far:.0%} false answers is the current setting: nothing to "
                       f"change. It {rates}."))
        else:
            points.append({"label": f"recommended ({best['signal']})", **best})
            st.success(md(f"Recommended within {max_far:.0%} false answers: {' '.join(best['settings'])} — {rates}."))
    else:
        st.warning(md(best.get("why", "no recommendation")))
    answerable = int(result.scores().answerable.sum())
    _points_table(points, f"{key}.points", answerable, len(result.cases) - answerable)
    mismatches, cases = replay_check(result, cfg.gate)
    st.caption(f"Replay check: replaying the gate rule over the stored scores reproduces the stored decision of "
               f"{'all ' if not mismatches else ''}{cases - mismatches} of {cases} cases"
               + ("." if not mismatches else f"; {mismatches} differ (early-stopped reranking makes a replay "
                                              "inexact), so treat the sweep as approximate."))
    figure = tradeoff(result, report, points)
    for trace in figure.data[len(figure.data) - len(points):]:
        trace.textposition = "bottom right" if trace.name.startswith("recommended") else "top left"
    st.plotly_chart(figure, key=f"{key}.tradeoff", width="stretch")
    scores = result.scores()
    marks = {name: {"current": getattr(cfg.gate, sweep.FIELDS[f"t_{name}"])} for name in sweep.SIGNALS}
    if len(points) > 1:
        for key_name in sweep.RULE_KEYS.get(best.get("rule") or "", ()):
            if key_name[2:] in marks:
                marks[key_name[2:]]["recommended"] = best[key_name]
    aucs = {name: r.get("roc_auc") for name, r in report["rules"].items()}
    distributions = figures.score_distributions_figure({n: scores.signal(n) for n in sweep.SIGNALS},
                                                       scores.answerable, marks, aucs)
    _separate_labels(distributions)
    st.plotly_chart(distributions, key=f"{key}.distributions", width="stretch")
    missing = [n for n in sweep.SIGNALS if n not in scores.available()]
    if missing:
        st.caption(md(f"No {' or '.join(missing)} scores in this run (the model did not run, or the signal was not "
                      "measured), so "
                      f"{'they are' if len(missing) > 1 else 'it is'} not plotted and no rule reading "
                      f"{'them' if len(missing) > 1 else 'it'} is swept."))
    st.markdown(f"**Answer rate over two thresholds** (colour: share of answerable questions answered; × marks "
                f"settings with more than {max_far:.0%} false answers on unanswerable ones)")
    for name, grid in report["grids"].items():
        needs = {"auto": "rerank"}.get(name)
        if needs in missing:
            st.caption(md(f"The {name} grid (fused × {needs} thresholds) is hidden: without {needs} scores every "
                          f"row would be the same."))
            continue
        st.plotly_chart(figures.heatmap_figure(grid, max_far=max_far), key=f"{key}.heatmap.{name}", width="stretch")
