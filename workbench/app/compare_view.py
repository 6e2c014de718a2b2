"""Rendering for the Compare page: B's presets, the parsers for its inputs, and the highlighted diff.

The presets are built from the configuration A runs with and from what is installed (:func:`presets`): a
change that would do nothing (turning off a reranker that is not installed) is not offered, "stricter" and
"looser" move the thresholds of the rule the gate actually applies, and turning a retrieval leg off scales
the fused threshold with the fused scale's new ceiling (one leg halves it), saying so in the label. When A is
tiered (two or more ``generate.tiers``), B can be "cheap only" or "expensive only" (one tier alone).

Over the golden set, A and B answer the same cases and every compared rate sits beside the paired test of the two
(:func:`render_run_comparison`, from :func:`workbench.compare.comparison_table`)."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from pipeline.config import PipelineConfig, get_value
from pipeline.trace import Message, Trace
from workbench.app import render, thresholds
from workbench.app.render import esc
from workbench.app.thresholds import fmt
from workbench.compare import PairedRate, TraceDiff, comparison_table, tier_arms

ONLY_BELOW = "only the changes below"


def applied_rule(cfg: PipelineConfig, reranker_available: bool) -> str:
    """The rule the gate applies under ``cfg``: ``auto`` reads the learned rule, ``rerank`` falls back to fused
    without a rerank score (pipeline/gate/rule.py); this assumes the dense leg returns something."""
    reranks = reranker_available and cfg.rerank.enabled
    signal = cfg.gate.signal
    if signal == "auto":
        return "learned"
    if signal == "rerank":
        return "rerank" if reranks else "fused"
    return signal


def _moved(cfg: PipelineConfig, direction: int) -> dict[str, float]:
    """Each threshold moved towards (+1) or away from (-1) abstaining, within its scale."""
    g, ceiling = cfg.gate, thresholds.fused_ceiling(cfg.retrieve)
    rerank, fused, dense = g.confidence_threshold_rerank, g.confidence_threshold_fused, g.confidence_threshold_dense
    learned = g.confidence_threshold_learned
    # a single-signal rule's threshold: 0.05 along its scale, inside the widget's range
    evidence = {}
    for name in thresholds.EVIDENCE:
        spec, t = thresholds.spec(name, cfg.retrieve), getattr(g, thresholds.FIELD[name])
        evidence[name] = round(min(t + 0.05, spec.hi) if direction > 0 else max(t - 0.05, spec.lo), 3)
    if direction > 0:  # fused: halfway to the ceiling (first on both legs); learned: halfway to 1
        return {"rerank": round(min(rerank + 0.15, 0.99), 2),
                "fused": round(fused + (max(ceiling, fused) - fused) / 2, 5),
                "dense": round(min(dense + 0.05, 0.99), 3),
                "learned": round(learned + (1.0 - learned) / 2, 3), **evidence}
    one_leg_first = 1 / (cfg.retrieve.rrf_k + 1)
    return {"rerank": round(max(rerank - 0.15, 0.01), 2), "fused": round(max(fused - one_leg_first / 4, 0.0), 5),
            "dense": round(max(dense - 0.05, -0.99), 3), "learned": round(max(learned - 0.15, 0.01), 3), **evidence}


def _threshold_preset(cfg: PipelineConfig, rule: str, direction: int) -> tuple[str, dict[str, object]]:
    moved = _moved(cfg, direction)
    signals = ("fused", "dense") if rule == "fused_and_dense" else (rule,)
    name = "stricter" if direction > 0 else "looser"
    label = f"{name} gate on the rule in use ({thresholds.rule_name_of(rule)}: " + ", ".join(
        f"{s} {fmt(s, getattr(cfg.gate, thresholds.FIELD[s]))} → {fmt(s, moved[s])}" for s in signals) + ")"
    return label, {f"gate.{thresholds.FIELD[s]}": moved[s] for s in signals}


def _one_leg(cfg: PipelineConfig, keep: str) -> tuple[str, dict[str, object]]:
    r = cfg.retrieve
    changed = {"retrieve.keyword_weight" if keep == "dense" else "retrieve.dense_weight": 0.0}
    weight = r.dense_weight if keep == "dense" else r.keyword_weight
    ceiling_before = thresholds.fused_ceiling(r)
    ceiling_after = weight / (r.rrf_k + 1)
    scaled = round(cfg.gate.confidence_threshold_fused * ceiling_after / ceiling_before, 5) if ceiling_before else 0.0
    changed["gate.confidence_threshold_fused"] = scaled
    return (f"{keep} leg only (fused threshold scaled to {fmt('fused', scaled)}: one leg halves the fused scale)",
            changed)


def presets(cfg: PipelineConfig, reranker_available: bool) -> dict[str, dict[str, object]]:
    """B's preset changes that make a difference under ``cfg`` with what is installed, label → overrides."""
    out: dict[str, dict[str, object]] = {}
    if reranker_available:
        reads = cfg.rerank.granularity == "sentence"
        if cfg.rerank.enabled:
            out["reader off (no rerank: fused order, the most similar sentences quoted)" if reads
                else "reranker off"] = {"rerank.enabled": False}
            if reads:
                out["reader scores whole passages (no sentence check before quoting)"] = {
                    "rerank.granularity": "passage"}
        else:
            out["reader on" if reads else "reranker on"] = {"rerank.enabled": True}
    rule = applied_rule(cfg, reranker_available)
    for direction in (1, -1):
        label, changes = _threshold_preset(cfg, rule, direction)
        out[label] = changes
    if cfg.gate.signal != "dense":
        out["gate on the dense signal alone"] = {"gate.signal": "dense"}
    if cfg.rewrite.backend != "off":
        out["rewrite off (changes only a question with a conversation)"] = {"rewrite.backend": "off"}
    if cfg.retrieve.dense_weight > 0 and cfg.retrieve.keyword_weight > 0:
        for keep in ("dense", "keyword"):
            label, changes = _one_leg(cfg, keep)
            out[label] = changes
    if len(cfg.generate.tiers) >= 2:  # A is tiered: B answers with one of its tiers alone, same cases
        for arm, arm_cfg in tier_arms(cfg).items():
            if arm != "tiered":
                tier = arm_cfg.generate.tiers[0]
                out[f"{arm} (tier {cfg.generate.tiers.index(tier) + 1} alone: {tier.label}) instead of tiered"] = {
                    "generate.tiers": get_value(arm_cfg, "generate.tiers")}
    out[ONLY_BELOW] = {}
    return out


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


def _change_html(label: str, a: str, b: str, changed: bool, *, raw: bool = False) -> str:
    """One line of the diff; ``raw``: ``a`` and ``b`` are already HTML built from escaped text."""
    colour, background = (render.AMBER, render.AMBER_BG) if changed else (render.SLATE, render.SLATE_BG)
    state = "changed" if changed else "same"
    a, b = (a, b) if raw else (esc(a), esc(b))
    return (f"<div class='wb-diff wb-diff-{state}' data-diff='{esc(label)}'>"
            f"{render.chip(state, colour, background)} <b>{esc(label)}</b>: A {a} → B {b}</div>")


def gate_line(gate) -> str:
    """"answer — rule fused AND dense: fused 0.03226 ≥ 0.03201 and dense 0.712 ≥ 0.595"."""
    return f"{gate.decision} — rule {thresholds.rule_name(gate)}: {thresholds.conditions_text(gate)}"


def _excerpt(text: str, limit: int = 200) -> str:
    """The start of an answer, cut at a word; a code span the cut opened is closed again."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    cut = text[: limit - 1].rsplit(" ", 1)[0]
    return cut + ("`" if cut.count("`") % 2 else "") + " …"


def render_diff(diff: TraceDiff, trace_a: Trace, trace_b: Trace, key: str) -> None:
    """What changed from A to B; the gate lines read each trace's own conditions."""
    st.subheader("What changed")
    lines = diff.summary()
    if not lines:
        st.success("Both configurations produced the same decision, ranking, answer and verdicts.")
    st.html("".join([
        _change_html("gate decision", gate_line(trace_a.gate), gate_line(trace_b.gate), diff.gate_changed),
        _change_html("rewrite", f"{diff.rewrite_status_a}: {diff.query_a}", f"{diff.rewrite_status_b}: {diff.query_b}",
                     diff.rewrite_changed),
        _change_html("answer", render.inline_html(_excerpt(diff.answer_a)), render.inline_html(_excerpt(diff.answer_b)),
                     diff.answer_changed, raw=True),
        _change_html("claim verdicts", f"{len([c for c in diff.claim_changes if c.verdict_a])} claims",
                     f"{len([c for c in diff.claim_changes if c.verdict_b])} claims, {diff.verdicts_changed} differ",
                     diff.verdicts_changed > 0),
        _change_html("generator / LLM calls / confidence",
                     f"{diff.backend_a or '–'} / {diff.llm_calls_a} / {diff.confidence_a or '–'}",
                     f"{diff.backend_b or '–'} / {diff.llm_calls_b} / {diff.confidence_b or '–'}",
                     (diff.backend_a, diff.llm_calls_a, diff.confidence_a) !=
                     (diff.backend_b, diff.llm_calls_b, diff.confidence_b)),
        _change_html("tiers tried / cost", diff.tiers_a or "one generator", diff.tiers_b or "one generator",
                     diff.tiers_a != diff.tiers_b) if diff.tiers_a or diff.tiers_b else ""]))
    if diff.config_changes:
        st.dataframe(pd.DataFrame([{"setting": c.key, "A": str(c.a), "B": str(c.b)} for c in diff.config_changes]),
                     hide_index=True, key=f"{key}.config")
    moved = [m for m in diff.rank_moves if m.movement != "same"]
    if diff.rank_moves and not moved:
        st.caption(f"Rank movements: none — the top {len(diff.rank_moves)} are in the same order in A and B.")
    elif moved:
        moves = pd.DataFrame([{"movement": MOVE_ARROW[m.movement] + (f" {abs(m.places)}" if m.places else ""),
                               "rank A": m.rank_a, "rank B": m.rank_b, "chunk": m.chunk_id, "document": m.doc_id,
                               "title": m.title} for m in diff.rank_moves])
        st.markdown(f"**Rank movements** ({len(moved)} of the top {len(diff.rank_moves)} moved; final order)")
        st.dataframe(moves.style.apply(_highlight_moves, axis=1), hide_index=True, key=f"{key}.moves")
    changed_claims = [c for c in diff.claim_changes if c.status != "same"]
    if diff.claim_changes and not changed_claims:
        st.caption(f"Claim verdicts: all {len(diff.claim_changes)} the same in A and B.")
    elif changed_claims:
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


def b_config(cfg: PipelineConfig, preset_changes: dict[str, object], extra: str) -> PipelineConfig:
    """B: A plus the preset's changes and the typed ones (ConfigError / ValueError for a bad line or value)."""
    return cfg.with_overrides({**preset_changes, **parse_overrides(extra)})


def render_run_comparison(rates: tuple[PairedRate, ...], cases: int, key: str) -> None:
    """A and B over the same golden cases: each rate with its interval, beside the paired test of A against B."""
    if not rates:
        st.info("A and B have no golden case in common to compare.")
        return
    st.markdown(f"**A and B over the same {cases} golden cases.** Each rate with its 95 % Wilson interval; A − B "
                "with the 95 % paired bootstrap interval (resampling cases) and the exact McNemar p on the cases "
                "where only one of them counted: a small p says the difference is unlikely to be chance on these "
                "cases.")
    st.dataframe(pd.DataFrame(comparison_table(rates)), hide_index=True, key=f"{key}.paired")
