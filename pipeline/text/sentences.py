"""What a sentence is, once for the whole answerer: the Markdown block patterns and the sentence-end rule that
both the extractive generator (:mod:`pipeline.generation.extractive`, which quotes sentences of a source) and
the claim splitter (:mod:`pipeline.validation.claims`, which checks sentences of an answer) use, so the
generator never quotes a span the validator would cut in two, or join with its neighbour.

**Blocks.** A heading (``#``), a fenced code block, a table rule (``|---|``), a list item (``-``, ``*``, ``+``,
``•``, ``–``, ``1.``, ``2)``) and a table row are recognised by line; a list item or row is one statement in
its own right, whatever its punctuation.

**Sentence ends within a block** (:func:`sentence_spans`). A text is cut at ``.``/``!``/``?`` only when the
punctuation (plus any closing quote, and any citation markers right after it) is followed by whitespace and
a character that can start a sentence: not a lower-case letter, unless it opens an identifier such as
``delivery.max_retries`` (technical text starts sentences with config keys), and not ``,;:)]}``. That one
rule keeps decimals (``0.5``), versions (``v2.3``), config keys and file names whole, because no space
follows their dot; ``e.g.``, ``i.e.``, ``vs.`` and the other :data:`ABBREVIATIONS` do not cut before a
capital either, and an ellipsis before a lower-case word elides rather than ends. Inline code spans are never
cut.
"""

from __future__ import annotations

import re

_PREFIX = r"(?:(?:source|src|doc)\s*#?\s*)?"
NUMBER_LIST = rf"{_PREFIX}\d+(?:\s*(?:[,;]|[-–])\s*{_PREFIX}\d+)*"
MARKER = re.compile(rf"\[\s*({NUMBER_LIST})\s*\]", re.IGNORECASE)
"""A citation marker: ``[1]``, ``[1, 3]``, ``[1-3]``, ``[Source 2]``."""
MARKER_RUN = re.compile(rf"(?:\s*\[\s*{NUMBER_LIST}\s*\])*", re.IGNORECASE)

LIST_ITEM = re.compile(r"^\s*(?:[-*+\u2022\u2013]|\d{1,3}[.)])\s+")
HEADING = re.compile(r"^\s{0,3}#{1,6}\s")
FENCE = re.compile(r"^\s*(```|~~~)")
TABLE_RULE = re.compile(r"^\s*\|?\s*:?-{2,}:?\s*(\|\s*:?-{2,}:?\s*)*\|?\s*$")

_TERMINAL = re.compile(r"[.!?]+[\"')\u201d\u2019]*")
_IDENTIFIER = re.compile(r"[a-z][a-z0-9]*(?:[._][a-z0-9]+)+\b")
_NON_SPACE = re.compile(r"\S")
_LONGEST_ABBREVIATION = 40

# Words ending in "." that do not end a sentence even before a capital ("e.g. Kafka", "vs. Redis").
ABBREVIATIONS = frozenset("""
e.g i.e cf vs etc approx appx incl excl est min max avg no nos fig figs sec sect ch vol p pp ed eds
dr mr mrs ms prof st jr sr inc ltd co corp dept univ jan feb mar apr jun jul aug sep sept oct nov dec
mon tue wed thu fri sat sun al resp ca viz
""".split())
# "etc." ends a sentence as often as not; only listed above so a following lower-case word never cuts.
_ENDS_OFTEN = frozenset({"etc"})


def code_spans(text: str) -> list[tuple[int, int]]:
    """(start, end) of every inline code span (```...```) on one line."""
    return [(m.start(), m.end()) for m in re.finditer(r"`[^`\n]+`", text)]


def inside(pos: int, spans: list[tuple[int, int]]) -> bool:
    return any(s <= pos < e for s, e in spans)


def sentence_spans(text: str, start: int = 0, end: int | None = None,
                   code: list[tuple[int, int]] | None = None) -> list[tuple[int, int]]:
    """(start, end) of each sentence of ``text[start:end]``, whitespace trimmed, empty ones dropped."""
    end = len(text) if end is None else end
    code = code_spans(text) if code is None else code
    spans, cur = [], start
    for m in _TERMINAL.finditer(text, start, end):
        if m.start() < cur or inside(m.start(), code) or _is_abbreviation(text, cur, m):
            continue
        stop = min(MARKER_RUN.match(text, m.end(), end).end(), end)
        # positions, not slices of the rest: a long run of full stops stays linear
        following = _NON_SPACE.search(text, stop, end)
        if following and not (text[stop].isspace() and _can_start_sentence(text, following.start(), end)):
            continue
        if m.group().startswith("..") and following and text[following.start()].islower():
            continue  # "proxy_next_upstream ... http_503": an ellipsis before a lower-case word elides, it does not end
        spans.append((cur, stop))
        cur = stop
    spans.append((cur, end))
    return [(s, e) for s, e in (_trim(text, s, e) for s, e in spans) if e > s]


def split_sentences(text: str) -> list[str]:
    """The sentences of one block of text (a paragraph), by :func:`sentence_spans`."""
    return [text[s:e] for s, e in sentence_spans(text)]


def _is_abbreviation(text: str, sentence_start: int, m: re.Match) -> bool:
    if m.group() != ".":
        return False
    # the word before the full stop, read backwards (at most _LONGEST_ABBREVIATION characters: no listed word
    # or run of initials is longer, and a bounded look keeps a long dotted token linear)
    first = m.start()
    while first > sentence_start and not (text[first - 1].isspace() or text[first - 1] in "(\"'"):
        if m.start() - first >= _LONGEST_ABBREVIATION:
            return False
        first -= 1
    if first == m.start():
        return False
    token = text[first:m.start()].lower()
    if token in _ENDS_OFTEN:
        following = text[m.end():m.end() + 2].strip()
        return bool(following) and following[0].islower()
    return token in ABBREVIATIONS or bool(re.fullmatch(r"(?:[a-z]\.)+[a-z]", token))


def _can_start_sentence(text: str, pos: int, end: int) -> bool:
    """Whether ``text[pos:end]`` can open a sentence. Capitals, digits, quotes and code start sentences; so does a
    lower-case identifier such as ``delivery.max_retries`` or ``harbor_cli`` (technical answers often open a
    sentence with a config key)."""
    ch = text[pos]
    if ch in ",;:)]}":
        return False
    if not ch.islower():
        return True
    return bool(_IDENTIFIER.match(text, pos, end))


def _trim(text: str, start: int, end: int) -> tuple[int, int]:
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return start, end
