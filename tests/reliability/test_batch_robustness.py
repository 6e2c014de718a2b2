"""One bad file never sinks a batch (issue 14): every loader failure is one problem line naming the file
(escaped, with the line for JSONL) and everything else in the batch is ingested; no recursion limit, integer
limit or hang is reachable from a file's content, its name or the shape of the folder it sits in.

Each case ingests a good document next to the hostile one into a fresh store with the fake models, so a
failure that aborted the batch (the old behaviour: ``internal error``, exit 1, nothing stored) shows as the
good document missing.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from pipeline.config import PipelineConfig
from pipeline.ingestion.documents import load_paths
from pipeline.ingestion.ingest import ingest_paths
from pipeline.storage.store import Store
from pipeline.testing import fake_models

GOOD = "---\nid: good-doc\ntitle: Good\n---\nThe default request timeout of Marlin Gateway is 30 seconds.\n"


def ingest(tmp_path: Path, *paths: Path):
    with Store.open(tmp_path / "store") as store:
        report = ingest_paths(store, list(paths), PipelineConfig(), fake_models(), progress=False)
        stored = {d.doc_id: d.source for d in store.documents()}
        texts = {c.doc_id: c.text for c in store.chunks()}
    return report, stored, texts


def batch(tmp_path: Path) -> Path:
    folder = tmp_path / "batch"
    folder.mkdir()
    (folder / "good.md").write_text(GOOD, encoding="utf-8")
    return folder


def assert_one_problem(report, name: str, message: str) -> str:
    (problem,) = report.problems
    assert name in problem and message in problem, problem
    assert "\n" not in problem and "Traceback" not in problem
    return problem


# -- a file's content -------------------------------------------------------------------------------------------

BAD_CONTENT = [
    pytest.param("impossible-date.md", "---\nid: bad-date\ndate: 2024-13-45\n---\nBody.\n",
                 "malformed front matter", id="front-matter-impossible-date"),
    pytest.param("impossible-effective.md", "---\nid: bad-eff\neffective_date: 2024-02-30\n---\nBody.\n",
                 "malformed front matter", id="front-matter-impossible-effective-date"),
    pytest.param("impossible-time.md", "---\nid: bad-time\nreviewed: 2024-01-01 25:61:00\n---\nBody.\n",
                 "malformed front matter", id="front-matter-impossible-time"),
    pytest.param("deep-yaml.md", "---\nid: deep-yaml\nx: " + "[" * 5000 + "]" * 5000 + "\n---\nBody.\n",
                 "malformed front matter", id="front-matter-nested-5000-deep"),
    pytest.param("deep.jsonl", "[" * 100_000 + "]" * 100_000 + "\n", "deep.jsonl:1: ", id="jsonl-100k-deep"),
    pytest.param("deep-object.jsonl", '{"id": "x", "text": "t", "m": ' + '{"a": ' * 50_000 + "1" + "}" * 50_001 + "\n",
                 "deep-object.jsonl:1: ", id="jsonl-object-50k-deep"),
]


@pytest.mark.parametrize(("name", "content", "message"), BAD_CONTENT)
def test_a_file_that_crashed_the_parser_is_one_problem_line_and_the_batch_is_ingested(tmp_path, name, content,
                                                                                      message):
    folder = batch(tmp_path)
    (folder / name).write_text(content, encoding="utf-8")
    report, stored, _ = ingest(tmp_path, folder)
    assert_one_problem(report, name, message)
    assert list(stored) == ["good-doc"]


def test_a_jsonl_line_nested_too_deeply_names_its_line_and_the_good_lines_are_kept(tmp_path):
    lines = [json.dumps({"id": "kb-1", "text": "First article."}), "[" * 100_000 + "]" * 100_000,
             json.dumps({"id": "kb-3", "text": "Third article."})]
    (tmp_path / "kb.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    docs, problems = load_paths([tmp_path])
    assert [d.doc_id for d in docs] == ["kb-1", "kb-3"]
    (problem,) = problems
    assert str(problem).startswith(f"{tmp_path / 'kb.jsonl'}:2: ") and "nested too deeply" in str(problem)


def test_a_jsonl_record_with_a_5000_digit_integer_is_kept_with_its_digits(tmp_path):
    digits = "7" * 5000
    (tmp_path / "kb.jsonl").write_text('{"id": "kb-big", "text": "A record with a huge serial.", "serial": '
                                       + digits + '}\n{"id": "kb-2", "text": "Second."}\n', encoding="utf-8")
    report, stored, _ = ingest(tmp_path, tmp_path / "kb.jsonl")
    assert report.problems == () and sorted(stored) == ["kb-2", "kb-big"]
    docs, _ = load_paths([tmp_path / "kb.jsonl"])
    assert docs[0].doc_id == "kb-big" and docs[0].metadata["serial"] == digits, "the value is kept exactly, not lost or rounded"


def test_html_nested_1200_deep_is_ingested_with_its_text(tmp_path):
    folder = batch(tmp_path)
    (folder / "deep.html").write_text("<html><body><h1>Deep page</h1>" + "<div>" * 1200 + "<p>The bottom holds "
                                      "the deep fact.</p>" + "</div>" * 1200 + "<p>After the nest.</p></body></html>",
                                      encoding="utf-8")
    (folder / "deep-list.html").write_text("<ul>" + "<li>level<ul>" * 1500 + "<li>leaf item</li>"
                                           + "</ul></li>" * 1500 + "</ul>", encoding="utf-8")
    report, stored, texts = ingest(tmp_path, folder)
    assert report.problems == () and sorted(stored) == ["deep", "deep-list", "good-doc"]
    assert "The bottom holds the deep fact." in texts["deep"] and "After the nest." in texts["deep"]
    assert "leaf item" in texts["deep-list"]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("line", [
    pytest.param("# a" + " " * 5000 + "b", id="heading-with-5000-spaces"),
    pytest.param("## " + " #" * 5000 + " x", id="heading-of-hashes"),
])
def test_a_pathological_heading_line_is_chunked_without_hanging(tmp_path, line):
    (tmp_path / "h.md").write_text(f"---\nid: h\n---\n{line}\n\nBody text.\n", encoding="utf-8")
    report, stored, texts = ingest(tmp_path, tmp_path / "h.md")
    assert report.problems == () and list(stored) == ["h"] and "Body text." in texts["h"]


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-le", "utf-16-be", "utf-32"])
def test_a_unicode_file_with_a_byte_order_mark_is_decoded_not_called_binary(tmp_path, encoding):
    text = "Délai d'attente\nLe délai par défaut est de 30 secondes. 日本語も。\n"
    data = text.encode(encoding)
    if encoding.endswith(("-le", "-be")):
        data = "\ufeff".encode(encoding) + data
    (tmp_path / "fr.txt").write_bytes(data)
    (doc,), problems = load_paths([tmp_path / "fr.txt"])
    assert problems == []
    assert doc.title == "Délai d'attente" and doc.text == "Le délai par défaut est de 30 secondes. 日本語も。"


def test_utf16_without_a_byte_order_mark_is_named_as_such(tmp_path):
    (tmp_path / "nobom.txt").write_bytes("Title\nThe default timeout is 30 s.\n".encode("utf-16-le"))
    _, (problem,) = load_paths([tmp_path / "nobom.txt"])
    assert "UTF-16 without a byte-order mark" in problem.message and "UTF-8" in problem.message


def test_a_broken_utf16_file_is_one_problem(tmp_path):
    (tmp_path / "odd.txt").write_bytes(b"\xff\xfeT\x00i\x00\x00\xd8")  # ends in a lone high surrogate
    _, (problem,) = load_paths([tmp_path / "odd.txt"])
    assert "not valid UTF-16" in problem.message


def test_a_lone_surrogate_escaped_in_jsonl_is_replaced_not_a_crash_after_embedding(tmp_path):
    (tmp_path / "kb.jsonl").write_text('{"id": "kb-s", "title": "T\\ud800", "text": "Half a pair: \\udc00 here.", '
                                       '"product": "p\\ud83d"}\n', encoding="utf-8")
    report, stored, texts = ingest(tmp_path, tmp_path / "kb.jsonl")
    assert report.problems == () and list(stored) == ["kb-s"]
    assert texts["kb-s"] == "Half a pair: \ufffd here."


# -- a file's name and place ------------------------------------------------------------------------------------

def test_a_file_name_that_is_not_utf8_is_ingested_under_an_escaped_name(tmp_path):
    folder = batch(tmp_path)
    raw = os.path.join(os.fsencode(folder), b"caf\xe9.md")
    with open(raw, "wb") as f:
        f.write(b"---\nid: latin1-name\n---\nA file whose name is Latin-1.\n")
    report, stored, _ = ingest(tmp_path, folder)
    assert report.problems == () and sorted(stored) == ["good-doc", "latin1-name"]
    assert stored["latin1-name"].endswith("caf\\xe9.md")


def test_a_bad_file_with_a_hostile_name_is_reported_on_one_escaped_line(tmp_path):
    folder = batch(tmp_path)
    name = "evil\nproblem: forged line \x1b[31mred\x1b[0m\u202e.md"
    (folder / name).write_text("", encoding="utf-8")
    raw = os.path.join(os.fsencode(folder), b"bad\xff\nname.md")
    with open(raw, "wb"):
        pass
    report, stored, _ = ingest(tmp_path, folder)
    assert list(stored) == ["good-doc"] and len(report.problems) == 2
    for problem in report.problems:
        assert "empty document" in problem
        assert not any(ch in problem for ch in "\n\r\x1b\u202e"), repr(problem)
    joined = " ".join(report.problems)
    assert "evil\\nproblem: forged line \\x1b[31mred\\x1b[0m\\u202e.md" in joined
    assert "bad\\xff\\nname.md" in joined


def test_1100_nested_folders_are_walked_without_a_recursion_error(tmp_path):
    folder = batch(tmp_path)
    here = os.getcwd()
    try:
        os.chdir(folder)
        for _ in range(1100):  # os.makedirs recurses once per level itself
            os.mkdir("d")
            os.chdir("d")
        Path("bottom.md").write_text("---\nid: bottom\n---\nFound at the bottom.\n", encoding="utf-8")
    finally:
        os.chdir(here)
    try:
        report, stored, _ = ingest(tmp_path, folder)
        assert report.problems == () and sorted(stored) == ["bottom", "good-doc"]
    finally:
        _remove_deep_chain(folder, 1100)  # shutil.rmtree (pytest's tmp cleanup) recurses once per level


def _remove_deep_chain(folder: Path, levels: int) -> None:
    """Remove ``folder/d/d/.../d`` (``levels`` deep) bottom-up without recursion."""
    here = os.getcwd()
    try:
        os.chdir(folder)
        for _ in range(levels):
            os.chdir("d")
        for name in os.listdir("."):
            os.remove(name)
        for _ in range(levels):
            os.chdir("..")
            os.rmdir("d")
    finally:
        os.chdir(here)


def test_a_symlink_out_of_the_corpus_folder_is_refused_and_one_inside_is_fine(tmp_path):
    folder = batch(tmp_path)
    outside = tmp_path / "private"
    outside.mkdir()
    (outside / "secret.md").write_text("---\nid: secret\n---\nThe root password.\n", encoding="utf-8")
    (folder / "leak.md").symlink_to(outside / "secret.md")
    (folder / "leakdir").symlink_to(outside, target_is_directory=True)
    (folder / "alias.md").symlink_to(folder / "good.md")
    (folder / "sub").mkdir()
    (folder / "sub" / "inner.md").write_text("---\nid: inner\n---\nInside the folder.\n", encoding="utf-8")
    (folder / "sub-link").symlink_to(folder / "sub", target_is_directory=True)
    (folder / "loop").symlink_to(folder, target_is_directory=True)
    report, stored, _ = ingest(tmp_path, folder)
    assert sorted(stored) == ["good-doc", "inner"], "nothing outside the folder, and nothing twice"
    assert len(report.problems) == 2, report.problems
    assert all("symbolic link" in p and "outside" in p for p in report.problems)
    assert {Path(p.split(": ")[0]).name for p in report.problems} == {"leak.md", "leakdir"}


def test_a_symlink_named_on_the_command_line_is_followed(tmp_path):
    outside = tmp_path / "elsewhere.md"
    outside.write_text(GOOD, encoding="utf-8")
    (tmp_path / "link.md").symlink_to(outside)
    report, stored, _ = ingest(tmp_path, tmp_path / "link.md")
    assert report.problems == () and list(stored) == ["good-doc"]


def test_an_unreadable_subfolder_is_one_problem_and_the_rest_is_loaded(tmp_path, monkeypatch):
    folder = batch(tmp_path)
    (folder / "locked").mkdir()
    (folder / "locked" / "x.md").write_text(GOOD, encoding="utf-8")
    real_scandir = os.scandir

    def scandir(path):  # chmod 000 does not stop root, so the refusal is simulated
        if os.fspath(path).endswith("locked"):
            raise PermissionError(13, "Permission denied", os.fspath(path))
        return real_scandir(path)

    monkeypatch.setattr(os, "scandir", scandir)
    docs, problems = load_paths([folder])
    assert [d.doc_id for d in docs] == ["good-doc"]
    assert len(problems) == 1 and "cannot read folder" in problems[0].message


def test_hidden_folders_are_not_walked(tmp_path):
    folder = batch(tmp_path)
    (folder / ".git" / "objects").mkdir(parents=True)
    (folder / ".git" / "objects" / "ab12").write_bytes(b"\x78\x01blob")
    (folder / ".git" / "HEAD").write_text("ref: refs/heads/main\n", encoding="utf-8")
    docs, problems = load_paths([folder])
    assert [d.doc_id for d in docs] == ["good-doc"] and problems == []
