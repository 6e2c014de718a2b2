"""Gate lab rendering: what-if sliders replayed with ``pipeline.gate.stage.decide`` on the stored gate inputs."""

from __future__ import annotations

import dataclasses

import pandas as pd
import streamlit as st

from pipeline.config import GateConfig, PipelineConfig, RetrieveConfig
from pipeline.gate import rule
from pipeline.gate import signals as gate_signals
from pipeline.gate import stage as gate
from pipeline.generation.extractive import reader_answers
from pipeline.trace import Trace
from workbench.app import charts, render, thresholds
from workbench.app.render import esc, md
from workbench.app.thresholds import fmt

TRACE = "gate.trace"
INPUTS = "gate.inputs"
SIGNALS = rule.SIGNALS
WHATIF = "gate.whatif"


def load_trace(trace: Trace, cfg: PipelineConfig) -> None:
    """Keep the trace and extract the gate's inputs once; the sliders start at the trace's own config."""
    st.session_state[TRACE] = trace
    st.session_state[INPUTS] = gate.gate_inputs(trace.retrieval, trace.rerank)
    source = (trace.config or cfg).gate
    for name, value in _slider_values(source, fusion_of(trace)).items():
        st.session_state[f"{WHATIF}.{name}"] = value


def fusion_of(trace: Trace) -> RetrieveConfig:
    """The fusion settings the trace's fused scores were computed with (its k and leg weights)."""
    ret = trace.retrieval
    base = trace.config.retrieve if trace.config is not None else RetrieveConfig()
    return dataclasses.replace(base, rrf_k=ret.rrf_k, dense_weight=ret.dense_weight, keyword_weight=ret.keyword_weight)


def _slider_values(g: GateConfig, fusion: RetrieveConfig) -> dict[str, object]:
    """The run's gate settings, clamped into the sliders' ranges."""
    out: dict[str, object] = {"signal": g.signal}
    for signal in thresholds.SIGNALS:
        spec = thresholds.spec(signal, fusion)
        out[signal] = min(max(float(getattr(g, thresholds.FIELD[signal])), spec.lo), spec.hi)
    return out


def whatif_config(base: GateConfig, key: str = WHATIF) -> GateConfig:
    """``base`` with the what-if rule and thresholds (a threshold whose slider is not shown: ``base``'s)."""
    return dataclasses.replace(
        base, signal=st.session_state.get(f"{key}.signal", base.signal),
        **{field: st.session_state.get(f"{key}.{signal}", getattr(base, field))
           for signal, field in thresholds.FIELD.items()})


def _decision_html(label: str, css: str, g) -> str:
    colour = render.EMERALD if g.decision == "answer" else render.ROSE
    return (f"<div class='wb-gate-{css}' data-decision='{esc(g.decision)}'><b>{esc(label)}</b>: "
            f"<b style='color:{colour}'>{esc(g.decision.upper())}</b> — {esc(g.reason)}</div>")


def render_whatif(cfg: PipelineConfig, key: str = WHATIF) -> None:
    trace: Trace | None = st.session_state.get(TRACE)
    if trace is None:
        st.info("Score a question (or take the last Ask answer) to open its gate.")
        return
    inputs = st.session_state[INPUTS]
    st.markdown(f"**{md(trace.question, limit=160)}** · corpus version {trace.corpus_version} · "
                f"run config `{trace.config_hash}`")
    base = (trace.config or cfg).gate
    fusion = fusion_of(trace)
    for name, value in _slider_values(base, fusion).items():
        # Streamlit drops a widget's value when another page is shown; start again from the run's config.
        st.session_state.setdefault(f"{key}.{name}", value)
    st.selectbox("what-if signal", SIGNALS, key=f"{key}.signal")
    sliders = thresholds.shown(st.session_state[f"{key}.signal"])
    for column, signal in zip(st.columns(len(sliders)), sliders, strict=True):
        spec = thresholds.spec(signal, fusion)
        column.slider(f"{signal} threshold", spec.lo, spec.hi, step=spec.step, format=spec.format,
                      key=f"{key}.{signal}", help=spec.help)
    original = trace.gate
    what_if = whatif_config(base, key)
    replayed = gate.decide(inputs, what_if)
    changed = replayed.decision != original.decision
    st.html(_decision_html("stored run", "stored", original) + _decision_html("what-if", "what-if", replayed)
            + (f"<div class='wb-gate-case'>{esc(replayed.plain_reason)}</div>" if replayed.plain_reason else "")
            + (f"<div class='wb-gate-flip' style='color:{render.AMBER};font-weight:700'>The decision flips: "
               f"{esc(original.decision)} → {esc(replayed.decision)}</div>" if changed else ""))
    _reader_step(trace, replayed, key)
    st.plotly_chart(charts.gate_figure(replayed), key=f"{key}.gauge", width="stretch")
    rows = []
    read = [("rerank", inputs.best_rerank), ("fused", inputs.best_fused), ("dense", inputs.best_dense)]
    if replayed.scale in rule.EVIDENCE:
        value = gate_signals.value(inputs.signals, replayed.scale)
        read.append((replayed.scale, None if value is None else (inputs.top_chunk_id, value)))
    for scale, best in read:
        threshold = getattr(what_if, thresholds.FIELD[scale])
        score = best[1] if best else None
        rows.append({"scale": scale, "top score": fmt(scale, score), "what-if threshold": fmt(scale, threshold),
                     "would answer": None if score is None else score >= threshold,
                     "read by the what-if gate": scale == replayed.scale
                     or (replayed.scale == "fused_and_dense" and scale in ("fused", "dense")),
                     "top chunk": best[0] if best else "–"})
    st.dataframe(pd.DataFrame(rows), hide_index=True, key=f"{key}.scales")
    if not inputs.rerank_ran:
        st.caption(md(f"No rerank score in this run ({inputs.no_rerank_reason}): auto reads the learned rule, "
                      "rerank falls back to fused alone."))
    st.markdown("**Evidence signals** (recorded in the trace; `pipeline/gate/signals.py`)")
    st.dataframe(pd.DataFrame(signal_rows(replayed)), hide_index=True, key=f"{key}.signals")
    st.markdown("**Learned rule, term by term** (logit = the sum; probability = sigmoid of it)")
    st.dataframe(pd.DataFrame(contribution_rows(replayed)), hide_index=True, key=f"{key}.contributions")
    if replayed.closest_documents:
        st.caption("Closest documents the what-if abstention would show")
        st.dataframe(pd.DataFrame([{**dataclasses.asdict(d), "score": fmt(d.scale, d.score)}
                                   for d in replayed.closest_documents]), hide_index=True, key=f"{key}.closest")


def reader_outcome(decision: str, best: float | None, min_score: float, reader_on: bool) -> tuple[str, str]:
    """What the user gets after the gate: ``(outcome, why)``, with the reader's check after the gate on or off.

    The extractive generator quotes only when the reader's best sentence passes ``generate.reader_min_score``
    (``pipeline.generation.extractive.reader_answers``); off, it quotes the sentences most similar to the question."""
    if decision != "answer":
        return "abstain", "the gate abstains before any sentence is chosen"
    if not reader_on:
        return "answer", "without the reader, the answer quotes the sentences most similar to the question"
    if best is None:
        return "answer", "this run has no reader scores (passage granularity or no reranker): nothing to check"
    if reader_answers(best, min_score):
        return "answer", f"the reader's best sentence scores {best:.3f} ≥ {min_score:g}: it is quoted"
    return "abstain", f"the reader's best sentence scores {best:.3f} < {min_score:g}: no sentence answers"


def _reader_step(trace: Trace, replayed, key: str) -> None:
    """The reader on or off after the what-if gate: a run's answer can still be an abstention by the reader."""
    best = trace.rerank.best_unit()
    score = best[1].score if best else None
    base = (trace.config or PipelineConfig()).generate.reader_min_score
    left, right = st.columns([1, 2])
    on = left.toggle("reader after the gate", value=best is not None, key=f"{key}.reader_on",
                     help="Off: what the extractive answer would quote without the reader's check")
    min_score = right.slider("reader threshold (generate.reader_min_score)", 0.0, 1.0, float(base), step=0.01,
                             key=f"{key}.reader_min", disabled=not on)
    outcome, why = reader_outcome(replayed.decision, score, min_score, on)
    colour = render.EMERALD if outcome == "answer" else render.ROSE
    sentence = f" · best sentence: <i>{esc(best[1].text)}</i>" if best and on else ""
    st.html(f"<div class='wb-reader-outcome' data-outcome='{esc(outcome)}'><b>after the reader</b>: "
            f"<b style='color:{colour}'>{esc(outcome.upper())}</b> — {esc(why)}{sentence}</div>")


def signal_rows(g) -> list[dict]:
    """One row per evidence signal of a GateTrace, and the terms the top passages miss."""
    s = g.signals
    rows = [{"signal": name, "value": "–" if getattr(s, name) is None else f"{getattr(s, name):.3f}"}
            for name in ("window", "coverage", "critical", "bm25", "dense", "dense_margin", "fused_norm", "rerank",
                         "reader")]
    rows.append({"signal": "critical terms missing", "value": ", ".join(s.missing_critical) or "none"})
    rows.append({"signal": "query terms missing", "value": ", ".join(s.missing_terms) or "none"})
    return rows


def contribution_rows(g) -> list[dict]:
    """The learned rule's logit term by term (coefficient × value), imputed values marked."""
    return [{"term": c.name, "value": round(c.value, 4), "coefficient": round(c.coefficient, 4),
             "contribution": round(c.contribution, 4), "imputed": c.imputed} for c in g.contributions]


def rate_columns() -> dict:
    """Rates as percentages, thresholds at their scale's precision."""
    percent = st.column_config.NumberColumn
    config = {name: percent(label, format="percent") for name, label in (
        ("answer_rate_answerable", "answered (answerable)"),
        ("false_answer_rate_unanswerable", "false answers (unanswerable)"))}
    for signal in thresholds.SIGNALS:
        config[f"t_{signal}"] = percent(f"{signal} threshold", format=f"%.{thresholds.DIGITS[signal]}f")
    return config


def render_golden_tradeoff(cfg: PipelineConfig, pipe, key: str) -> None:
    """Answer rate vs false-answer rate over the golden set, every threshold of each signal, with the
    sidebar's and the what-if sliders' operating points marked (replayed on stored traces, as above)."""
    from workbench.app import resources
    from workbench.app.eval_view import DEFAULT_GOLDEN, operating_point, progress_bar, tradeoff, tune_report
    from workbench.evaluate import eval_pipeline, run_cases
    from workbench.golden import GoldenError, load_golden

    st.subheader("Over the golden set")
    if st.button("Retrieve and score every golden case (no generation)", key=f"{key}.run"):
        try:
            golden = load_golden(DEFAULT_GOLDEN)
        except GoldenError as exc:
            st.error(md(str(exc)))
        else:
            with resources.eval_threads():  # one torch thread, as the CLI and Evaluate & tune run it
                result = run_cases(golden, eval_pipeline(pipe.store, resources.models(), cfg), generate=False,
                                   on_progress=progress_bar("scoring"))
            st.session_state[f"{key}.result"] = result
    evaluation = st.session_state.get("eval.result")
    result = st.session_state.get(f"{key}.result") or (evaluation.run if evaluation is not None else None)
    calibration = render_calibration(cfg, pipe, f"{key}.calibration", result)
    if result is None:
        st.info("Score the golden set once (or run it on Evaluate & tune); every threshold is then a replay.")
        return
    st.caption(md(f"{len(result.rows)} golden cases · config {result.config_hash} · corpus version "
                  f"{result.corpus_version}" + ("" if f"{key}.result" in st.session_state
                                                 else " · from the Evaluate & tune run")))
    points = [operating_point(result, cfg.gate, f"sidebar ({cfg.gate.signal})")]
    trace = st.session_state.get(TRACE)
    if trace is not None and f"{WHATIF}.signal" in st.session_state:
        what_if = whatif_config((trace.config or cfg).gate)
        points.append(operating_point(result, what_if, f"what-if ({what_if.signal})"))
    points += calibration
    report = tune_report(result, cfg.gate, max_far=0.05)
    st.plotly_chart(tradeoff(result, report, points), key=f"{key}.tradeoff", width="stretch")
    st.dataframe(pd.DataFrame(points), hide_index=True, key=f"{key}.points", column_config=rate_columns())


def render_calibration(cfg: PipelineConfig, pipe, key: str, result) -> list[dict]:
    """The label-free estimate (:mod:`workbench.calibrate`): probes written from the open corpus, searched once;
    next to the golden run's measured rates when there is one. Returns the estimate's points for the trade-off
    chart (empty until it has run)."""
    from workbench import calibrate
    from workbench.app import resources
    from workbench.app.eval_view import progress_bar

    with st.expander("Label-free calibration: where the operating point lands on this corpus, without labels",
                     expanded=f"{key}.result" in st.session_state):
        st.caption(md("Pseudo-questions (a sentence of a chunk without its answer) and unanswerable probes "
                      "(off-corpus questions, and pseudo-questions with a key term swapped for one the corpus lacks, "
                      "one of another document, or another word of the same passage) are written from the corpus "
                      "and searched once each; `workbench calibrate` does the same from the command line."))
        n = st.number_input("pseudo-questions (N/2 off-corpus probes, N/4 of each swapped kind)", min_value=10,
                            max_value=2000, value=100, step=10, key=f"{key}.probes")
        target = st.number_input("target false-answer rate", min_value=0.01, max_value=0.5, value=0.05, step=0.01,
                                 key=f"{key}.target")
        if st.button("Estimate from the corpus (no labels)", key=f"{key}.run"):
            bar = progress_bar("probing")
            try:
                with resources.eval_threads():
                    found = calibrate.calibrate(pipe.store, resources.models(), cfg, n=int(n), target=float(target),
                                                on_progress=lambda done, total: bar(done, total, ""))
            except ValueError as exc:
                st.error(md(str(exc)))
            else:
                st.session_state[f"{key}.result"] = (found, cfg.config_hash())
        stored = st.session_state.get(f"{key}.result")
        if stored is None:
            return []
        found, config_hash = stored
        if config_hash != cfg.config_hash() or found.corpus_version != pipe.store.corpus_version:
            st.warning("The configuration or the corpus changed since this estimate: run it again.")
        labelled = result.scores().with_gate(cfg.gate) if result is not None else None
        table = calibrate.estimate_table(found.estimate, labelled, cfg.gate)
        st.dataframe(pd.DataFrame(table), hide_index=True, key=f"{key}.table",
                     column_config={c: st.column_config.NumberColumn(format="%.1f" if "points" in c else "percent")
                                    for c in table[0] if "answered" in c or "false answers" in c})
        st.caption("  \n".join(md(line) for line in calibrate.report_lines(found)))  # one line per figure
        if labelled is None:
            st.caption("Score the golden set above to see the estimate next to the measured curve.")
        else:
            st.caption(f"Measured: the {len(result.cases)} golden cases scored above (every part of the split, not "
                       "only the held-out test part; `workbench calibrate --golden` measures one part).")
        return calibrate.chart_points(found.estimate, labelled, cfg.gate)
