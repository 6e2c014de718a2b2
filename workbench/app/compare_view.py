"""Rendering for the Compare page: B's presets, the parsers for its inputs, and the highlighted diff."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from pipeline.trace import Message
from workbench.app import render
from workbench.app.render import esc
from workbench.compare import TraceDiff

PRESETS: dict[str, dict[str, object]] = {
    "reranker off": {"rerank.enabled": False},
    "rewrite off": {"rewrite.backend": "off"},
    "gate on the dense signal": {"gate.signal": "dense"},
    "stricter gate (rerank 0.60, fused 0.030, dense 0.55)": {
        "gate.confidence_threshold_rerank": 0.60, "gate.confidence_threshold_fused": 0.030,
        "gate.confidence_threshold_dense": 0.55},
    "dense leg only": {"retrieve.keyword_weight": 0.0},
    "keyword leg only": {"retrieve.dense_weight": 0.0},
    "only the changes below": {},
}

MOVE_ARROW = {"up": "▲", "down": "▼", "new": "new in B", "dropped": "dropped in B", "same": "="}


def parse_overrides(text: str) -> dict[str, str]:
    """``stage.key=value`` lines (blank lines and ``#`` comments ignored); values are parsed by the config."""
    out = {}
    for number, line in enumerate(text.splitlines(), start=1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if "=" not in line:
            raise ValueError(f"line {number} of B's changes: expected stage.key=value, got {line!r}")
        key, _, value = line.partition("=")
        out[key.strip()] = value.strip()
    return out


def parse_history(text: str) -> list[Message]:
    turns = []
    for number, line in enumerate(text.splitlines(), start=1):
        line = line.strip()
        if not line:
            continue
        role, sep, content = line.partition(":")
        if not sep or role.strip().lower() not in ("user", "assistant") or not content.strip():
            raise ValueError(f"conversation line {number}: start it with 'user:' or 'assistant:', got {line!r}")
        turns.append(Message(role.strip().lower(), content.strip()))
    return turns


def _change_html(label: str, a: str, b: str, changed: bool) -> str:
    colour, background = (render.AMBER, render.AMBER_BG) if changed else (render.SLATE, render.SLATE_BG)
    state = "changed" if changed else "same"
    return (f"<div class='wb-diff wb-diff-{state}' data-diff='{esc(label)}'>"
            f"{render.chip(state, colour, background)} <b>{esc(label)}</b>: A {esc(a)} → B {esc(b)}</div>")


def render_diff(diff: TraceDiff, key: str) -> None:
    st.subheader("What changed")
    lines = diff.summary()
    if not lines:
        st.success("Both configurations produced the same decision, ranking, answer and verdicts.")
    st.html("".join([
        _change_html("gate decision", f"{diff.gate_a.decision} ({diff.gate_a.scale} {diff.gate_a.score:.4f} vs "
                     f"{diff.gate_a.threshold:g})", f"{diff.gate_b.decision} ({diff.gate_b.scale} "
                     f"{diff.gate_b.score:.4f} vs {diff.gate_b.threshold:g})", diff.gate_changed),
        _change_html("rewrite", f"{diff.rewrite_status_a}: {diff.query_a}", f"{diff.rewrite_status_b}: {diff.query_b}",
                     diff.rewrite_changed),
        _change_html("answer", diff.answer_a[:160], diff.answer_b[:160], diff.answer_changed),
        _change_html("claim verdicts", f"{len([c for c in diff.claim_changes if c.verdict_a])} claims",
                     f"{len([c for c in diff.claim_changes if c.verdict_b])} claims, {diff.verdicts_changed} differ",
                     diff.verdicts_changed > 0),
        _change_html("generator / LLM calls / confidence",
                     f"{diff.backend_a or '–'} / {diff.llm_calls_a} / {diff.confidence_a or '–'}",
                     f"{diff.backend_b or '–'} / {diff.llm_calls_b} / {diff.confidence_b or '–'}",
                     (diff.backend_a, diff.llm_calls_a, diff.confidence_a) !=
                     (diff.backend_b, diff.llm_calls_b, diff.confidence_b))]))
    if diff.config_changes:
        st.dataframe(pd.DataFrame([{"setting": c.key, "A": str(c.a), "B": str(c.b)} for c in diff.config_changes]),
                     hide_index=True, key=f"{key}.config")
    moves = pd.DataFrame([{"movement": MOVE_ARROW[m.movement] + (f" {abs(m.places)}" if m.places else ""),
                           "rank A": m.rank_a, "rank B": m.rank_b, "chunk": m.chunk_id, "document": m.doc_id,
                           "title": m.title} for m in diff.rank_moves])
    if not moves.empty:
        st.markdown("**Rank movements** (final order; top 10 of either run)")
        st.dataframe(moves.style.apply(_highlight_moves, axis=1), hide_index=True, key=f"{key}.moves")
    changed_claims = [c for c in diff.claim_changes if c.status != "same"]
    if diff.claim_changes:
        st.markdown(f"**Claim verdicts** ({len(changed_claims)} differ)")
        st.dataframe(pd.DataFrame([{"status": c.status, "claim": c.text, "verdict A": c.verdict_a or "–",
                                    "verdict B": c.verdict_b or "–", "similarity A": c.similarity_a,
                                    "similarity B": c.similarity_b} for c in diff.claim_changes]),
                     hide_index=True, key=f"{key}.claims")


def _highlight_moves(row: pd.Series) -> list[str]:
    text = str(row["movement"])
    if text.startswith("▲") or text.startswith("new"):
        style = f"background-color: {render.EMERALD_BG}"
    elif text.startswith("▼") or text.startswith("dropped"):
        style = f"background-color: {render.ROSE_BG}"
    else:
        style = ""
    return [style] * len(row)
