"""Plotly figures for one trace (the research figures over many runs live in ``workbench.figures``).

Plotly interprets a small HTML subset in text (``<b>``, ``<a href>``, ``<br>``), so every label taken from
the corpus is :func:`html.escape`-d first; Plotly shows the entities as the characters they stand for.
"""

from __future__ import annotations

import html

import plotly.graph_objects as go

from pipeline.trace import GateTrace, Trace
from workbench.app.render import AMBER, EMERALD, ROSE

DENSE_COLOUR = "#2563eb"
KEYWORD_COLOUR = "#d97706"


def _label(text: str, limit: int = 48) -> str:
    text = text if len(text) <= limit else text[: limit - 1] + "…"
    return html.escape(text)


def contributions_figure(trace: Trace, limit: int = 20) -> go.Figure:
    """Each leg's reciprocal-rank contribution to the fused score, per candidate in final order."""
    ranked = list(trace.ranked_candidates()[:limit])
    labels = [_label(f"{i}. {c.chunk_id}") for i, c in enumerate(ranked, start=1)]
    fig = go.Figure()
    fig.add_bar(y=labels, x=[c.dense_contribution for c in ranked], name="dense leg", orientation="h",
                marker_color=DENSE_COLOUR,
                customdata=[[c.dense_rank or "–"] for c in ranked],
                hovertemplate="dense rank %{customdata[0]}: %{x:.5f}<extra></extra>")
    fig.add_bar(y=labels, x=[c.keyword_contribution for c in ranked], name="keyword leg (BM25)", orientation="h",
                marker_color=KEYWORD_COLOUR,
                customdata=[[c.keyword_rank or "–"] for c in ranked],
                hovertemplate="keyword rank %{customdata[0]}: %{x:.5f}<extra></extra>")
    fig.update_layout(barmode="stack", height=max(260, 24 * len(ranked) + 90),
                      margin=dict(l=10, r=10, t=40, b=10), title="Fused score = dense + keyword contribution",
                      xaxis_title="weight / (k + rank)", yaxis=dict(autorange="reversed"),
                      legend=dict(orientation="h", y=-0.15))
    return fig


UNIT_SCALES = ("rerank", "dense", "learned", "window", "coverage", "critical", "fused_norm")  # bounded by 1


def _scale_range(scale: str, score: float, threshold: float) -> tuple[float, float]:
    """The gauge's axis: a probability, cosine or share runs to 1 (from -1 only for a negative cosine)."""
    if scale in UNIT_SCALES:
        return (0.0, 1.0) if min(score, threshold) >= 0 else (-1.0, 1.0)
    top = max(score, threshold, 1e-6) * 1.3
    return 0.0, max(top, 2 / 61)


def _gauge(scale: str, score: float, threshold: float, domain: dict) -> go.Indicator:
    lo, hi = _scale_range(scale, score, threshold)
    answer = score >= threshold
    return go.Indicator(
        mode="gauge+number+delta", value=score, number=dict(valueformat=".4f"), domain=domain,
        delta=dict(reference=threshold, valueformat=".4f", increasing=dict(color=EMERALD),
                   decreasing=dict(color=ROSE)),
        title=dict(text=f"{html.escape(scale)} score vs threshold {threshold:.4g}"),
        gauge=dict(axis=dict(range=[lo, hi]), bar=dict(color=EMERALD if answer else ROSE),
                   threshold=dict(line=dict(color="#111827", width=4), thickness=0.9, value=threshold),
                   steps=[dict(range=[lo, threshold], color="#fde2e7"), dict(range=[threshold, hi], color="#dcfce7")]))


def gate_figure(gate: GateTrace, score: float | None = None, threshold: float | None = None) -> go.Figure:
    """Each score the gate compared against its threshold line (two gauges for fused AND dense): green
    when it passes, rose when it does not."""
    if len(gate.conditions) > 1 and score is None and threshold is None:
        width = 1.0 / len(gate.conditions)
        fig = go.Figure([_gauge(c.scale, c.score, c.threshold,
                                dict(x=[i * width + 0.04, (i + 1) * width - 0.04], y=[0, 1]))
                         for i, c in enumerate(gate.conditions)])
    else:
        score = gate.score if score is None else score
        threshold = gate.threshold if threshold is None else threshold
        fig = go.Figure(_gauge(gate.scale, score, threshold, dict(x=[0, 1], y=[0, 1])))
    fig.update_layout(height=230, margin=dict(l=20, r=20, t=50, b=10))
    return fig


def timings_figure(timings: dict[str, float]) -> go.Figure:
    stages = [k for k in timings if k != "total"]
    fig = go.Figure(go.Bar(x=[timings[k] for k in stages], y=[html.escape(k) for k in stages], orientation="h",
                           marker_color=[AMBER if k == "generate" else DENSE_COLOUR for k in stages],
                           hovertemplate="%{y}: %{x:.1f} ms<extra></extra>"))
    total = timings.get("total")
    fig.update_layout(height=60 + 28 * max(1, len(stages)), margin=dict(l=10, r=10, t=30, b=10),
                      title=f"per-stage time (total {total:.1f} ms)" if total is not None else "per-stage time",
                      xaxis_title="ms", yaxis=dict(autorange="reversed"))
    return fig
