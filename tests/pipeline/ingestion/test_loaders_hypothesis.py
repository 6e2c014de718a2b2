"""Property-based tests of the loaders (issue 14): arbitrary bytes, text, JSON, YAML front matter, HTML and
Markdown never raise, never hang, never report more than one printable line per problem, and never lose a
good record that sits next to bad ones."""

from __future__ import annotations

import json
import string
import tempfile
import unicodedata
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from pipeline.config import ChunkingConfig
from pipeline.ingestion.chunking import chunk_document
from pipeline.ingestion.css import declarations, hiding_declaration, stylesheet_rules
from pipeline.ingestion.documents import Document, load_file, parse_document, parse_jsonl
from pipeline.ingestion.files import decode_text, escape
from pipeline.ingestion.html import html_to_markdown
from pipeline.ingestion.markdown import strip_hidden
from pipeline.ingestion.normalise import normalise_text

SETTINGS = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
SAFE = string.ascii_letters + string.digits + " .,;:!?'()-"
safe_text = st.text(alphabet=SAFE, min_size=1, max_size=60).filter(lambda t: t.strip())

# Fragments that exercise the parsers' edges, strung together in any order.
MARKDOWN_BITS = st.sampled_from(["<!--", "-->", "--!>", "<!-->", "`", "``", "```", "~~~", "\n", "\n\n", " ", "#",
                                 "## ", "[//]: # (", ")", "[x]: ", "<", ">", "<span hidden>", "</span>",
                                 '<div style="display:none">', "</div>", "<style>", ".a{opacity:0}", "</style>",
                                 '<p class="a">', "<![CDATA[", "]]>", "<?", "<!x", "| a | b |", "|---|---|", "- item",
                                 "1. item", "> quote", "word", "\u200b", "\U000e0041", "\u202e", "\ufe0f", "\u200d"])
HTML_BITS = st.sampled_from(["<div>", "</div>", "<p>", "</p>", "<ul>", "<li>", "</ul>", "<ol>", "<table>", "<tr>",
                             "<td>", "<th>", "<pre>", "<code>", "<blockquote>", "<br>", "<h2>", "</h2>", "<b>", "</b>",
                             "<!--", "-->", "<![CDATA[", "]]>", "<style>", "</style>", ".x{display:none}",
                             '<span class="x">', '<span style="', 'color:#fff;background:white', 'clip:rect(',
                             "font-size:0", '">', "</span>", "<script>", "</script>", "<dialog>", "text", " ", "\n",
                             "|", "&amp;", "&#0;", "<meta name=\"id\" content=\"", "\"/>"])
json_values = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
                           lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                                        max_size=4), max_leaves=20)


@pytest.fixture(scope="module")
def folder() -> Path:
    with tempfile.TemporaryDirectory() as name:
        yield Path(name)


def assert_one_line_problems(problems) -> None:
    for problem in problems:
        line = str(problem)
        assert line.isprintable(), repr(line)
        assert "could not be loaded" not in line, f"an unexpected exception reached the safety net: {line}"


@SETTINGS
@given(raw=st.binary(max_size=400) | st.text(max_size=300).map(lambda t: t.encode("utf-8", "surrogatepass")),
       suffix=st.sampled_from([".md", ".txt", ".html", ".jsonl"]))
def test_any_bytes_in_any_format_load_or_give_one_line_problems(folder, raw, suffix):
    path = folder / f"file{suffix}"
    path.write_bytes(raw)
    docs, problems = load_file(path)
    assert_one_line_problems(problems)
    assert all(isinstance(d, Document) and d.text.strip() for d in docs)


@SETTINGS
@given(raw=st.binary(max_size=300), bom=st.sampled_from([b"", b"\xef\xbb\xbf", b"\xff\xfe", b"\xfe\xff",
                                                          b"\xff\xfe\x00\x00", b"\x00\x00\xfe\xff"]))
def test_decoding_any_bytes_gives_text_or_one_printable_reason(raw, bom):
    text, problem = decode_text(bom + raw)
    assert (text == "") or not problem
    assert problem == "" or problem.isprintable()


@SETTINGS
@given(good=st.lists(safe_text, min_size=1, max_size=6),
       garbage=st.lists(st.one_of(st.text(max_size=80), json_values.map(json.dumps),
                                  st.integers(1, 3000).map(lambda n: "[" * n + "]" * n),
                                  st.integers(1, 6000).map(lambda n: '{"id": "big", "text": "t", "n": ' + "9" * n + "}")),
                        max_size=6),
       order=st.randoms(use_true_random=False))
def test_good_jsonl_records_next_to_any_garbage_are_all_kept(good, garbage, order):
    garbage = [line.replace("\n", " ") for line in garbage]
    for line in garbage:
        try:
            value = json.loads(line)
        except (ValueError, RecursionError):
            continue
        assume(not (isinstance(value, dict) and str(value.get("id", "")).startswith("good-")))
    records = [json.dumps({"id": f"good-{i}", "title": "T", "text": text}) for i, text in enumerate(good)]
    lines = records + garbage
    order.shuffle(lines)
    docs, problems = parse_jsonl("\n".join(lines), "kb.jsonl")
    assert_one_line_problems(problems)
    kept = {d.doc_id: d.text for d in docs if d.doc_id.startswith("good-")}
    assert kept == {f"good-{i}": text.strip("\n") for i, text in enumerate(good)}
    good_lines = {n for n, line in enumerate(lines, start=1) if line in records}
    for problem in problems:
        assert int(problem.source.rsplit(":", 1)[1]) not in good_lines


date_like = st.from_regex(r"\A\d{4}-\d{1,2}-\d{1,2}( \d{1,2}:\d{1,2}(:\d{1,2})?)?\Z")
yaml_values = st.one_of(st.text(max_size=30), date_like, st.integers(), st.just("[" * 3000 + "]" * 3000),
                        st.just("9" * 5000), st.sampled_from(["&a [1]", "*a", "!!python/object:os.system x", "{a: {b: c}}",
                                                              "? [a]", "- x", "|", ">-", "'", '"', "@", "`", "%YAML"]))


@SETTINGS
@given(pairs=st.lists(st.tuples(st.sampled_from(["title", "version", "effective_date", "date", "product", "id",
                                                 "status", "tags", "x"]), yaml_values), max_size=5),
       front=st.text(max_size=60), use_pairs=st.booleans(), body=safe_text, fmt=st.sampled_from(["md", "txt", "html"]))
def test_any_front_matter_gives_a_document_or_one_problem(pairs, front, use_pairs, body, fmt):
    block = "\n".join(f"{key}: {value}" for key, value in pairs) if use_pairs else front
    doc, problem = parse_document(f"---\n{block}\n---\n{body}\n", "f", fmt, default_id="f")
    assert (doc is None) != (problem == "")
    assert_one_line_problems([problem])


@SETTINGS
@given(body=safe_text, version=st.from_regex(r"\A[0-9]{1,3}(\.[0-9]{1,3}){0,2}\Z"),
       date=st.dates().map(lambda d: d.isoformat()))
def test_a_good_front_matter_document_is_never_lost(body, version, date):
    doc, problem = parse_document(f'---\nid: good\nversion: "{version}"\neffective_date: {date}\n---\n{body}\n',
                                  "f.md", "md", default_id="f")
    assert problem == "" and doc.text == body.strip("\n") and doc.version == version and doc.effective_date == date


@SETTINGS
@given(parts=st.lists(st.one_of(MARKDOWN_BITS, st.text(max_size=10)), max_size=40))
def test_any_markdown_is_stripped_and_chunked_without_losing_shown_words(parts):
    text = strip_hidden("".join(parts))
    doc = Document(doc_id="d", title="T", text=normalise_text(text).strip("\n") or "x", source="s", format="md")
    chunks = chunk_document(doc, ChunkingConfig(max_tokens=8, overlap_tokens=2))
    kept = {w for c in chunks for w in (c.text.split() + " ".join(c.heading_path).split())}
    lost = {w for w in doc.text.split() if w.strip("#") and w not in kept}
    assert not lost, lost


@SETTINGS
@given(parts=st.lists(st.one_of(HTML_BITS, st.text(max_size=10)), max_size=50))
def test_any_html_converts_without_an_exception(parts):
    text, title = html_to_markdown("".join(parts))
    assert isinstance(text, str) and isinstance(title, str)


@SETTINGS
@given(style=st.text(alphabet=st.sampled_from(list("0123456789.-%:;() ,#/*!abcdefghilmnoprstuvwxyz{}@")),
                     max_size=120) | st.text(max_size=120))
def test_any_css_parses(style):
    hiding_declaration(declarations(style))
    stylesheet_rules(style)


@SETTINGS
@given(text=st.text(max_size=200))
def test_escaped_text_is_one_printable_line_and_printable_text_is_untouched(text):
    escaped = escape(text)
    assert escaped.isprintable()
    if text.isprintable():
        assert escaped == text


ALLOWED_FORMAT = {"\u200c", "\u200d"} | {chr(c) for c in range(0xE0061, 0xE007B)} | {"\U000e007f"}


@SETTINGS
@given(text=st.text(max_size=200) | st.lists(st.sampled_from(["a", "\u0628", "\u0915\u094d", "\U0001f468", "\ufe0f",
                                                              "\u200c", "\u200d", "\u200b", "\U000e0067", " ",
                                                              "\U0001f3f4", "\u0430", "\uff41"]),
                                             max_size=30).map("".join))
def test_normalised_text_has_no_invisible_characters_and_is_stable(text):
    once = normalise_text(text)
    assert normalise_text(once) == once
    assert all(unicodedata.category(ch) != "Cf" or ch in ALLOWED_FORMAT for ch in once)
    assert all(unicodedata.category(ch) not in ("Cs",) for ch in once)
    assert all(ch in "\t\n\r\x85" or unicodedata.category(ch) != "Cc" for ch in once)
