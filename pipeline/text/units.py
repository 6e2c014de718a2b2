"""Quotable units of a source text: sentences of prose, list items, labelled table rows, one-line commands.

The extractive generator quotes these units and the reader (the answerability cross-encoder, run by the rerank
stage) scores them, so both must cut a passage the same way: this module is that one rule.

1. Split a source into units: sentences of prose (:func:`pipeline.text.sentences.split_sentences`), list items
   (with their wrapped lines), table rows labelled by their header cells ("Limit: x; 3.1: 250"), and one-line
   code blocks (shown as inline code). Headings, table headers and multi-line code are context, not quotable
   claims.
2. A unit is quotable when it has two terms or is a command, and is not a lead-in that ends with a colon.
"""

from __future__ import annotations

from dataclasses import dataclass

from pipeline.text.sentences import FENCE, HEADING, LIST_ITEM, TABLE_RULE, split_sentences
from pipeline.text.tokenize import tokenize


@dataclass(frozen=True)
class Unit:
    source: int          # 1-based source number
    block: int           # which block of the source (adjacent units of one block print as one paragraph)
    position: int        # order within the source
    text: str            # verbatim text as it will be quoted
    kind: str = "prose"  # prose | item | row | code


# -- splitting ------------------------------------------------------------------------------------------

class _Splitter:
    """Line-by-line state for :func:`split_units`: an open paragraph, list item, code block or table."""

    def __init__(self, source: int) -> None:
        self.source = source
        self.units: list[Unit] = []
        self.block = 0
        self.paragraph: list[str] = []
        self.item: list[str] = []
        self.code: list[str] | None = None
        self.header: list[str] = []

    def add(self, text: str, kind: str) -> None:
        self.units.append(Unit(self.source, self.block, len(self.units), text, kind))

    def flush(self) -> None:
        if self.paragraph:
            for sentence in split_sentences(" ".join(self.paragraph)):
                if sentence.strip():
                    self.add(sentence.strip(), "prose")
            self.paragraph.clear()
            self.block += 1
        if self.item:
            self.add(" ".join(self.item), "item")
            self.item.clear()
            self.block += 1

    def row(self, line: str) -> None:
        """A table row, labelled with the header cells ("Limit: x; 3.1: 250") so it means something alone."""
        self.flush()
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if self.header and len(self.header) == len(cells):
            self.add("; ".join(f"{h}: {c}" if h else c for h, c in zip(self.header, cells, strict=True)), "row")
        else:
            self.add(" | ".join(cells), "row")

    def table_rule(self) -> None:
        # the row just above a |---| rule is the header: context for the rows, not a claim of its own
        if self.units and self.units[-1].kind == "row" and not self.header:
            self.header = [c.strip() for c in self.units.pop().text.split(" | ")]

    def line(self, line: str) -> None:
        if FENCE.match(line):
            self.fence()
        elif self.code is not None:
            self.code.append(line)
        elif TABLE_RULE.match(line):
            self.table_rule()
        elif line.lstrip().startswith("|"):
            self.row(line)
        elif not line.strip() or HEADING.match(line):
            self.flush()
            self.header = []
        elif LIST_ITEM.match(line):
            self.flush()
            self.item.append(LIST_ITEM.sub("", line, count=1).strip())
        elif self.item:
            self.item.append(line.strip())     # a wrapped line of the same list item
        else:
            self.paragraph.append(line.strip())

    def fence(self) -> None:
        self.flush()
        if self.code is None:
            self.code = []
            return
        if len(self.code) == 1 and self.code[0].strip():
            self.add(f"`{self.code[0].strip()}`", "code")
            self.block += 1
        self.code = None


def split_units(text: str, source: int, quotable_only: bool = True) -> list[Unit]:
    """Quotable units of one source text, in document order (every unit with ``quotable_only=False``: the
    injection checks must see sentences that would never be quoted, to flag their source)."""
    splitter = _Splitter(source)
    for line in text.splitlines():
        splitter.line(line)
    splitter.flush()
    return [u for u in splitter.units if quotable(u)] if quotable_only else splitter.units


def quotable(unit: Unit) -> bool:
    """Two terms or a command; a lead-in ("From our notes, checked against the 3.0 release notes:")
    announces an answer, it is none."""
    return (len(tokenize(unit.text)) >= 2 or unit.kind == "code") and not (
        unit.kind == "prose" and unit.text.rstrip().endswith(":"))
