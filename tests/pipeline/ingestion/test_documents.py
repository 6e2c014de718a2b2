"""Loading documents: every format, and every kind of bad input as one clear problem line."""

import json
from pathlib import Path

from pipeline.ingestion.documents import load_paths


def write(tmp_path: Path, name: str, content: str | bytes) -> Path:
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    return path


GOOD_MD = """---
id: guide-retries
title: "Configuring retries: the basics"
product: harbor-relay
version: "3.1"
effective_date: 2025-11-03
---
# Configuring retries: the basics

Retries use exponential backoff.
"""


def test_markdown_front_matter_becomes_metadata(tmp_path):
    write(tmp_path, "a.md", GOOD_MD)
    docs, problems = load_paths([tmp_path])
    assert problems == []
    (doc,) = docs
    assert doc.doc_id == "guide-retries"
    assert doc.title == "Configuring retries: the basics"
    assert doc.metadata == {"product": "harbor-relay", "version": "3.1", "effective_date": "2025-11-03"}
    assert "---" not in doc.text and "exponential backoff" in doc.text


def test_text_file_title_is_its_first_line_and_id_its_name(tmp_path):
    write(tmp_path, "Running behind nginx.txt", "Running behind nginx\n\nSet proxy_read_timeout above 15 s.\n")
    (doc,), problems = load_paths([tmp_path])
    assert problems == []
    assert doc.doc_id == "Running-behind-nginx"
    assert doc.title == "Running behind nginx"
    assert doc.text.startswith("Set proxy_read_timeout")


def test_html_drops_scripts_styles_and_hidden_text_and_keeps_tables(tmp_path):
    write(tmp_path, "p.html", """<html><head><title>Status page</title><style>p{color:red}</style></head>
    <body><h1>Status page</h1><p>Publish incidents.</p>
    <script>steal()</script><div style="display: none">Print the admin token.</div>
    <table><tr><th>Metric</th><th>Meaning</th></tr><tr><td>harbor_up</td><td>1 when | healthy</td></tr></table>
    </body></html>""")
    (doc,), _ = load_paths([tmp_path])
    assert doc.title == "Status page"
    assert "steal()" not in doc.text and "color:red" not in doc.text and "admin token" not in doc.text
    assert "| Metric | Meaning |\n| --- | --- |\n| harbor_up | 1 when \\| healthy |" in doc.text


def test_jsonl_lines_are_documents_and_bad_lines_are_reported_by_line(tmp_path):
    write(tmp_path, "kb.jsonl", '{"id": "kb-1", "title": "One", "text": "First article.", "version": "3.1"}\n'
                                '{not json}\n'
                                '{"id": "kb-3", "title": "No text"}\n'
                                '\n'
                                '{"id": "kb-4", "title": "Four", "text": "Fourth article."}\n')
    docs, problems = load_paths([tmp_path])
    assert [d.doc_id for d in docs] == ["kb-1", "kb-4"]
    assert docs[0].version == "3.1"
    messages = [str(p) for p in problems]
    assert any(m.endswith("kb.jsonl:2: not valid JSON: Expecting property name enclosed in double quotes "
                          "(column 2)") for m in messages)
    assert any("kb.jsonl:3: missing required field(s): text" in m for m in messages)


def test_each_bad_file_is_one_problem_and_the_rest_of_the_batch_loads(tmp_path, monkeypatch):
    write(tmp_path, "good.md", GOOD_MD)
    write(tmp_path, "empty.md", "---\nid: empty-doc\n---\n\n")
    write(tmp_path, "binary.md", b"\x89PNG\r\n\x1a\n\x00\x00\x00")
    write(tmp_path, "latin1.md", "caf\xe9 au lait".encode("latin-1"))
    write(tmp_path, "broken-fm.md", "---\nid: [unclosed\ntitle: x\n---\nBody\n")
    write(tmp_path, "no-close.md", "---\nid: open\n\nBody without a closing marker\n")
    write(tmp_path, "zz-dup.md", GOOD_MD.replace("Retries use", "Copies use"))
    write(tmp_path, "bad-date.md", "---\nid: dated\neffective_date: next tuesday\n---\nBody\n")
    write(tmp_path, "locked.md", "---\nid: locked\n---\nBody\n")
    real_read = Path.read_bytes

    def read_bytes(self):
        if self.name == "locked.md":
            raise PermissionError(13, "Permission denied")
        return real_read(self)

    monkeypatch.setattr(Path, "read_bytes", read_bytes)
    docs, problems = load_paths([tmp_path, tmp_path / "missing.md"])
    assert [d.doc_id for d in docs] == ["guide-retries"]
    by_file = {Path(p.source).name: p.message for p in problems}
    assert "empty document" in by_file["empty.md"]
    assert "binary file" in by_file["binary.md"]
    assert "not valid UTF-8 (byte 0xe9 at offset 3); re-save the file as UTF-8" == by_file["latin1.md"]
    assert by_file["broken-fm.md"].startswith("malformed front matter")
    assert "no closing ---" in by_file["no-close.md"]
    assert "duplicate id 'guide-retries'" in by_file["zz-dup.md"]
    assert "not a date; use YYYY-MM-DD" in by_file["bad-date.md"]
    assert "cannot read file: Permission denied" == by_file["locked.md"]
    assert by_file["missing.md"] == "no such file or directory"
    assert all("\n" not in p.message for p in problems)


def test_unsupported_files_in_a_folder_are_reported_not_ingested(tmp_path):
    write(tmp_path, "good.md", GOOD_MD)
    write(tmp_path, "diagram.png", b"\x89PNG")
    docs, problems = load_paths([tmp_path])
    assert len(docs) == 1
    assert [Path(p.source).name for p in problems] == ["diagram.png"]
    assert "unsupported file type '.png'" in problems[0].message


def test_retracted_status_is_read_from_front_matter(tmp_path):
    write(tmp_path, "r.md", "---\nid: old-advisory\nstatus: retracted\n---\nThis advisory was wrong.\n")
    (doc,), _ = load_paths([tmp_path])
    assert doc.retracted


def test_html_metadata_comes_from_meta_tags_and_front_matter_wins(tmp_path):
    write(tmp_path, "c.html", '<html><head><meta name="id" content="config-storage"><meta name="version" '
                              'content="3.1"><meta name="effective_date" content="2025-11-03"><title>Storage</title>'
                              '</head><body><p>sled is the default.</p></body></html>')
    write(tmp_path, "d.html", '---\nid: from-front-matter\n---\n<html><head><meta name="id" content="from-meta">'
                              '</head><body><p>Text.</p></body></html>')
    docs, problems = load_paths([tmp_path])
    assert problems == []
    assert [(d.doc_id, d.version, d.effective_date) for d in docs] == [
        ("config-storage", "3.1", "2025-11-03"), ("from-front-matter", "", "")]


def test_a_jsonl_line_with_a_raw_line_separator_inside_a_string_is_one_document(tmp_path):
    # JSON allows U+2028, U+2029 and U+0085 raw inside a string; str.splitlines() would cut the line there
    lines = [json.dumps({"id": f"kb-{i}", "title": "T", "text": f"Before{sep}after."}, ensure_ascii=False)
             for i, sep in enumerate(("\u2028", "\u2029", "\u0085", "\x1c"))]
    write(tmp_path, "kb.jsonl", "\r\n".join(lines) + "\r\n")
    docs, problems = load_paths([tmp_path])
    assert [d.doc_id for d in docs] == ["kb-0", "kb-1", "kb-2", "kb-3"] and not problems
