"""Perturbed claims: does the citation check pass what a passage says and fail what it does not?

From a corpus's own prose sentences (the benchmark uses the demo corpus, never golden questions or evaluation data;
command lines, table rows and log lines are left out, as the validator leaves them to the embedding check), each
claim cites the chunk its source sentence comes from, as an answer would:

Faithful (must pass):

- ``quote``: the sentence as written (what the extractive generator produces);
- ``trim``: its first clause, where it has several joined by "; " or ", and " (a claim that says less);
- ``reword``: common words replaced by synonyms ("requires" -> "needs"), or, where none occurs, prefixed with
  "According to the documentation,".

Altered (must fail):

- ``number``: one number changed (a count, a size, a duration);
- ``negation``: a negation added after the first auxiliary verb, or the first one removed;
- ``entity``: a version, a dotted identifier (``retry.max_attempts``) or a capitalised name swapped for another of
  the same shape written elsewhere in the corpus;
- ``qualifier``: a restriction the passage does not state appended ("only for administrators");
- ``crossed``: two sources' facts crossed: the sentence's subject up to its verb, then another document's
  sentence's predicate after the same verb, cited to the first.

Generation is seeded and a pure function of the chunks (:func:`perturbed_claims`). :func:`judge` runs each claim
through the real validator (:func:`pipeline.validation.citations.run`) once, with the NLI check on, and reads three
verdicts from one trace: the embedding validator's (cosine and key facts, ``embedding_verdict``), the NLI model's
alone (its most probable label, before the validator's rule that a word-for-word quote is entailed), and the
combination the validator ships (``verdict``).
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from dataclasses import dataclass

from pipeline.text.sentences import sentence_spans
from pipeline.validation.entailment import structured

FAITHFUL = ("quote", "trim", "reword")
ALTERED = ("number", "negation", "entity", "qualifier", "crossed")
KINDS = FAITHFUL + ALTERED

_WORD = re.compile(r"\w+")
_NUMBER = re.compile(r"(?<![\w.\-])(\d+)(?:\.(\d+))?(?![\w\-]|\.\d)")
_VERSION = re.compile(r"(?<![\w.])(\d+\.\d+(?:\.\d+)?)(?![\w.]*\w)")
_IDENTIFIER = re.compile(r"(?<![\w.])([a-z][a-z0-9_]*\.[a-z][a-z0-9_.]*[a-z0-9_])(?![\w])")
_NAME = re.compile(r"(?<=[a-z,;] )([A-Z][a-z]{3,})\b")
_AUX = re.compile(r"\b(is|are|was|were|can|will|should|must)\b(?! not\b)")
_NEG = re.compile(r"\b(is|are|was|were|can|will|should|must|does|do|has|have) not\b|\b(cannot|never)\b")
_VERB = re.compile(r"\b(is|are|uses|defaults to|keeps|takes|sends|returns|expires after)\b")
SYNONYMS = {"requires": "needs", "allows": "lets", "uses": "relies on", "shows": "displays", "removes": "deletes",
            "contains": "holds", "starts": "begins", "before": "prior to", "receives": "gets", "must": "has to",
            "returns": "gives back", "creates": "makes", "large": "big", "quickly": "fast", "also": "as well",
            "modify": "change", "prevents": "stops", "verify": "check", "verifies": "checks", "every": "each",
            "needs": "requires", "deletes": "removes", "changes": "modifies", "sends": "transmits",
            "keeps": "retains", "runs": "executes", "after": "following", "shown": "displayed"}
QUALIFIERS = (" only for administrators", " but only on weekends", " in every region", " only on the free plan",
              " only when debug logging is on")


@dataclass(frozen=True)
class Claim:
    kind: str
    faithful: bool
    text: str            # the claim, without its marker
    source: str          # the sentence it was written from
    chunk_id: str        # the chunk it cites


def _sentences(text: str) -> list[str]:
    out = []
    for s, e in sentence_spans(text):
        sentence = " ".join(text[s:e].split())
        words = _WORD.findall(sentence)
        if 6 <= len(words) <= 45 and sentence[-1:] in ".!" and sentence[:1].isupper() and "?" not in sentence \
                and not any(mark in sentence for mark in ("```", "->", "[", "|")) and not structured(sentence):
            out.append(sentence)
    return out


def _trim(sentence: str) -> str | None:
    for joint in ("; ", ", and "):
        if joint in sentence:
            head = sentence.split(joint, 1)[0].rstrip(",;") + "."
            if len(_WORD.findall(head)) >= 5:
                return head
    return None


def _reword(sentence: str) -> str:
    words = sentence.split(" ")
    changed = [SYNONYMS.get(w, w) for w in words]
    if changed != words:
        return " ".join(changed)
    return "According to the documentation, " + sentence[0].lower() + sentence[1:]


def _number(sentence: str, rng: random.Random) -> str | None:
    found = [m for m in _NUMBER.finditer(sentence) if not _VERSION.fullmatch(m.group(0))]
    if not found:
        return None
    m = rng.choice(found)
    value = int(m.group(1))
    new = rng.choice([value + 2, value * 3, value + 7] if value else [3, 5, 12])
    return sentence[:m.start(1)] + str(new) + sentence[m.end(1):]


def _negation(sentence: str) -> str | None:
    negated = _NEG.search(sentence)
    if negated:
        if negated.group(1):
            return sentence[:negated.start()] + negated.group(1) + sentence[negated.end():]
        positive = {"cannot": "can", "never": "always"}[negated.group(2).lower()]
        return sentence[:negated.start()] + positive + sentence[negated.end():]
    aux = _AUX.search(sentence)
    return None if aux is None else sentence[:aux.end()] + " not" + sentence[aux.end():]


def _entity(sentence: str, pools: dict[str, list[str]], rng: random.Random) -> str | None:
    for name, pattern in (("version", _VERSION), ("identifier", _IDENTIFIER), ("name", _NAME)):
        found = list(pattern.finditer(sentence))
        if not found:
            continue
        m = rng.choice(found)
        others = [x for x in pools[name] if x != m.group(1) and x not in sentence]
        if others:
            return sentence[:m.start(1)] + rng.choice(others) + sentence[m.end(1):]
    return None


def _qualifier(sentence: str, rng: random.Random) -> str:
    return sentence.rstrip(".!") + rng.choice(QUALIFIERS) + "."


def _crossed(sentence: str, doc_id: str, donors: Sequence[tuple[str, str]], rng: random.Random) -> str | None:
    verb = _VERB.search(sentence)
    if verb is None or verb.start() < 8:
        return None
    same = [(d, s) for d, s in donors if d != doc_id and re.search(rf"\b{re.escape(verb.group(1))}\b", s)]
    rng.shuffle(same)
    for _, donor in same[:20]:
        m = re.search(rf"\b{re.escape(verb.group(1))}\b", donor)
        tail = donor[m.end():]
        claim = sentence[:verb.end()] + tail
        if len(_WORD.findall(tail)) >= 3 and claim != sentence:
            return claim
    return None


def write(kind: str, sentence: str, doc_id: str, pools: dict[str, list[str]], donors: Sequence[tuple[str, str]],
          rng: random.Random) -> str | None:
    """One claim of ``kind`` from ``sentence``, or None when the sentence offers nothing to alter that way."""
    if kind == "quote":
        return sentence
    if kind == "trim":
        return _trim(sentence)
    if kind == "reword":
        return _reword(sentence)
    if kind == "number":
        return _number(sentence, rng)
    if kind == "negation":
        return _negation(sentence)
    if kind == "entity":
        return _entity(sentence, pools, rng)
    if kind == "qualifier":
        return _qualifier(sentence, rng)
    if kind == "crossed":
        return _crossed(sentence, doc_id, donors, rng)
    raise ValueError(f"unknown perturbation kind {kind!r}: one of {', '.join(KINDS)}")


def perturbed_claims(chunks: Sequence, per_kind: int = 50, seed: int = 0) -> list[Claim]:
    """Up to ``per_kind`` claims of each kind from the chunks' sentences (each chunk has chunk_id, doc_id, text)."""
    rng = random.Random(seed)
    rows = [(c.chunk_id, c.doc_id, s) for c in chunks if getattr(c, "kind", "prose") in ("prose", "mixed", "list")
            for s in _sentences(c.text)]
    pools = {"version": sorted({m.group(1) for _, _, s in rows for m in _VERSION.finditer(s)}),
             "identifier": sorted({m.group(1) for _, _, s in rows for m in _IDENTIFIER.finditer(s)}),
             "name": sorted({m.group(1) for _, _, s in rows for m in _NAME.finditer(s)})}
    donors = [(d, s) for _, d, s in rows]
    out: list[Claim] = []
    for kind in KINDS:
        order = list(rows)
        random.Random(f"{seed}:{kind}").shuffle(order)
        taken, used = 0, set()
        for chunk_id, doc_id, sentence in order:
            if taken >= per_kind:
                break
            if sentence in used:
                continue
            text = write(kind, sentence, doc_id, pools, donors, rng)
            if text is None or (kind not in ("quote",) and text == sentence):
                continue
            used.add(sentence)
            taken += 1
            out.append(Claim(kind, kind in FAITHFUL, text, sentence, chunk_id))
    return out


@dataclass(frozen=True)
class Judged:
    claim: Claim
    embedding_pass: bool     # the embedding validator (cosine + key facts) calls it supported
    nli_pass: bool           # the NLI model alone (its own most probable label, no quote rule): entailed
    combined_pass: bool      # the shipped validator: both
    nli_label: str
    nli_probs: tuple[float, ...] | None
    similarity: float | None
    nli_status: str
    quoted: bool = False     # the validator found the claim word for word in the cited chunk


def judge(claims: Sequence[Claim], chunks: dict, cfg, ctx) -> list[Judged]:
    """Each claim through the validator as the answer "<claim> [1]" citing its chunk (see the module docstring)."""
    from pipeline.trace import Candidate, GenerationTrace, Source
    from pipeline.validation import citations

    out = []
    for claim in claims:
        chunk = chunks[claim.chunk_id]
        candidate = Candidate(chunk_id=chunk.chunk_id, doc_id=chunk.doc_id, title=chunk.title, text=chunk.text,
                              heading_path=tuple(chunk.heading_path), kind=chunk.kind)
        gen = GenerationTrace(status="answered", backend="perturbation", answer=f"{claim.text} [1]",
                              sources=(Source(1, chunk.chunk_id, chunk.doc_id, chunk.title),))
        val = citations.run(gen, (candidate,), cfg, ctx)
        check = val.claims[0] if val.claims else None
        if check is None:
            out.append(Judged(claim, False, False, False, "", None, None, val.nli_status))
            continue
        before = check.embedding_verdict or check.verdict
        model_entails = check.nli_probs is not None and max(range(3), key=lambda k: check.nli_probs[k]) == 0
        out.append(Judged(claim, before == "supported", model_entails, check.verdict == "supported",
                          check.nli_label, check.nli_probs, check.best_similarity, val.nli_status, check.nli_quoted))
    return out


def rates(judged: Sequence[Judged]) -> dict:
    """Per kind and judge: claims, and how many passed (faithful kinds: should pass; altered: should fail)."""
    out: dict[str, dict] = {}
    for kind in KINDS:
        mine = [j for j in judged if j.claim.kind == kind]
        out[kind] = {"claims": len(mine), "faithful": kind in FAITHFUL,
                     "passed": {"embedding": sum(j.embedding_pass for j in mine), "nli": sum(j.nli_pass for j in mine),
                                "combined": sum(j.combined_pass for j in mine)}}
    return out
