"""The NLI check: does the passage a claim cites entail it, say nothing about it, or contradict it?

Runs inside the validator (:func:`pipeline.validation.citations.run`) after the embedding check, on every claim that
cites an offered source. Per cited source the premise is the sentence window the embedding check found closest to
the claim (the passage it recorded; the chunk's text when the whole chunk was closest), the hypothesis the claim's
text without its markers; one batched call to the NLI classifier (``validate.nli_model``) scores every pair.

- **A quote or a restatement is entailed**: a claim that stands word for word in a cited chunk as a whole sentence
  or a clause ended by ";" (case, spacing and Markdown emphasis aside), or whose every content word and every
  negation stands in one cited sentence window (:func:`restated`), is taken as entailed; the model still reads it
  and its probabilities are recorded, but its label is not asked to overrule the copy (``nli_quoted``). Small NLI
  models learn that a "not" in the hypothesis means contradiction, and would otherwise fail faithful restatements
  of negated sentences.
- **Label per claim**: entailment when ANY cited passage entails it (the validator's ANY rule: an answer may cite
  both sides of a disagreement), else contradiction when any contradicts it, else neutral. The recorded
  probabilities and passage are those of the source that decided: the most entailing one, else the most
  contradicting one.
- **Verdict** (``validate.nli``): ``entailment`` (default) keeps a claim supported only when its label is
  entailment: "supported" means "a cited passage entails it", and a neutral or contradicted claim is unsupported
  whatever its cosine. ``contradiction`` removes support only from a contradicted claim. A claim the embedding check
  or the key-fact check rejected stays unsupported: the cheap checks are a pre-filter, the model can only take
  support away. The verdict before the model is kept on the claim (``embedding_verdict``) for the agreement report.
- **Prose only**: a claim that is a rendered table row, a command line, JSON or a log line (:func:`structured`) is
  not read by the model (trained on prose sentences); its verdict stays the embedding check's and the trace's
  ``nli_reason`` counts it.
- **Degradation**: ``off`` loads nothing; a model that does not resolve is ``unavailable`` and one that raises
  ``failed``, each with the reason on the trace, and the verdicts stay the embedding check's.
"""

from __future__ import annotations

import dataclasses
import functools
import re
import time
from collections.abc import Sequence

import numpy as np

from pipeline.config import ValidateConfig
from pipeline.models.resolve import ModelUnavailable
from pipeline.text.sentences import MARKER
from pipeline.trace import Candidate, ClaimCheck
from pipeline.validation.passages import chunk_passages

LABELS = ("entailment", "neutral", "contradiction")   # the order the probabilities are recorded in


@dataclasses.dataclass(frozen=True)
class NLIOutcome:
    claims: tuple[ClaimCheck, ...]
    status: str            # "ran" | "off" | "unavailable" | "failed"
    model: str = ""
    reason: str = ""
    pairs: int = 0
    ms: float = 0.0


def hypothesis(claim: str) -> str:
    """The claim as the model reads it: markers out, spaces tidied."""
    return " ".join(MARKER.sub(" ", claim).split())


def premise(check: ClaimCheck, marker: int, chunk: Candidate) -> str:
    """What the claim is checked against for one cited source: its closest sentence window, else the chunk."""
    for score in check.similarities:
        if score.marker == marker and score.passage:
            return score.passage
    return chunk.text


def _plain(text: str) -> str:
    return " ".join(re.sub(r"[*_`]", "", text).casefold().split())


@functools.lru_cache(maxsize=1024)
def _windows(text: str) -> tuple[str, ...]:
    return tuple(chunk_passages(text)[1:]) or (text,)


def quoted(claim: str, chunk: Candidate) -> bool:
    """Does the claim (markers out) stand word for word in the chunk's text as a whole sentence or clause: starting
    where a sentence starts and ending where one ends (or at a ";")? A piece cut from inside a sentence ("X" out of
    "X unless Y") is not a quote: the model reads it."""
    text = _plain(hypothesis(claim)).rstrip(".!?;:")
    if len(text) < 12:
        return False
    source = _plain(chunk.text)
    for m in re.finditer(re.escape(text), source):
        before = source[:m.start()].rstrip()
        after = source[m.end():]
        starts = not before or before[-1] in ".!?;:" or re.search(r"(^|\s)([-+>]|\d+\.)$", before) is not None
        if starts and (not after or after[0] in ".!?;"):
            return True
    return False


_NEGATION = re.compile(r"\b(not|no|never|none|nothing|neither|nor|cannot|without)\b|n't\b", re.IGNORECASE)


def _negations(text: str) -> list[str]:
    return sorted(m.group(0).lower() for m in _NEGATION.finditer(text))


def restated(claim: str, windows: Sequence[str]) -> str | None:
    """The one-sentence window that states the claim in its own words: every content word of the claim (stemmed, stop
    words and markers aside) is in the window, and so is the same set of negations ("not", "never", "n't", ...).
    A changed number, a swapped name, an added qualifier or a flipped negation each bring a word the window lacks
    or change the negations, so none of them is a restatement; a reordering of the window's own words is (a known
    limit: "A sends to B" restates "B sends to A")."""
    from pipeline.text.tokenize import STOP_WORDS, tokenize

    text = hypothesis(claim)
    words = {t for t in tokenize(text) if t not in STOP_WORDS}
    if len(words) < 3:
        return None
    negations = _negations(text)
    for window in windows:
        reading = _reading(window)
        if reading is not None and words <= reading[0] and negations == reading[1]:
            return window
    return None


@functools.lru_cache(maxsize=4096)
def _reading(window: str) -> tuple[frozenset[str], list[str]] | None:
    """A one-sentence window's tokens and negations (None for a window of several sentences: a negation in the
    neighbouring sentence must not stand in for one); cached, since every claim citing a chunk reads its windows."""
    from pipeline.text.sentences import sentence_spans
    from pipeline.text.tokenize import tokenize

    if len(sentence_spans(window)) > 1:
        return None
    return frozenset(tokenize(window)), _negations(window)


_TABLE_ROW = re.compile(r"^[^;:]{1,60}: [^;]*; [^;:]{1,60}:")   # "Header: value; Header: value ..." (a cell may hold ;)
_CLI_FLAG = re.compile(r"(?:^|\s)--?[a-z][\w-]*")
_LOG_LINE = re.compile(r"^(?:ERROR|WARN|WARNING|INFO|DEBUG|FATAL)\b")


def structured(claim: str) -> bool:
    """Is the claim a rendered table row ("Setting: x; Default: 8"), a command line with flags, JSON or markup, or a
    log line? The model was trained on prose sentences; these are left to the embedding check and key facts."""
    text = hypothesis(claim).strip()
    return bool(_TABLE_ROW.match(text) or _CLI_FLAG.search(text) or _LOG_LINE.match(text)
                or text.startswith(("{", "[", "<")))


def label_of(probs: Sequence[float]) -> str:
    return LABELS[int(np.argmax(probs))]


def claim_label(rows: Sequence[tuple[int, str, np.ndarray]]) -> tuple[str, int, str, np.ndarray]:
    """(label, marker, passage, probabilities) for one claim from its cited sources' rows (see the docstring)."""
    entailed = [r for r in rows if label_of(r[2]) == "entailment"]
    if entailed:
        best = max(entailed, key=lambda r: r[2][0])
        return "entailment", best[0], best[1], best[2]
    contradicted = [r for r in rows if label_of(r[2]) == "contradiction"]
    if contradicted:
        best = max(contradicted, key=lambda r: r[2][2])
        return "contradiction", best[0], best[1], best[2]
    best = max(rows, key=lambda r: r[2][0])
    return "neutral", best[0], best[1], best[2]


def verdict_after(check: ClaimCheck, label: str, rule: str) -> str:
    """The validator's verdict once the NLI label is known (only support can be taken away)."""
    if check.verdict != "supported":
        return check.verdict
    if rule == "entailment" and label != "entailment":
        return "unsupported"
    if rule == "contradiction" and label == "contradiction":
        return "unsupported"
    return check.verdict


def ordered_probs(raw: np.ndarray, labels: Sequence[str]) -> np.ndarray:
    """The classifier's probabilities re-ordered to :data:`LABELS` (checkpoints disagree on their label order)."""
    index = [list(labels).index(name) for name in LABELS]
    return np.asarray(raw, dtype=np.float64)[:, index]


def check(claims: tuple[ClaimCheck, ...], offered: dict[int, str], by_id: dict[str, Candidate],
          cfg: ValidateConfig, ctx) -> NLIOutcome:
    """The claims with their NLI label, probabilities and final verdict (see the module docstring)."""
    if cfg.nli == "off":
        return NLIOutcome(claims, "off", cfg.nli_model, "validate.nli=off: the embedding check alone decides")
    started = time.perf_counter()
    pairs: list[tuple[int, int, str]] = []   # (claim index, marker, premise)
    skipped = [structured(c.text) for c in claims]
    unread = sum(1 for c, skip in zip(claims, skipped, strict=True) if skip and c.markers)
    note = (f"{unread} structured claim(s) (table rows, commands, JSON, log lines) left to the embedding check"
            if unread else "")
    for i, c in enumerate(claims):
        if skipped[i]:
            continue
        for n in dict.fromkeys(c.markers):
            if n in offered and offered[n] in by_id:
                pairs.append((i, n, premise(c, n, by_id[offered[n]])))
    if not pairs:
        return NLIOutcome(claims, "ran", cfg.nli_model, note or "no claim cites an offered source")
    try:
        model = ctx.nli(cfg.nli_model)
    except (ModelUnavailable, ImportError, OSError) as exc:
        return NLIOutcome(claims, "unavailable", cfg.nli_model, f"{exc}; verdicts from the embedding check alone")
    try:
        missing = [name for name in LABELS if name not in model.labels]
        if missing:
            raise ValueError(f"the model has no {', '.join(missing)} label (labels {tuple(model.labels)})")
        raw = model.predict([(p, hypothesis(claims[i].text)) for i, _, p in pairs])
        probs = ordered_probs(raw, model.labels)
        if probs.shape != (len(pairs), len(LABELS)) or not np.isfinite(probs).all():
            raise ValueError(f"probabilities of shape {probs.shape} (or non-finite) for {len(pairs)} pairs")
    except Exception as exc:  # a model failure is recorded, never raised into the answer
        return NLIOutcome(claims, "failed", cfg.nli_model, f"{type(exc).__name__}: {exc}; verdicts from the "
                          "embedding check alone", len(pairs), round((time.perf_counter() - started) * 1000, 3))
    by_claim: dict[int, list[tuple[int, str, np.ndarray]]] = {}
    for (i, n, p), row in zip(pairs, probs, strict=True):
        by_claim.setdefault(i, []).append((n, p, row))
    out = []
    for i, c in enumerate(claims):
        if i not in by_claim:
            out.append(c)
            continue
        label, marker, passage, row = claim_label(by_claim[i])
        copied = next((n for n in dict.fromkeys(c.markers) if n in offered and offered[n] in by_id
                       and (quoted(c.text, by_id[offered[n]])
                            or restated(c.text, _windows(by_id[offered[n]].text)) is not None)), None)
        if copied is not None and label != "entailment":
            label, marker = "entailment", copied
            passage, row = next((p, r) for n, p, r in by_claim[i] if n == copied)
        out.append(dataclasses.replace(c, embedding_verdict=c.verdict, verdict=verdict_after(c, label, cfg.nli),
                                       nli_label=label, nli_probs=tuple(round(float(x), 4) for x in row),
                                       nli_marker=marker, nli_passage=passage, nli_quoted=copied is not None))
    return NLIOutcome(tuple(out), "ran", cfg.nli_model, note, len(pairs),
                      round((time.perf_counter() - started) * 1000, 3))
