"""Escaping text for Markdown renderers: Streamlit's labels, captions and ``st.markdown``, and the Markdown reports
the research layer writes (the week-one report, BENCHMARKS.md sections). Below both the app and the research
layer, so a notebook that writes a report loads no app code.

Retrieved text, titles, answers and claim texts are data, never markup: :func:`md` escapes HTML *and*
Markdown (links, images, emphasis, Streamlit's ``:color[...]`` directives, ``$`` maths).
"""

from __future__ import annotations

import re

_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|~:$=^])")


def md(text: object, limit: int | None = None) -> str:
    """Escape text for any Streamlit element that renders Markdown (labels, captions, st.markdown).

    HTML special characters become entities (shown as text) and Markdown punctuation is backslash-escaped,
    so ``<script>``, ``![x](url)``, ``[a](javascript:...)``, ``**x**``, ``:red[x]`` and ``$x$`` show as typed.
    Newlines become spaces: a label is one line.
    """
    value = " ".join(str(text).split())
    if limit is not None and len(value) > limit:
        value = value[: limit - 1] + "…"
    value = _MD_SPECIAL.sub(r"\\\1", value)
    return value.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
