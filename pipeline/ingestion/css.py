"""Is an HTML element hidden from a reader of the page? Attributes, inline styles, hiding classes and the
simple rules of the page's own ``<style>`` blocks.

Hidden text is text a reader never sees but a model reads, the classic carrier of an injected instruction
(Greshake et al., "Not what you've signed up for", 2023). An element is hidden when:

- attributes: ``hidden``, ``aria-hidden="true"``, ``<input type="hidden">``, a ``<dialog>`` that is not open;
- a declaration (inline ``style``, or a rule of a ``<style>`` block whose selector is a simple compound one —
  ``tag``, ``.class``, ``#id``, ``tag.class.other`` — outside ``@media`` blocks other than ``screen``/``all``):
  ``display:none``, ``visibility:hidden|collapse``, ``content-visibility:hidden``, ``opacity`` (or
  ``filter:opacity()``) at most 0.01, ``font-size`` at most 1px (0.75pt, 0.0625em/rem, 6.25%), a transparent
  ``color`` (``transparent``, an alpha of 0), ``color`` equal to the element's or the nearest styled
  ancestor's background, ``clip:rect()`` with no area, ``clip-path`` ``inset()`` of 50% or more,
  ``circle(0)``/``ellipse(0 0)``, ``height``/``width`` (or their max-) at most 1px with ``overflow`` hidden,
  ``transform`` with a ``scale`` of 0 (or ``scale:0``), and off-screen placement: ``left``/``top``/``right``/
  ``bottom``/``margin-left``/``margin-top``/``text-indent`` of -999px or less (em/rem counted at 16px,
  -100%/vw/vh), or 5000px or more sideways;
- a hiding class: ``sr-only``, ``visually-hidden``, ``screen-reader-text``, ``d-none``, ``hidden``, ``hide``,
  ``invisible`` and the like (:data:`HIDING_CLASSES`), unless a responsive class shows it again at some width
  (Bootstrap ``d-md-block``, Tailwind ``md:block``).

Declarations are parsed by splitting, never by a backtracking regular expression, so a hostile style attribute
cannot make the parse slow. Specificity and the cascade are not evaluated: a rule that hides is enough.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

HIDING_CLASSES = frozenset({
    "sr-only", "sr-only-focusable", "visually-hidden", "visually-hidden-focusable", "visuallyhidden",
    "screen-reader-text", "screen-reader-only", "screenreader-only", "screenreader", "a11y-hidden",
    "assistive-text", "slds-assistive-text", "govuk-visually-hidden", "element-invisible", "element-hidden",
    "offscreen", "off-screen", "d-none", "display-none", "hidden", "hide", "is-hidden", "u-hidden",
    "u-hide", "u-visually-hidden", "invisible", "is-invisible", "text-hide", "hidden-text", "ng-hide",
    "ng-cloak", "x-cloak", "v-cloak", "hidden-all"})
_SHOWN_AGAIN = re.compile(r"^(?:d-(?:sm|md|lg|xl|xxl)-(?:block|inline|inline-block|flex|inline-flex|grid|"
                          r"inline-grid|table|table-cell|table-row|contents)"
                          r"|(?:sm|md|lg|xl|2xl):(?:block|inline|inline-block|flex|inline-flex|grid|inline-grid|"
                          r"table|contents|flow-root|visible))$")
_NUMBER = re.compile(r"^([+-]?(?:\d{1,12}(?:\.\d{0,12})?|\.\d{1,12}))([a-z%]{0,4})$")
_SIMPLE_SELECTOR = re.compile(r"^([a-z][a-z0-9-]{0,40})?((?:[.#][A-Za-z0-9_-]{1,200}){0,10})$", re.IGNORECASE)
_NAMED = {"white": (255, 255, 255), "black": (0, 0, 0), "red": (255, 0, 0), "green": (0, 128, 0),
          "blue": (0, 0, 255), "yellow": (255, 255, 0), "gray": (128, 128, 128), "grey": (128, 128, 128),
          "silver": (192, 192, 192), "navy": (0, 0, 128), "maroon": (128, 0, 0), "purple": (128, 0, 128),
          "teal": (0, 128, 128), "olive": (128, 128, 0), "lime": (0, 255, 0), "aqua": (0, 255, 255),
          "fuchsia": (255, 0, 255), "orange": (255, 165, 0), "whitesmoke": (245, 245, 245),
          "snow": (255, 250, 250), "ivory": (255, 255, 240), "beige": (245, 245, 220), "linen": (250, 240, 230)}
_PX = {"": 1.0, "px": 1.0, "pt": 4 / 3, "pc": 16.0, "em": 16.0, "rem": 16.0, "ch": 8.0, "ex": 8.0,
       "in": 96.0, "cm": 96 / 2.54, "mm": 9.6 / 2.54, "q": 2.4 / 2.54}
_OFFSETS = ("left", "top", "right", "bottom", "margin-left", "margin-top", "text-indent")


def strip_comments(css: str) -> str:
    """``/* ... */`` removed (an unclosed one runs to the end), in linear time."""
    out, i = [], 0
    while True:
        start = css.find("/*", i)
        if start < 0:
            out.append(css[i:])
            return "".join(out)
        out.append(css[i:start])
        end = css.find("*/", start + 2)
        if end < 0:
            return "".join(out)
        i = end + 2


def declarations(style: str) -> dict[str, str]:
    """``prop: value; ...`` → {prop: value}, lower-cased, ``!important`` dropped, the last one winning."""
    out: dict[str, str] = {}
    for part in strip_comments(style).split(";"):
        prop, colon, value = part.partition(":")
        if not colon:
            continue
        value = value.strip().lower().replace("!important", "").strip()
        prop = prop.strip().lower()
        if prop and value:
            out[prop] = value
    return out


def _length(value: str) -> float | None:
    """A length in px (em/rem at 16px); None for anything else (a percentage, a keyword)."""
    match = _NUMBER.match(value.strip())
    if not match or match.group(2) not in _PX:
        return None
    return float(match.group(1)) * _PX[match.group(2)]


def _number(value: str) -> tuple[float, str] | None:
    match = _NUMBER.match(value.strip())
    return (float(match.group(1)), match.group(2)) if match else None


def _args(value: str, function: str) -> list[str] | None:
    """The arguments of ``function(...)`` in a value, split on commas and spaces; None when absent."""
    start = value.find(function + "(")
    if start < 0 or (start and (value[start - 1].isalnum() or value[start - 1] == "-")):
        return None
    end = value.find(")", start)
    inner = value[start + len(function) + 1:end if end >= 0 else len(value)]
    return inner.replace(",", " ").replace("/", " ").split()


def colour(value: str) -> tuple[int, int, int, float] | None:
    """(r, g, b, alpha) of a simple CSS colour: a name, #rgb(a), #rrggbb(aa), rgb(a)(), transparent."""
    value = value.strip()
    if value == "transparent":
        return (0, 0, 0, 0.0)
    if value in _NAMED:
        return (*_NAMED[value], 1.0)
    if value.startswith("#") and len(value) in (4, 5, 7, 9) and all(c in "0123456789abcdef" for c in value[1:]):
        digits = value[1:]
        if len(digits) in (3, 4):
            digits = "".join(c * 2 for c in digits)
        alpha = int(digits[6:8], 16) / 255 if len(digits) == 8 else 1.0
        return (int(digits[0:2], 16), int(digits[2:4], 16), int(digits[4:6], 16), alpha)
    for function in ("rgba", "rgb", "hsla", "hsl"):
        args = _args(value, function)
        if args is not None and value.startswith(function + "("):
            parsed = [_number(a) for a in args]
            if len(parsed) < 3 or any(p is None for p in parsed):
                return None
            alpha = 1.0
            if len(parsed) >= 4:
                a, unit = parsed[3]
                alpha = a / 100 if unit == "%" else a
            if function.startswith("hsl"):
                return (-1, -1, -1, alpha) if alpha <= 0 else None  # only its transparency is judged
            rgb = tuple(round(v * 2.55) if unit == "%" else round(v) for v, unit in parsed[:3])
            return (*rgb, alpha)
    return None


def _background(decls: Mapping[str, str]) -> tuple[int, int, int, float] | None:
    if "background-color" in decls:
        return colour(decls["background-color"])
    for token in decls.get("background", "").split():
        found = colour(token)
        if found is not None:
            return found
    return None


def hiding_declaration(decls: Mapping[str, str], background: tuple | None = None) -> str:
    """Why these declarations hide the element's text ("" when they do not); see the module docstring."""
    reasons = _hidden_by_display(decls) or _hidden_by_size(decls) or _hidden_by_place(decls)
    if reasons:
        return reasons
    text = colour(decls["color"]) if "color" in decls else None
    if text is not None:
        if text[3] <= 0.01:
            return "transparent text"
        own = _background(decls)
        behind = own if own is not None and own[3] > 0.99 else background
        if behind is not None and behind[3] > 0.99 and text[:3] == behind[:3]:
            return "text the colour of its background"
    return ""


def _hidden_by_display(decls: Mapping[str, str]) -> str:
    if decls.get("display") == "none":
        return "display:none"
    if decls.get("visibility") in ("hidden", "collapse"):
        return "visibility:" + decls["visibility"]
    if decls.get("content-visibility") == "hidden":
        return "content-visibility:hidden"
    opacity = _number(decls.get("opacity", ""))
    if opacity is not None and opacity[0] / (100 if opacity[1] == "%" else 1) <= 0.01:
        return "opacity:0"
    filtered = _args(decls.get("filter", ""), "opacity")
    if filtered:
        amount = _number(filtered[0])
        if amount is not None and amount[0] / (100 if amount[1] == "%" else 1) <= 0.01:
            return "filter:opacity(0)"
    return ""


def _hidden_by_size(decls: Mapping[str, str]) -> str:
    size = decls.get("font-size", "")
    number, length = _number(size), _length(size)
    if number is not None and (number[0] <= 6.25 if number[1] == "%" else length is not None and length <= 1):
        return "font-size:0"
    rect = _args(decls.get("clip", ""), "rect")
    if rect and len(rect) == 4:
        top, right, bottom, left = (_length(v) for v in rect)
        if None not in (top, right, bottom, left) and (bottom <= top or right <= left):
            return "clip:rect() with no area"
    clip_path = decls.get("clip-path", "")
    inset = _args(clip_path, "inset")
    if inset:
        values = [_number(v) for v in (inset[:inset.index("round")] if "round" in inset else inset)[:4]]
        if values and all(v is not None and (v[1] == "%" or v[0] == 0) for v in values):
            top, right, bottom, left = _box([v[0] if v[1] == "%" else 0.0 for v in values])
            if top + bottom >= 100 or left + right >= 100:
                return "clip-path:inset() with no area"
    for shape, count in (("circle", 1), ("ellipse", 2)):
        radii = _args(clip_path, shape)
        if radii and len(radii) >= count and all(_number(r) is not None and _number(r)[0] == 0 for r in radii[:count]):
            return f"clip-path:{shape}(0)"
    if _transform_scales_to_zero(decls):
        return "transform:scale(0)"
    overflow = " ".join(decls.get(k, "") for k in ("overflow", "overflow-x", "overflow-y")).split()
    if "hidden" in overflow or "clip" in overflow:
        for prop in ("height", "max-height", "width", "max-width"):
            length = _length(decls.get(prop, "x"))
            if length is not None and length <= 1:
                return f"{prop}:0 with overflow:hidden"
    return ""


def _box(values: list[float]) -> tuple[float, float, float, float]:
    """CSS box shorthand (1 to 4 values) → (top, right, bottom, left)."""
    values = values[:4]
    if len(values) == 1:
        return values[0], values[0], values[0], values[0]
    if len(values) == 2:
        return values[0], values[1], values[0], values[1]
    if len(values) == 3:
        return values[0], values[1], values[2], values[1]
    return values[0], values[1], values[2], values[3]


def _transform_scales_to_zero(decls: Mapping[str, str]) -> bool:
    scale = decls.get("scale", "").split()
    if scale and any(_number(s) == (0.0, "") for s in scale):
        return True
    transform = decls.get("transform", "")
    for function in ("scale", "scalex", "scaley", "scale3d"):
        args = _args(transform, function)
        if args and any(_number(a) is not None and _number(a)[0] == 0 for a in args[:2]):
            return True
    matrix = _args(transform, "matrix")
    return bool(matrix and len(matrix) >= 4 and all(_number(a) == (0.0, "") for a in matrix[:4]))


def _hidden_by_place(decls: Mapping[str, str]) -> str:
    for prop in _OFFSETS:
        value = decls.get(prop, "")
        number = _number(value)
        if number is None:
            continue
        amount, unit = number
        px = amount * 10 if unit in ("%", "vw", "vh") else _length(value)  # -100% of a 1000px page, roughly
        if px is not None and (px <= -999 or (px >= 5000 and prop not in ("top", "margin-top"))):
            return f"off-screen ({prop}:{value})"
    return ""


@dataclass(frozen=True)
class Rule:
    tag: str
    ids: frozenset[str]
    classes: frozenset[str]
    reason: str
    background: str = ""           # the colour values, for text-on-background checks across elements
    colour: str = ""


def stylesheet_rules(css: str) -> list[Rule]:
    """The rules of a ``<style>`` block with a simple selector; see the module docstring."""
    rules: list[Rule] = []
    _rules_of(strip_comments(css), rules, 0)
    return rules


def _rules_of(css: str, rules: list[Rule], depth: int) -> None:
    i, n = 0, len(css)
    while i < n:
        brace = css.find("{", i)
        if brace < 0:
            return
        end, level = brace + 1, 1  # the matching closing brace
        while end < n and level:
            nxt_open, nxt_close = css.find("{", end), css.find("}", end)
            if nxt_close < 0:
                end = n
                break
            if 0 <= nxt_open < nxt_close:
                level, end = level + 1, nxt_open + 1
            else:
                level, end = level - 1, nxt_close + 1
        prelude, body = css[i:brace].strip(), css[brace + 1:end - 1]
        i = end
        if prelude.startswith("@"):
            media = prelude.lower().split(None, 1)
            query = media[1].replace("only", "").strip() if len(media) > 1 else ""
            if media[0] == "@media" and query in ("screen", "all") and depth == 0:
                _rules_of(body, rules, depth + 1)
            continue
        if "{" in body:
            continue
        decls = declarations(body)
        reason = hiding_declaration(decls)
        background = decls.get("background-color") or decls.get("background", "")
        if not (reason or background or decls.get("color")):
            continue
        for selector in prelude.split(","):
            match = _SIMPLE_SELECTOR.match(selector.strip())
            if not match or not selector.strip():
                continue
            parts = re.findall(r"[.#][A-Za-z0-9_-]+", match.group(2) or "")
            rules.append(Rule(tag=(match.group(1) or "").lower(), ids=frozenset(p[1:] for p in parts if p[0] == "#"),
                              classes=frozenset(p[1:] for p in parts if p[0] == "."), reason=reason,
                              background=background, colour=decls.get("color", "")))


def matching(rules: list[Rule], tag: str, element_id: str, classes: frozenset[str]) -> list[Rule]:
    return [r for r in rules if (not r.tag or r.tag == tag) and r.ids <= {element_id}
            and r.classes <= classes]


def hiding_class(classes: frozenset[str]) -> str:
    """The hiding class among ``classes`` ("" when none, or when a responsive class shows it again)."""
    hiding = sorted(classes & HIDING_CLASSES)
    if not hiding or any(_SHOWN_AGAIN.match(c) for c in classes):
        return ""
    return f"class {hiding[0]}"
