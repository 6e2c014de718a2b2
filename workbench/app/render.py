"""Escaping and the small coloured pieces of the app: verdict markers, the answer, badges, source lines.

Retrieved text, titles, answers and claim texts are data, never markup (issue 10, item 4). Three rules:

- Raw text goes through ``st.text`` / ``st.code`` / ``st.dataframe`` / ``st.json``, which never interpret it.
- Coloured HTML is built here from :func:`html.escape`-d pieces; every tag and attribute is ours. It is
  rendered with ``st.html``, which does not parse Markdown, so only HTML escaping applies.
- Text that must pass through Markdown (expander labels, captions) goes through :func:`md`, which escapes
  HTML *and* Markdown (links, images, emphasis, Streamlit's ``:color[...]`` directives, ``$`` maths).

Colours: supported emerald, unsupported and fabricated rose (fabricated is also listed by name), uncited
sources dimmed, superseded-in-part amber.
"""

from __future__ import annotations

import re

from pipeline.trace import Trace, ValidationTrace
from pipeline.validation.citations import claim_marker_verdicts, marker_verdicts
from workbench.display.markdown import md  # noqa: F401  (the escaping every page uses; the research layer shares it)
from workbench.display.trace_html import (  # noqa: F401  (one palette and chip for the app and Jupyter; views read render.*)
    AMBER,
    AMBER_BG,
    EMERALD,
    EMERALD_BG,
    ROSE,
    ROSE_BG,
    SLATE,
    SLATE_BG,
    VERDICT_STYLE,
    chip,
    esc,
    verdict_chip,
)

# -- pieces of HTML (all text escaped) ---------------------------------------------------------------

def superseded_badge(reason: str = "") -> str:
    """The amber "superseded in part" badge; the reason is its tooltip and follows it as text."""
    badge = chip("superseded in part", AMBER, AMBER_BG, title=reason, css="wb-superseded")
    return badge + (f' <span class="wb-superseded-reason" style="color:{AMBER};font-size:0.85em">'
                    f"{esc(reason)}</span>" if reason else "")


def marker_html(number: int, verdict: str, similarity: float | None = None) -> str:
    colour, background = VERDICT_STYLE.get(verdict, (SLATE, SLATE_BG))
    tip = verdict if similarity is None else f"{verdict}, similarity {similarity:.2f}"
    return (f'<span class="wb-marker wb-{esc(verdict)}" data-verdict="{esc(verdict)}" title="{esc(tip)}" '
            f'style="color:{colour};background:{background};border-radius:0.3em;padding:0 0.2em;'
            f'font-weight:700">[{number}]</span>')


_MARKER = re.compile(r"\[\s*(\d+(?:\s*[,;]\s*\d+)*)\s*\]")
_CODE = re.compile(r"`([^`\n]+)`")
_BOLD = re.compile(r"\*\*([^*\n]+)\*\*")
_EMPHASIS = re.compile(r"(?<![*\w])\*(?![*\s])([^*\n]+?)(?<!\s)\*(?![*\w])")


def _inline(escaped: str) -> str:
    """`code`, **bold** and *emphasis* of already-escaped text as our own tags (the answer quotes Markdown
    sources; literal asterisks around a word read as noise). Inside code nothing else is converted."""
    pieces = _CODE.split(escaped)
    out = []
    for i, piece in enumerate(pieces):
        if i % 2:
            out.append(f"<code>{piece}</code>")
        else:
            out.append(_EMPHASIS.sub(r"<em>\1</em>", _BOLD.sub(r"<b>\1</b>", piece)))
    return "".join(out)


def inline_html(text: str) -> str:
    """Plain text (an answer excerpt) escaped, its inline Markdown shown as formatting, citation markers kept."""
    return _inline(esc(text))


def _colour_markers(segment: str, verdicts: dict[int, str], similarities: dict[int, float | None]) -> str:
    """Escape a piece of the answer and colour each [n] / [1, 3] marker in it."""
    out, last = [], 0
    for match in _MARKER.finditer(segment):
        out.append(_inline(esc(segment[last:match.start()])))
        numbers = [int(n) for n in re.split(r"\s*[,;]\s*", match.group(1))]
        out.append("".join(marker_html(n, verdicts.get(n, "unsupported"), similarities.get(n)) for n in numbers))
        last = match.end()
    out.append(_inline(esc(segment[last:])))
    return "".join(out)


def answer_html(answer: str, validation: ValidationTrace) -> str:
    """The answer with every citation marker coloured by its claim's verdict for that source.

    Each claim's span is coloured with :func:`claim_marker_verdicts` (the same [2] can be green in one
    sentence and rose in another); text outside any claim uses the answer-wide :func:`marker_verdicts`.
    """
    overall = marker_verdicts(validation) if validation.status != "skipped" else {}
    pieces, cursor = [], 0
    for claim in sorted(validation.claims, key=lambda c: c.span):
        start, end = claim.span
        if end <= start or start < cursor or end > len(answer):
            continue
        pieces.append(_colour_markers(answer[cursor:start], overall, {}))
        local = claim_marker_verdicts(claim, validation.threshold)
        sims = {s.marker: s.similarity for s in claim.similarities}
        text = _colour_markers(answer[start:end], {**overall, **local}, sims)
        if claim.verdict == "unsupported":
            text = f'<span class="wb-claim-unsupported" style="text-decoration:underline wavy {ROSE}">{text}</span>'
        pieces.append(text)
        cursor = end
    pieces.append(_colour_markers(answer[cursor:], overall, {}))
    body = "".join(pieces).replace("\n", "<br>")
    return f'<div class="wb-answer" style="line-height:1.6">{body}</div>'


def fabricated_html(validation: ValidationTrace) -> str:
    if not validation.fabricated_markers:
        return ""
    markers = ", ".join(f"[{n}]" for n in validation.fabricated_markers)
    return (f'<div class="wb-fabricated" style="color:{ROSE};font-weight:600">Fabricated citation markers '
            f"(sources never offered to the generator): {esc(markers)}</div>")


def abstention_html(trace: Trace, reason: str = "") -> str:
    """The fixed abstention sentence, and under it why, in words (``workbench.app.explain``)."""
    why = (f'<div class="wb-abstention-reason" style="margin-top:0.3em;font-weight:600">{esc(reason)}</div>'
           if reason else "")
    return (f'<div class="wb-abstention" style="border-left:4px solid {SLATE};padding:0.4em 0.8em;'
            f'background:#f8fafc">{esc(trace.answer)}{why}</div>')


def legend_html() -> str:
    return " ".join([verdict_chip("supported"), verdict_chip("unsupported"), chip("fabricated", ROSE, ROSE_BG),
                     chip("not cited (dimmed)", SLATE, SLATE_BG), chip("superseded in part", AMBER, AMBER_BG)])


def source_line_html(numbers: int | list[int], title: str, doc_id: str, version: str, *, cited: bool,
                     superseded_reason: str | None, verdicts: list[str], uncited: list[int] = ()) -> str:
    """One line of the sources list per document: [n][m] title (doc, version), verdict chips, badge; the
    whole line dimmed if none of its passages is cited, a "not cited" chip naming the ones that are not."""
    numbers = [numbers] if isinstance(numbers, int) else list(numbers)
    label = "".join(f"[{n}]" for n in numbers)
    parts = [f'<b>{label}</b> {esc(title)} <span style="color:{SLATE}">({esc(doc_id)}'
             + (f", v{esc(version)}" if version else "") + ")</span>"]
    parts += [verdict_chip(v) for v in verdicts]
    if not cited:
        parts.append(chip("not cited", SLATE, SLATE_BG, css="wb-uncited-chip"))
    elif uncited:
        parts.append(chip("not cited: " + "".join(f"[{n}]" for n in uncited), SLATE, SLATE_BG, css="wb-uncited-chip"))
    if superseded_reason is not None:
        parts.append(superseded_badge(superseded_reason))
    style = "opacity:0.45" if not cited else ""
    css = "wb-source wb-uncited" if not cited else "wb-source wb-cited"
    return (f'<div class="{css}" data-source="{numbers[0]}" data-sources="{" ".join(map(str, numbers))}" '
            f'style="{style}">{" ".join(parts)}</div>')


def fmt(value: float | None, digits: int = 4) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


_FENCE = re.compile(r"^[ \t]*(```+|~~~+)[ \t]*[\w+.-]*[ \t]*$")


def passage_text(text: str) -> str:
    """A source passage as plain text for ``st.text``: Markdown code-fence lines (```` ```yaml ````, ``~~~``)
    dropped, the code between them kept as it is; nothing else changes."""
    return "\n".join(line for line in text.split("\n") if not _FENCE.match(line))
