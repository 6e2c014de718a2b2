"""The Monitor page's body: the drift alarm, rates per hour or day, latency and LLM cost, and citation
click-through per day and per document. The numbers come from :func:`workbench.monitor.report`; this module only
lays them out (every text from a run, such as a question, goes through ``st.dataframe`` or ``md``, never HTML)."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from pipeline.storage.runs import RunLog
from workbench import monitor
from workbench.app.render import md

RATE_COLUMNS = {f"{m.name}_rate": m.label for m in monitor.METRICS}
# the other per-bucket columns: a header a reader understands and one number format each
OTHER_COLUMNS = {"latency_p50_ms": ("latency p50 (ms)", "%.0f"), "latency_p95_ms": ("latency p95 (ms)", "%.0f"),
                 "prompt_tokens": ("prompt tokens", "%d"), "completion_tokens": ("completion tokens", "%d"),
                 "llm_cost_usd": ("LLM cost (USD)", "%.4f"), "runs": ("runs", "%d")}


def controls() -> tuple[str, int, int, float]:
    """Bucket, baseline and recent window sizes, alpha: the same settings as ``workbench monitor``."""
    c1, c2, c3, c4 = st.columns(4)
    bucket = c1.selectbox("Rates per", monitor.BUCKETS, index=1, key="monitor.bucket")
    baseline = c2.number_input("Baseline window (runs)", min_value=1, max_value=100_000,
                               value=monitor.DEFAULT_BASELINE, step=10, key="monitor.baseline")
    recent = c3.number_input("Recent window (runs)", min_value=1, max_value=100_000, value=monitor.DEFAULT_RECENT,
                             step=5, key="monitor.recent")
    alpha = c4.number_input("False-alarm rate per check (alpha)", min_value=0.0001, max_value=0.5,
                            value=monitor.DEFAULT_ALPHA, step=0.005, format="%.4f", key="monitor.alpha")
    return bucket, int(baseline), int(recent), float(alpha)


def render(log: RunLog) -> None:
    bucket, baseline, recent, alpha = controls()
    rep = monitor.report(log.monitor_rows(), log.clicks(), bucket=bucket, baseline=baseline, recent=recent,
                         alpha=alpha)
    if not rep.runs:
        st.info("No runs yet: ask a question on the Ask page (or with `workbench ask`).")
        return
    render_check(rep.check)
    render_buckets(rep)
    render_clicks(rep)


def render_check(check: monitor.Check) -> None:
    st.subheader("Drift alarm")
    if not check.ready:
        st.info(md(f"Not checked yet: {check.reason}."))
        return
    st.caption(md(f"The last {check.recent} runs ({check.recent_span[0]} to {check.recent_span[1]}) against the "
                  f"{check.baseline} before them ({check.baseline_span[0]} to {check.baseline_span[1]}): "
                  f"{check.reason}."))
    if check.alarm:
        st.error(md("Alarm: " + "; ".join(
            f"{t.label} {_pct(t.baseline_rate)} → {_pct(t.recent_rate)} (p = {t.p_value:.3g} ≤ {check.threshold:.3g})"
            for t in check.alarmed)))
    else:
        st.success("No rate departs from its baseline by more than chance.")
    st.dataframe(pd.DataFrame([{
        "metric": t.label, "bad when": "higher" if t.direction == "up" else "lower",
        "baseline": f"{t.baseline_hits}/{t.baseline_n}", "baseline rate": t.baseline_rate,
        "recent": f"{t.recent_hits}/{t.recent_n}", "recent rate": t.recent_rate, "p-value": t.p_value,
        "alarm": t.alarm} for t in check.tests]), hide_index=True, key="monitor.tests", use_container_width=True,
        column_config={"baseline rate": st.column_config.NumberColumn(format="percent"),
                       "recent rate": st.column_config.NumberColumn(format="percent"),
                       "p-value": st.column_config.NumberColumn(format="%.3g")})
    if check.runs_behind:
        st.markdown("**The runs behind the change** (open them on the Runs page)")
        st.dataframe(pd.DataFrame([{**r, "metrics": ", ".join(r["metrics"])} for r in check.runs_behind]),
                     hide_index=True, key="monitor.behind")


def render_buckets(rep: monitor.Report) -> None:
    st.subheader(f"Rates per {rep.bucket} (UTC)")
    frame = pd.DataFrame(rep.buckets)
    if len(frame) > 1:  # a line needs two points
        st.line_chart(frame.set_index("bucket")[list(RATE_COLUMNS)].rename(columns=RATE_COLUMNS))
    labels = {**RATE_COLUMNS, **{k: label for k, (label, _) in OTHER_COLUMNS.items()}}
    st.dataframe(frame.rename(columns=labels), hide_index=True, key="monitor.buckets", use_container_width=True,
                 column_config={**{label: st.column_config.NumberColumn(format="percent")
                                   for label in RATE_COLUMNS.values()},
                                **{label: st.column_config.NumberColumn(format=fmt)
                                   for label, fmt in OTHER_COLUMNS.values()}})
    if rep.unpriced_models:
        st.caption(md("No price in litellm's cost map for " + ", ".join(rep.unpriced_models)
                      + "; their runs count as 0 USD."))


def render_clicks(rep: monitor.Report) -> None:
    st.subheader("Citation click-through")
    st.caption("A click is a person opening a source of an answer (its expander under Citations). "
               "Click-through = runs in which a source was opened / runs that offered sources.")
    if rep.clicks_per_bucket:
        st.dataframe(pd.DataFrame(rep.clicks_per_bucket), hide_index=True, key="monitor.clicks")
    else:
        st.caption("No source has been opened yet.")
    if rep.documents:
        st.markdown("**Per document**")
        st.dataframe(pd.DataFrame(rep.documents), hide_index=True, key="monitor.documents")


def _pct(rate: float | None) -> str:
    return "–" if rate is None else f"{100 * rate:.1f} %"
