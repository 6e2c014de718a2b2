"""Plotly figures for the evaluation and the threshold sweep: pure functions, plain data in, ``go.Figure`` out.

No I/O and no Streamlit here: ``workbench tune`` writes them as HTML, the app's pages render the same
functions with ``st.plotly_chart``. Inputs are the plain lists/dicts of :func:`workbench.sweep.sweep`'s
report (or numpy arrays), so a stored ``report.json`` can be re-plotted without the traces.

- :func:`tradeoff_figure`: answer rate on answerable (y) against false-answer rate on unanswerable (x), one
  curve per signal (every threshold), with marked operating points and the false-answer bound.
- :func:`score_distributions_figure`: one panel per signal, answerable vs unanswerable histograms of the
  top score, with the current and recommended thresholds as vertical lines.
- :func:`heatmap_figure`: answer rate over a 2-D threshold grid; cells whose false-answer rate exceeds the
  bound are crossed out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

ANSWERABLE_COLOUR = "#1f77b4"
UNANSWERABLE_COLOUR = "#d62728"
SIGNAL_COLOURS = {"rerank": "#9467bd", "fused": "#ff7f0e", "dense": "#2ca02c", "fused_and_dense": "#8c564b"}
LABELS = {"t_rerank": "rerank threshold", "t_fused": "fused (RRF) threshold", "t_dense": "dense cosine threshold"}


def tradeoff_figure(curves: Mapping[str, Mapping[str, Sequence[float]]],
                    points: Sequence[Mapping] = (), max_far: float | None = None,
                    title: str = "Answer rate vs false-answer rate") -> go.Figure:
    """``curves``: signal → {"threshold", "answer_rate_answerable", "false_answer_rate_unanswerable"};
    ``points``: {"label", "answer_rate_answerable", "false_answer_rate_unanswerable"} markers."""
    fig = go.Figure()
    for name, c in curves.items():
        fig.add_trace(go.Scatter(
            x=c["false_answer_rate_unanswerable"], y=c["answer_rate_answerable"], mode="lines+markers",
            name=name, line={"shape": "hv", "color": SIGNAL_COLOURS.get(name)}, marker={"size": 4},
            customdata=c["threshold"],
            hovertemplate=f"{name} ≥ %{{customdata:.4f}}<br>false answers %{{x:.1%}}<br>answered %{{y:.1%}}"
                          "<extra></extra>"))
    for p in points:
        fig.add_trace(go.Scatter(
            x=[p["false_answer_rate_unanswerable"]], y=[p["answer_rate_answerable"]], mode="markers+text",
            name=p["label"], text=[p["label"]], textposition="top right", marker={"size": 11, "symbol": "diamond"}))
    if max_far is not None:
        fig.add_vline(x=max_far, line_dash="dash", line_color="grey",
                      annotation_text=f"bound {max_far:.0%}", annotation_position="bottom right")
    fig.update_layout(title=title, xaxis_title="false-answer rate on unanswerable",
                      yaxis_title="answer rate on answerable",
                      xaxis={"range": [-0.02, 1.02], "tickformat": ".0%"},
                      yaxis={"range": [-0.02, 1.02], "tickformat": ".0%"}, legend={"orientation": "h", "y": -0.2})
    return fig


def score_distributions_figure(scores: Mapping[str, Sequence[float]], answerable: Sequence[bool],
                               thresholds: Mapping[str, Mapping[str, float]] | None = None,
                               aucs: Mapping[str, float | None] | None = None, bins: int = 30) -> go.Figure:
    """One histogram panel per signal; ``thresholds``: signal → {"current": t, "recommended": t}."""
    names = [n for n, v in scores.items() if np.isfinite(np.asarray(v, dtype=float)).any()]
    titles = [f"{n}" + (f" (ROC-AUC {aucs[n]:.3f})" if aucs and aucs.get(n) is not None else "") for n in names]
    rows = max(len(names), 1)
    # plotly refuses a spacing above 1 / (rows - 1): ten signals need a tighter one than four
    fig = make_subplots(rows=rows, cols=1, subplot_titles=titles or ["no scores"],
                        vertical_spacing=min(0.12, 0.6 / max(rows - 1, 1)))
    y = np.asarray(answerable, dtype=bool)
    for row, name in enumerate(names, 1):
        values = np.asarray(scores[name], dtype=float)
        finite = np.isfinite(values)
        lo, hi = float(values[finite].min()), float(values[finite].max())
        size = (hi - lo) / bins if hi > lo else 1.0
        for mask, label, colour in ((y, "answerable", ANSWERABLE_COLOUR), (~y, "unanswerable", UNANSWERABLE_COLOUR)):
            fig.add_trace(go.Histogram(x=values[mask & finite], name=label, marker_color=colour, opacity=0.6,
                                       xbins={"start": lo, "end": hi + size, "size": size}, legendgroup=label,
                                       showlegend=row == 1), row=row, col=1)
        for t, dash, text, position in _threshold_lines((thresholds or {}).get(name, {})):
            fig.add_vline(x=t, line_dash=dash, line_color="black", row=row, col=1,
                          annotation_text=text, annotation_position=position)
    fig.update_layout(barmode="overlay", title="Top score per question: answerable vs unanswerable",
                      height=320 * max(len(names), 1))
    return fig


def _threshold_lines(marks: Mapping[str, float]) -> list[tuple[float, str, str, str]]:
    """(x, dash, label, label position) for the current and recommended thresholds of one panel: each label
    sits on the side away from the other line, so two close lines never print their labels over each other;
    one line when they are equal."""
    current, recommended = marks.get("current"), marks.get("recommended")
    current = current if current is not None and np.isfinite(current) else None
    recommended = recommended if recommended is not None and np.isfinite(recommended) else None
    if current is not None and recommended is not None and f"{current:.4g}" == f"{recommended:.4g}":
        return [(current, "dash", f"current = recommended {current:.4g}", "top")]
    lines = []
    if current is not None:
        left = recommended is not None and current < recommended
        lines.append((current, "dash", f"current {current:.4g}", "top left" if left else "top right"))
    if recommended is not None:
        left = current is not None and recommended < current
        lines.append((recommended, "dot", f"recommended {recommended:.4g}", "top left" if left else "top right"))
    return lines


def heatmap_figure(grid: Mapping, max_far: float | None = None, title: str | None = None) -> go.Figure:
    """``grid``: {"x", "y", "xs", "ys", "answer_rate_answerable", "false_answer_rate_unanswerable"} as from
    :func:`workbench.sweep.grid` (rows = ys, columns = xs)."""
    ar = np.asarray(grid["answer_rate_answerable"], dtype=float)
    far = np.asarray(grid["false_answer_rate_unanswerable"], dtype=float)
    xs, ys = [f"{v:.4g}" for v in grid["xs"]], [f"{v:.4g}" for v in grid["ys"]]
    fig = go.Figure(go.Heatmap(
        z=ar, x=xs, y=ys, customdata=far, colorscale="Viridis", zmin=0, zmax=1,
        colorbar={"title": "answered", "tickformat": ".0%"},
        hovertemplate=f"{grid['x']} %{{x}}<br>{grid['y']} %{{y}}<br>answered %{{z:.1%}}<br>"
                      "false answers %{customdata:.1%}<extra></extra>"))
    if max_far is not None:
        bad = np.argwhere(far > max_far + 1e-12)
        if len(bad):
            fig.add_trace(go.Scatter(x=[xs[i] for _, i in bad], y=[ys[j] for j, _ in bad], mode="markers",
                                     marker={"symbol": "x-thin", "size": 7, "line": {"width": 1, "color": "white"}},
                                     name=f"false answers > {max_far:.0%}", hoverinfo="skip"))
    fig.update_layout(title=title or f"Answer rate over ({grid['x']}, {grid['y']}) — rule {grid['rule']}",
                      xaxis_title=LABELS.get(grid["x"], grid["x"]), yaxis_title=LABELS.get(grid["y"], grid["y"]),
                      legend={"orientation": "h", "y": -0.2})
    return fig
