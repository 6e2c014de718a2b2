"""Identifier-preserving tokenizer for the keyword leg and the answerer's lexical checks.

Support questions are full of identifiers — ``ERR_TIMEOUT_502``, ``delivery.timeout_ms``, ``v3.1``,
``harbor.toml`` — that generic tokenizers (Qdrant's built-in BM25 one included) split into pieces, so a
query for the exact code also matches every page that mentions "timeout" or "502". Here a compound token
is kept whole *and* its parts are emitted as well, so the exact identifier scores highest while a partial
query ("timeout 502") still matches.

Plain words are lower-cased, English stop words are dropped, and a light plural stemmer (Harman's
"S" stemmer, "How effective is suffixing?", JASIS 1991) folds "retries"/"retry", "endpoints"/"endpoint".
Identifiers and numbers are never stemmed.

The tokens feed the keyword leg's BM25 sparse vectors (:mod:`pipeline.retrieval.bm25`) and the lexical
overlap checks of the extractive generator.
"""

from __future__ import annotations

import re

from pipeline.text.memo import memoised

# A token: runs of letters/digits/underscores, optionally joined by . - / : into one compound
# ("delivery.timeout_ms", "v3.1", "ERR_TIMEOUT_502", "harbor.toml", "/v2/events").
_TOKEN = re.compile(r"[0-9A-Za-z_]+(?:[.\-/:][0-9A-Za-z_]+)*")
_PART_SPLIT = re.compile(r"[._\-/:]+")

STOP_WORDS = frozenset(
    """a an and are as at be been but by can could did do does for from had has have how i if in into is it
    its me my no not of on or our so such than that the their them then there these they this those to too
    us was we were what when where which who whom why will with would you your yours""".split()
)


def _stem(word: str) -> str:
    """Harman's S stemmer: only plural endings, only on alphabetic words."""
    if not word.isalpha() or len(word) <= 3:
        return word
    if word.endswith("ies") and not word.endswith(("eies", "aies")):
        return word[:-3] + "y"
    if word.endswith("es") and not word.endswith(("aes", "ees", "oes")):
        return word[:-1]
    if word.endswith("s") and not word.endswith(("us", "ss")):
        return word[:-1]
    return word


def _is_compound(raw: str) -> bool:
    return bool(_PART_SPLIT.search(raw)) or (any(c.isdigit() for c in raw) and any(c.isalpha() for c in raw))


def tokenize(text: str) -> list[str]:
    """Tokens of ``text`` in order; a compound identifier yields itself, then its parts."""
    return list(_tokens(text, True))


def whole_tokens(text: str) -> list[str]:
    """Tokens of ``text`` in order without the parts of compounds: ``v3.1`` is one token, never ``3`` and ``1``
    (what an exact comparison of numbers, versions and identifiers needs)."""
    return list(_tokens(text, False))


@memoised  # the same chunk texts are tokenized for every question of a golden walk (pipeline/text/memo.py)
def _tokens(text: str, parts: bool) -> tuple[str, ...]:
    out: list[str] = []
    for match in _TOKEN.finditer(text):
        raw = match.group(0).lower().strip("_")
        if not raw:
            continue
        if _PART_SPLIT.search(raw):
            out.append(raw)
            if parts:
                for part in _PART_SPLIT.split(raw):
                    if part and part not in STOP_WORDS:
                        out.append(part if not part.isalpha() else _stem(part))
        elif raw in STOP_WORDS:
            continue
        else:
            out.append(raw if _is_compound(raw) else _stem(raw))
    return tuple(out)
