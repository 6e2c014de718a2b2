"""What `workbench ask` and `workbench search` print: retrieved text shown, never obeyed by the terminal.

An answer quotes documents, and a document may carry an ANSI escape sequence (clear the screen, rewrite
the line above, set the window title, a hidden OSC 8 hyperlink), a C1 control such as the 8-bit CSI
``\\x9b``, bidirectional overrides that reorder what is shown, or HTML that a page the output is pasted into
would run (``<script>``, ``<img onerror=...>``). :func:`safe` makes all of it visible as text: control and
invisible format characters become ``\\x1b``-style escapes, HTML tags are entity-escaped (``&lt;script&gt;``),
tabs and newlines stay. The JSON output keeps the raw text (consumers escape for their own medium) and adds
``flags`` (:func:`answer_flags`, :func:`search_flags`) naming what the answer carries, so a consumer can act
on it without parsing the trace. What counts as markup is :mod:`pipeline.text.markup`.
"""

from __future__ import annotations

import html
import re

from pipeline.generation.generate import flagged_sources
from pipeline.text.markup import CONTROL, TAG, has_active_markup, markup_kinds
from pipeline.trace import Trace

_TAG_SPAN = re.compile(TAG.pattern + r"[^<>]{0,2000}>?", re.IGNORECASE)


def _visible(ch: str) -> str:
    code = ord(ch)
    return f"\\x{code:02x}" if code < 0x100 else (f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}")


def safe(text: str) -> str:
    """``text`` as it may go to a terminal or be pasted anywhere: controls and bidi/tag characters shown as
    escapes, HTML tags escaped; everything else (tabs, newlines, any script's letters) as written."""
    text = CONTROL.sub(lambda m: _visible(m.group()), text)
    return _TAG_SPAN.sub(lambda m: html.escape(m.group(), quote=False), text)


def answer_flags(trace: Trace) -> list[str]:
    """What a consumer of ``ask --json`` should know before showing ``answer``: ``markup`` (HTML, an event
    handler or a script URL: escape it), ``control_characters``, ``flagged_source`` (an offered source talks
    to AI models), ``instruction_in_answer``, ``fabricated_marker``, ``unsupported_claim``, ``uncited_claim``,
    ``validation_failed``, ``fallback`` (the LLM's answer could not be used)."""
    flags = _markup_flags(trace.answer)
    gen, val = trace.generation, trace.validation
    if gen.flagged_sources:
        flags.append("flagged_source")
    if "answer_reads_as_instruction" in trace.trust.rules_fired:
        flags.append("instruction_in_answer")
    if val.fabricated_markers:
        flags.append("fabricated_marker")
    if val.unsupported:
        flags.append("unsupported_claim")
    if val.uncited:
        flags.append("uncited_claim")
    if val.status == "failed":
        flags.append("validation_failed")
    if gen.status == "fallback":
        flags.append("fallback")
    return flags


def search_flags(trace: Trace) -> list[str]:
    """``markup`` / ``control_characters`` when a ranked candidate's title or text carries them;
    ``flagged_source`` when one reads as addressed to a model."""
    candidates = trace.ranked_candidates()[:10]
    flags: list[str] = []
    for c in candidates:
        for flag in _markup_flags(f"{c.title}\n{c.text}"):
            if flag not in flags:
                flags.append(flag)
    if flagged_sources(candidates, trace.question):
        flags.append("flagged_source")
    return flags


def _markup_flags(text: str) -> list[str]:
    kinds = markup_kinds(text)
    flags = ["markup"] if has_active_markup(text) and set(kinds) - {"control_characters"} else []
    if "control_characters" in kinds:
        flags.append("control_characters")
    return flags
