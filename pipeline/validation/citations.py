"""Citation validation: does each sentence of the answer say what its cited sources say?

Algorithm, after the answer exists (:func:`run`):

1. **Claims**: the answer is split into sentence-level claims with their ``[n]`` markers by
   :func:`pipeline.validation.claims.split_claims` (abbreviations, versions, decimals, error codes, config keys, lists,
   ``[1][2]`` / ``[1, 3]`` forms; headings, lead-ins and questions are not claims — see that module).
2. **One batched encoder call per answer**: every claim that cites an offered source goes to
   ``embedder.encode`` in one call — the same bi-encoder retrieval uses — so validation costs one encoder
   call whatever the answer's length; an answer with nothing to compare makes no call. What a cited chunk is
   compared with (step 3) is known before any question is asked, so ingestion embeds it once and stores it
   (``ingest.passage_vectors``, :meth:`pipeline.storage.store.Store.passage_vectors`), and the caller passes that
   lookup as ``passages``: the one call then carries only the claims — 1 to 10 short texts, encoded as one
   mini-batch. A chunk with nothing stored (an older store, the setting off, another embedder, a text that
   changed — checked by :func:`passage_key`) has its passages added to the same call, length-sorted in
   mini-batches of ``validate.encode_batch_size``: one padded batch of 64 would pad every short claim to
   the longest chunk. Either way the numbers are the same vectors of the same texts. What each way costs is
   measured in BENCHMARKS.md ("Validation cost").
3. **Similarity to a cited chunk** is the cosine of the L2-normalised vectors, rounded to 4 places *before*
   it is compared (the number the user sees is the number that decided). The whole chunk is represented by
   the vector retrieval indexed for it (heading path + text, the chunk's dense vector). With
   ``validate.match="passage"`` (default) it is also represented by its sentences and adjacent-sentence
   pairs (:func:`chunk_passages`), and the best one counts and is recorded: a claim restates one or two
   sentences of a chunk that says several things, and against the whole chunk a sentence copied verbatim
   from a 60-word chunk scored 0.40 with MiniLM — the extractive generator's own quotes would fail — while
   chunks past the encoder's 256 tokens are truncated. ``match="chunk"`` compares with the whole chunk only.
   Cosine measures topical agreement, not entailment: "publishers never receive X" and "publishers receive
   X" score alike, so a supported verdict means "a cited passage says something very close", no more.
4. **Verdicts**: a claim with no marker is ``uncited``. A claim is ``supported`` when ANY of its cited
   chunks reaches ``validate.claim_threshold`` — the prompt asks the model to cite both sides of a
   disagreement, and requiring all would punish that — AND every key fact of the claim is written in one of
   its cited chunks (:func:`key_facts`: numbers and versions, identifiers such as ``tls.min_version``,
   ``key = value`` assignments, URLs and host names), otherwise ``unsupported``. Cosine is blind to the one
   token that makes a claim false ("set tls.min_version = 1.0" against "defaults to 1.2" scores high);
   the value a user acts on must be in the source, as the generation prompt demands. A marker to a source
   number that was never offered is **fabricated**: listed on the claim and in the summary, never removed —
   the sentence may still be right, and hiding the marker would hide the model's failure. A claim whose
   only markers are fabricated has nothing to be checked against, so it is ``unsupported``.
   **NLI** (:mod:`pipeline.validation.entailment`, ``validate.nli``): then every cited claim is read against its
   closest cited sentence window by the NLI model; by default a supported claim stays supported only when a cited
   passage entails it (a contradicted or neutral claim is unsupported whatever its cosine). Label, probabilities
   and the verdict before the model are on the claim; a missing model is a recorded degradation (``nli_status``).
   **Misattributed** (``validate.misattribution_margin``, a flag beside the verdict, not a verdict): a cited
   claim is also compared with every offered source it does not cite, where that costs no encoding (the
   source's vectors are stored, or another claim cites it; the others are listed in ``not_compared``). When
   one of them reaches the claim threshold and beats every cited source by the margin, the claim records it
   (``closer_source``, its cosine and passage): the sentence is most likely that source's, cited to another —
   a topical neighbour can reach the threshold, so "supported" alone does not catch a wrong source. The same
   holds by words, for every offered source and without vectors: when one sentence window of an uncited source
   holds :data:`COPIED` of the claim's content words (a claim of at least :data:`MIN_COPIED_WORDS`) and that share
   beats every cited source's by the margin, the claim was copied from it (:func:`copied_share`). Window vectors
   pooled from the chunk's own pass (``ingest.passage_vectors_mode=late``) are contextual, so a copied sentence
   no longer scores 1.0 against its own window; the word test does not depend on them. Tiered
   generation escalates on it (trigger ``misattributed``).
   **Markers copied from a source** are not citations: a source may itself write "as the handbook explains
   [2]", and a model that copies the phrase has cited nothing. A marker to an offered source whose
   preceding words, marker included, stand verbatim in an offered source's text (:func:`quoted_markers`) is
   dropped from its claim and listed among the non-claims; a copied marker to a source never offered stays
   a fabricated marker (it is on the screen, pointing nowhere).
5. **Summary**: counts per verdict and of misattributed claims; ``cited_sources`` (offered and cited),
   ``uncited_sources`` (offered, never cited: the UI dims them), ``superseded_sources`` (offered chunks carrying
   ``superseded_by``: the amber badge), the fabricated markers, the non-claims, encoder calls and latency.

Sources are matched to candidate texts by ``chunk_id``. Status ``skipped`` (with a reason) when generation
did not run or the answer is the abstention sentence: there is nothing to validate; and when
``validate.enabled`` is false (the week-one setting, :mod:`workbench.week_one`): the answer is shown with its
citations unchecked. If the encoder raises or returns vectors of the wrong shape, the stage records ``failed``
with the reason and every marked claim stays ``unsupported`` (unverified is not supported); it never raises.
"""

from __future__ import annotations

import dataclasses
import inspect
import re

import numpy as np

from pipeline.config import ValidateConfig
from pipeline.context import StageContext
from pipeline.text.sentences import MARKER, code_spans, inside
from pipeline.text.tokenize import STOP_WORDS, tokenize
from pipeline.trace import Candidate, CitationScore, ClaimCheck, GenerationTrace, ValidationTrace
from pipeline.validation import entailment
from pipeline.validation.claims import Sentence, marker_numbers, split_claims
from pipeline.validation.passages import chunk_passages, passage_key

__all__ = ["run", "split_claims", "chunk_passages", "passage_key", "marker_verdicts", "claim_marker_verdicts",
           "key_facts", "missing_facts", "quoted_markers"]

CLAIMS_ONLY_BATCH = 64        # claims are all short: one mini-batch pads little
COPIED = 0.9                  # misattribution by words: this share of the claim's content words in one window ...
MIN_COPIED_WORDS = 4          # ... of a claim with at least this many (fewer match by chance)
VALIDATION_OFF = "validation off (validate.enabled=false): the citations were not checked"
_FULLWIDTH = {0xFF3B: "[", 0xFF3D: "]", 0xFF0C: ",", **{0xFF10 + d: str(d) for d in range(10)}}

# -- validation ---------------------------------------------------------------------------------------

def run(generation: GenerationTrace, candidates: tuple[Candidate, ...], cfg: ValidateConfig,
        ctx: StageContext) -> ValidationTrace:
    """Check every claim of ``generation.answer`` against the chunks it cites (see the module docstring).

    ``ctx.embedder()`` encodes the claims; ``ctx.passages()`` (``Store.passage_vectors`` when a store is
    attached) looks up the chunks' stored validation vectors.
    """
    skip = _skip_reason(generation) or ("" if cfg.enabled else VALIDATION_OFF)
    if skip:
        return ValidationTrace(status="skipped", reason=skip, threshold=cfg.claim_threshold)
    embedder, passages = ctx.embedder(), ctx.passages()
    offered = {s.number: s.chunk_id for s in generation.sources}
    by_id = {c.chunk_id: c for c in candidates}
    sources = [by_id[cid].text for cid in offered.values() if cid in by_id]
    answer = generation.answer.translate(_FULLWIDTH)   # "［7］" reads as [7]; one character for one, spans hold
    sentences, copied = _without_quoted_markers(answer, split_claims(answer), offered, sources)
    claims = [s for s in sentences if s.is_claim]
    pairs = _pairs_to_score(claims, offered, by_id)
    others = _other_pairs(claims, offered, by_id) if cfg.misattribution_margin > 0 else []
    sims, calls, failure, not_compared = _similarities(pairs, claims, by_id, embedder, cfg, passages, others)
    checks = tuple(_closer(_check_claim(i, c, offered, sims, cfg.claim_threshold, by_id), i, offered, sims, cfg,
                           by_id) for i, c in enumerate(claims))
    nli = entailment.check(checks, offered, by_id, cfg, ctx) if not failure else entailment.NLIOutcome(
        checks, "off", cfg.nli_model, "the embedding check failed: nothing to read against")
    checks = nli.claims
    all_markers = sorted({n for s in sentences for n in s.markers})
    cited = tuple(n for n in all_markers if n in offered)
    superseded = {c.chunk_id for c in candidates if c.superseded_by}
    return ValidationTrace(
        status="failed" if failure else "ran",
        reason=failure,
        threshold=cfg.claim_threshold,
        claims=checks,
        fabricated_markers=tuple(n for n in all_markers if n not in offered),
        cited_sources=cited,
        uncited_sources=tuple(n for n in sorted(offered) if n not in cited),
        superseded_sources=tuple(n for n in sorted(offered) if offered[n] in superseded),
        supported=sum(c.verdict == "supported" for c in checks),
        unsupported=sum(c.verdict == "unsupported" for c in checks),
        uncited=sum(c.verdict == "uncited" for c in checks),
        misattributed=sum(c.closer_source is not None for c in checks),
        not_compared=tuple(n for n in sorted(offered) if offered[n] in not_compared),
        encoder_calls=calls,
        non_claims=tuple(f"{s.why_not}: {s.text}" for s in sentences if not s.is_claim) + copied,
        nli_status=nli.status, nli_model=nli.model, nli_reason=nli.reason, nli_pairs=nli.pairs, nli_ms=nli.ms,
    )


def _skip_reason(generation: GenerationTrace) -> str:
    if generation.status in ("skipped", "abstained"):
        return f"generation {generation.status}: no answer to validate"
    if generation.is_abstention:
        return "the answer is the abstention sentence: no claims to validate"
    if not generation.answer.strip():
        return "the answer is empty: no claims to validate"
    return ""


def _pairs_to_score(claims: list[Sentence], offered: dict[int, str],
                    texts: dict[str, Candidate]) -> list[tuple[int, str]]:
    """(claim index, chunk id) for every citation that points at an offered source with known text."""
    return [(i, offered[n]) for i, c in enumerate(claims) for n in c.markers
            if n in offered and offered[n] in texts]


def _other_pairs(claims: list[Sentence], offered: dict[int, str],
                 texts: dict[str, Candidate]) -> list[tuple[int, str]]:
    """(claim index, chunk id) for every offered source a cited claim does NOT cite: the misattribution check."""
    return [(i, cid) for i, c in enumerate(claims) if any(n in offered for n in c.markers)
            for n, cid in sorted(offered.items()) if n not in c.markers and cid in texts]


def _words(text: str) -> set[str]:
    return {t for t in tokenize(MARKER.sub(" ", text)) if t not in STOP_WORDS}


def copied_share(claim: str, text: str) -> tuple[float, str]:
    """The largest share of the claim's content words (stop words and markers aside) found in one sentence window
    of ``text`` (:func:`chunk_passages`), and that window: 1.0 for a sentence copied word for word."""
    words = _words(claim)
    if not words:
        return 0.0, ""
    best = (0.0, "")
    for window in chunk_passages(text)[1:] or [text]:
        share = len(words & _words(window)) / len(words)
        if share > best[0]:
            best = (share, window)
    return best


def _closer(check: ClaimCheck, i: int, offered: dict[int, str], sims: dict, cfg: ValidateConfig,
            by_id: dict[str, Candidate]) -> ClaimCheck:
    """The check with ``closer_source`` set when an offered source the claim does not cite states it much more
    closely than every source it cites — by cosine or by copied words (the module docstring, step 4)."""
    if cfg.misattribution_margin <= 0 or check.best_similarity is None:
        return check
    margin, best = cfg.misattribution_margin, None
    cited = [offered[n] for n in check.markers if n in offered and offered[n] in by_id]
    copied_cited = None
    if len(_words(check.text)) >= MIN_COPIED_WORDS:
        copied_cited = max((copied_share(check.text, by_id[cid].text)[0] for cid in cited), default=0.0)
    for n, cid in sorted(offered.items()):
        if n in check.markers or cid not in by_id:
            continue
        found = sims.get((i, cid))
        by_cosine = (found is not None and found[0] >= cfg.claim_threshold
                     and found[0] >= check.best_similarity + margin)
        share, window = copied_share(check.text, by_id[cid].text) if copied_cited is not None else (0.0, "")
        by_words = copied_cited is not None and share >= COPIED and share >= copied_cited + margin
        if by_cosine or by_words:
            key = (found[0] if found else -1.0, share)
            if best is None or key > best[0]:
                best = (key, n, found[0] if found else None, found[1] if by_cosine else window)
    if best is None:
        return check
    return dataclasses.replace(check, closer_source=best[1], closer_similarity=best[2], closer_passage=best[3])


def _stored(lookup, chunk_ids: list[str], by_id: dict[str, Candidate], embedder) -> dict[str, tuple]:
    """(window texts, vectors) of the chunks whose stored vectors match this embedder and text."""
    if lookup is None:
        return {}
    try:
        found = lookup(chunk_ids)
    except Exception:  # a lookup failure only costs time: the passages are encoded instead
        return {}
    name = getattr(embedder, "name", "")
    out = {}
    for cid in chunk_ids:
        entry = found.get(cid)
        c = by_id[cid]
        if (entry is not None and entry.model == name and entry.vectors.shape[0] == len(entry.passages) + 1
                and entry.passage_key == passage_key(c.heading_path, c.text)):
            out[cid] = (list(entry.passages), entry.vectors)
    return out


def _similarities(pairs, claims, by_id: dict[str, Candidate], embedder, cfg: ValidateConfig,
                  lookup, others=()) -> tuple[dict, int, str, set[str]]:
    """(cosine, best passage) per (claim, chunk) from ONE encode call over the claims (and any passages
    not stored), and the chunks of ``others`` left out: an uncited chunk is compared only where that costs no
    encoding (its vectors are stored, or another claim cites it)."""
    if not pairs:
        return {}, 0, "", set()
    claim_ids = sorted({i for i, _ in pairs})
    cited_ids = {cid for _, cid in pairs}
    stored = _stored(lookup, sorted(cited_ids | {cid for _, cid in others}), by_id, embedder)
    not_compared = {cid for _, cid in others if cid not in cited_ids and cid not in stored}
    pairs = list(pairs) + [(i, cid) for i, cid in others if cid not in not_compared]
    chunk_ids = sorted({cid for _, cid in pairs})
    stored = {cid: v for cid, v in stored.items() if cid in chunk_ids}
    batch = [claims[i].text for i in claim_ids]
    rows: dict[str, list[int]] = {}
    windows: dict[str, list[str]] = {}
    for cid in chunk_ids:
        if cid in stored:
            windows[cid] = stored[cid][0]
            continue
        c = by_id[cid]
        windows[cid] = chunk_passages(c.text)[1:]
        texts = [" > ".join(c.heading_path) + "\n" + c.text] + (windows[cid] if cfg.match == "passage" else [])
        rows[cid] = list(range(len(batch), len(batch) + len(texts)))
        batch += texts
    claims_only = len(batch) == len(claim_ids)
    batch_size = max(cfg.encode_batch_size, min(len(batch), CLAIMS_ONLY_BATCH)) if claims_only \
        else cfg.encode_batch_size
    try:
        vectors = np.asarray(_encode(embedder, batch, batch_size), dtype=np.float64)
    except Exception as exc:  # any encoder failure is recorded, never raised into the answer
        return {}, 1, f"encoder failed: {type(exc).__name__}: {exc}", not_compared
    if vectors.ndim != 2 or vectors.shape[0] != len(batch) or not np.isfinite(vectors).all():
        return {}, 1, f"encoder returned {vectors.shape} for {len(batch)} texts (or non-finite values)", not_compared
    unit = _normalise(vectors)
    mats = {cid: unit[r] for cid, r in rows.items()}
    for cid, (_, vecs) in stored.items():
        keep = vecs if cfg.match == "passage" else vecs[:1]
        if keep.shape[1] != unit.shape[1]:
            return ({}, 1, f"stored passage vectors of {cid} have dimension {keep.shape[1]}, not {unit.shape[1]}",
                    not_compared)
        mats[cid] = _normalise(np.asarray(keep, dtype=np.float64))
    claim_row = {i: k for k, i in enumerate(claim_ids)}
    out = {}
    for i, cid in pairs:
        cosines = mats[cid] @ unit[claim_row[i]]
        best = int(np.argmax(cosines))
        out[i, cid] = (round(float(cosines[best]), 4), windows[cid][best - 1] if best else "")
    return out, 1, "", not_compared


def _encode(embedder, texts: list[str], batch_size: int):
    """One encode call. Embedders that take ``batch_size`` (both in this package do) get the small one, so
    their length-sorted mini-batches pad a 15-token claim to its neighbours, not to a 256-token chunk."""
    try:
        takes_batch_size = "batch_size" in inspect.signature(embedder.encode).parameters
    except (TypeError, ValueError):
        takes_batch_size = False
    return embedder.encode(texts, batch_size=batch_size) if takes_batch_size else embedder.encode(texts)


def _normalise(vectors: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.where(norms == 0.0, 1.0, norms)


def _score(marker: int, chunk_id: str, found: tuple[float, str] | None) -> CitationScore:
    if found is None:  # fabricated, or the chunk's text is missing: nothing to compare with
        return CitationScore(marker=marker, chunk_id=chunk_id, similarity=None)
    return CitationScore(marker=marker, chunk_id=chunk_id, similarity=found[0], passage=found[1])


def _check_claim(i: int, claim: Sentence, offered: dict[int, str], sims: dict,
                 threshold: float, by_id: dict[str, Candidate] | None = None) -> ClaimCheck:
    scores = tuple(_score(n, offered.get(n, ""), sims.get((i, offered.get(n, "")))) for n in claim.markers)
    known = [s.similarity for s in scores if s.similarity is not None]
    best = max(known) if known else None
    if not claim.markers:
        verdict = "uncited"
    else:
        verdict = "supported" if best is not None and best >= threshold else "unsupported"
        cited = [by_id[offered[n]] for n in claim.markers if by_id and n in offered and offered[n] in by_id]
        if verdict == "supported" and cited and missing_facts(claim.text, [_indexed(c) for c in cited]):
            verdict = "unsupported"
    return ClaimCheck(text=claim.text, markers=claim.markers, similarities=scores, verdict=verdict,
                      fabricated_markers=tuple(n for n in claim.markers if n not in offered),
                      best_similarity=best, span=(claim.start, claim.end))


# -- helpers the app uses to colour markers -----------------------------------------------------------

def claim_marker_verdicts(claim: ClaimCheck, threshold: float) -> dict[int, str]:
    """Per marker of one claim: "fabricated", or whether that source alone reaches the threshold (never
    "supported" on a claim judged unsupported, e.g. for a value no cited source contains)."""
    out = {}
    for score in claim.similarities:
        if score.marker in claim.fabricated_markers:
            out[score.marker] = "fabricated"
        elif score.similarity is not None and score.similarity >= threshold and claim.verdict != "unsupported":
            out[score.marker] = "supported"
        else:
            out[score.marker] = "unsupported"
    return out


def marker_verdicts(validation: ValidationTrace) -> dict[int, str]:
    """One colour per marker number over the whole answer: "supported" | "unsupported" | "fabricated".

    A marker is "supported" only if it reaches the threshold for EVERY claim that cites it, so a green [2]
    never sits next to a sentence that [2] does not back. Use :func:`claim_marker_verdicts` to colour each
    occurrence separately.
    """
    out: dict[int, str] = {}
    for claim in validation.claims:
        for marker, verdict in claim_marker_verdicts(claim, validation.threshold).items():
            if out.get(marker) in ("fabricated", "unsupported"):
                continue
            out[marker] = verdict
    for marker in validation.fabricated_markers:
        out[marker] = "fabricated"
    return dict(sorted(out.items()))


# -- key facts --------------------------------------------------------------------------------------------

_ASSIGNMENT = re.compile(r"([A-Za-z_][\w.-]*[._][\w.-]*[A-Za-z0-9_])\s*(?:=|:=)\s*([^\s,;()]+)")
_URL_OR_HOST = re.compile(r"\b(?:https?://)?((?:[a-z0-9-]+\.)+(?:com|org|net|io|dev|example|local|internal|app)\b[^\s)\]]*)",
                          re.IGNORECASE)
_IDENTIFIER = re.compile(r"(?<![\w.-])([A-Za-z][A-Za-z0-9]*(?:[._][A-Za-z0-9]+)+|[A-Z][A-Z0-9]*_[A-Z0-9_]+)(?![\w-])")
# A number ends where missing_facts looks for its end: "08:42.555Z" holds no "42" (nor any number).
_NUMBER = re.compile(r"(?<![\w.])v?(\d+(?:[.,]\d+)*)(?![\w]|[.,]\d)")
_REF = re.compile(r"\((?:ref|source|src|doc)\s[^)]*\)", re.IGNORECASE)


def _plain(text: str) -> str:
    """Text as facts are compared: lower-case, no Markdown emphasis or backticks, one space, no thousands
    separators in numbers ("30,000" = "30000")."""
    text = re.sub(r"[`*]", "", text.casefold())
    text = re.sub(r"(?<=\d),(?=\d{3}\b)", "", text)
    return " ".join(text.split())


def key_facts(claim: str) -> list[str]:
    """The values in ``claim`` a user would act on, each as it must appear in a source: ``key = value``
    assignments, URLs and host names, identifiers (``tls.min_version``, ``ERR_TIMEOUT_502``), numbers and
    versions. Markers a source wrote itself (``(ref 9)``, as the extractive generator renders them) are not
    facts."""
    text = _REF.sub(" ", claim)
    facts: list[str] = []
    for m in _ASSIGNMENT.finditer(text):
        facts.append(f"{m.group(1)} = {m.group(2).rstrip('.')}")
    for m in _URL_OR_HOST.finditer(text):
        facts.append(m.group(1).rstrip(".\"'"))
    for m in _IDENTIFIER.finditer(text):
        facts.append(m.group(1))
    for m in _NUMBER.finditer(text):
        facts.append(m.group(1).rstrip(".,"))
    plain = [f for f in dict.fromkeys(_plain(f) for f in facts) if f]
    return [f for f in plain if not any(f != g and f in g and not f[:1].isdigit() for g in plain)]


def missing_facts(claim: str, sources: list[str]) -> list[str]:
    """Key facts of ``claim`` that none of ``sources`` contains (an assignment may also be written with
    ``:`` or spaces, "key = value" or "key: value")."""
    pool = [_plain(s) for s in sources]
    missing = []
    for fact in key_facts(claim):
        if " = " in fact:
            key, value = fact.split(" = ", 1)
            pattern = re.compile(re.escape(key) + r"\s*(?:=|:=|:|\bis\b|\bto\b)?\s*[\"']?" + re.escape(value)
                                 + r"(?!\w|\.\w)")
            if not any(pattern.search(p) for p in pool):
                missing.append(fact)
        elif fact[:1].isdigit():
            if not any(re.search(r"(?<![\d.])" + re.escape(fact) + r"(?![\d]|\.\d)", p) for p in pool):
                missing.append(fact)
        elif not any(fact in p for p in pool):
            missing.append(fact)
    return missing


def _indexed(candidate: Candidate) -> str:
    return " > ".join(candidate.heading_path) + "\n" + candidate.title + "\n" + candidate.text


# -- markers copied from a source ----------------------------------------------------------------------------

_CONTEXT_WORDS = 4
COPIED_MARKER = "marker copied from a source: "   # the non-claim note; trust.py reads the same prefix


def quoted_markers(answer: str, start: int, end: int, sources: list[str]) -> list[tuple[int, int]]:
    """(position, number) of each marker in ``answer[start:end]`` whose preceding words, the marker
    included, stand verbatim in one of ``sources``: the source's own reference, copied, not a citation.
    Adjacent markers ("disagree [3][4]") are read as one run on both sides."""
    code = code_spans(answer)
    plain_sources = [_marker_plain(s) for s in sources]
    out = []
    for m in MARKER.finditer(answer, start, end):
        if inside(m.start(), code):
            continue
        run_start = m.start()
        while True:   # back over the markers right before this one
            before = re.search(r"\[[^\[\]\n]{1,30}\]\s*$", answer[max(0, run_start - 40):run_start])
            if not before or not MARKER.fullmatch(before.group().strip()):
                break
            run_start -= len(before.group())
        words = re.findall(r"[\w.%/-]+", answer[max(0, run_start - 200):run_start])[-_CONTEXT_WORDS:]
        if len(words) < 2:
            continue
        numbers = set(marker_numbers(m.group(1)))
        lead = r"\W+".join(re.escape(w.casefold()) for w in words)
        run = r"\W*((?:\s*\[\s*(?:source|src|doc)?\s*#?\s*[\d ,;\-–]+\])+)"
        if any(numbers <= {n for inner in re.findall(r"\[([^\]]*)\]", found.group(1)) for n in marker_numbers(inner)}
               for source in plain_sources for found in re.finditer(lead + run, source)):
            out.extend((m.start(), n) for n in sorted(numbers))
    return out


def _marker_plain(text: str) -> str:
    return re.sub(r"[`*]", "", text.casefold())


def _without_quoted_markers(answer: str, sentences: list[Sentence], offered: dict[int, str],
                            sources: list[str]) -> tuple[list[Sentence], tuple[str, ...]]:
    """The sentences with every copied marker to an offered source removed from their markers, and one note
    per copied marker for the non-claims list."""
    out, notes = [], []
    for s in sentences:
        copied = [(pos, n) for pos, n in quoted_markers(answer, s.start, s.end, sources) if n in offered]
        if not copied:
            out.append(s)
            continue
        copied_at = {pos for pos, _ in copied}
        genuine = [n for m in MARKER.finditer(answer, s.start, s.end) if m.start() not in copied_at
                   for n in marker_numbers(m.group(1))]
        markers = tuple(n for n in s.markers if n in genuine)
        for _, n in copied:
            notes.append(f"{COPIED_MARKER}[{n}] in \"{s.text}\" is the source's own reference, not a citation")
        out.append(Sentence(s.text, markers, s.start, s.end, s.is_claim, s.why_not))
    return out, tuple(notes)

