"""workbench.app.render: escaping for HTML and Markdown, and the colour of every citation marker."""

from __future__ import annotations

from pipeline.trace import CitationScore, ClaimCheck, ValidationTrace
from workbench.app.render import answer_html, md, source_line_html


def _claim(text, start, markers, sims, verdict, fabricated=()):
    return ClaimCheck(text=text, markers=markers, verdict=verdict, fabricated_markers=fabricated,
                      similarities=tuple(CitationScore(m, f"c{m}" if s is not None else "", s)
                                         for m, s in zip(markers, sims, strict=True)),
                      best_similarity=max([s for s in sims if s is not None], default=None),
                      span=(start, start + len(text)))


def test_md_neutralises_html_links_images_directives_and_maths():
    hostile = "<script>x</script> ![p](http://e/p.png) [a](javascript:x) :red[r] $x$ **b** `c`"
    out = md(hostile)
    for live in ("<script", "![", "](", ":red[", "$x$", "**b**", "`c`"):
        assert live not in out, live
    assert "&lt;script&gt;" in out


def test_markers_are_coloured_per_claim_and_text_is_escaped():
    first = "Timeout is 15 s <b>really</b> [1]."
    second = " It is 10 s [1][9]."
    answer = first + second
    val = ValidationTrace(status="ran", threshold=0.5, fabricated_markers=(9,), claims=(
        _claim(first, 0, (1,), (0.8,), "supported"),
        _claim(second.strip(), len(first) + 1, (1, 9), (0.3, None), "unsupported", fabricated=(9,))))
    out = answer_html(answer, val)
    assert "&lt;b&gt;really&lt;/b&gt;" in out and "<b>really</b>" not in out
    supported = out.index('wb-marker wb-supported')
    unsupported = out.index('wb-marker wb-unsupported')
    fabricated = out.index('wb-marker wb-fabricated')
    assert supported < unsupported < fabricated, "[1] green in the first sentence, rose in the second; [9] fabricated"
    assert "wb-claim-unsupported" in out


def test_uncited_sources_are_dimmed_and_superseded_ones_get_the_amber_badge_with_its_reason():
    dim = source_line_html(2, "<i>T</i>", "d", "2.4", cited=False, superseded_reason="3.1 says 250", verdicts=[])
    assert "opacity:0.45" in dim and "wb-uncited" in dim and "&lt;i&gt;T&lt;/i&gt;" in dim
    assert "superseded in part" in dim and "3.1 says 250" in dim and "#b45309" in dim
    cited = source_line_html(1, "T", "d", "", cited=True, superseded_reason=None, verdicts=["supported"])
    assert "opacity" not in cited and "wb-supported" in cited and "superseded" not in cited
