"""Structure-aware chunking: sections by heading, tables, lists and code kept whole.

The body is parsed into blocks (headings, paragraphs, lists, tables, fenced code, quotes). A chunk never
crosses a level-1/2 heading, so it belongs to one section, and its ``heading_path`` (document title, then the
section headings above it) goes with it into the index. Within a section, blocks are packed up to
``max_tokens`` words. The rules that keep a chunk meaningful on its own:

- a table, list or code block is never split mid-way; an oversized *table* is split by rows with its header
  row repeated in every piece, an oversized *list* (over 3x the budget) between items, and code is kept
  whole however long it is (half a config file is worse than a long chunk);
- an oversized paragraph is split at sentence boundaries;
- consecutive chunks of the same section overlap by up to ``overlap_tokens`` words of whole trailing
  sentences of prose (never a partial table or code block).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from pipeline.config import ChunkingConfig
from pipeline.ingestion.documents import Chunk, Document

# An ATX heading; its text and closing #s are taken apart in :func:`_heading` (a pattern doing both backtracks
# cubically on a long run of spaces).
_HEADING = re.compile(r"^(#{1,6})[ \t]+(\S.*)$")
_FENCE = re.compile(r"^(\s*)(`{3,}|~{3,})")
_LIST_ITEM = re.compile(r"^\s*(?:[-*+]|\d{1,3}[.)])\s+")
_TABLE_ROW = re.compile(r"^\s*\|.*\|\s*$")
_TABLE_SEP = re.compile(r"^\s*\|?\s*:?-{3,}:?\s*(\|\s*:?-{3,}:?\s*)*\|?\s*$")
# Sentence end: . ! ? followed by space and an upper-case letter/digit/quote, not after common abbreviations.
_SENTENCE_END = re.compile(
    r"(?<!\be\.g\.)(?<!\bi\.e\.)(?<!\betc\.)(?<!\bvs\.)(?<!\bNo\.)(?<!\bcf\.)(?<=[.!?])\s+(?=[\"'(\[A-Z0-9`*])")


@dataclass(frozen=True)
class Block:
    kind: str          # heading | prose | list | table | code | quote
    text: str
    level: int = 0     # heading level

    @property
    def words(self) -> int:
        return len(self.text.split())


def parse_blocks(body: str) -> list[Block]:
    """Split a Markdown-like body into structural blocks."""
    lines = body.split("\n")
    blocks: list[Block] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if not line.strip():
            i += 1
            continue
        fence = _FENCE.match(line)
        if fence:
            marker = fence.group(2)
            j = i + 1
            while j < len(lines) and not lines[j].strip().startswith(marker[0] * len(marker)):
                j += 1
            blocks.append(Block("code", "\n".join(lines[i:j + 1])))
            i = j + 1
            continue
        heading = _HEADING.match(line)
        if heading:
            blocks.append(Block("heading", _heading_text(heading.group(2)), level=len(heading.group(1))))
            i += 1
            continue
        if _TABLE_ROW.match(line) and i + 1 < len(lines) and _TABLE_SEP.match(lines[i + 1]):
            j = i + 2
            while j < len(lines) and _TABLE_ROW.match(lines[j]):
                j += 1
            blocks.append(Block("table", "\n".join(lines[i:j])))
            i = j
            continue
        if _LIST_ITEM.match(line):
            j = i + 1
            while j < len(lines):
                nxt = lines[j]
                if _LIST_ITEM.match(nxt) or (nxt.startswith(("  ", "\t")) and nxt.strip()):
                    j += 1
                elif not nxt.strip() and j + 1 < len(lines) and (
                        _LIST_ITEM.match(lines[j + 1]) or lines[j + 1].startswith(("  ", "\t"))):
                    j += 1  # a blank line inside a loose list
                else:
                    break
            blocks.append(Block("list", "\n".join(lines[i:j]).strip("\n")))
            i = j
            continue
        if line.lstrip().startswith(">"):
            j = i
            while j < len(lines) and lines[j].lstrip().startswith(">"):
                j += 1
            blocks.append(Block("quote", "\n".join(lines[i:j])))
            i = j
            continue
        j = i
        while j < len(lines) and lines[j].strip() and not (
                _HEADING.match(lines[j]) or _FENCE.match(lines[j]) or _LIST_ITEM.match(lines[j])
                or (_TABLE_ROW.match(lines[j]) and j + 1 < len(lines) and _TABLE_SEP.match(lines[j + 1]))):
            j += 1
        blocks.append(Block("prose", " ".join(part.strip() for part in lines[i:j])))
        i = j
    return blocks


def _heading_text(text: str) -> str:
    """A heading's text without its optional closing sequence of #s (CommonMark: preceded by a space)."""
    text = text.strip()
    bare = text.rstrip("#")
    if bare != text and (not bare or bare[-1] in " \t"):
        text = bare.strip()
    return text or "#"


def split_sentences(text: str) -> list[str]:
    return [s for s in _SENTENCE_END.split(text) if s.strip()]


def _split_oversized(block: Block, budget: int) -> list[Block]:
    """Pieces of a block that is larger than the budget, each a whole unit of its kind."""
    if block.kind == "table":
        rows = block.text.split("\n")
        header, body = rows[:2], rows[2:]
        pieces, current = [], []
        header_words = sum(len(r.split()) for r in header)
        for row in body:
            if current and header_words + sum(len(r.split()) for r in current) + len(row.split()) > budget:
                pieces.append(Block("table", "\n".join(header + current)))
                current = []
            current.append(row)
        if current:
            pieces.append(Block("table", "\n".join(header + current)))
        return pieces
    if block.kind == "list" and block.words > 3 * budget:
        items, current = [], []
        for line in block.text.split("\n"):
            if _LIST_ITEM.match(line) and current:
                items.append("\n".join(current))
                current = []
            current.append(line)
        if current:
            items.append("\n".join(current))
        return _pack_texts(items, budget, "list", "\n")
    if block.kind in ("prose", "quote"):
        return _pack_texts(split_sentences(block.text), budget, block.kind, " ")
    return [block]  # code, and lists up to 3x the budget, stay whole


def _pack_texts(parts: list[str], budget: int, kind: str, joiner: str) -> list[Block]:
    pieces, current, words = [], [], 0
    for part in parts:
        n = len(part.split())
        if current and words + n > budget:
            pieces.append(Block(kind, joiner.join(current)))
            current, words = [], 0
        current.append(part)
        words += n
    if current:
        pieces.append(Block(kind, joiner.join(current)))
    return pieces


def _overlap_tail(blocks: list[Block], overlap: int) -> list[Block]:
    """Whole trailing sentences of the last prose block, up to ``overlap`` words."""
    if overlap <= 0 or not blocks or blocks[-1].kind != "prose":
        return []
    tail, words = [], 0
    for sentence in reversed(split_sentences(blocks[-1].text)):
        n = len(sentence.split())
        if words + n > overlap:
            break
        tail.insert(0, sentence)
        words += n
    return [Block("prose", " ".join(tail))] if tail else []


def chunk_document(doc: Document, cfg: ChunkingConfig) -> list[Chunk]:
    budget = cfg.max_tokens
    sections: list[tuple[tuple[str, ...], list[Block]]] = []
    path: list[tuple[int, str]] = []
    current: list[Block] = []
    current_path: tuple[str, ...] = ()
    pending: tuple[int, str] | None = None  # a heading with no content under it yet
    for block in parse_blocks(doc.text):
        if block.kind == "heading":
            if block.level == 1 and block.text.strip() == doc.title.strip() and not path and not current:
                continue  # the H1 that repeats the title is already the root of the heading path
            if pending and pending[0] >= block.level:  # an empty section: its heading would leave the index
                sections.append((current_path, [Block("prose", "#" * pending[0] + " " + pending[1])]))
            if block.level <= 2:
                if current:
                    sections.append((current_path, current))
                current = []
                path = [(lvl, txt) for lvl, txt in path if lvl < block.level] + [(block.level, block.text)]
                current_path = tuple(txt for _, txt in path)
                pending = (block.level, block.text)
                continue
            path = [(lvl, txt) for lvl, txt in path if lvl < block.level] + [(block.level, block.text)]
            if not current:
                current_path = tuple(txt for _, txt in path)
                pending = (block.level, block.text)
                continue
            current.append(Block("prose", "#" * block.level + " " + block.text))  # sub-heading kept inline
            pending = None
            continue
        current.append(block)
        pending = None
    if current:
        sections.append((current_path, current))
    elif pending:
        sections.append((current_path, [Block("prose", "#" * pending[0] + " " + pending[1])]))

    chunks: list[Chunk] = []
    for heading_path, blocks in sections:
        full_path = (doc.title,) + heading_path
        units: list[Block] = []
        for block in blocks:
            units.extend(_split_oversized(block, budget) if block.words > budget else [block])
        packed: list[Block] = []
        fresh = 0  # units in ``packed`` that are not overlap carried from the previous chunk
        words = 0
        for unit in units:
            if fresh and words + unit.words > budget:
                chunks.append(_make_chunk(doc, len(chunks), packed, full_path))
                packed = _overlap_tail(packed, cfg.overlap_tokens)
                fresh, words = 0, sum(b.words for b in packed)
            packed.append(unit)
            fresh += 1
            words += unit.words
        if fresh:
            chunks.append(_make_chunk(doc, len(chunks), packed, full_path))
    return chunks


def _make_chunk(doc: Document, ordinal: int, blocks: list[Block], heading_path: tuple[str, ...]) -> Chunk:
    kinds = {b.kind for b in blocks if not b.text.startswith("#")}
    kind = kinds.pop() if len(kinds) == 1 else "mixed"
    text = "\n\n".join(b.text for b in blocks)
    return Chunk(chunk_id=f"{doc.doc_id}#{ordinal}", doc_id=doc.doc_id, ordinal=ordinal, text=text,
                 heading_path=heading_path, kind=kind if kind != "quote" else "prose", title=doc.title)
