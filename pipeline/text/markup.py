"""What in a text would act, not read, if a page or a terminal rendered it as it is.

An answer quotes retrieved text, and retrieved text is data: it may carry HTML a browser would run
(``<script>``, ``<img onerror=...>``, ``<svg onload=...>``, a ``javascript:`` link), Markdown that turns into a
live link or image, or control characters a terminal obeys (ANSI/VT escape sequences, C1 controls such as
the 8-bit CSI ``\\x9b``, bidirectional overrides that reorder what is shown). This module names what is
there (:func:`markup_kinds`); the renderers decide what to do with it — the terminal escapes it
(``workbench/terminal.py``), the app and notebooks escape every string, the JSON keeps the raw text and
says what it holds (``flags``), and the trust rules warn when an answer carries it.

The patterns follow what HTML parsers treat as a tag (``<`` then a letter, ``/`` or ``!``), event-handler
attributes (``on...=``) and the script URL schemes browsers execute (``javascript:``, ``vbscript:``,
``data:text/html``); controls are Unicode categories Cc (except tab and newline) and the bidi
embedding/override/isolate characters of Cf.
"""

from __future__ import annotations

import re

TAG = re.compile(r"<\s*(/?\s*[A-Za-z][\w:-]*|!--|!\[CDATA\[|!doctype|\?)", re.IGNORECASE)
EVENT_HANDLER = re.compile(r"\bon[a-z]{3,}\s*=", re.IGNORECASE)
SCRIPT_URL = re.compile(r"\b(javascript|vbscript|livescript)\s*:|\bdata\s*:\s*text/html", re.IGNORECASE)
MARKDOWN_LINK = re.compile(r"!?\[[^\]\n]*\]\(\s*[^)\s]+[^)]*\)")
CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\u200e\u200f\u061c"
                     r"\U000e0000-\U000e007f]")


def markup_kinds(text: str) -> tuple[str, ...]:
    """Which kinds of live content ``text`` holds: ``html`` (a tag), ``event_handler``, ``script_url``,
    ``markdown_link`` (a link or image a Markdown renderer would make live), ``control_characters``."""
    kinds = []
    if TAG.search(text):
        kinds.append("html")
    if EVENT_HANDLER.search(text):
        kinds.append("event_handler")
    if SCRIPT_URL.search(text):
        kinds.append("script_url")
    if MARKDOWN_LINK.search(text):
        kinds.append("markdown_link")
    if CONTROL.search(text):
        kinds.append("control_characters")
    return tuple(kinds)


_CODE = re.compile(r"```.*?(```|$)|~~~.*?(~~~|$)|`[^`\n]+`", re.DOTALL)


def has_active_markup(text: str) -> bool:
    """Markup that runs or hides something when rendered: a tag, a handler, a script URL or a control
    character outside code (``<token-id>`` in a code span is a placeholder a Markdown renderer shows as code;
    a plain Markdown link to a web page is not counted)."""
    prose = _CODE.sub(" ", text)
    return any(kind != "markdown_link" for kind in markup_kinds(prose)) or bool(
        MARKDOWN_LINK.search(prose) and SCRIPT_URL.search(prose)) or "control_characters" in markup_kinds(text)
