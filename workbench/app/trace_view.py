"""The whole trace of one run, stage by stage, as tabs: every field each stage computed is on screen.

Each tab shows the stage's story first (what happened and why) and ends with "all fields", the stage record
as JSON, so nothing a stage computes is hidden even when it has no dedicated widget. All corpus and model
text is shown with ``st.text`` / ``st.code`` / ``st.dataframe`` / ``st.json`` or escaped (``render``).
"""

from __future__ import annotations

import dataclasses
import json

import pandas as pd
import streamlit as st

from pipeline.trace import Trace
from workbench.app import charts, render
from workbench.app.render import esc, fmt, md

STAGE_TABS = ("Rewrite", "Retrieval", "Rerank", "Gate", "Generation", "Validation", "Trust", "Run")


def _kv(pairs: list[tuple[str, object]], key: str) -> None:
    rows = [{"field": k, "value": _plain(v)} for k, v in pairs]
    st.dataframe(pd.DataFrame(rows), hide_index=True, key=key, width="stretch")


def _plain(value: object) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:.4f}"
    if isinstance(value, (tuple, list)):
        return ", ".join(_plain(v) for v in value) if value else "–"
    if isinstance(value, dict):
        return json.dumps(value, ensure_ascii=False)
    return str(value) if str(value) != "" else "–"


def _all_fields(record: object, drop: tuple[str, ...] = ()) -> None:
    data = dataclasses.asdict(record)
    for name in drop:
        data.pop(name, None)
    with st.expander("all fields (JSON)"):
        st.json(data, expanded=False)


def render_trace(trace: Trace, key: str) -> None:
    tabs = st.tabs(list(STAGE_TABS))
    sections = (_rewrite, _retrieval, _rerank, _gate, _generation, _validation, _trust, _run)
    for tab, section in zip(tabs, sections, strict=True):
        with tab:
            section(trace, f"{key}.{section.__name__.strip('_')}")


def _rewrite(trace: Trace, key: str) -> None:
    rw = trace.rewrite
    outcome = {"accepted": "accepted", "expanded": "expanded with history terms", "rejected": "rejected",
               "failed": "failed", "skipped": "skipped", "off": "off"}.get(rw.status, rw.status)
    colour = render.ROSE if rw.status in ("rejected", "failed") else render.EMERALD
    flow = (f"<div class='wb-rewrite'><b>original</b> {esc(rw.original or trace.question)}"
            f" → <b>proposed</b> {esc(rw.proposed or '–')}"
            f" → <b>query used</b> {esc(rw.query or trace.question)}"
            f" <span style='color:{colour};font-weight:600'>[{esc(outcome)}]</span></div>")
    st.html(flow)
    if rw.reason:
        st.caption(md(f"why: {rw.reason}"))
    _kv([("status", rw.status), ("backend", rw.backend), ("history turns used", rw.history_turns_used),
         ("LLM calls", rw.llm_calls), ("latency ms", rw.latency_ms)], f"{key}.kv")
    if rw.prompt:
        with st.expander("rewrite prompt"):
            st.code("\n\n".join(f"[{m.role}]\n{m.content}" for m in rw.prompt), language=None, wrap_lines=True)
    if rw.raw_reply:
        with st.expander("raw reply"):
            st.code(rw.raw_reply, language=None, wrap_lines=True)
    _all_fields(rw)


def _candidate_rows(trace: Trace) -> list[dict]:
    rerank = {r.chunk_id: r for r in trace.rerank.candidates}
    rows = []
    for final_rank, c in enumerate(trace.ranked_candidates(), start=1):
        r = rerank.get(c.chunk_id)
        rows.append({
            "rank": final_rank, "chunk": c.chunk_id, "document": c.doc_id, "title": c.title,
            "dense rank": c.dense_rank, "dense cosine": c.dense_score, "dense contribution": c.dense_contribution,
            "keyword rank": c.keyword_rank, "BM25": c.keyword_score, "keyword contribution": c.keyword_contribution,
            "fused rank": c.fused_rank, "fused score": c.fused_score,
            "rerank rank": r.rerank_rank if r else None, "rerank score": r.rerank_score if r else None,
            "rerank logit": r.logit if r else None,
            "matched terms": ", ".join(f"{m.term} ({m.contribution:.2f} = {m.query_weight:g}×{m.doc_weight:.2f}"
                                       f"×idf {m.idf:.2f})" for m in c.matched_terms),
            "superseded by": ", ".join(c.superseded_by), "superseded reason": c.superseded_reason,
            "version": c.version, "effective date": c.effective_date, "kind": c.kind,
            "heading path": " › ".join(c.heading_path), "text": c.text})
    return rows


def _retrieval(trace: Trace, key: str) -> None:
    ret = trace.retrieval
    if ret.status == "failed":
        st.error(md(f"Retrieval failed: {ret.reason}"))
    elif ret.status == "skipped":
        st.info("Retrieval did not run (the answer came from the cache or the run stopped earlier).")
    _kv([("status", ret.status), ("query", ret.query), ("query terms (keyword leg)", ret.query_terms),
         ("dense leg", f"{ret.dense_status or '–'}: {ret.dense_hits} hits of top-{ret.dense_top_k}"),
         ("keyword leg", f"{ret.keyword_status or '–'}: {ret.keyword_hits} hits of top-{ret.keyword_top_k}"),
         ("RRF k", ret.rrf_k), ("leg weights (dense, keyword)", (ret.dense_weight, ret.keyword_weight)),
         ("reason", ret.reason), ("timings ms", ret.timings_ms)], f"{key}.kv")
    rows = _candidate_rows(trace)
    if rows:
        st.markdown(f"**{len(rows)} candidates**, in final order (rerank order when the reranker ran)")
        st.dataframe(pd.DataFrame(rows), hide_index=True, key=f"{key}.table", height=360,
                     column_config={"text": st.column_config.TextColumn(width="large")})
        st.plotly_chart(charts.contributions_figure(trace), key=f"{key}.chart", width="stretch")
    st.caption(md(ret.fused_scale_note))
    _all_fields(ret, drop=("candidates",))


def _rerank(trace: Trace, key: str) -> None:
    rr = trace.rerank
    if rr.status != "ran":
        st.warning(md(f"Rerank {rr.status}" + (f": {rr.reason}" if rr.reason else "")
                      + " — the gate reads another scale (see Gate)."))
    _kv([("status", rr.status), ("model", rr.model), ("precision", rr.precision),
         ("candidates in", rr.candidates_in), ("scored", rr.scored), ("early stopped", rr.early_stopped),
         ("max tokens", rr.max_tokens), ("latency ms", rr.latency_ms), ("reason", rr.reason)], f"{key}.kv")
    if rr.candidates:
        st.dataframe(pd.DataFrame([dataclasses.asdict(r) for r in rr.candidates]), hide_index=True,
                     key=f"{key}.table")
    _all_fields(rr)


def _gate(trace: Trace, key: str) -> None:
    gate = trace.gate
    decision_colour = render.EMERALD if gate.decision == "answer" else render.ROSE
    st.html(f"<div class='wb-gate' data-decision='{esc(gate.decision)}'>decision "
            f"<b style='color:{decision_colour}'>{esc(gate.decision.upper())}</b> — {esc(gate.reason)}</div>")
    if gate.status == "ran":
        st.plotly_chart(charts.gate_figure(gate), key=f"{key}.gauge", width="stretch")
    conditions = "; ".join(f"{c.scale} {c.score:.4g} {'>=' if c.passed else '<'} {c.threshold:g}"
                           for c in gate.conditions)
    _kv([("signal (configured)", gate.signal), ("rule (used)", gate.scale), ("conditions (all must hold)", conditions),
         ("score (binding condition)", gate.score),
         ("threshold", gate.threshold), ("margin", gate.margin),
         ("chunk whose score was compared", gate.score_chunk_id),
         ("top chunk of the final ranking", gate.top_chunk_id), ("its rerank score", gate.top_rerank_score),
         ("its fused score", gate.top_fused_score), ("its dense cosine", gate.top_dense_cosine),
         ("best dense cosine", gate.best_dense_cosine), ("LLM calls saved", gate.llm_calls_saved),
         ("abstention message", gate.abstention_message)], f"{key}.kv")
    if gate.closest_documents:
        st.dataframe(pd.DataFrame([dataclasses.asdict(d) for d in gate.closest_documents]), hide_index=True,
                     key=f"{key}.closest")
    _all_fields(gate)


def _generation(trace: Trace, key: str) -> None:
    gen = trace.generation
    if gen.status == "fallback":
        st.warning(md(f"Fell back from {gen.requested_backend} to {gen.backend}: {gen.fallback_reason}"))
    _kv([("status", gen.status), ("backend used", gen.backend), ("backend configured", gen.requested_backend),
         ("model", gen.model), ("fallback reason", gen.fallback_reason), ("used source ids", gen.used_source_ids),
         ("confidence (reported)", gen.confidence), ("limitations (reported)", gen.limitations),
         ("is abstention", gen.is_abstention), ("LLM calls", gen.llm_calls), ("latency ms", gen.latency_ms),
         ("notes", gen.notes)], f"{key}.kv")
    if gen.sources:
        st.dataframe(pd.DataFrame([dataclasses.asdict(s) for s in gen.sources]), hide_index=True,
                     key=f"{key}.sources")
    if not gen.attempts and gen.status not in ("skipped",):
        st.caption("No LLM call was made: the extractive generator quotes the sources verbatim.")
    for i, attempt in enumerate(gen.attempts, start=1):
        with st.expander(f"attempt {i}: prompt"):
            st.code("\n\n".join(f"[{m.role}]\n{m.content}" for m in attempt.messages), language=None,
                    wrap_lines=True)
        with st.expander(f"attempt {i}: raw reply" + (" (error)" if attempt.error else "")):
            st.code(attempt.raw_reply or "(empty)", language=None, wrap_lines=True)
            if attempt.error or attempt.parse_error:
                st.text(f"provider error: {attempt.error or '–'}\nparse error: {attempt.parse_error or '–'}")
            st.text(f"latency {attempt.latency_ms:.1f} ms · usage {json.dumps(attempt.usage)}")
    _all_fields(gen)


def _validation(trace: Trace, key: str) -> None:
    val = trace.validation
    if val.status == "skipped":
        st.info(md(f"Validation skipped: {val.reason or 'nothing to validate'}"))
    elif val.status == "failed":
        st.error(md(f"Validation failed: {val.reason}"))
    _kv([("status", val.status), ("claim threshold", val.threshold),
         ("supported / unsupported / uncited", f"{val.supported} / {val.unsupported} / {val.uncited}"),
         ("fabricated markers", val.fabricated_markers), ("cited sources", val.cited_sources),
         ("uncited sources (dimmed)", val.uncited_sources), ("superseded sources (amber)", val.superseded_sources),
         ("encoder calls", val.encoder_calls), ("latency ms", val.latency_ms), ("reason", val.reason)], f"{key}.kv")
    if val.claims:
        st.dataframe(pd.DataFrame([{
            "claim": c.text, "verdict": c.verdict, "markers": ", ".join(f"[{m}]" for m in c.markers),
            "best similarity": c.best_similarity,
            "similarities": "; ".join(f"[{s.marker}] {fmt(s.similarity, 3)}" for s in c.similarities),
            "fabricated": ", ".join(f"[{m}]" for m in c.fabricated_markers), "span": f"{c.span[0]}–{c.span[1]}"}
            for c in val.claims]), hide_index=True, key=f"{key}.claims")
    if val.non_claims:
        st.markdown("**Not checked** (headings, lead-ins, questions)")
        st.text("\n".join(val.non_claims))
    _all_fields(val)


def _trust(trace: Trace, key: str) -> None:
    tr = trace.trust
    left, right = st.columns(2)
    left.metric("reported confidence", tr.reported_confidence or "–")
    right.metric("final confidence", tr.final_confidence or "–",
                 delta=None if tr.reported_confidence == tr.final_confidence else "changed by the trust rules",
                 delta_color="off")
    _kv([("status", tr.status), ("rules fired", tr.rules_fired), ("limitations", tr.limitations)], f"{key}.kv")
    _all_fields(tr)


def _run(trace: Trace, key: str) -> None:
    for line in trace.degradations:
        st.warning(md(f"degradation: {line}"))
    if trace.timings_ms:
        st.plotly_chart(charts.timings_figure(trace.timings_ms), key=f"{key}.timings", width="stretch")
    _kv([("run id", trace.run_id), ("created at", trace.created_at), ("question", trace.question),
         ("history turns", len(trace.history)), ("LLM calls", trace.llm_calls),
         ("LLM calls saved", trace.llm_calls_saved), ("cache hit", trace.cache_hit),
         ("abstained", trace.abstained), ("confidence", trace.confidence), ("limitations", trace.limitations),
         ("config hash", trace.config_hash), ("corpus version", trace.corpus_version),
         ("timings ms", trace.timings_ms)], f"{key}.kv")
    if trace.history:
        with st.expander("conversation history sent with the question"):
            st.json([dataclasses.asdict(m) for m in trace.history])
    if trace.config is not None:
        with st.expander("configuration of this run"):
            st.json(trace.config.to_dict(), expanded=False)
    st.download_button("Export trace as JSON", trace.to_json(indent=2), file_name=f"trace-{trace.run_id or 'run'}.json",
                       mime="application/json", key=f"{key}.export")
