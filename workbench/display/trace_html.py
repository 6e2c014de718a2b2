"""Rich display of a Trace in Jupyter: every stage as a compact HTML table (see :mod:`workbench.display.jupyter`).

Plain functions, no Streamlit and no plotting: a notebook shows ``trace`` and gets what each stage did, in
order — rewrite, retrieve, rerank, gate, generate, validate, trust — with verdicts coloured as in the app
(supported emerald, unsupported and fabricated rose, uncited slate).

Every string that came from the user, the corpus or a model (question, chunk text, titles, answers, claims,
reasons) is data, not markup: it goes through :func:`esc` (``html.escape`` with quotes) before it is placed
inside a tag we wrote, so a document containing ``<script>`` shows as text. Numbers are rounded (scores to
3 decimals, fused RRF scores to 4) and timings, run ids, timestamps and the config hash are left out, so
rendering the same run twice gives the same HTML and a notebook's stored output compares equal under nbval
until the behaviour changes (a new config key alone changes the hash, not what a stage did). Timings are shown
by ``trace_html(trace, timings=True)``; the hash is ``trace.config_hash``.
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Sequence

from pipeline.trace import ClaimCheck, Trace

EMERALD = "#047857"
EMERALD_BG = "#d1fae5"
ROSE = "#be123c"
ROSE_BG = "#ffe4e6"
AMBER = "#b45309"
AMBER_BG = "#fef3c7"
SLATE = "#64748b"
SLATE_BG = "#f1f5f9"

VERDICT_STYLE = {
    "supported": (EMERALD, EMERALD_BG),
    "unsupported": (ROSE, ROSE_BG),
    "fabricated": (ROSE, ROSE_BG),
    "uncited": (SLATE, SLATE_BG),
}

TEXT_LIMIT = 160        # characters of a chunk shown in a table cell (the whole text is in the trace)
CANDIDATE_ROWS = 10     # rows of the retrieval and rerank tables

_TABLE = "border-collapse:collapse;font-size:0.85em;margin:0.2em 0 0.6em 0"
_CELL = "border:1px solid #e2e8f0;padding:0.15em 0.45em;text-align:left;vertical-align:top"


def esc(value: object) -> str:
    """HTML-escape anything (quotes included): the only way text enters the markup built here."""
    return html.escape(str(value), quote=True)


def clip(text: str, limit: int = TEXT_LIMIT) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def num(value: float | None, digits: int = 3) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


def chip(label: str, colour: str, background: str, title: str = "", css: str = "") -> str:
    """A coloured label; the app (workbench.app.render) and the Jupyter displays share it."""
    tip = f' title="{esc(title)}"' if title else ""
    return (f'<span class="wb-chip {esc(css)}"{tip} style="color:{colour};background:{background};'
            f'border-radius:0.6em;padding:0.05em 0.5em;font-size:0.85em;font-weight:600;white-space:nowrap">'
            f"{esc(label)}</span>")


def verdict_chip(verdict: str) -> str:
    colour, background = VERDICT_STYLE.get(verdict, (SLATE, SLATE_BG))
    return chip(verdict, colour, background, css=f"wb-verdict wb-{verdict}")


def table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    """A compact table; header labels are escaped here, cells must already be escaped HTML."""
    head = "".join(f'<th style="{_CELL};background:{SLATE_BG}">{esc(h)}</th>' for h in header)
    body = "".join("<tr>" + "".join(f'<td style="{_CELL}">{cell}</td>' for cell in row) + "</tr>" for row in rows)
    return f'<table style="{_TABLE}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def fields(pairs: Iterable[tuple[str, object]]) -> str:
    """A two-column key/value table of plain values (escaped); empty values are left out."""
    return table(("field", "value"), ((esc(k), esc(v)) for k, v in pairs if v not in ("", None, ())))


def section(title: str, status: str, body: str) -> str:
    colour = ROSE if status in ("failed", "rejected", "fallback") else SLATE
    return (f'<details open class="wb-stage" data-stage="{esc(title)}"><summary style="font-weight:600">'
            f'{esc(title)} <span style="color:{colour};font-weight:400">({esc(status)})</span></summary>'
            f"{body}</details>")


# -- one section per stage -----------------------------------------------------------------------------

def rewrite_section(trace: Trace) -> str:
    rw = trace.rewrite
    return section("rewrite", rw.status, fields([
        ("backend", rw.backend), ("original", rw.original), ("proposed", rw.proposed), ("query used", rw.query),
        ("reason", rw.reason), ("history turns used", rw.history_turns_used if rw.history_turns_used else ""),
        ("LLM calls", rw.llm_calls if rw.llm_calls else "")]))


def retrieval_section(trace: Trace, limit: int = CANDIDATE_ROWS) -> str:
    ret = trace.retrieval
    rows = [(str(c.fused_rank), esc(c.chunk_id), esc(c.doc_id), esc(clip(c.title, 60)), esc(c.dense_rank or "–"),
             num(c.dense_score), esc(c.keyword_rank or "–"), num(c.fused_score, 4), esc(clip(c.text)))
            for c in ret.candidates[:limit]]
    info = fields([("query", ret.query), ("dense hits", ret.dense_hits), ("keyword hits", ret.keyword_hits),
                   ("RRF k", ret.rrf_k), ("retracted documents matched", ", ".join(ret.retracted_matches)),
                   ("reason", ret.reason)])
    more = f"<div>… {len(ret.candidates) - limit} more candidates</div>" if len(ret.candidates) > limit else ""
    return section("retrieve", ret.status, info + table(
        ("fused rank", "chunk", "document", "title", "dense rank", "cosine", "keyword rank", "fused score", "text"),
        rows) + more)


def rerank_section(trace: Trace, limit: int = CANDIDATE_ROWS) -> str:
    rr = trace.rerank
    info = fields([("model", rr.model), ("reason", rr.reason), ("scored", f"{rr.scored} of {rr.candidates_in}"
                                                                 if rr.status == "ran" else "")])
    rows = []
    for r in rr.candidates[:limit]:
        c = trace.candidate(r.chunk_id)
        rows.append((str(r.rerank_rank), esc(r.chunk_id), esc(r.doc_id), num(r.rerank_score), str(r.fused_rank),
                     esc(clip(c.text)) if c else ""))
    return section("rerank", rr.status, info + (table(
        ("rerank rank", "chunk", "document", "rerank score", "fused rank", "text"), rows) if rows else ""))


def gate_section(trace: Trace) -> str:
    g = trace.gate
    colour, background = (EMERALD, EMERALD_BG) if g.decision == "answer" else (SLATE, SLATE_BG)
    digits = 4 if g.scale.startswith("fused") else 3  # RRF scores differ in the 4th decimal
    decision = (f'<div>decision {chip(g.decision, colour, background)} — {esc(g.scale)} score '
                f"{num(g.score, digits)} vs threshold {num(g.threshold, digits)}</div>") if g.status == "ran" else ""
    conditions = table(("scale", "score", "threshold", "passed"),
                       ((esc(c.scale), num(c.score, 4), num(c.threshold, 4), "yes" if c.passed else "no")
                        for c in g.conditions)) if g.conditions else ""
    closest = table(("closest document", "title", "score"),
                    ((esc(d.doc_id), esc(clip(d.title, 80)), num(d.score, 4)) for d in g.closest_documents)) \
        if g.decision == "abstain" and g.closest_documents else ""
    return section("gate", g.status, decision + fields([("reason", g.reason)]) + conditions + closest)


def generation_section(trace: Trace) -> str:
    gen = trace.generation
    sources = table(("source", "chunk", "document", "title"),
                    ((f"[{s.number}]", esc(s.chunk_id), esc(s.doc_id), esc(clip(s.title, 80)))
                     for s in gen.sources)) if gen.sources else ""
    return section("generate", gen.status, fields([
        ("backend", gen.backend), ("requested backend", gen.requested_backend if gen.requested_backend
                                   != gen.backend else ""), ("fallback reason", gen.fallback_reason),
        ("answer", gen.answer), ("confidence", gen.confidence), ("LLM calls", gen.llm_calls or ""),
        ("notes", "; ".join(gen.notes)), ("flagged sources", ", ".join(f"[{n}]" for n in gen.flagged_sources))])
        + sources)


def _marker_cell(claim: ClaimCheck) -> str:
    parts = []
    for score in claim.similarities:
        if score.similarity is None:
            parts.append(f"[{score.marker}] {verdict_chip('fabricated')}")
        else:
            parts.append(f"[{score.marker}] {num(score.similarity)}")
    parts += [f"[{n}] {verdict_chip('fabricated')}" for n in claim.fabricated_markers
              if n not in {s.marker for s in claim.similarities}]
    return "<br>".join(parts) or "–"


NLI_STYLE = {"entailment": (EMERALD, EMERALD_BG), "neutral": (AMBER, AMBER_BG), "contradiction": (ROSE, ROSE_BG)}


def nli_cell(claim: ClaimCheck) -> str:
    """The claim's NLI label as a coloured chip with its three probabilities; "–" when the check did not run."""
    if not claim.nli_label:
        return "–"
    fg, bg = NLI_STYLE.get(claim.nli_label, (SLATE, SLATE_BG))
    probs = " / ".join(f"{p:.2f}" for p in claim.nli_probs or ())
    return (f'<span style="color:{fg};background:{bg};border-radius:0.6em;padding:0 0.45em;font-weight:600">'
            f"{esc(claim.nli_label)}</span> {esc(probs)}")


def validation_section(trace: Trace) -> str:
    val = trace.validation
    rows = [(verdict_chip(c.verdict), esc(c.text), _marker_cell(c), num(c.best_similarity), nli_cell(c))
            for c in val.claims]
    fabricated = (f'<div class="wb-fabricated" style="color:{ROSE};font-weight:600">fabricated markers '
                  f"(sources never offered): {esc(', '.join(f'[{n}]' for n in val.fabricated_markers))}</div>"
                  if val.fabricated_markers else "")
    counts = fields([("reason", val.reason), ("claim threshold", val.threshold if val.status == "ran" else ""),
                     ("supported / unsupported / uncited",
                      f"{val.supported} / {val.unsupported} / {val.uncited}" if val.status == "ran" else ""),
                     ("uncited sources", ", ".join(f"[{n}]" for n in val.uncited_sources)),
                     ("misattributed", "; ".join(f"{c.text} → closer to [{c.closer_source}] "
                                                 f"({num(c.closer_similarity)})"
                                                 for c in val.claims if c.closer_source is not None))])
    note = f": {val.nli_reason}" if val.nli_reason else ""
    counts += fields([("NLI check", f"{val.nli_status} ({val.nli_model}){note}" if val.status == "ran" else "")])
    claims = table(("verdict", "claim", "cited → similarity", "best", "NLI (entails / neutral / contradicts)"),
                   rows) if rows else ""
    return section("validate", val.status, fabricated + counts + claims)


def trust_section(trace: Trace) -> str:
    tr = trace.trust
    return section("trust", tr.status, fields([
        ("confidence", f"{tr.reported_confidence or '–'} → {tr.final_confidence or '–'}" if tr.status == "ran" else ""),
        ("rules fired", "; ".join(tr.rules_fired)), ("limitations", "; ".join(tr.limitations))]))


STAGES = (rewrite_section, retrieval_section, rerank_section, gate_section, generation_section,
          validation_section, trust_section)


def trace_html(trace: Trace, *, timings: bool = False) -> str:
    """The whole run: a header (question, outcome, LLM calls) and one collapsible table per stage."""
    outcome = chip("abstained", SLATE, SLATE_BG) if trace.abstained else chip("answered", EMERALD, EMERALD_BG)
    header = fields([
        ("question", trace.question),
        ("history turns", len(trace.history) or ""),
        ("answer", trace.answer), ("confidence", trace.confidence), ("LLM calls", trace.llm_calls),
        ("LLM calls saved", trace.llm_calls_saved or ""), ("cache hit", "yes" if trace.cache_hit else ""),
        ("degradations", "; ".join(trace.degradations)), ("corpus version", trace.corpus_version)])
    timing = table(("stage", "ms"), ((esc(k), f"{v:.1f}") for k, v in trace.timings_ms.items())) if timings else ""
    body = "".join(stage(trace) for stage in STAGES)
    return (f'<div class="wb-trace"><div style="font-weight:700">Trace {outcome}</div>{header}{body}{timing}'
            "</div>")


def trace_text(trace: Trace) -> str:
    """One short line for a plain-text display (the dataclass repr runs to pages and carries the run id)."""
    outcome = "abstained" if trace.abstained else "answered"
    return (f"Trace({trace.question!r}: {outcome}, gate {trace.gate.scale} {trace.gate.score:.3f} vs "
            f"{trace.gate.threshold:.3f}, {len(trace.validation.claims)} claims, {trace.llm_calls} LLM calls)")
