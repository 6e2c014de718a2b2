"""Markdown: what the rendered page does not show is not ingested, as for HTML (:mod:`pipeline.ingestion.html`).

Markdown passes raw HTML through, so a ``.md`` file can hide text from its readers exactly as a web page can.
Removed, everywhere except inside fenced code blocks and inline code spans (which show their text literally):

- HTML comments ``<!-- ... -->`` (across lines too; ``<!-->`` and ``<!--->`` are empty ones), CDATA sections,
  processing instructions and declarations (``<!doctype>``), which browsers all treat as comments. A comment
  that opens a line and never closes hides the rest of the rendered document (a CommonMark HTML block runs to
  its ``-->``), so the rest is dropped; one opened inside a paragraph and never closed is literal text and stays;
- link reference definitions, never rendered themselves: the comment idiom (``[//]: # (text)``,
  ``[comment]: <> (text)``, any definition whose destination is ``#``, ``<>`` or ``//``) is dropped, any other
  keeps only its URL (its label and title are never shown); GFM footnotes (``[^1]: ...``) are shown and kept;
- raw HTML elements a browser would not show: ``<script>``, ``<style>``, ``<template>``, ``<noscript>``,
  ``<head>``, ``<title>``, and any element hidden by its attributes, inline style, hiding class or a rule of the
  document's own ``<style>`` blocks (:mod:`pipeline.ingestion.css`). An unclosed hidden element hides to the
  end of its paragraph, or to the end of the document for a block element.

Indented code blocks are not told apart (a four-space indent also continues a list item, where a comment is
hidden), so a comment inside one is removed too: dropping a shown example is the safe error.

Every scan is a ``str.find`` loop or an anchored pattern without nested quantifiers: linear in the input.
"""

from __future__ import annotations

import bisect
import re

from pipeline.ingestion import css

_FENCE = re.compile(r"^[ \t]*(`{3,}|~{3,})")
_BACKTICKS = re.compile(r"`+")
_BLANK_LINE = re.compile(r"\n[ \t]*\n")
_LINK_DEFINITION = re.compile(r"^ {0,3}\[(?!\^)((?:[^\[\]\\\n]|\\.){1,999})\]:[ \t]*(<[^<>\n]*>|[^\s<>]\S*)"
                              r"(?:[ \t]+(?:\"[^\"\n]*\"|'[^'\n]*'|\([^()\n]*\)))?[ \t]*$", re.MULTILINE)
_COMMENT_DESTINATIONS = {"", "#", "<>", "<#>", "//", "/", "<//>"}
_OPEN_TAG = re.compile(r"<([A-Za-z][A-Za-z0-9-]{0,30})((?:[ \t\n/][^<>]*)?)>")
_ATTRIBUTE = re.compile(r"""([^\s"'=<>/`]+)(?:[ \t\n]*=[ \t\n]*("[^"]*"|'[^']*'|[^\s"'=<>`]+))?""")
_ALWAYS_HIDDEN = {"script", "style", "template", "noscript", "head", "title"}
_VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}
_BLOCK = {"div", "section", "article", "aside", "header", "footer", "nav", "main", "p", "table", "ul", "ol", "dl",
          "blockquote", "details", "figure", "form", "fieldset", "dialog", "pre", "address", "center", "body",
          "html"} | _ALWAYS_HIDDEN
_HIDING_OPENERS = (("<!--", ("-->", "--!>")), ("<![CDATA[", ("]]>",)), ("<?", (">",)), ("<!", (">",)))
_HIDING_START = re.compile(r"<[!?]")
_MASK = "\x00"


def strip_hidden(text: str) -> str:
    """``text`` (Markdown) without what its rendering hides; see the module docstring."""
    text = text.replace(_MASK, "")
    masked, kept = _mask_code(text)
    masked = _strip_comments(masked)
    masked = _LINK_DEFINITION.sub(_link_definition, masked)
    if "<" in masked:
        masked = _strip_hidden_elements(masked)
    return _unmask(masked, kept)


# -- code: masked so that nothing inside it is touched -------------------------------------------------------------

def _mask_code(text: str) -> tuple[str, list[str]]:
    """Fenced blocks and code spans replaced by ``\\x00<n>\\x00``; the originals in a list."""
    kept: list[str] = []
    out: list[str] = []
    prose: list[str] = []
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        opener = _FENCE.match(lines[i])
        if not opener or (opener.group(1)[0] == "`" and "`" in lines[i][opener.end():]):
            prose.append(lines[i])
            i += 1
            continue
        marker = opener.group(1)
        j = i + 1
        while j < len(lines) and not _closes(lines[j], marker):
            j += 1
        out.append(_mask_spans("\n".join(prose), kept) if prose else None)
        prose = []
        kept.append("\n".join(lines[i:j + 1]))
        out.append(f"{_MASK}{len(kept) - 1}{_MASK}")
        i = j + 1
    if prose:
        out.append(_mask_spans("\n".join(prose), kept))
    return "\n".join(part for part in out if part is not None), kept


def _closes(line: str, marker: str) -> bool:
    stripped = line.strip()
    return len(stripped) >= len(marker) and set(stripped) == {marker[0]}


def _mask_spans(text: str, kept: list[str]) -> str:
    """Inline code spans: a run of n backticks up to the next run of exactly n in the same paragraph."""
    runs = [(m.start(), m.end()) for m in _BACKTICKS.finditer(text)]
    if len(runs) < 2:
        return text
    breaks = [m.start() for m in _BLANK_LINE.finditer(text)]
    by_key: dict[tuple[int, int], list[int]] = {}
    for index, (start, end) in enumerate(runs):
        by_key.setdefault((bisect.bisect(breaks, start), end - start), []).append(index)
    out, position, index = [], 0, 0
    while index < len(runs):
        start, end = runs[index]
        same = by_key[(bisect.bisect(breaks, start), end - start)]
        after = bisect.bisect(same, index)
        if after == len(same):
            index += 1  # no closing run: the backticks are literal
            continue
        closer = same[after]
        out.append(text[position:start])
        kept.append(text[start:runs[closer][1]])
        out.append(f"{_MASK}{len(kept) - 1}{_MASK}")
        position = runs[closer][1]
        index = closer + 1
    out.append(text[position:])
    return "".join(out)


def _unmask(text: str, kept: list[str]) -> str:
    if not kept:
        return text
    parts = text.split(_MASK)
    return "".join(kept[int(p)] if k % 2 and p.isdigit() and int(p) < len(kept) else p
                   for k, p in enumerate(parts))


# -- comments and their kin ------------------------------------------------------------------------------------------

def _strip_comments(text: str) -> str:
    out, i = [], 0
    missing: set[str] = set()  # closers absent after some point are absent after every later one
    for match in _HIDING_START.finditer(text):
        start = match.start()
        if start < i:
            continue
        if text.startswith(("<!-->", "<!--->"), start):
            out.append(text[i:start])
            i = text.index(">", start + 4) + 1
            continue
        opener, closers = next((o, c) for o, c in _HIDING_OPENERS if text.startswith(o, start))
        if opener == "<!" and not (start + 2 < len(text) and text[start + 2].isalpha()):
            continue  # "<!" and no declaration name: literal text
        found, length = -1, 0
        for closer in closers:
            if closer in missing:
                continue
            at = text.find(closer, start + len(opener))
            if at < 0:
                missing.add(closer)
            elif found < 0 or at < found:
                found, length = at, len(closer)
        if found >= 0:
            out.append(text[i:start])
            i = found + length
        elif opener == "<!--" and not text[text.rfind("\n", 0, start) + 1:start].strip():
            out.append(text[i:start])  # an unclosed comment opening a block hides the rest of the document
            return "".join(out).rstrip(" ")
    out.append(text[i:])
    return "".join(out)


def _link_definition(match: re.Match) -> str:
    destination = match.group(2)
    if destination in _COMMENT_DESTINATIONS:
        return ""
    return destination[1:-1] if destination.startswith("<") and destination.endswith(">") else destination


# -- raw HTML elements ----------------------------------------------------------------------------------------------

def _attributes(raw: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for name, value in _ATTRIBUTE.findall(raw):
        if value[:1] in ("'", '"'):
            value = value[1:-1]
        out.setdefault(name.lower(), value)
    return out


def _hidden(name: str, attrs: dict[str, str], rules: list[css.Rule]) -> bool:
    if name in _ALWAYS_HIDDEN or "hidden" in attrs or attrs.get("aria-hidden", "").strip().lower() == "true":
        return True
    if (name == "input" and attrs.get("type", "").lower() == "hidden") or (name == "dialog" and "open" not in attrs):
        return True
    classes = frozenset(attrs.get("class", "").split())
    if css.hiding_class(classes) or css.hiding_declaration(css.declarations(attrs.get("style", ""))):
        return True
    return any(r.reason for r in css.matching(rules, name, attrs.get("id", ""), classes))


def _stylesheet(text: str) -> list[css.Rule]:
    rules, i, lower = [], 0, text.lower()
    while (start := lower.find("<style", i)) >= 0:
        body = lower.find(">", start)
        end = lower.find("</style", body if body >= 0 else start)
        if body < 0:
            break
        rules.extend(css.stylesheet_rules(text[body + 1:end if end >= 0 else len(text)]))
        i = end if end >= 0 else len(text)
    return rules


def _strip_hidden_elements(text: str) -> str:
    rules = _stylesheet(text)
    lower = text.lower()
    out, position = [], 0
    for match in _OPEN_TAG.finditer(text):
        if match.start() < position:
            continue  # inside an element already removed
        name = match.group(1).lower()
        if not _hidden(name, _attributes(match.group(2)), rules):
            continue
        out.append(text[position:match.start()])
        if name in _VOID or match.group(2).rstrip().endswith("/"):
            position = match.end()
        else:
            position = _element_end(text, lower, name, match.end())
    out.append(text[position:])
    return "".join(out)


def _element_end(text: str, lower: str, name: str, start: int) -> int:
    """Where the element opened just before ``start`` ends: its matching close tag, or, never closed, the end of
    its paragraph (an inline element) or of the document (a block element)."""
    pattern = re.compile(rf"<(/?){re.escape(name)}(?=[\s/>])[^<>]*>")
    blank = None if name in _BLOCK else _BLANK_LINE.search(text, start)
    limit = blank.start() if blank else len(text)  # inline HTML does not outlive its paragraph
    depth = 1
    for tag in pattern.finditer(lower, start, limit):
        depth += -1 if tag.group(1) else 1
        if depth == 0:
            return tag.end()
    return limit
