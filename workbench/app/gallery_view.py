"""The failure gallery of Evaluate & tune: the golden cases that went wrong, grouped by kind, each with what
the golden set expected (answer and documents), the conversation a follow-up came after, the correctness
verdict, its full trace, and a button that opens the case on the Ask page with the run's configuration."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from pipeline.trace import Trace
from workbench.app import render, sidebar
from workbench.app.answer_view import gate_abstained, render_details
from workbench.app.ask_view import TURNS, queue
from workbench.app.explain import abstention_headline
from workbench.app.render import md
from workbench.app.thresholds import conditions_text
from workbench.app.trace_view import render_trace
from workbench.evaluate import GoldenRun
from workbench.summary import supported_but_wrong

ASK_PAGE = "workbench/app/pages/ask.py"

GALLERY = (("false answers", lambda r: not r.answerable and not r.abstained),
           ("false abstentions", lambda r: r.answerable and r.abstained),
           ("supported but wrong", lambda r: r.answerable and supported_but_wrong(r)),
           ("unsupported claims", lambda r: r.unsupported_claims > 0),
           ("fabricated markers", lambda r: r.fabricated_markers > 0))


def gallery_rows(result: GoldenRun) -> dict[str, list[int]]:
    """Case indices per failure kind."""
    return {name: [i for i, r in enumerate(result.rows) if test(r)] for name, test in GALLERY}


def expected_documents(result: GoldenRun, i: int) -> str:
    """The expected documents, each marked found (in the top 10 retrieved) or missed."""
    retrieved = set(result.rows[i].retrieved_doc_ids)
    expected = result.cases[i].expected_doc_ids
    return ", ".join(f"{d} {'✓' if d in retrieved else '✗'}" for d in expected) or "–"


def _history_text(result: GoldenRun, i: int) -> str:
    history = result.cases[i].history
    users = [m.content for m in history if m.role == "user"]
    return f"{len(users)} earlier: " + " / ".join(users) if users else ""


def _verdict(result: GoldenRun, i: int) -> str:
    c = result.rows[i].correctness
    return c.verdict if c is not None else ("abstained" if result.rows[i].abstained else "–")


def case_row(result: GoldenRun, i: int) -> dict:
    row, case, c = result.rows[i], result.cases[i], result.rows[i].correctness
    return {"id": row.id, "question": row.question, "conversation before": _history_text(result, i),
            "expected answer": case.expected_answer or "–", "answer": result.traces[i].answer,
            "expected documents": expected_documents(result, i), "verdict": _verdict(result, i),
            "why wrong": c.why if c is not None and c.verdict != "correct" else "",
            "abstained by": row.abstained_by or "–",
            "gate": conditions_text(result.traces[i].gate), "unsupported": row.unsupported_claims,
            "fabricated": row.fabricated_markers, "tags": ", ".join(row.tags)}


COLUMNS = {
    "conversation before": st.column_config.TextColumn(help="The earlier user turns of a follow-up."),
    "expected documents": st.column_config.TextColumn(
        help="What the golden set expects to be cited: ✓ retrieved in the top 10, ✗ missed."),
    "verdict": st.column_config.TextColumn(help="Answer correctness against the expected answer (correct, "
                                                "partly, wrong); abstained when there is no answer to judge."),
    "gate": st.column_config.TextColumn(width="large", help="Every comparison the gate made, score vs threshold."),
    "expected answer": st.column_config.TextColumn(width="large"),
    "answer": st.column_config.TextColumn(width="large"),
}


def render_case(result: GoldenRun, i: int, key: str) -> None:
    """One case: the conversation before it, expected vs given, the verdict, the trace, and Open in Ask."""
    case, trace = result.cases[i], result.traces[i]
    if case.history:
        st.markdown("**Conversation before it**")
        for message in case.history:
            st.caption(md(f"{message.role}: {message.content}"))
    st.markdown(f"**Question** {md(case.question)}")
    expected, given = st.columns(2)
    expected.markdown("**Expected answer**")
    expected.text(case.expected_answer or "– (unanswerable: the right outcome is to abstain)")
    expected.caption(md(f"expected documents: {expected_documents(result, i)}"))
    given.markdown("**Answer**")
    if gate_abstained(trace) or trace.abstained:
        given.html(render.abstention_html(trace, abstention_headline(trace)))
    else:
        given.html(render.answer_html(trace.answer, trace.validation))
    c = result.rows[i].correctness
    if c is not None:
        signals = c.signals()
        given.caption(md(f"verdict {c.verdict}: {c.why}" + (f" — {signals}" if signals else "")))
    if st.button("Open this case in Ask (same question, conversation and configuration)", key=f"{key}.open_in_ask"):
        open_in_ask(case.question, case.history, trace)
    render_details(trace, key=f"{key}.answer")
    render_trace(trace, key=f"{key}.trace")


def open_in_ask(question: str, history, trace: Trace) -> None:
    """Load the run's configuration into the sidebar, queue the question with its conversation, go to Ask."""
    if trace.config is not None:
        sidebar.load_config(trace.config)
    st.session_state[TURNS] = []
    queue([question], tuple(history))
    st.switch_page(ASK_PAGE)


def render_gallery(result: GoldenRun, key: str) -> None:
    groups = gallery_rows(result)
    tabs = st.tabs([f"{name} ({len(idx)})" for name, idx in groups.items()])
    for tab, (name, idx) in zip(tabs, groups.items(), strict=True):
        slug = name.replace(" ", "-")
        with tab:
            if not idx:
                st.success(f"No {name} in this run.")
                continue
            st.dataframe(pd.DataFrame([case_row(result, i) for i in idx]), hide_index=True, width="stretch",
                         key=f"{key}.{slug}.table", column_config=COLUMNS)
            labels = {i: f"{result.rows[i].id}: {result.rows[i].question[:90]}" for i in idx}
            chosen = st.selectbox("Open the case", idx, format_func=labels.get, key=f"{key}.{slug}.open")
            render_case(result, chosen, f"{key}.{slug}")
