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
   disagreement, and requiring all would punish that — otherwise ``unsupported``. A marker to a source
   number that was never offered is **fabricated**: listed on the claim and in the summary, never removed —
   the sentence may still be right, and hiding the marker would hide the model's failure. A claim whose
   only markers are fabricated has nothing to be checked against, so it is ``unsupported``.
5. **Summary**: counts per verdict; ``cited_sources`` (offered and cited), ``uncited_sources`` (offered,
   never cited: the UI dims them), ``superseded_sources`` (offered chunks carrying ``superseded_by``: the
   amber badge), the fabricated markers, the non-claims, encoder calls and latency.

Sources are matched to candidate texts by ``chunk_id``. Status ``skipped`` (with a reason) when generation
did not run or the answer is the abstention sentence: there is nothing to validate. If the encoder raises or
returns vectors of the wrong shape, the stage records ``failed`` with the reason and every marked claim
stays ``unsupported`` (unverified is not supported); it never raises.
"""

from __future__ import annotations

import hashlib
import inspect
import re

import numpy as np

from pipeline.config import ValidateConfig
from pipeline.context import StageContext
from pipeline.trace import Candidate, CitationScore, ClaimCheck, GenerationTrace, ValidationTrace
from pipeline.validation.claims import Sentence, split_claims

__all__ = ["run", "split_claims", "chunk_passages", "passage_key", "marker_verdicts", "claim_marker_verdicts"]

MAX_PASSAGES_PER_CHUNK = 64   # a chunk is ~220 words; this only bounds a pathological one
PASSAGES_VERSION = "1"        # bump when chunk_passages changes, so stored windows are not reused
CLAIMS_ONLY_BATCH = 64        # claims are all short: one mini-batch pads little

# -- validation ---------------------------------------------------------------------------------------

def run(generation: GenerationTrace, candidates: tuple[Candidate, ...], cfg: ValidateConfig,
        ctx: StageContext) -> ValidationTrace:
    """Check every claim of ``generation.answer`` against the chunks it cites (see the module docstring).

    ``ctx.embedder()`` encodes the claims; ``ctx.passages()`` (``Store.passage_vectors`` when a store is
    attached) looks up the chunks' stored validation vectors.
    """
    skip = _skip_reason(generation)
    if skip:
        return ValidationTrace(status="skipped", reason=skip, threshold=cfg.claim_threshold)
    embedder, passages = ctx.embedder(), ctx.passages()
    offered = {s.number: s.chunk_id for s in generation.sources}
    by_id = {c.chunk_id: c for c in candidates}
    sentences = split_claims(generation.answer)
    claims = [s for s in sentences if s.is_claim]
    pairs = _pairs_to_score(claims, offered, by_id)
    sims, calls, failure = _similarities(pairs, claims, by_id, embedder, cfg, passages)
    checks = tuple(_check_claim(i, c, offered, sims, cfg.claim_threshold) for i, c in enumerate(claims))
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
        encoder_calls=calls,
        non_claims=tuple(f"{s.why_not}: {s.text}" for s in sentences if not s.is_claim),
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


def chunk_passages(text: str, match: str = "passage") -> list[str]:
    """What one cited chunk is compared with: the whole chunk, plus (``match="passage"``) each of its
    sentences and each pair of adjacent sentences. A claim usually restates one or two sentences of a chunk
    that says several things; against the whole chunk its cosine is diluted by the rest (a sentence copied
    verbatim from a 60-word chunk scored 0.40 with MiniLM), and a chunk longer than the encoder's 256 tokens
    is truncated, so facts near its end would never match at all."""
    if match == "chunk":
        return [text]
    sentences = [s.text for s in split_claims(text)
                 if s.why_not not in ("heading", "code") and len(re.findall(r"\w+", s.text)) >= 3]
    windows = sentences + [f"{a} {b}" for a, b in zip(sentences, sentences[1:], strict=False)]
    return list(dict.fromkeys([text, *windows]))[:MAX_PASSAGES_PER_CHUNK]


def passage_key(heading_path: tuple[str, ...] | list[str], text: str) -> str:
    """What a chunk's stored validation vectors were made from: the windowing version and the indexed text."""
    indexed = " > ".join(heading_path) + "\n" + text
    return hashlib.sha1(f"{PASSAGES_VERSION}\x00{indexed}".encode()).hexdigest()


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
                  lookup) -> tuple[dict, int, str]:
    """(cosine, best passage) per (claim, chunk) from ONE encode call over the claims (and any passages
    not stored)."""
    if not pairs:
        return {}, 0, ""
    claim_ids = sorted({i for i, _ in pairs})
    chunk_ids = sorted({cid for _, cid in pairs})
    stored = _stored(lookup, chunk_ids, by_id, embedder)
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
        return {}, 1, f"encoder failed: {type(exc).__name__}: {exc}"
    if vectors.ndim != 2 or vectors.shape[0] != len(batch) or not np.isfinite(vectors).all():
        return {}, 1, f"encoder returned {vectors.shape} for {len(batch)} texts (or non-finite values)"
    unit = _normalise(vectors)
    mats = {cid: unit[r] for cid, r in rows.items()}
    for cid, (_, vecs) in stored.items():
        keep = vecs if cfg.match == "passage" else vecs[:1]
        if keep.shape[1] != unit.shape[1]:
            return {}, 1, f"stored passage vectors of {cid} have dimension {keep.shape[1]}, not {unit.shape[1]}"
        mats[cid] = _normalise(np.asarray(keep, dtype=np.float64))
    claim_row = {i: k for k, i in enumerate(claim_ids)}
    out = {}
    for i, cid in pairs:
        cosines = mats[cid] @ unit[claim_row[i]]
        best = int(np.argmax(cosines))
        out[i, cid] = (round(float(cosines[best]), 4), windows[cid][best - 1] if best else "")
    return out, 1, ""


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
                 threshold: float) -> ClaimCheck:
    scores = tuple(_score(n, offered.get(n, ""), sims.get((i, offered.get(n, "")))) for n in claim.markers)
    known = [s.similarity for s in scores if s.similarity is not None]
    best = max(known) if known else None
    if not claim.markers:
        verdict = "uncited"
    else:
        verdict = "supported" if best is not None and best >= threshold else "unsupported"
    return ClaimCheck(text=claim.text, markers=claim.markers, similarities=scores, verdict=verdict,
                      fabricated_markers=tuple(n for n in claim.markers if n not in offered),
                      best_similarity=best, span=(claim.start, claim.end))


# -- helpers the app uses to colour markers -----------------------------------------------------------

def claim_marker_verdicts(claim: ClaimCheck, threshold: float) -> dict[int, str]:
    """Per marker of one claim: "fabricated", or whether that source alone reaches the threshold."""
    out = {}
    for score in claim.similarities:
        if score.marker in claim.fabricated_markers:
            out[score.marker] = "fabricated"
        elif score.similarity is not None and score.similarity >= threshold:
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
