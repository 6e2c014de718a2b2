"""Retrieved text, titles, answers and claim texts never render as live HTML or live Markdown (issue 10,
item 4): a document carrying <script>, <img onerror>, a javascript: link and an image is shown as text."""

from __future__ import annotations

import re

from conftest import ask, html_of, markdown_sources, open_app, texts_of

HOSTILE = b"""---
id: zorblat-widget-notes
title: Zorblat widget <script>window.__pwned=1</script> notes
product: harbor-relay
---
# Zorblat embedding <img src=x onerror="window.__pwned=1">

The zorblat status widget renders <script>window.__pwned=1</script> inside the page header.
The zorblat widget also accepts <img src=x onerror="window.__pwned=1"> as a logo tag.
See [the zorblat guide](javascript:window.__pwned=1) and ![zorblat pixel](http://127.0.0.1:9/p.png)
for **zorblat** :red[colours].
"""

LIVE_TAG = re.compile(r"<\s*(script|img|iframe|svg|object|embed)\b", re.IGNORECASE)
LIVE_MARKDOWN = re.compile(r"(?<!\\)!?(?<!\\)\[[^\]]*(?<!\\)\]\((?!\s)")   # an unescaped [text]( or ![alt](


def _assert_nothing_live(at) -> None:
    for value in [h.value for h in at.html]:
        assert not LIVE_TAG.search(value), value[:300]
        assert "onerror=" not in value.replace("onerror=&quot;", "").replace('onerror=\\"', "") or \
            "&lt;img" in value, value[:300]
    for source in markdown_sources(at):
        assert not LIVE_TAG.search(source), source[:300]
        assert not LIVE_MARKDOWN.search(source), source[:300]
        assert ":red[" not in source, source[:300]


def test_hostile_document_shows_as_text_on_corpus_and_ask(scratch_env):
    at = open_app("corpus")
    at.file_uploader(key="corpus.upload").set_value(("hostile.md", HOSTILE, "text/markdown"))
    at.run()
    at.button(key="corpus.ingest").click().run()
    at.selectbox(key="corpus.doc").set_value("zorblat-widget-notes").run()
    _assert_nothing_live(at)
    shown = texts_of(at)
    assert "<script>window.__pwned=1</script>" in shown, "the chunk text is shown, as text"
    assert any("Zorblat widget &lt;script&gt;" in v for v in markdown_sources(at)) or \
        "Zorblat widget <script>" in shown, "the title is shown escaped"

    at.switch_page("workbench/app/pages/ask.py").run()
    at = ask(at, "what does the zorblat status widget render?")
    _assert_nothing_live(at)
    page = html_of(at)
    assert "zorblat" in page.lower(), "the hostile document was retrieved and quoted"
    assert "&lt;script&gt;window.__pwned=1&lt;/script&gt;" in page or "&lt;img src=x" in page, \
        "its tags appear as escaped text in the answer"
    assert "zorblat-widget-notes" in texts_of(at)


def test_the_demo_corpus_widget_guide_shows_its_script_sample_as_text(app_env):
    at = ask(open_app(), "How do I embed the status widget in a page?")
    _assert_nothing_live(at)
    at.switch_page("workbench/app/pages/corpus.py").run()
    at.selectbox(key="corpus.doc").set_value("guide-embed-status-widget").run()
    _assert_nothing_live(at)
    assert "<script>alert('xss')</script>" in texts_of(at)
