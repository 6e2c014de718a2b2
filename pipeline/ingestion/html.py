"""HTML to Markdown-like text for ingestion: structure kept, active content dropped.

Metadata may come from YAML front matter or from ``<meta name="id" content="...">`` tags (front matter
wins). Headings become ``#`` lines, lists ``-``/``1.`` items, ``<pre>`` fenced code, and ``<table>`` a Markdown
table (the first row is the header; pipes in cells are escaped), so the chunker can keep tables whole and
repeat their header when it has to split one by rows. ``<script>``, ``<style>``, ``<noscript>``,
``<template>``, ``<iframe>``, comments, CDATA sections, processing instructions, the doctype and hidden
elements are removed: text a reader of the page never sees should not become a source the answer can quote
(a page can hide "ignore all previous instructions" from its human readers in any of these). What counts as
hidden — attributes, inline styles, hiding classes and the simple rules of the page's ``<style>`` blocks, text
the colour of the background behind it — is :mod:`pipeline.ingestion.css`'s rule.

Nesting: the conversion recurses once per element level, so an element nested deeper than
:data:`MAX_DEPTH` has its content flattened to plain text (words kept, structure below that depth dropped):
a page nested a thousand levels deep is ingested instead of reaching Python's recursion limit.
"""

from __future__ import annotations

import re

from bs4 import BeautifulSoup, NavigableString, Tag
from bs4.element import CData, Comment, Declaration, Doctype, ProcessingInstruction

from pipeline.ingestion import css

MAX_DEPTH = 100
_DROP = ("script", "style", "noscript", "template", "iframe", "object", "embed", "svg", "head")
_NOT_TEXT = (Comment, CData, ProcessingInstruction, Declaration, Doctype)
_BLOCKS = {"p", "div", "section", "article", "main", "header", "footer", "aside", "nav", "figure",
           "figcaption", "details", "summary", "form", "fieldset", "address", "body", "html", "dl", "dd", "dt"}


META_FIELDS = ("id", "title", "version", "effective_date", "product", "topic", "status")


def html_metadata(html: str) -> dict[str, str]:
    """Document metadata from ``<meta name="id|version|effective_date|product|topic|status" content=...>``."""
    soup = BeautifulSoup(html, "html.parser")
    out = {}
    for tag in soup.find_all("meta"):
        name = str(tag.get("name", "")).strip().lower()
        if name in META_FIELDS and tag.get("content"):
            out[name] = str(tag["content"]).strip()
    return out


def html_to_markdown(html: str) -> tuple[str, str]:
    """Return (markdown_text, title) for an HTML document."""
    soup = BeautifulSoup(html, "html.parser")
    title_tag = soup.find("title")
    title = title_tag.get_text(" ", strip=True) if title_tag else ""
    rules = [rule for style in soup.find_all("style") for rule in css.stylesheet_rules(style.get_text())]
    for tag in soup.find_all(_DROP):
        tag.decompose()
    for node in soup.find_all(string=lambda text: isinstance(text, _NOT_TEXT)):
        node.extract()
    for tag in soup.find_all(lambda t: _is_hidden(t, rules)):
        tag.decompose()
    _flatten_deep(soup, MAX_DEPTH)
    if not title:
        h1 = soup.find("h1")
        title = h1.get_text(" ", strip=True) if h1 else ""
    blocks: list[str] = []
    _walk(soup, blocks)
    text = "\n\n".join(b for b in blocks if b.strip())
    return re.sub(r"\n{3,}", "\n\n", text).strip(), title


def _is_hidden(tag: Tag, rules: list[css.Rule]) -> bool:
    if not isinstance(tag, Tag) or tag.attrs is None or tag.decomposed:
        return False
    if tag.has_attr("hidden") or str(tag.get("aria-hidden", "")).strip().lower() == "true":
        return True
    if tag.name == "input" and str(tag.get("type", "")).lower() == "hidden":
        return True
    if tag.name == "dialog" and not tag.has_attr("open"):
        return True
    classes = _classes(tag)
    matched = css.matching(rules, tag.name, str(tag.get("id", "")), classes) if rules else []
    if css.hiding_class(classes) or any(rule.reason for rule in matched):
        return True
    decls = _declarations(tag, matched)
    return bool(css.hiding_declaration(decls, _background_behind(tag, rules) if "color" in decls else None))


def _classes(tag: Tag) -> frozenset[str]:
    value = tag.get("class") or []
    return frozenset(value.split() if isinstance(value, str) else value)


def _declarations(tag: Tag, matched: list[css.Rule]) -> dict[str, str]:
    """The inline style, with the legacy ``<font color>`` and ``bgcolor`` attributes as declarations."""
    decls = css.declarations(str(tag.get("style", "")))
    if tag.name == "font" and tag.get("color") and "color" not in decls:
        decls["color"] = str(tag["color"]).strip().lower()
    if tag.get("bgcolor") and "background-color" not in decls and "background" not in decls:
        decls["background-color"] = str(tag["bgcolor"]).strip().lower()
    background = next((r.background for r in reversed(matched) if r.background), "")
    if background and "background-color" not in decls and "background" not in decls:
        decls["background"] = background
    colour = next((r.colour for r in reversed(matched) if r.colour), "")
    if colour and "color" not in decls:
        decls["color"] = colour
    return decls


def _background_behind(tag: Tag, rules: list[css.Rule]) -> tuple | None:
    """The opaque background colour of the nearest ancestor that sets one (inline, bgcolor or a simple rule)."""
    for parent in tag.parents:
        if not isinstance(parent, Tag) or parent.attrs is None:
            continue
        matched = css.matching(rules, parent.name, str(parent.get("id", "")), _classes(parent)) if rules else []
        decls = _declarations(parent, matched)
        for key in ("background-color", "background"):
            for token in decls.get(key, "").split():
                found = css.colour(token)
                if found is not None:
                    return found if found[3] > 0.99 else None
    return None


def _flatten_deep(soup: BeautifulSoup, limit: int) -> None:
    """Replace the content of every element at depth ``limit`` that has child elements by its words."""
    depth: dict[int, int] = {id(soup): 0}
    deepest: list[Tag] = []
    for node in soup.descendants:
        if not isinstance(node, Tag):
            continue
        level = depth.get(id(node.parent), 0) + 1
        depth[id(node)] = level
        if level == limit and any(isinstance(child, Tag) for child in node.children):
            deepest.append(node)
    for node in deepest:
        words = " ".join(node.get_text(" ").split())
        node.clear()
        node.append(NavigableString(words))


def _inline(node) -> str:
    """Text of an inline run, with code spans kept and whitespace collapsed."""
    if isinstance(node, NavigableString):
        return str(node)
    if not isinstance(node, Tag):
        return ""
    if node.name == "br":
        return "\n"
    if node.name == "code":
        return f"`{node.get_text()}`"
    if node.name in ("strong", "b"):
        inner = "".join(_inline(c) for c in node.children).strip()
        return f"**{inner}**" if inner else ""
    if node.name in ("em", "i"):
        inner = "".join(_inline(c) for c in node.children).strip()
        return f"*{inner}*" if inner else ""
    return "".join(_inline(c) for c in node.children)


def _clean(text: str) -> str:
    lines = [re.sub(r"[ \t\r\f\v]+", " ", line).strip() for line in text.split("\n")]
    return "\n".join(line for line in lines if line)


def _walk(node: Tag, blocks: list[str]) -> None:
    buffer: list[str] = []

    def flush() -> None:
        text = _clean("".join(buffer))
        if text:
            blocks.append(text)
        buffer.clear()

    for child in node.children:
        if isinstance(child, NavigableString):
            buffer.append(str(child))
            continue
        if not isinstance(child, Tag):
            continue
        name = child.name
        if name and re.fullmatch(r"h[1-6]", name):
            flush()
            blocks.append("#" * int(name[1]) + " " + _clean(_inline(child)).replace("\n", " "))
        elif name in ("ul", "ol"):
            flush()
            blocks.append(_list(child, ordered=name == "ol"))
        elif name == "pre":
            flush()
            code = child.get_text()
            lang = ""
            inner = child.find("code")
            if inner is not None:
                for cls in inner.get("class") or []:
                    if cls.startswith("language-"):
                        lang = cls[len("language-"):]
            blocks.append(f"```{lang}\n{code.strip(chr(10))}\n```")
        elif name == "table":
            flush()
            table = _table(child)
            if table:
                blocks.append(table)
        elif name == "blockquote":
            flush()
            inner: list[str] = []
            _walk(child, inner)
            blocks.append("\n".join("> " + line for block in inner for line in block.splitlines()))
        elif name == "hr":
            flush()
        elif name in _BLOCKS or name == "li":
            flush()
            _walk(child, blocks)
        else:
            buffer.append(_inline(child))
    flush()


def _list(tag: Tag, ordered: bool, depth: int = 0) -> str:
    lines = []
    number = 0
    for item in tag.find_all("li", recursive=False):
        number += 1
        nested = [c for c in item.children if isinstance(c, Tag) and c.name in ("ul", "ol")]
        for n in nested:
            n.extract()
        text = _clean(_inline(item)).replace("\n", " ")
        marker = f"{number}." if ordered else "-"
        lines.append("   " * depth + f"{marker} {text}")
        for n in nested:
            lines.append(_list(n, ordered=n.name == "ol", depth=depth + 1))
    return "\n".join(lines)


def _table(tag: Tag) -> str:
    rows = []
    for tr in tag.find_all("tr"):
        cells = [_clean(_inline(cell)).replace("\n", " ").replace("|", "\\|") for cell in tr.find_all(["th", "td"])]
        if cells:
            rows.append(cells)
    if not rows:
        return ""
    width = max(len(r) for r in rows)
    rows = [r + [""] * (width - len(r)) for r in rows]
    header, body = rows[0], rows[1:]
    lines = ["| " + " | ".join(header) + " |", "| " + " | ".join("---" for _ in header) + " |"]
    lines += ["| " + " | ".join(r) + " |" for r in body]
    return "\n".join(lines)
