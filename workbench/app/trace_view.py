"""The whole trace of one run, stage by stage, as tabs: every field each stage computed is on screen.

Each tab shows the stage's story first (what happened and why), its fields as a table and its rows; the Run
tab ends with the raw trace, every field of every stage as JSON (one per answer), so nothing a stage
computes is hidden even when it has no dedicated widget. Scores are shown at their scale's precision
(``workbench.app.thresholds``). All corpus and model text is shown with ``st.text`` / ``st.code`` /
``st.dataframe`` / ``st.json`` or escaped (``render``).
"""

from __future__ import annotations

import dataclasses
import json

import pandas as pd
import streamlit as st

from pipeline.config import PipelineConfig
from pipeline.generation.extractive import reader_answers
from pipeline.generation.tiers import cost_text, tiers_line
from pipeline.trace import Trace
from workbench.app import charts, render
from workbench.app.render import esc, fmt, md
from workbench.app.thresholds import conditions_text, rule_name
from workbench.app.thresholds import fmt as score_fmt

STAGE_TABS = ("Rewrite", "Retrieval", "Rerank", "Gate", "Generation", "Validation", "Trust", "Run")
TOP_CANDIDATES = 20


def _kv(pairs: list[tuple[str, object]], key: str) -> None:
    rows = [{"field": k[:-3], "value": ms_text(v)} if k.endswith(" ms") and isinstance(v, (int, float))
            else {"field": k, "value": _plain(v)} for k, v in pairs]
    st.dataframe(pd.DataFrame(rows), hide_index=True, key=key, width="stretch")


def ms_text(ms: float) -> str:
    """A duration as a person reads it: ``12 ms``, ``1.4 ms``, ``< 0.1 ms`` (not ``0.0260``), ``2.35 s``."""
    if ms >= 1000:
        return f"{ms / 1000:.2f} s"
    if ms >= 10:
        return f"{ms:.0f} ms"
    return f"{ms:.1f} ms" if ms >= 0.1 else "< 0.1 ms"


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


def _timings_table(timings: dict[str, float], key: str, caption: str = "") -> None:
    """Stage (or leg) times as a small table, slowest first after the total."""
    if not timings:
        return
    rows = [{"stage": k, "ms": round(v, 1)} for k, v in timings.items() if k != "total"]
    rows.sort(key=lambda r: -r["ms"])
    if "total" in timings:
        rows.append({"stage": "total", "ms": round(timings["total"], 1)})
    if caption:
        st.caption(md(caption))
    st.dataframe(pd.DataFrame(rows), hide_index=True, key=key, width=320,
                 column_config={"ms": st.column_config.NumberColumn("ms", format="%.1f")})


def render_trace(trace: Trace, key: str, rewrite_note: str = "") -> None:
    """Every stage of ``trace`` as a tab; ``rewrite_note`` says why the conversation was or was not sent
    (the Ask page decides that before the pipeline runs)."""
    tabs = st.tabs(list(STAGE_TABS))
    sections = (_rewrite, _retrieval, _rerank, _gate, _generation, _validation, _trust, _run)
    for tab, section in zip(tabs, sections, strict=True):
        with tab:
            if section is _rewrite:
                section(trace, f"{key}.rewrite", rewrite_note)
            else:
                section(trace, f"{key}.{section.__name__.strip('_')}")


def _rewrite(trace: Trace, key: str, note: str = "") -> None:
    rw = trace.rewrite
    if note:
        st.info(md(f"Conversation: {note}"))
    outcome = {"accepted": "accepted", "expanded": "expanded with history terms", "rejected": "rejected",
               "failed": "failed", "skipped": "skipped", "off": "off"}.get(rw.status, rw.status)
    colour = render.ROSE if rw.status in ("rejected", "failed") else render.EMERALD
    flow = (f"<div class='wb-rewrite'><b>original</b> {esc(rw.original or trace.question)}"
            f" → <b>proposed</b> {esc(rw.proposed or '–')}"
            f" → <b>query used</b> {esc(rw.query or trace.question)}"
            f" <span style='color:{colour};font-weight:600'>[{esc(outcome)}]</span></div>")
    st.html(flow)
    reason = rw.reason
    if note and not trace.history and rw.status == "skipped":
        reason = "no earlier turns were sent with this question"
    if reason:
        st.caption(md(f"why: {reason}"))
    _kv([("status", rw.status), ("backend", rw.backend), ("history turns used", rw.history_turns_used),
         ("LLM calls", rw.llm_calls), ("latency ms", rw.latency_ms)], f"{key}.kv")
    if rw.prompt:
        with st.expander("rewrite prompt"):
            st.code("\n\n".join(f"[{m.role}]\n{m.content}" for m in rw.prompt), language=None, wrap_lines=True)
    if rw.raw_reply:
        with st.expander("raw reply"):
            st.code(rw.raw_reply, language=None, wrap_lines=True)


CANDIDATE_HELP = {
    "rank": "Final order: rerank order when the reranker ran, else fused order. Empty: retrieved, but not kept "
            "by the reranker (listed after the final ranking, in fused order).",
    "fused score": "Reciprocal-rank fusion: dense contribution + keyword contribution. What the gate's fused "
                   "check reads (the top chunk's).",
    "dense cosine": "Cosine similarity of question and chunk embeddings; the gate's dense check reads the best.",
    "BM25": "Keyword-leg score (BM25) from the engine.",
    "rerank score": "Sigmoid of the cross-encoder logit, 0 to 1; empty when the reranker did not run.",
    "dense rank": "Rank on the dense leg (empty: not in its top-k).",
    "keyword rank": "Rank on the BM25 keyword leg (empty: not in its top-k).",
    "dense contribution": "dense weight / (k + dense rank)",
    "keyword contribution": "keyword weight / (k + keyword rank)",
    "matched terms": "Each query term's share of the BM25 score: query weight × document weight × idf.",
}


def _candidate_rows(trace: Trace) -> list[dict]:
    """One row per candidate, scores first (what a reader compares), then where it comes from, then text."""
    rerank = {r.chunk_id: r for r in trace.rerank.candidates}
    ranked = trace.ranked_candidates()
    kept = {c.chunk_id for c in ranked}
    # The final ranking first; then what retrieval found that the reranker did not keep, in fused order.
    ordered = [(i, c) for i, c in enumerate(ranked, start=1)]
    ordered += [(None, c) for c in trace.retrieval.candidates if c.chunk_id not in kept]
    rows = []
    for final_rank, c in ordered:
        r = rerank.get(c.chunk_id)
        rows.append({
            "rank": final_rank, "fused score": c.fused_score, "dense cosine": c.dense_score, "BM25": c.keyword_score,
            "rerank score": r.rerank_score if r else None,
            "dense rank": c.dense_rank, "keyword rank": c.keyword_rank, "fused rank": c.fused_rank,
            "rerank rank": r.rerank_rank if r else None,
            "document": c.doc_id, "title": c.title, "chunk": c.chunk_id,
            "dense contribution": c.dense_contribution, "keyword contribution": c.keyword_contribution,
            # convex fusion: each leg's score normalised to [0, 1]; the RRF value is what the fused gate rule reads
            "dense normalised": c.dense_norm, "keyword normalised": c.keyword_norm,
            "RRF score": c.fused_score if c.rrf_score is None else c.rrf_score,
            "rerank logit": r.logit if r else None,
            "matched terms": ", ".join(f"{m.term} ({m.contribution:.2f} = {m.query_weight:g}×{m.doc_weight:.2f}"
                                       f"×idf {m.idf:.2f})" for m in c.matched_terms),
            "superseded by": ", ".join(c.superseded_by), "superseded reason": c.superseded_reason,
            "version": c.version, "effective date": c.effective_date, "kind": c.kind,
            "heading path": " › ".join(c.heading_path), "text": c.text})
    return rows


def _candidate_columns() -> dict:
    number = st.column_config.NumberColumn
    formats = {"fused score": "%.5f", "dense cosine": "%.3f", "BM25": "%.2f", "rerank score": "%.3f",
               "dense contribution": "%.5f", "keyword contribution": "%.5f", "rerank logit": "%.2f",
               "dense normalised": "%.3f", "keyword normalised": "%.3f", "RRF score": "%.5f"}
    config = {name: number(name, format=f, help=CANDIDATE_HELP.get(name)) for name, f in formats.items()}
    for name in ("rank", "dense rank", "keyword rank"):
        config[name] = number(name, help=CANDIDATE_HELP[name], pinned=name == "rank")
    config["matched terms"] = st.column_config.TextColumn(help=CANDIDATE_HELP["matched terms"])
    config["text"] = st.column_config.TextColumn(width="large")
    return config


def _retrieval(trace: Trace, key: str) -> None:
    ret = trace.retrieval
    if ret.status == "failed":
        st.error(md(f"Retrieval failed: {ret.reason}"))
    elif ret.status == "skipped":
        st.info("Retrieval did not run (the run stopped earlier).")
    if trace.cache_hit:
        st.info("This answer came from the answer cache: the candidates below, and their times, are those of the "
                "run that first produced it. This run's own time is on the Run tab.")
    rows = _candidate_rows(trace)
    if rows:
        shown = rows
        if len(rows) > TOP_CANDIDATES:
            show_all = st.toggle(f"Show all {len(rows)} candidates (top {TOP_CANDIDATES} shown)", value=False,
                                 key=f"{key}.show_all")
            shown = rows if show_all else rows[:TOP_CANDIDATES]
        kept = len(trace.ranked_candidates())
        st.markdown(f"**{len(rows)} candidates**, in final order (rerank order when the reranker ran"
                    + (f"; the {len(rows) - kept} it did not keep follow" if kept < len(rows) else "")
                    + "); hover a column name for what it means")
        table = pd.DataFrame(shown)
        for column in ("rank", "dense rank", "keyword rank", "fused rank", "rerank rank"):
            table[column] = table[column].astype("Int64")  # whole numbers, empty where a chunk has no rank
        st.dataframe(table, hide_index=True, key=f"{key}.table", height=min(38 + 35 * len(shown), 420),
                     column_config=_candidate_columns())
        st.plotly_chart(charts.contributions_figure(trace), key=f"{key}.chart", width="stretch")
    st.caption(md(ret.fused_scale_note))
    _kv([("status", ret.status), ("query", ret.query), ("query terms (keyword leg)", ret.query_terms),
         ("dense leg", f"{ret.dense_status or '–'}: {ret.dense_hits} hits of top-{ret.dense_top_k}"),
         ("keyword leg", f"{ret.keyword_status or '–'}: {ret.keyword_hits} hits of top-{ret.keyword_top_k}"),
         ("RRF k", ret.rrf_k), ("leg weights (dense, keyword)", (ret.dense_weight, ret.keyword_weight)),
         ("retracted documents naming what the query names", ret.retracted_matches),
         ("reason", ret.reason)], f"{key}.kv")
    _timings_table(ret.timings_ms, f"{key}.timings",
                   "Retrieval's own times" + (" (of the original run)" if trace.cache_hit else ""))


READER_VERDICTS = ("answers", "close", "does not answer")
READER_COLOURS = {"answers": render.EMERALD, "close": render.AMBER, "does not answer": render.ROSE}


def reader_min_score(trace: Trace) -> float:
    """The extractive generator's reader threshold the run used (the shipped default for an old trace)."""
    return (trace.config or PipelineConfig()).generate.reader_min_score


def reader_verdict(score: float, min_score: float) -> str:
    """``answers`` at or above the generator's threshold, ``close`` within half of it, else ``does not answer``."""
    if reader_answers(score, min_score):
        return "answers"
    return "close" if score >= min_score / 2 else "does not answer"


def reader_rows(trace: Trace) -> list[dict]:
    """Every sentence the reader scored (rerank granularity=sentence), by candidate in rerank order, with its
    verdict against the run's ``generate.reader_min_score`` and whether the answer quotes it."""
    min_score = reader_min_score(trace)
    answer = trace.answer if not trace.generation.is_abstention else ""
    return [{"rerank rank": c.rerank_rank, "chunk": c.chunk_id, "document": c.doc_id, "sentence": u.text,
             "reader score": u.score, "verdict": reader_verdict(u.score, min_score),
             "quoted": bool(answer) and u.text in answer}
            for c in trace.rerank.candidates for u in c.units]


def _reader_table(rows: list[dict], key: str) -> None:
    """The reader's rows with each score cell coloured by its verdict."""
    table = pd.DataFrame(rows)
    styled = table.style.apply(
        lambda col: [f"background-color: {READER_COLOURS[v]}33" for v in table["verdict"]], subset=["reader score"])
    st.dataframe(styled, hide_index=True, key=key, width="stretch",
                 column_config={"reader score": st.column_config.NumberColumn(
                     format="%.3f", help="The reader's probability that this sentence answers the question"),
                     "sentence": st.column_config.TextColumn(width="large")})


def _rerank(trace: Trace, key: str) -> None:
    rr = trace.rerank
    if rr.status != "ran":
        st.warning(md(f"Rerank {rr.status}" + (f": {rr.reason}" if rr.reason else "")
                      + " — the gate reads another scale (see Gate)."))
    _kv([("status", rr.status), ("model", rr.model), ("precision", rr.precision), ("granularity", rr.granularity),
         ("candidates in", rr.candidates_in), ("scored", rr.scored), ("pairs read", rr.pairs_scored),
         ("early stopped", rr.early_stopped), ("max tokens", rr.max_tokens), ("latency ms", rr.latency_ms),
         ("reason", rr.reason)], f"{key}.kv")
    if rr.candidates:
        st.dataframe(pd.DataFrame([{
            "rerank rank": r.rerank_rank, "fused rank": r.fused_rank, "chunk": r.chunk_id, "document": r.doc_id,
            "score": r.rerank_score, "logit": r.logit, "sentences scored": len(r.units),
            "best sentence": max(r.units, key=lambda u: u.score).text if r.units else ""}
            for r in rr.candidates]), hide_index=True, key=f"{key}.table",
            column_config={"score": st.column_config.NumberColumn(
                format="%.3f", help="Sigmoid of the logit; in sentence granularity the best sentence's reader score"),
                "logit": st.column_config.NumberColumn(format="%.2f")})
    rows = reader_rows(trace)
    if rows:
        st.markdown(f"**The reader, sentence by sentence**: green answers (≥ {reader_min_score(trace):g}, "
                    "`generate.reader_min_score`), amber is close, red does not answer; `quoted`: in the answer")
        _reader_table(rows, f"{key}.reader")


def _gate(trace: Trace, key: str) -> None:
    gate = trace.gate
    decision_colour = render.EMERALD if gate.decision == "answer" else render.ROSE
    st.html(f"<div class='wb-gate' data-decision='{esc(gate.decision)}'>decision "
            f"<b style='color:{decision_colour}'>{esc(gate.decision.upper())}</b> — {esc(gate.reason)}</div>")
    if gate.status == "ran":
        st.plotly_chart(charts.gate_figure(gate), key=f"{key}.gauge", width="stretch")
    binding = next((c.scale for c in gate.conditions if c.score == gate.score and c.threshold == gate.threshold),
                   gate.scale)
    _kv([("signal (configured)", gate.signal), ("rule (used)", rule_name(gate)),
         ("conditions (all must hold)", conditions_text(gate)),
         ("score (binding condition)", score_fmt(binding, gate.score)),
         ("threshold", score_fmt(binding, gate.threshold)), ("margin", score_fmt(binding, gate.margin)),
         ("chunk whose score was compared", gate.score_chunk_id),
         ("top chunk of the final ranking", gate.top_chunk_id),
         ("its rerank score", score_fmt("rerank", gate.top_rerank_score)),
         ("its fused score", score_fmt("fused", gate.top_fused_score)),
         ("its dense cosine", score_fmt("dense", gate.top_dense_cosine)),
         ("best dense cosine", score_fmt("dense", gate.best_dense_cosine)), ("LLM calls saved", gate.llm_calls_saved),
         ("reader's best sentence", gate.closest_sentence), ("its reader score", gate.closest_sentence_score),
         ("abstention message", gate.abstention_message)], f"{key}.kv")
    if gate.closest_documents:
        st.markdown("**Closest documents** (shown with an abstention)")
        st.dataframe(pd.DataFrame([{**dataclasses.asdict(d), "score": score_fmt(d.scale, d.score)}
                                   for d in gate.closest_documents]), hide_index=True, key=f"{key}.closest")


def _generation(trace: Trace, key: str) -> None:
    gen = trace.generation
    if gen.status == "fallback":
        st.warning(md(f"Fell back from {gen.requested_backend} to {gen.backend}: {gen.fallback_reason}"))
    _kv([("status", gen.status), ("backend used", gen.backend), ("backend configured", gen.requested_backend),
         ("model", gen.model), ("fallback reason", gen.fallback_reason), ("used source ids", gen.used_source_ids),
         ("confidence (reported)", gen.confidence), ("limitations (reported)", gen.limitations),
         ("is abstention", gen.is_abstention), ("LLM calls", gen.llm_calls), ("latency ms", gen.latency_ms),
         ("notes", gen.notes), ("reader scores of the quoted sentences", gen.reader_scores),
         ("reader's closest sentence (it abstained)", gen.reader_closest),
         ("its reader score", gen.reader_closest_score)], f"{key}.kv")
    quoted = [r for r in reader_rows(trace) if r["quoted"]]
    if quoted:
        st.markdown("**Quoted sentences as the reader scored them**")
        _reader_table(quoted, f"{key}.quoted")
    elif gen.reader_closest_score is not None:
        colour = READER_COLOURS[reader_verdict(gen.reader_closest_score, reader_min_score(trace))]
        st.html(f"<div class='wb-reader-closest'>The reader abstained: its closest sentence scores "
                f"<b style='color:{colour}'>{gen.reader_closest_score:.3f}</b> &lt; "
                f"{reader_min_score(trace):g}: <i>{esc(gen.reader_closest)}</i></div>")
    if gen.tiers:  # generate.tiers: every tier tried, what it cost, what the validator said, which was kept
        st.markdown(f"**Tiers** (kept: tier {gen.kept_tier}) · " + md(tiers_line(gen)))
        st.dataframe(pd.DataFrame([{
            "tier": a.tier, "backend": a.backend, "model": a.model, "status": a.status, "kept": a.kept,
            "escalated because": ", ".join(a.escalate_reasons), "prompt tokens": a.prompt_tokens,
            "completion tokens": a.completion_tokens, "cost": cost_text(a.cost_usd), "LLM calls": a.llm_calls,
            "latency ms": a.latency_ms, "supported / unsupported / uncited": f"{a.supported} / {a.unsupported} / "
            f"{a.uncited}", "misattributed": a.misattributed,
            "fabricated markers": ", ".join(f"[{m}]" for m in a.fabricated_markers),
            "validation": a.validation_status, "fallback reason": a.fallback_reason, "answer": a.answer}
            for a in gen.tiers]), hide_index=True, key=f"{key}.tiers")
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


def _validation(trace: Trace, key: str) -> None:
    val = trace.validation
    if val.status == "skipped":
        st.info(md(f"Validation skipped: {val.reason or 'nothing to validate'}"))
    elif val.status == "failed":
        st.error(md(f"Validation failed: {val.reason}"))
    _kv([("status", val.status), ("claim threshold", val.threshold),
         ("supported / unsupported / uncited", f"{val.supported} / {val.unsupported} / {val.uncited}"),
         ("misattributed claims", val.misattributed), ("not compared for misattribution", val.not_compared),
         ("fabricated markers", val.fabricated_markers), ("cited sources", val.cited_sources),
         ("uncited sources (dimmed)", val.uncited_sources), ("superseded sources (amber)", val.superseded_sources),
         ("encoder calls", val.encoder_calls), ("latency ms", val.latency_ms), ("reason", val.reason),
         ("NLI check", f"{val.nli_status} ({val.nli_model})" if val.nli_model else val.nli_status),
         ("NLI pairs read / ms", f"{val.nli_pairs} / {val.nli_ms:.1f}"), ("NLI note", val.nli_reason)], f"{key}.kv")
    if val.nli_status in ("unavailable", "failed"):
        st.warning(md(f"degradation: the NLI check {val.nli_status}: {val.nli_reason}"))
    if val.claims:
        _claims_table(nli_rows(val), f"{key}.claims")
    if val.non_claims:
        st.markdown("**Not checked** (headings, lead-ins, questions)")
        st.text("\n".join(val.non_claims))


NLI_COLOURS = {"entailment": render.EMERALD, "neutral": render.AMBER, "contradiction": render.ROSE, "": "#94a3b8"}


def nli_rows(val) -> list[dict]:
    """One row per claim: the verdict, the embedding check's verdict before the model, the NLI label and its
    (entailment, neutral, contradiction) probabilities, the passage it read, then the cosine details."""
    rows = []
    for c in val.claims:
        probs = c.nli_probs or (None, None, None)
        rows.append({
            "claim": c.text, "verdict": c.verdict, "before NLI": c.embedding_verdict or c.verdict,
            "NLI": c.nli_label, "P(entails)": probs[0], "P(neutral)": probs[1], "P(contradicts)": probs[2],
            "NLI read": (f"[{c.nli_marker}] {c.nli_passage}" if c.nli_marker is not None else ""),
            "markers": ", ".join(f"[{m}]" for m in c.markers), "best similarity": c.best_similarity,
            "similarities": "; ".join(f"[{s.marker}] {fmt(s.similarity, 3)}" for s in c.similarities),
            "fabricated": ", ".join(f"[{m}]" for m in c.fabricated_markers),
            "closer source": (f"[{c.closer_source}] {fmt(c.closer_similarity, 3)}: {c.closer_passage}"
                              if c.closer_source is not None else ""),
            "span": f"{c.span[0]}–{c.span[1]}"})
    return rows


def _claims_table(rows: list[dict], key: str) -> None:
    """The claims with the NLI label cell coloured by label and the verdict cell by verdict."""
    table = pd.DataFrame(rows)
    verdict_colour = {"supported": render.EMERALD, "unsupported": render.ROSE, "uncited": "#94a3b8"}
    styled = (table.style
              .apply(lambda col: [f"background-color: {NLI_COLOURS.get(v, '#94a3b8')}33" for v in table["NLI"]],
                     subset=["NLI", "P(entails)", "P(neutral)", "P(contradicts)"])
              .apply(lambda col: [f"background-color: {verdict_colour.get(v, '#94a3b8')}33"
                                  for v in table["verdict"]], subset=["verdict"]))
    st.dataframe(styled, hide_index=True, key=key, width="stretch", column_config={
        **{name: st.column_config.NumberColumn(format="%.2f") for name in ("P(entails)", "P(neutral)",
                                                                           "P(contradicts)")},
        # the claim and the passage it was read against get room: a cut claim cannot be checked by eye
        "claim": st.column_config.TextColumn(width="large"), "NLI read": st.column_config.TextColumn(width="large")})


def _trust(trace: Trace, key: str) -> None:
    tr = trace.trust
    left, right = st.columns(2)
    left.metric("reported confidence", tr.reported_confidence or "–")
    right.metric("final confidence", tr.final_confidence or "–",
                 delta=None if tr.reported_confidence == tr.final_confidence else "changed by the trust rules",
                 delta_color="off")
    _kv([("status", tr.status), ("rules fired", tr.rules_fired), ("limitations", tr.limitations)], f"{key}.kv")


def _run(trace: Trace, key: str) -> None:
    for line in trace.degradations:
        st.warning(md(f"degradation: {line}"))
    if trace.cache_hit:
        total = trace.timings_ms.get("total")
        st.info(md("Served from the answer cache" + (f" in {total:.1f} ms" if total is not None else "")
                   + ": the times below are this run's; the stage records in the other tabs (and their "
                   "latencies) are those of the run that first produced the answer."))
    if trace.timings_ms:
        chart, table = st.columns([2, 1])
        with chart:
            st.plotly_chart(charts.timings_figure(trace.timings_ms), key=f"{key}.timings", width="stretch")
        with table:
            _timings_table(trace.timings_ms, f"{key}.timings_table")
    _kv([("run id", trace.run_id), ("created at", trace.created_at), ("question", trace.question),
         ("history turns", len(trace.history)), ("LLM calls", trace.llm_calls),
         ("LLM calls saved", trace.llm_calls_saved), ("cache hit", trace.cache_hit),
         ("abstained", trace.abstained), ("confidence", trace.confidence), ("limitations", trace.limitations),
         ("config hash", trace.config_hash), ("corpus version", trace.corpus_version)], f"{key}.kv")
    if trace.history:
        with st.expander("conversation history sent with the question"):
            st.json([dataclasses.asdict(m) for m in trace.history])
    if trace.config is not None:
        with st.expander("configuration of this run"):
            st.json(trace.config.to_dict(), expanded=False)
    with st.expander("Raw trace (JSON): every field of every stage"):
        st.json(trace.to_dict(), expanded=1)
    st.download_button("Export trace as JSON", trace.to_json(indent=2), file_name=f"trace-{trace.run_id or 'run'}.json",
                       mime="application/json", key=f"{key}.export")
