"""Sentence-level claims of an answer: where each sentence starts and ends, its citation markers, and
whether it asserts a fact a source could back. Used by the citation validator (``pipeline.validation.citations``).

Algorithm (:func:`split_claims`):

1. **Blocks first.** Lines are grouped into blocks: a paragraph, one list item (``-``, ``*``, ``•``, ``1.``,
   ``2)``), one table row, a heading, a fenced code block. A list item or table row never runs into the next
   one, whatever its punctuation, because each item is one statement in the answer's own layout.
2. **Sentences within a block**, by the shared rule of :mod:`pipeline.text.sentences` (the extractive
   generator quotes by the same rule). A text block is cut at ``.``/``!``/``?`` only when the punctuation (plus
   any closing quote and any citation markers right after it) is followed by whitespace and a character
   that can start a sentence (not a lower-case letter, unless it opens an identifier such as
   ``delivery.max_retries``: technical answers start sentences with config keys). That one rule keeps
   decimals (``0.5``), versions (``v2.3``), config keys (``delivery.timeout_ms``) and file names whole,
   because no space follows their dot; ``e.g.``, ``i.e.``, ``vs.`` and friends are listed so a capital
   after them does not cut either. Error codes (``ERR_TIMEOUT_502``) contain no dot at all. Inline code
   spans are never cut and their brackets are never read as markers (```items[0]``` is code, not a
   citation).
3. **Markers**: ``[1]``, ``[1][2]``, ``[1, 3]``, ``[1-3]`` and ``[Source 2]``, anywhere in the sentence. A
   marker that directly follows the sentence's full stop (``... 30 s. [1] Next``) belongs to that sentence;
   a line holding only markers belongs to the claim above it. The cleaned ``text`` (what gets embedded) has
   the markers and markdown removed — they carry no meaning for an encoder — and ``markers`` keeps them.
4. **What is not a claim**: headings, a bold-only line, fenced code, an unmarked lead-in ending in ``:``
   ("Here is what the sources say:"), an unmarked question, an unmarked fragment of fewer than three words
   with no digit ("Yes.", "In short,"), and unmarked sentences about the sources rather than the world
   ("The sources do not say ...", "I could not find ..."). None of these asserts a fact a source could back,
   so reporting them as uncited would be noise. A sentence that carries a marker is *always* a claim: the
   model said a source backs it, and that is exactly what must be checked. Non-claims are returned too
   (``is_claim=False`` with ``why_not``) so the validator can list them and nothing is silently dropped.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from pipeline.text.sentences import FENCE, HEADING, LIST_ITEM, MARKER, TABLE_RULE, code_spans, inside, sentence_spans

_UNDERSCORE_BOLD = re.compile(r"(?<![\w`])__(?=\S)(.+?)(?<=\S)__(?![\w`])")
_BOLD_LINE = re.compile(r"^\s*(\*\*|__)[^*_]+(\*\*|__)\s*:?\s*$")
_MAX_RANGE = 50   # "[1-100000]" is a typo, not a hundred thousand citations

_META = re.compile(
    r"^(?:here(?:'s| is| are)\b|below (?:is|are)\b|in (?:short|summary)\b|to summari[sz]e\b|"
    r"(?:the )?(?:provided |given |available |retrieved )?(?:sources?|documents?|context|passages?) "
    r"(?:do|does|did) not\b|"
    r"(?:none of )?the (?:provided |given )?(?:sources?|documents?|passages?) (?:do|does|did)n't\b|"
    r"i (?:could not|couldn't|cannot|can't|did not|didn't|do not|don't) (?:find|see|know)\b|"
    r"(?:please )?note(?: that)?:?$)",
    re.IGNORECASE)


@dataclass(frozen=True)
class Sentence:
    """One sentence of the answer, as the splitter found it."""
    text: str                      # cleaned: markers and markdown removed, whitespace collapsed
    markers: tuple[int, ...]       # in order of appearance, without repeats
    start: int
    end: int
    is_claim: bool
    why_not: str = ""              # for non-claims: "heading", "lead-in", "question", ...


# -- splitting ----------------------------------------------------------------------------------------

def split_claims(answer: str) -> list[Sentence]:
    """Every sentence of ``answer`` with its markers and whether it is a factual claim (see module doc)."""
    code = code_spans(answer)
    out: list[Sentence] = []
    for start, end, kind in _blocks(answer):
        if kind in ("heading", "code"):
            text = _clean(answer[start:end]) if kind == "heading" else "(code block)"
            out.append(Sentence(text, _markers_in(answer, start, end, code), start, end, False, kind))
            continue
        for s, e in sentence_spans(answer, start, end, code):
            out.append(_classify(answer, s, e, code))
    return _attach_marker_only(out)






def _blocks(answer: str) -> list[tuple[int, int, str]]:
    """(start, end, kind) of paragraphs, list items, table rows, headings and fenced code, in order."""
    blocks: list[list] = []
    pos, in_fence, previous = 0, False, "blank"
    for line in answer.splitlines(keepends=True):
        start, end = pos, pos + len(line.rstrip("\r\n"))
        pos += len(line)
        body = answer[start:end]
        if in_fence or FENCE.match(body):
            if in_fence:
                blocks[-1][1] = end
            else:
                blocks.append([start, end, "code"])
            in_fence = in_fence != bool(FENCE.match(body))
            previous = "blank"
            continue
        if TABLE_RULE.match(body) and blocks and previous == "row":
            blocks[-1][2] = "heading"  # the row above a |---| rule is the table's header
        if not body.strip() or TABLE_RULE.match(body):
            previous = "blank"
            continue
        if HEADING.match(body) or _BOLD_LINE.match(body):
            blocks.append([start, end, "heading"])
            previous = "blank"
            continue
        item = LIST_ITEM.match(body)
        if item:
            blocks.append([start + item.end(), end, "text"])
            previous = "text"
        elif body.lstrip().startswith("|"):
            blocks.append([start, end, "text"])
            previous = "row"   # one table row is one claim
        elif previous == "text":
            blocks[-1][1] = end  # a wrapped line continues its paragraph or list item
        else:
            blocks.append([start, end, "text"])
            previous = "text"
    return [(s, e, k) for s, e, k in blocks]










def _markers_in(text: str, start: int, end: int, code: list[tuple[int, int]]) -> tuple[int, ...]:
    seen: list[int] = []
    for m in MARKER.finditer(text, start, end):
        if inside(m.start(), code):
            continue
        for n in marker_numbers(m.group(1)):
            if n not in seen:
                seen.append(n)
    return tuple(seen)


def marker_numbers(inner: str) -> list[int]:
    """The source numbers inside one marker's brackets: "1, 3" -> [1, 3], "1-3" -> [1, 2, 3]."""
    out: list[int] = []
    for part in re.split(r"\s*[,;]\s*", inner):
        bounds = [int(x) for x in re.findall(r"\d+", part)]
        if len(bounds) == 2 and 0 <= bounds[1] - bounds[0] <= _MAX_RANGE:
            out.extend(range(bounds[0], bounds[1] + 1))
        else:
            out.extend(bounds)
    return out


def _clean(raw: str) -> str:
    code = code_spans(raw)
    text = MARKER.sub(lambda m: m.group() if inside(m.start(), code) else "", raw)
    text = re.sub(r"^\s{0,3}#{1,6}\s+", "", text)
    text = _UNDERSCORE_BOLD.sub(r"\1", text)  # only paired __bold__: window.__pwned or a __dunder is text
    text = re.sub(r"\*\*|`", "", text).replace("|", " ")
    text = re.sub(r"^\s*>\s?", "", text)
    text = re.sub(r"\s+", " ", text).strip()
    return re.sub(r"\s+([.,;:!?])", r"\1", text)


def _classify(answer: str, start: int, end: int, code: list[tuple[int, int]]) -> Sentence:
    markers = _markers_in(answer, start, end, code)
    text = _clean(answer[start:end])
    why_not = "" if markers else _why_not_a_claim(text)
    return Sentence(text, markers, start, end, not why_not, why_not)


def _why_not_a_claim(text: str) -> str:
    words = re.findall(r"\w+", text)
    if not words:
        return "no words"
    if text.endswith(":"):
        return "lead-in"
    if text.endswith("?"):
        return "question"
    if _META.match(text):
        return "about the sources"
    if len(words) < 3 and not re.search(r"\d", text):
        return "fragment"
    return ""


def _attach_marker_only(sentences: list[Sentence]) -> list[Sentence]:
    """A sentence that is only markers ("[2]" on its own line) cites for the claim before it."""
    out: list[Sentence] = []
    for s in sentences:
        if s.markers and not re.search(r"\w", s.text) and out and out[-1].is_claim:
            prev = out[-1]
            merged = prev.markers + tuple(n for n in s.markers if n not in prev.markers)
            out[-1] = Sentence(prev.text, merged, prev.start, s.end, True)
        else:
            out.append(s)
    return out
