"""The week-one citation-error report (``workbench eval GOLDEN --week-one``): how often is a citation wrong
when retrieval plus citations ship without a verifier, and how much does the verifier change that?

The design ships retrieval and citations first, without the citation validator, and measures how often
citations are wrong: that number decides how much verifier is needed. This module produces it.

Method (:func:`week_one`):

1. **Two arms, same cases.** The golden cases run twice through the evaluation pipeline
   (:func:`workbench.evaluate.eval_config`: answer cache off, nothing logged; one embedder memo shared by
   both arms): once with ``validate.enabled=false`` (**off**: the week-one setting — the answer and its
   markers are shown unchecked, the trust rules see no verdicts) and once with ``validate.enabled=true``
   (**on**). Every other setting is the caller's. The validator never rewrites an answer, so with a
   deterministic generator both arms show the same citations; what the verifier changes is which of them
   reach the user *flagged* (a rose marker, a limitation, confidence capped).
2. **Every citation, judged independently.** A citation is one ``[n]`` of one claim of an answered case:
   the claims are split from the answer again (:func:`pipeline.validation.claims.split_claims`), never read
   from the arm's validation record, and each (claim, cited source) pair is judged on its own — not the
   validator's "any cited source" rule. The judge says the source **supports** the claim when:

   - an NLI model resolves (``validate.nli_model``, :mod:`workbench.nli`): the claim is a whole sentence of the
     cited chunk word for word, or "entailment" is the model's most probable label for (premise: ANY sentence
     window of the cited chunk, hypothesis: the claim) (:func:`nli_judge`); the on arm's validator then runs
     without the model (``validate.nli=off``), so the judge is not the validator it judges;
   - otherwise (offline): the claim's cosine with the best of the cited chunk and its sentence windows
     (:func:`pipeline.validation.passages.chunk_passages`, recomputed with the evaluation's embedder)
     reaches ``validate.claim_threshold``, AND every key fact of the claim (numbers, identifiers,
     ``key = value``; :func:`pipeline.validation.citations.missing_facts`) is written in that one source.

   A marker to a source never offered supports nothing. A citation is **wrong** when its source does not
   support its claim, or when its claim carries the wrong value of a wrong answer: the answer's
   correctness against the golden answer (:mod:`workbench.correctness`) is ``wrong`` with a contradicted key
   fact ("8 -> 5") and this claim states the rival (``5``) — a source cited for a value the golden answer
   contradicts misleads the reader however well it matches the sentence. Both reasons are counted
   separately. Citations in answers judged wrong for other reasons (key facts missing: an incomplete
   answer) and in answers to unanswerable cases (the gate's false answers, measured by ``workbench eval``)
   are counted as context, not as wrong citations: the source may well say what the sentence says.
3. **Rates with intervals.** Per arm: citations judged, wrong, and wrong *and shown unflagged* (for the off
   arm every citation is unflagged), each with a Wilson 95 % score interval (:func:`wilson`). The difference
   the verifier makes is paired (:func:`difference`): the same citation in both arms, off's unflagged-wrong rate
   minus on's, with a bootstrap interval resampling cases and the exact McNemar test on the citations where the
   arms disagree.
4. **Examples**: up to ``examples`` wrong citations of the off arm (at most one per case first), each with
   the question, the claim, the cited source's snippet, why it was judged wrong, and whether the on arm
   flagged it.

Outputs (:func:`run_week_one`): the headline on the terminal (or the report as JSON with ``--json``); with
``--out DIR``: ``week_one.json`` (the report), ``week_one.md`` (the same as Markdown, every retrieved text
escaped with :func:`workbench.display.markdown.md`), ``citations.jsonl`` (every judgement of both arms) and each
arm's ``traces_validation_{off,on}.jsonl``.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from pipeline.config import ConfigError, PipelineConfig
from pipeline.engine import Pipeline
from pipeline.models.registry import Models, default_models
from pipeline.models.resolve import ModelUnavailable
from pipeline.storage.store import Store
from pipeline.trace import Candidate, Trace, ValidationTrace
from pipeline.validation.citations import COPIED_MARKER, claim_marker_verdicts, missing_facts
from pipeline.validation.claims import split_claims
from pipeline.validation.passages import chunk_passages
from workbench.correctness import Correctness, answer_facts, score_case
from workbench.evaluate import (
    EvalModels,
    GoldenRun,
    StoreOpener,
    abstained_by,
    eval_config,
    run_cases,
    tqdm_progress,
    write_traces,
)
from workbench.golden import GoldenSet, find_split, load_golden, select, subset

Z95 = 1.959963984540054          # the two-sided 95 % standard normal quantile
ARMS = ("off", "on")
DEFAULT_EXAMPLES = 10
SNIPPET_CHARS = 300
REASONS = ("fabricated", "not_similar", "missing_facts", "not_entailed", "no_source_text", "contradicts_gold")
REASON_WORDS = {
    "fabricated": "cites a source never offered",
    "not_similar": "the cited source's best passage is below the similarity threshold",
    "missing_facts": "a value of the claim is not in the cited source",
    "not_entailed": "NLI does not find the claim entailed by the cited source",
    "no_source_text": "the cited source's text is not in the trace",
    "contradicts_gold": "states a value the golden answer contradicts, in an answer judged wrong",
}


class WeekOneError(ConfigError):
    """A bad argument to the week-one report; the message says how to fix it."""


# -- intervals (pure) -----------------------------------------------------------------------------------------

def _check_counts(k: int, n: int) -> None:
    if isinstance(k, bool) or isinstance(n, bool) or not isinstance(k, int) or not isinstance(n, int):
        raise ValueError(f"counts must be integers, got {k!r} of {n!r}")
    if n < 0 or not 0 <= k <= n:
        raise ValueError(f"need 0 <= k <= n, got {k} of {n}")


def wilson(k: int, n: int, z: float = Z95) -> tuple[float, float]:
    """Wilson score interval for ``k`` successes of ``n`` at the two-sided level of ``z`` (no continuity
    correction; :func:`workbench.metrics.wilson`, SciPy's). ``n = 0`` gives (0, 1): nothing is known."""
    from scipy.stats import norm

    from workbench import metrics

    _check_counts(k, n)
    return metrics.wilson(k, n, confidence=float(2 * norm.cdf(z) - 1))


def proportion(k: int, n: int) -> dict:
    """``{"k", "n", "rate", "ci95"}``: the rate is None and the interval (0, 1) when ``n`` is 0."""
    low, high = wilson(k, n)
    return {"k": k, "n": n, "rate": round(k / n, 4) if n else None, "ci95": [round(low, 4), round(high, 4)]}


# -- citations of an answer (pure) ----------------------------------------------------------------------------

@dataclass(frozen=True)
class Citation:
    """One ``[n]`` of one claim of an answered case, as the user sees it."""
    case_id: str
    question: str
    claim: str
    marker: int
    chunk_id: str = ""              # "" when the marker points at a source never offered
    doc_id: str = ""
    title: str = ""
    heading_path: tuple[str, ...] = ()
    source_text: str = ""

    @property
    def offered(self) -> bool:
        return bool(self.chunk_id)


def citations_of(case_id: str, question: str, trace: Trace) -> list[Citation]:
    """Every (claim, marker) of ``trace``'s answer, split from the answer itself (not from its validation)."""
    if abstained_by(trace) or trace.generation.status in ("skipped", "abstained") or not trace.answer.strip():
        return []
    offered = {s.number: s.chunk_id for s in trace.generation.sources}
    by_id: dict[str, Candidate] = {c.chunk_id: c for c in trace.retrieval.candidates}
    out = []
    for sentence in split_claims(trace.answer):
        if not sentence.is_claim:
            continue
        for marker in sentence.markers:
            chunk = by_id.get(offered.get(marker, ""))
            if marker not in offered:
                out.append(Citation(case_id, question, sentence.text, marker))
            else:
                out.append(Citation(case_id, question, sentence.text, marker, chunk_id=offered[marker],
                                    doc_id=chunk.doc_id if chunk else "", title=chunk.title if chunk else "",
                                    heading_path=tuple(chunk.heading_path) if chunk else (),
                                    source_text=chunk.text if chunk else ""))
    return out


def validator_flagged(validation: ValidationTrace, claim: str, marker: int) -> bool:
    """Did the arm's own validator show this citation flagged (rose marker or limitation)? A failed
    validation flags everything (the trust rules say nothing was checked); a skipped one flags nothing."""
    if validation.status == "failed":
        return True
    if validation.status != "ran":
        return False
    if marker in validation.fabricated_markers:
        return True
    copied = f"{COPIED_MARKER}[{marker}] in \"{claim}\""
    if any(note.startswith(copied) for note in validation.non_claims):
        return True
    for check in validation.claims:
        if check.text == claim and marker in check.markers:
            return claim_marker_verdicts(check, validation.threshold).get(marker) != "supported"
    return False


# -- the judge ------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class SupportCheck:
    """The judge's verdict on one (claim, cited source) pair."""
    supports: bool
    reasons: tuple[str, ...] = ()          # keys of REASONS, empty when it supports
    similarity: float | None = None        # best cosine (embedding judge)
    passage: str = ""                      # the best-matching window of the cited chunk
    missing: tuple[str, ...] = ()          # key facts of the claim not in the cited source
    nli: str = ""                          # NLI label (NLI judge)


def _indexed(c: Citation) -> str:
    return " > ".join(c.heading_path) + "\n" + c.title + "\n" + c.source_text


def _unit(vectors) -> np.ndarray:
    vectors = np.asarray(vectors, dtype=np.float64)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.where(norms == 0.0, 1.0, norms)


def embedding_support(citations: Sequence[Citation], embedder, threshold: float, match: str = "passage",
                      batch_size: int = 8) -> list[SupportCheck]:
    """The offline judge: cosine of the claim with the best of the cited chunk (heading path + text) and its
    sentence windows, recomputed with ``embedder`` in one call, AND every key fact of the claim in that source."""
    windows: dict[str, list[str]] = {}
    for c in citations:
        if c.offered and c.source_text and c.chunk_id not in windows:
            whole = " > ".join(c.heading_path) + "\n" + c.source_text
            windows[c.chunk_id] = [whole] + (chunk_passages(c.source_text)[1:] if match == "passage" else [])
    claims = list(dict.fromkeys(c.claim for c in citations if c.chunk_id in windows))
    texts = claims + [t for ws in windows.values() for t in ws]
    unit = _unit(embedder.encode(texts, batch_size=batch_size)) if texts else np.zeros((0, 1))
    row = {claim: i for i, claim in enumerate(claims)}
    start, spans = len(claims), {}
    for cid, ws in windows.items():
        spans[cid] = (start, start + len(ws))
        start += len(ws)
    out = []
    for c in citations:
        if not c.offered:
            out.append(SupportCheck(False, ("fabricated",)))
            continue
        if c.chunk_id not in windows:
            out.append(SupportCheck(False, ("no_source_text",)))
            continue
        lo, hi = spans[c.chunk_id]
        cosines = unit[lo:hi] @ unit[row[c.claim]]
        best = int(np.argmax(cosines))
        similarity = round(float(cosines[best]), 4)
        missing = tuple(missing_facts(c.claim, [_indexed(c)]))
        reasons = (("not_similar",) if similarity < threshold else ()) + (("missing_facts",) if missing else ())
        out.append(SupportCheck(not reasons, reasons, similarity, windows[c.chunk_id][best] if best else "", missing))
    return out


def nli_judge(citations: Sequence[Citation], model, batch: int = 64) -> list[SupportCheck]:
    """The judge when an NLI model resolves. The premises are the cited chunk's sentence windows (a small model reads
    ~100 tokens, a chunk is ~300): the source supports the claim when the claim is a whole sentence of it word for word
    (:func:`pipeline.validation.entailment.quoted`) or "entailment" is the most probable label for ANY window; else
    the label is contradiction when any window contradicts it, neutral otherwise."""
    from pipeline.validation.entailment import hypothesis, quoted

    windows = {c.chunk_id: (chunk_passages(c.source_text)[1:] or [c.source_text]) for c in citations
               if c.offered and c.source_text}
    pairs, owners = [], []
    for i, c in enumerate(citations):
        for window in windows.get(c.chunk_id, []) if c.offered and c.source_text else []:
            pairs.append((window, hypothesis(c.claim)))
            owners.append(i)
    labels: list[str] = []
    for start in range(0, len(pairs), batch):
        probabilities = np.asarray(model.predict(pairs[start:start + batch]))
        labels += [str(model.labels[int(k)]).lower() for k in np.argmax(probabilities, axis=1)]
    read: dict[int, list[tuple[str, str]]] = {}
    for owner, (window, _), label in zip(owners, pairs, labels, strict=True):
        read.setdefault(owner, []).append((label, window))
    out = []
    for i, c in enumerate(citations):
        if not c.offered:
            out.append(SupportCheck(False, ("fabricated",)))
            continue
        if not c.source_text:
            out.append(SupportCheck(False, ("no_source_text",)))
            continue
        rows = read.get(i, [])
        if quoted(c.claim, Candidate(chunk_id=c.chunk_id, doc_id=c.doc_id, title=c.title, text=c.source_text)):
            out.append(SupportCheck(True, (), passage=hypothesis(c.claim), nli="entailment"))
            continue
        label, window = next(((lab, w) for lab, w in rows if lab == "entailment"),
                             next(((lab, w) for lab, w in rows if lab == "contradiction"), ("neutral", "")))
        ok = label == "entailment"
        out.append(SupportCheck(ok, () if ok else ("not_entailed",), passage=window, nli=label))
    return out


@dataclass(frozen=True)
class Judgement:
    """One citation of one arm: the judge's verdict, the reasons, and whether the arm's validator flagged it."""
    arm: str
    citation: Citation
    check: SupportCheck
    answer_verdict: str | None            # the answer's correctness verdict against the golden answer
    answer_why: str
    flagged: bool
    rivals: tuple[str, ...] = ()          # "expected -> rival" of a wrong answer whose rival this claim states
    unanswerable: bool = False            # the golden case has no answer (context, not a reason)

    @property
    def reasons(self) -> tuple[str, ...]:
        return self.check.reasons + (("contradicts_gold",) if self.rivals else ())

    @property
    def wrong(self) -> bool:
        return bool(self.reasons)

    def why(self) -> str:
        parts = []
        for reason in self.reasons:
            if reason == "fabricated":
                parts.append(f"[{self.citation.marker}] points at a source never offered")
            elif reason == "not_similar":
                parts.append(f"best cosine with the cited source {self.check.similarity:.4f} is below the threshold")
            elif reason == "missing_facts":
                parts.append(f"the cited source does not contain {', '.join(self.check.missing)}")
            elif reason == "not_entailed":
                parts.append(f"NLI says {self.check.nli}, not entailment")
            elif reason == "contradicts_gold":
                parts.append(f"the claim states a value the golden answer contradicts ({', '.join(self.rivals)})")
            else:
                parts.append(REASON_WORDS[reason])
        return "; ".join(parts)

    def to_dict(self) -> dict:
        c = self.citation
        return {"arm": self.arm, "case_id": c.case_id, "question": c.question, "claim": c.claim, "marker": c.marker,
                "chunk_id": c.chunk_id, "doc_id": c.doc_id, "title": c.title, "supports": self.check.supports,
                "similarity": self.check.similarity, "missing_facts": list(self.check.missing), "nli": self.check.nli,
                "answer_verdict": self.answer_verdict, "answer_why": self.answer_why, "rivals": list(self.rivals),
                "unanswerable": self.unanswerable, "wrong": self.wrong, "reasons": list(self.reasons),
                "why": self.why(), "flagged": self.flagged}


def judge_arm(arm: str, run: GoldenRun, verdicts: Sequence[Correctness | None], support) -> list[Judgement]:
    """Every citation of one arm judged: ``support(citations) -> [SupportCheck]`` is the judge."""
    cites, owners = [], []
    for case, trace, verdict in zip(run.cases, run.traces, verdicts, strict=True):
        for c in citations_of(case.id, case.question, trace):
            cites.append(c)
            owners.append((case, trace, verdict))
    checks = support(cites) if cites else []
    return [Judgement(arm, c, check, verdict.verdict if verdict else None, verdict.why if verdict else "",
                      validator_flagged(trace.validation, c.claim, c.marker), rivals_stated(c.claim, verdict),
                      not case.answerable)
            for c, check, (case, trace, verdict) in zip(cites, checks, owners, strict=True)]


def rivals_stated(claim: str, verdict: Correctness | None) -> tuple[str, ...]:
    """The ``"expected -> rival"`` pairs of an answer judged wrong (:mod:`workbench.correctness`) whose rival
    value this claim states: the claim that carries the wrong value, not every sentence of a wrong answer."""
    if verdict is None or verdict.verdict != "wrong":
        return ()
    stated = answer_facts(claim)
    return tuple(pair for pair in verdict.contradicted_facts if pair.split(" -> ", 1)[-1] in stated)


# -- the report (pure) ----------------------------------------------------------------------------------------

def arm_summary(judgements: Sequence[Judgement], run: GoldenRun) -> dict:
    """One arm's figures: answered cases, citations judged, wrong, wrong and unflagged, flags raised."""
    n = len(judgements)
    wrong = [j for j in judgements if j.wrong]
    flagged = [j for j in judgements if j.flagged]
    answered = sum(1 for t in run.traces if not abstained_by(t))
    return {
        "cases": len(run.cases), "answered": answered, "config_hash": run.config_hash,
        "seconds": round(run.seconds, 1),
        "generators": sorted({t.generation.backend for t in run.traces if t.generation.backend}),
        "validation": sorted({t.validation.status for t in run.traces if not abstained_by(t)}),
        "citations": n,
        "wrong": proportion(len(wrong), n),
        "not_supporting": proportion(sum(1 for j in judgements if not j.check.supports), n),
        "contradicting_gold": proportion(sum(1 for j in judgements if j.rivals), n),
        "in_wrong_answers": sum(1 for j in judgements if j.answer_verdict == "wrong"),
        "in_unanswerable_answers": sum(1 for j in judgements if j.unanswerable),
        "wrong_unflagged": proportion(sum(1 for j in wrong if not j.flagged), n),
        "flagged": len(flagged),
        "flagged_wrong": sum(1 for j in flagged if j.wrong),
        "flagged_right": sum(1 for j in flagged if not j.wrong),
        "reasons": {r: sum(1 for j in judgements if r in j.reasons) for r in REASONS},
    }


def difference(off: Sequence[Judgement], on: Sequence[Judgement], resamples: int = 2000, seed: int = 0) -> dict:
    """What the verifier changes, paired: the same citation in both arms (same case, claim and marker), wrong and
    shown unflagged in one arm and not in the other. Off's rate minus on's in points over the paired citations, a
    95 % bootstrap interval resampling whole cases (:func:`workbench.metrics.cluster_bootstrap`), and the exact
    McNemar test on the discordant citations (SciPy ``binomtest``)."""
    from workbench.metrics import paired_binary

    def bad(j: Judgement) -> bool:
        return j.wrong and not j.flagged

    on_by_key: dict[tuple, list[Judgement]] = {}
    for j in on:
        on_by_key.setdefault((j.citation.case_id, j.citation.claim, j.citation.marker), []).append(j)
    pairs = []
    for j in off:
        match = on_by_key.get((j.citation.case_id, j.citation.claim, j.citation.marker))
        if match:
            pairs.append((j.citation.case_id, bad(j), bad(match.pop(0))))
    test = paired_binary([a for _, a, _ in pairs], [b for _, _, b in pairs], resamples, seed,
                         groups=[c for c, _, _ in pairs])
    n = test.n
    low, high = test.difference_ci95 or (0.0, 0.0)
    return {"points": round(100 * test.difference, 2) if n else None,
            "ci95_points": [round(100 * low, 2), round(100 * high, 2)], "paired_citations": n,
            "unpaired_citations": len(off) + len(on) - 2 * n, "off_only": test.a_only, "on_only": test.b_only,
            "mcnemar_p": test.p_value,
            "method": "paired: the same citations in both arms; bootstrap interval resampling cases "
                      f"({resamples:,} resamples), exact McNemar test on the discordant citations"}


def _snippet(j: Judgement) -> str:
    text = j.check.passage or j.citation.source_text
    text = " ".join(text.split())
    return text if len(text) <= SNIPPET_CHARS else text[:SNIPPET_CHARS - 1] + "…"


def pick_examples(off: Sequence[Judgement], on: Sequence[Judgement], limit: int) -> list[dict]:
    """Up to ``limit`` wrong citations of the off arm, one per case first (golden order), each saying whether
    the on arm flagged the same citation."""
    on_flag = {(j.citation.case_id, j.citation.claim, j.citation.marker): j.flagged for j in on}
    wrong = [j for j in off if j.wrong]
    seen, first, rest = set(), [], []
    for j in wrong:
        (rest if j.citation.case_id in seen else first).append(j)
        seen.add(j.citation.case_id)
    out = []
    for j in (first + rest)[:max(limit, 0)]:
        c = j.citation
        out.append({"case_id": c.case_id, "question": c.question, "claim": c.claim, "marker": c.marker,
                    "doc_id": c.doc_id, "title": c.title, "source_snippet": _snippet(j), "why": j.why(),
                    "reasons": list(j.reasons), "similarity": j.check.similarity,
                    "flagged_with_validation_on": on_flag.get((c.case_id, c.claim, c.marker))})
    return out


def build_report(golden: str, part: str, runs: dict[str, GoldenRun], judged: dict[str, list[Judgement]],
                 judge: dict, examples: int) -> dict:
    arms = {arm: arm_summary(judged[arm], runs[arm]) for arm in ARMS}
    return {"golden": golden, "split": part, "cases": len(runs["off"].cases), "judge": judge, "arms": arms,
            "difference": difference(judged["off"], judged["on"]),
            "examples": pick_examples(judged["off"], judged["on"], examples)}


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{100 * value:.1f} %"


def _ci(block: dict) -> str:
    low, high = block["ci95"]
    return f"{100 * low:.1f}–{100 * high:.1f} %"


def _share(block: dict) -> str:
    return f"{block['k']} of {block['n']} = {_pct(block['rate'])} ({_ci(block)})"


def headline(report: dict) -> list[str]:
    """The terminal's lines: the week-one rate, what reaches the user with validation on, the difference."""
    off, on, diff = report["arms"]["off"], report["arms"]["on"], report["difference"]
    lines = [f"week one (validation off): {_share(off['wrong'])} citations wrong (95 % Wilson interval)",
             f"validation on: {_share(on['wrong_unflagged'])} citations wrong and shown unflagged; the validator "
             f"flagged {on['flagged_wrong']} of {on['wrong']['k']} wrong and {on['flagged_right']} of "
             f"{on['citations'] - on['wrong']['k']} right citations"]
    if diff["points"] is None:
        lines.append("difference the verifier makes: n/a (no citation to judge)")
    else:
        low, high = diff["ci95_points"]
        lines.append(f"difference the verifier makes: {diff['points']:.1f} points (95 % CI {low:.1f} to {high:.1f}, "
                     f"paired bootstrap over cases; McNemar p {diff['mcnemar_p']:.2g} on {diff['off_only']} + "
                     f"{diff['on_only']} discordant citations)")
    return lines


def arm_table(report: dict) -> str:
    """The two arms as one Markdown table (also the benchmark section's)."""
    rows = ["| validation | answered cases | citations judged | wrong (95 % CI) | not supporting their claim | "
            "stating a value the golden answer contradicts | wrong and shown unflagged (95 % CI) | "
            "flagged: wrong / right | in answers judged wrong / to unanswerable cases |",
            "|---|---:|---:|---|---:|---:|---|---:|---:|"]
    for arm in ARMS:
        a = report["arms"][arm]
        rows.append(f"| {arm} | {a['answered']} of {a['cases']} | {a['citations']} | {_share(a['wrong'])} | "
                    f"{a['not_supporting']['k']} | {a['contradicting_gold']['k']} | "
                    f"{_share(a['wrong_unflagged'])} | "
                    f"{a['flagged_wrong']} / {a['flagged_right']} | "
                    f"{a['in_wrong_answers']} / {a['in_unanswerable_answers']} |")
    return "\n".join(rows)


def judge_line(judge: dict) -> str:
    if judge["method"] == "nli":
        how = (f"NLI ({judge['nli_model']}: entailment of the claim by the cited chunk; the judged validator runs "
               f"without it, validate.nli={judge.get('validator_nli', 'off')}, so the judge is not the validator)")
    else:
        how = (f"embedding check ({judge['embedder']}, cosine ≥ {judge['threshold']} with the cited chunk or one of "
               f"its sentence windows, and the claim's key facts in that source; NLI unavailable: "
               f"{judge['nli_reason'] or 'off'})")
    return f"Judge: {how}, plus answer correctness against the golden answer ({judge['correctness']})."


def render_markdown(report: dict) -> str:
    """The report as Markdown; every text from the corpus, the golden file or an answer is escaped."""
    from workbench.display.markdown import md

    diff, off = report["difference"], report["arms"]["off"]
    low, high = diff["ci95_points"]
    gens = ", ".join(off["generators"]) or "none"
    out = ["# Week-one citation-error report", "",
           f"Golden set {md(report['golden'])} ({md(report['split'])} part, {report['cases']} cases); generator: "
           f"{md(gens)}. {md(judge_line(report['judge']))}", "",
           arm_table(report), "",
           "**Difference the verifier makes** (wrong citations reaching the user unflagged, off minus on): "
           + ("n/a" if diff["points"] is None else f"{diff['points']:.1f} points (95 % CI {low:.1f} to {high:.1f}; "
              f"{diff['method']})."), "",
           "## Why citations were judged wrong (validation off)", "",
           "| reason | citations |", "|---|---:|"]
    out += [f"| {REASON_WORDS[r]} | {n} |" for r, n in off["reasons"].items() if n]
    out += ["", f"## Examples ({len(report['examples'])} of {off['wrong']['k']} wrong citations)", ""]
    if not report["examples"]:
        out.append("No wrong citation.")
    for i, ex in enumerate(report["examples"], start=1):
        flag = {True: "flagged", False: "**not flagged**", None: "not shown"}[ex["flagged_with_validation_on"]]
        source = f"{md(ex['title'])} ({md(ex['doc_id'])})" if ex["doc_id"] else "a source never offered"
        out += [f"{i}. **{md(ex['case_id'])}**: {md(ex['question'])}",
                f"   - claim: {md(ex['claim'])}",
                f"   - cites \\[{ex['marker']}\\] {source}" + (f": “{md(ex['source_snippet'])}”"
                                                              if ex["source_snippet"] else ""),
                f"   - why: {md(ex['why'])}",
                f"   - with validation on: {flag}"]
    return "\n".join(out) + "\n"


# -- running it ------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class WeekOne:
    report: dict
    runs: dict[str, GoldenRun]
    judgements: dict[str, list[Judgement]]


def _nli_model(models: Models, name: str, nli: bool):
    if not nli:
        return None, "off", "--no-nli"
    if not name:
        return None, "unavailable", "validate.nli_model is empty"
    try:
        return models.nli(name), "ran", ""
    except (ModelUnavailable, ImportError, OSError) as exc:
        return None, "unavailable", str(exc)


def week_one(golden: GoldenSet, store: Store, models: Models, cfg: PipelineConfig, *, nli: bool = True,
             examples: int = DEFAULT_EXAMPLES, progress: bool = False, part: str = "all") -> WeekOne:
    """Run both arms over ``golden`` and judge every citation (the module docstring says how)."""
    if isinstance(examples, bool) or not isinstance(examples, int) or examples < 0:
        raise WeekOneError(f"--examples must be a whole number of at least 0, got {examples!r}")
    base = eval_config(cfg)
    shared = EvalModels(models, base)
    memo = shared.memo
    model, status, reason = _nli_model(models, base.validate.nli_model, nli)
    # The judge must not be the validator it judges: with the NLI model as judge, the on arm's validator runs
    # without it (validate.nli=off: the embedding check and key facts), and the report says so.
    on_nli = "off" if model is not None else base.validate.nli
    runs = {}
    for arm in ARMS:
        arm_cfg = base.with_overrides({"validate.enabled": arm == "on", "validate.nli": on_nli})
        pipeline = Pipeline(store, shared, arm_cfg, log_runs=False)
        runs[arm] = run_cases(golden, pipeline, on_progress=tqdm_progress(f"validation {arm}") if progress else None)
    if model is not None:
        def support(cites):
            return nli_judge(cites, model)
    else:
        def support(cites):
            return embedding_support(cites, memo, base.validate.claim_threshold, base.validate.match,
                                     base.validate.encode_batch_size)
    judged = {}
    for arm in ARMS:
        run = runs[arm]
        verdicts = [score_case(c, t, abstained=bool(abstained_by(t)), embedder=memo, nli_model=model,
                               nli_status=status) for c, t in zip(run.cases, run.traces, strict=True)]
        judged[arm] = judge_arm(arm, run, verdicts, support)
    judge = {"method": "nli" if model is not None else "embedding", "embedder": memo.name,
             "threshold": base.validate.claim_threshold, "match": base.validate.match,
             "nli": status, "nli_model": base.validate.nli_model, "nli_reason": reason,
             "validator_nli": on_nli,
             "correctness": "workbench.correctness: token recall, exact key facts, semantic match"
                            + (", NLI" if model is not None else "")}
    report = build_report(golden.path, part, runs, judged, judge, examples)
    report["problems"] = list(runs["off"].problems)
    return WeekOne(report=report, runs=runs, judgements=judged)


def write_outputs(out: Path, result: WeekOne) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "week_one.json").write_text(json.dumps(result.report, indent=2, ensure_ascii=False) + "\n",
                                       encoding="utf-8")
    (out / "week_one.md").write_text(render_markdown(result.report), encoding="utf-8")
    with (out / "citations.jsonl").open("w", encoding="utf-8") as fh:
        for arm in ARMS:
            for j in result.judgements[arm]:
                fh.write(json.dumps(j.to_dict(), ensure_ascii=False) + "\n")
    for arm in ARMS:
        write_traces(out / f"traces_validation_{arm}.jsonl", result.runs[arm].cases, result.runs[arm].traces)


def run_week_one(golden: str | Path, cfg: PipelineConfig, *, open_store: StoreOpener, models: Models | None = None,
                 out: str | Path | None = None, limit: int | None = None, nli: bool = True,
                 json_output: bool = False, progress: bool = False, split: str | None = None,
                 split_file: str | Path | None = None, examples: int = DEFAULT_EXAMPLES) -> int:
    """``workbench eval GOLDEN --week-one``: 0 done, 2 bad input (bad golden lines included; the good ones run)."""
    if isinstance(examples, bool) or not isinstance(examples, int) or examples < 0:
        raise WeekOneError(f"--examples must be a whole number of at least 0, got {examples!r}")
    full = load_golden(golden)
    part = split or "all"
    golden_set = subset(select(full, find_split(golden, split_file), part), limit)
    for problem in golden_set.problems:
        print(f"problem: {problem}", file=sys.stderr)
    with open_store() as store:
        result = week_one(golden_set, store, models or default_models(), cfg, nli=nli, examples=examples,
                          progress=progress, part=part)
    for problem in result.runs["off"].rejected:
        print(f"problem: {problem}", file=sys.stderr)
    if out:
        write_outputs(Path(out), result)
    if json_output:
        print(json.dumps(result.report, indent=2, ensure_ascii=False))
    else:
        from pipeline.ingestion.files import escape

        print("\n".join(escape(line) for line in headline(result.report)))
    seconds = sum(r.seconds for r in result.runs.values())
    print(f"week-one report: {result.report['cases']} cases, both arms, in {seconds:.1f} s"
          + (f"; report, citations and traces in {out}" if out else ""), file=sys.stderr)
    return 2 if result.report["problems"] else 0


__all__ = ["wilson", "proportion", "Citation", "citations_of", "validator_flagged", "SupportCheck",
           "embedding_support", "nli_judge", "Judgement", "judge_arm", "arm_summary", "difference",
           "pick_examples", "build_report", "headline", "arm_table", "render_markdown", "week_one", "run_week_one",
           "write_outputs", "WeekOne", "WeekOneError"]
