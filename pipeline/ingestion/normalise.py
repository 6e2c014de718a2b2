"""Text normalisation at ingestion: what a reader cannot see is removed, look-alike letters are folded.

Documents are untrusted: a page can split "ig\u200bnore all previous instructions" with zero-width
characters, reverse it on screen with bidi overrides (the "Trojan Source" trick, Boucher & Anderson 2021),
spell a whole instruction in invisible Unicode tag characters (U+E0000 block) after a normal sentence, or
write it with Cyrillic look-alikes ("Ign\u043ere"), so that neither a reader nor the instruction detector sees
what a model reads. :func:`normalise_text` therefore:

- removes every format character (general category Cf) — soft hyphen, zero-width space, word joiner and
  invisible operators, bidi embeddings/overrides/isolates and marks, BOM, interlinear annotation marks,
  prepended concatenation marks, the tag block — and the other default-ignorable code points (Unicode's
  Default_Ignorable_Code_Point: Hangul fillers, the combining grapheme joiner, unassigned ignorables), plus C0/C1
  control characters other than tab, newline, carriage return and NEL; a lone surrogate (only JSON's ``\\ud800``
  escapes can make one) becomes U+FFFD;
- keeps what a script needs: a zero-width (non-)joiner between two letters or marks of a script that shapes
  with them (Arabic, Persian, Syriac, the Indic scripts, Myanmar, Khmer, Mongolian, ...), a zero-width joiner
  between two emoji (a family, a profession), one variation selector after a character it can select a form
  of (emoji presentation, a CJK ideographic variant, a Mongolian form), and the three tag sequences that spell
  the RGI subdivision flags (England, Scotland, Wales); everywhere else these are removed too, so a run of
  variation selectors cannot smuggle bytes after an emoji;
- turns full-width ASCII and mathematical alphanumeric letters into plain ASCII, and inside a word that
  mixes Latin letters with Cyrillic or Greek ones, folds the look-alikes to their Latin twins (UTS #39's
  mixed-script test: no legitimate word mixes the two; an all-Cyrillic or all-Greek word is left alone).
"""

from __future__ import annotations

import re
import unicodedata

# Cf (Unicode 15.1) and the other Default_Ignorable_Code_Point ranges, less the contextual ones handled below
# (ZWNJ/ZWJ, variation selectors, Mongolian free variation selectors); tests/pipeline/ingestion/test_normalise.py
# checks this against the running Python's Unicode database.
_INVISIBLE = ("\u00ad\u034f\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891\u08e2\u115f\u1160\u17b4\u17b5\u180e"
              "\u200b\u200e\u200f\u202a-\u202e\u2060-\u206f\u3164\ufeff\uffa0\ufff0-\ufffb"
              "\U000110bd\U000110cd\U00013430-\U0001343f\U0001bca0-\U0001bca3\U0001d173-\U0001d17a"
              "\U000e0000-\U000e00ff\U000e01f0-\U000e0fff")
_CONTROLS = "\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x84\x86-\x9f"
_FLAG = "\U0001f3f4\U000e0067\U000e0062(?:\U000e0065\U000e006e\U000e0067|\U000e0073\U000e0063\U000e0074|" \
        "\U000e0077\U000e006c\U000e0073)\U000e007f"
_STRIP = re.compile(f"({_FLAG})|[{_INVISIBLE}{_CONTROLS}]+")
_SURROGATE = re.compile("[\ud800-\udfff]")
_JOINERS = re.compile("[\u200c\u200d]+")
_SELECTORS = re.compile("[\ufe00-\ufe0f\u180b-\u180d\u180f\U000e0100-\U000e01ef]+")
# Scripts whose shaping uses ZWNJ/ZWJ between letters.
_JOINING_SCRIPTS = ((0x0600, 0x08FF), (0x0900, 0x0DFF), (0x0F00, 0x0FFF), (0x1000, 0x109F), (0x1780, 0x18AF),
                    (0x1900, 0x1AAF), (0x1B00, 0x1BFF), (0xA800, 0xA8FF), (0xA980, 0xAAFF), (0xABC0, 0xABFF),
                    (0xFB50, 0xFDFF), (0xFE70, 0xFEFF), (0x10A00, 0x10A5F), (0x10AC0, 0x10AFF), (0x10B80, 0x10BAF),
                    (0x10D00, 0x10D3F), (0x10F30, 0x11FFF), (0x1E900, 0x1E95F))
_CJK = ((0x3400, 0x4DBF), (0x4E00, 0x9FFF), (0xF900, 0xFAFF), (0x20000, 0x3FFFF))
_WIDE = re.compile(r"[\uff01-\uff5e\U0001d400-\U0001d7ff]")
_WORD = re.compile(r"[^\W\d_]+")
# Cyrillic and Greek letters that render like a Latin letter (after Unicode's confusables.txt).
_LOOKALIKES = str.maketrans(
    "\u0430\u0435\u043e\u0440\u0441\u0443\u0445\u0456\u0458\u0455\u0501\u04bb\u043a"
    "\u0410\u0412\u0415\u041a\u041c\u041d\u041e\u0420\u0421\u0422\u0425\u0423\u0406\u0408\u0405"
    "\u03b1\u03bf\u03bd\u03b9\u03ba\u03c1\u03c5\u0391\u0392\u0395\u0396\u0397\u0399\u039a\u039c\u039d\u039f"
    "\u03a1\u03a4\u03a5\u03a7",
    "aeopcyxijsdhk"
    "ABEKMHOPCTXYIJS"
    "aovikpuABEZHIKMNO"
    "PTYX")


def normalise_text(text: str) -> str:
    """Remove invisible characters and fold look-alike letters (see the module docstring)."""
    text = _STRIP.sub(lambda m: m.group(1) or "", text)
    text = _SURROGATE.sub("\ufffd", text)
    if "\u200c" in text or "\u200d" in text:
        text = _JOINERS.sub(lambda m: _joiner(m, text), text)
    if _SELECTORS.search(text):
        text = _SELECTORS.sub(lambda m: _selector(m, text), text)
    text = _WIDE.sub(lambda m: unicodedata.normalize("NFKC", m.group(0)), text)
    return _WORD.sub(_fold_word, text)


def _in(ch: str, ranges: tuple[tuple[int, int], ...]) -> bool:
    cp = ord(ch)
    return any(lo <= cp <= hi for lo, hi in ranges)


def _shapes_with_joiners(ch: str) -> bool:
    return unicodedata.category(ch)[0] in "LM" and _in(ch, _JOINING_SCRIPTS)


def _emoji(ch: str) -> bool:
    return unicodedata.category(ch) in ("So", "Sk") or ch in "\ufe0f\u20e3\U000e007f"


def _joiner(match: re.Match, text: str) -> str:
    before = text[match.start() - 1] if match.start() else ""
    after = text[match.end()] if match.end() < len(text) else ""
    if not before or not after:
        return ""
    if _shapes_with_joiners(before) and _shapes_with_joiners(after):
        return match.group(0)[0]
    if "\u200d" in match.group(0) and _emoji(before) and unicodedata.category(after) == "So":
        return "\u200d"
    return ""


def _selector(match: re.Match, text: str) -> str:
    before = text[match.start() - 1] if match.start() else ""
    first = match.group(0)[0]
    if not before or before.isspace() or unicodedata.category(before)[0] in "CZ":
        return ""
    if first in "\ufe0e\ufe0f":                       # text or emoji presentation
        return first
    if "\ufe00" <= first <= "\ufe0d":                 # standardized variants: CJK, maths, Myanmar, ...
        return first if ord(before) > 0x7F and unicodedata.category(before)[0] in "LS" else ""
    if "\u180b" <= first <= "\u180f":                 # Mongolian free variation selectors
        return first if 0x1800 <= ord(before) <= 0x18AF else ""
    return first if _in(before, _CJK) else ""         # ideographic variation selectors


def _fold_word(match: re.Match) -> str:
    word = match.group(0)
    folded = word.translate(_LOOKALIKES)
    if folded == word or not any("a" <= ch.lower() <= "z" for ch in word):
        return word  # no look-alike, or no Latin letter: an ordinary Cyrillic or Greek word
    return folded
