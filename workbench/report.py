"""Plain-text renderings of a Trace for the terminal (``workbench search`` / ``workbench ask``)."""

from __future__ import annotations

from pipeline.generation.tiers import tiers_line
from pipeline.trace import Trace


def _fmt(value: float | None, digits: int = 4) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def render_gate(trace: Trace) -> str:
    g = trace.gate
    line = (f"gate: {g.decision.upper()} — {g.scale} score {_fmt(g.score)} vs threshold {_fmt(g.threshold)} "
            f"(margin {g.margin:+.4f}); {g.reason}")
    if g.decision == "abstain":
        line += f"\nLLM calls made: {trace.llm_calls}; saved by abstaining: {trace.llm_calls_saved}"
    return line


def render_candidates(trace: Trace, limit: int = 10) -> str:
    rows = ["rank  chunk                                   dense  keyword  fused    rerank  title"]
    for i, c in enumerate(trace.ranked_candidates()[:limit], start=1):
        rows.append(f"{i:>4}  {c.chunk_id[:38]:<38} {c.dense_rank or '-':>6} {c.keyword_rank or '-':>8}  "
                    f"{c.fused_score:.4f}  {_fmt(trace.rerank_score(c.chunk_id), 3):>6}  {c.title[:50]}"
                    + ("  [superseded in part]" if c.superseded_by else ""))
    return "\n".join(rows)


def render_search(trace: Trace) -> str:
    parts = []
    if trace.rewrite.status not in ("skipped", "off"):
        parts.append(f"rewrite ({trace.rewrite.status}): {trace.rewrite.query}")
    if trace.retrieval.status == "failed":
        parts.append(f"retrieval failed: {trace.retrieval.reason}")
    parts.append(render_candidates(trace))
    if trace.rerank.status != "ran":
        parts.append(f"rerank {trace.rerank.status}: {trace.rerank.reason}")
    parts.append(render_gate(trace))
    return "\n\n".join(parts)


def render_answer(trace: Trace) -> str:
    parts = [trace.answer]
    if trace.gate.decision == "abstain":
        if trace.gate.closest_documents:
            parts.append("closest documents:\n" + "\n".join(
                f"  - {d.title} ({d.doc_id}, {d.scale} {d.score:.4f})" for d in trace.gate.closest_documents))
        parts.append(render_gate(trace))
        return "\n\n".join(parts)
    gen, val = trace.generation, trace.validation
    meta = f"generator: {gen.backend}" + (f" (fallback from {gen.requested_backend}: {gen.fallback_reason})"
                                          if gen.status == "fallback" else "")
    meta += f"; confidence {trace.confidence or '-'}; LLM calls {trace.llm_calls}"
    if trace.cache_hit:
        meta += "; served from the answer cache"
    if gen.tiers:  # generate.tiers: every tier tried, why it went on, which was kept, and the cost
        meta += f"\n{tiers_line(gen)}"
    parts.append(meta)
    if trace.limitations:
        parts.append("limitations:\n" + "\n".join(f"  - {lim}" for lim in trace.limitations))
    if gen.sources:
        cited = set(val.cited_sources)
        lines = []
        for s in gen.sources:
            flags = []
            if s.number not in cited:
                flags.append("not cited")
            if s.number in val.superseded_sources:
                flags.append("superseded in part")
            version = f" v{s.version}" if s.version else ""
            flag_text = f" — {', '.join(flags)}" if flags else ""
            lines.append(f"  [{s.number}] {s.title}{version} ({s.chunk_id}){flag_text}")
        parts.append("sources:\n" + "\n".join(lines))
    if val.status == "ran":
        lines = []
        for claim in val.claims:
            sims = ", ".join(f"[{c.marker}] {_fmt(c.similarity, 2) if c.similarity is not None else 'fabricated'}"
                             for c in claim.similarities) or "no citation"
            lines.append(f"  {claim.verdict.upper():<11} {claim.text[:90]}  ({sims})")
        header = (f"claims: {val.supported} supported, {val.unsupported} unsupported, {val.uncited} uncited"
                  + (f"; fabricated markers: {', '.join(f'[{m}]' for m in val.fabricated_markers)}"
                     if val.fabricated_markers else ""))
        parts.append(header + "\n" + "\n".join(lines))
    parts.append(render_gate(trace))
    if trace.degradations:
        parts.append("degradations:\n" + "\n".join(f"  - {d}" for d in trace.degradations))
    return "\n\n".join(parts)
