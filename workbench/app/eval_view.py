"""Evaluate & tune and the Gate lab's golden-set part: the golden set run with a progress bar, then the
evaluation's summary, the threshold sweep's figures and a failure gallery (``workbench.evaluate``,
``workbench.sweep``, ``workbench.figures`` do the work; this module only renders them). Both pages walk the
golden set with the CLI's driver: :func:`workbench.evaluate.evaluate` (ask, measured) on Evaluate & tune,
:func:`workbench.evaluate.run_cases` (search only) in the Gate lab; :func:`progress_bar` is their progress."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pandas as pd
import streamlit as st

from pipeline.config import GateConfig, PipelineConfig
from workbench import figures, sweep
from workbench.app.answer_view import render_answer
from workbench.app.render import md
from workbench.app.trace_view import render_trace
from workbench.evaluate import Evaluation, GoldenRun
from workbench.summary import supported_but_wrong

DEFAULT_GOLDEN = Path(__file__).resolve().parents[2] / "golden" / "golden.jsonl"
HEADLINE = (("answer_rate_answerable", "answered (answerable)"),
            ("false_answer_rate_unanswerable", "false answers (unanswerable)"),
            ("recall_at_10", "recall@10"), ("mrr", "MRR@10"), ("citation_support_rate", "claims supported"),
            ("correct_answer_rate", "correct answers"), ("supported_but_wrong_rate", "supported but wrong"),
            ("llm_calls_saved", "LLM calls saved"))


def progress_bar(label: str) -> Callable[[int, int, str], None]:
    bar = st.progress(0.0, text=label)

    def update(done: int, total: int, case_id: str) -> None:
        bar.progress(done / max(total, 1), text=f"{label}: {done}/{total}" + (f" ({case_id})" if case_id else ""))
    return update


# -- summary and figures ---------------------------------------------------------------------------------

def _pct(value) -> str:
    return "–" if value is None else (f"{value:.1%}" if isinstance(value, float) else str(value))


def render_summary(evaluation: Evaluation, key: str) -> None:
    s, result = evaluation.summary, evaluation.run
    st.caption(md(f"{len(result.rows)} cases of {Path(result.golden).name} · config {result.config_hash} · "
                  f"corpus version {result.corpus_version} · answer cache off, runs not logged"))
    for column, (name, label) in zip(st.columns(len(HEADLINE)), HEADLINE, strict=True):
        column.metric(label, _pct(s.get(name)))
    for problem in result.problems:
        st.warning(md(problem))
    with st.expander("every summary number"):
        st.dataframe(pd.DataFrame([{"metric": k, "value": _pct(v)} for k, v in s.items()
                                   if not isinstance(v, dict)]), hide_index=True, key=f"{key}.all")
        if s.get("per_tag"):
            st.dataframe(pd.DataFrame(s["per_tag"]).T, key=f"{key}.tags")
        if s.get("latency_ms"):
            st.dataframe(pd.DataFrame(s["latency_ms"]).T, key=f"{key}.latency")
            st.caption(md(s.get("latency_note", "")))
        st.json({k: v for k, v in s.items() if isinstance(v, dict) and k not in ("per_tag", "latency_ms")},
                expanded=False)


def tune_report(result: GoldenRun, gate: GateConfig, max_far: float) -> dict:
    return sweep.sweep(result.scores(), gate, max_far=max_far)


def operating_point(result: GoldenRun, gate: GateConfig, label: str) -> dict:
    rates = sweep.current_rates(result.scores(), sweep.configured_rule(gate), gate)
    return {"label": label, **rates}


def tradeoff(result: GoldenRun, report: dict, points: list[dict]) -> object:
    curves = {name: r["curve"] for name, r in report["rules"].items() if "curve" in r}
    return figures.tradeoff_figure(curves, points=points, max_far=report["max_false_answer_rate"])


def render_tuning(result: GoldenRun, cfg: PipelineConfig, key: str) -> None:
    max_far = st.select_slider("False-answer bound", options=[0.0, 0.02, 0.05, 0.1, 0.2, 0.3], value=0.05,
                               key=f"{key}.max_far", format_func=lambda v: f"{v:.0%}")
    report = tune_report(result, cfg.gate, max_far)
    best = sweep.recommend(report)
    points = [operating_point(result, cfg.gate, f"current ({cfg.gate.signal})")]
    if best.get("signal"):
        points.append({"label": f"recommended ({best['signal']})", **best})
        cv = best["cross_validated"]
        st.success(md(f"Recommended within {max_far:.0%} false answers: {' '.join(best['settings'])} — answers "
                      f"{best['answer_rate_answerable']:.1%} of answerable, "
                      f"{best['false_answer_rate_unanswerable']:.1%} false answers (5-fold cross-validated: "
                      f"{cv['answer_rate_answerable']:.1%} / {cv['false_answer_rate_unanswerable']:.1%})."))
    else:
        st.warning(md(best.get("why", "no recommendation")))
    st.plotly_chart(tradeoff(result, report, points), key=f"{key}.tradeoff", width="stretch")
    scores = result.scores()
    thresholds = {name: {"current": getattr(cfg.gate, sweep.FIELDS[f"t_{name}"])} for name in sweep.SIGNALS}
    for key_name in sweep.RULE_KEYS.get(best.get("rule") or "", ()):
        signal = key_name[2:]
        if signal in thresholds:
            thresholds[signal]["recommended"] = best[key_name]
    aucs = {name: r.get("roc_auc") for name, r in report["rules"].items()}
    st.plotly_chart(figures.score_distributions_figure({n: scores.signal(n) for n in sweep.SIGNALS},
                                                       scores.answerable, thresholds, aucs),
                    key=f"{key}.distributions", width="stretch")
    for name, grid in report["grids"].items():
        st.plotly_chart(figures.heatmap_figure(grid, max_far=max_far), key=f"{key}.heatmap.{name}", width="stretch")


# -- the failure gallery --------------------------------------------------------------------------------

GALLERY = (("false answers", lambda r: not r.answerable and not r.abstained),
           ("false abstentions", lambda r: r.answerable and r.abstained),
           ("supported but wrong", lambda r: r.answerable and supported_but_wrong(r)),
           ("unsupported claims", lambda r: r.unsupported_claims > 0),
           ("fabricated markers", lambda r: r.fabricated_markers > 0))


def gallery_rows(result: GoldenRun) -> dict[str, list[int]]:
    """Case indices per failure kind."""
    return {name: [i for i, r in enumerate(result.rows) if test(r)] for name, test in GALLERY}


def _wrong_answer_columns(result: GoldenRun, i: int) -> dict:
    """The expected answer beside the answer, and why the correctness check called it wrong."""
    c = result.rows[i].correctness
    return {"expected answer": result.cases[i].expected_answer or "–", "answer": result.traces[i].answer,
            "why wrong": c.why if c else "–", "token recall": c.token_recall if c else None,
            "semantic": c.semantic if c else None}


def render_expected_beside_answer(result: GoldenRun, i: int) -> None:
    expected, answer = st.columns(2)
    expected.markdown("**Expected answer**")
    expected.markdown(md(result.cases[i].expected_answer or "–"))
    answer.markdown("**Answer** (every claim supported by its citation)")
    answer.markdown(md(result.traces[i].answer))
    c = result.rows[i].correctness
    if c is not None:
        st.caption(md(f"verdict {c.verdict}: {c.why}"))


def render_gallery(result: GoldenRun, key: str) -> None:
    groups = gallery_rows(result)
    tabs = st.tabs([f"{name} ({len(idx)})" for name, idx in groups.items()])
    for tab, (name, idx) in zip(tabs, groups.items(), strict=True):
        slug = name.replace(" ", "-")
        with tab:
            if not idx:
                st.success(f"No {name} in this run.")
                continue
            st.dataframe(pd.DataFrame([{
                "id": result.rows[i].id, "question": result.rows[i].question, "answerable": result.rows[i].answerable,
                "abstained by": result.rows[i].abstained_by or "–", "gate": f"{result.rows[i].gate_scale} "
                f"{result.rows[i].gate_score:.4f} vs {result.rows[i].gate_threshold:g}",
                "unsupported": result.rows[i].unsupported_claims, "fabricated": result.rows[i].fabricated_markers,
                "tags": ", ".join(result.rows[i].tags),
                **(_wrong_answer_columns(result, i) if name == "supported but wrong" else {})} for i in idx]),
                hide_index=True, key=f"{key}.{slug}.table")
            labels = {i: f"{result.rows[i].id}: {result.rows[i].question[:90]}" for i in idx}
            chosen = st.selectbox("Open the trace of", idx, format_func=labels.get, key=f"{key}.{slug}.open")
            if name == "supported but wrong":
                render_expected_beside_answer(result, chosen)
            render_answer(result.traces[chosen], key=f"{key}.{slug}.answer")
            render_trace(result.traces[chosen], key=f"{key}.{slug}.trace")
