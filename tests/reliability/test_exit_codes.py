"""One exit-code rule for bad input (issue 14): every command exits 2 with one ``error:`` line (``problem:``
lines for ingest) for anything the user can fix, never 1 and never a traceback; 1 is left for internal
errors. Each case below exited 1 ("internal error") or 2 depending on the path before the rule was one.

The commands run in-process (``workbench.cli.main``) against a small store built with the fake models: every
bad input here is refused before a model is needed.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.config import PipelineConfig
from pipeline.ingestion.ingest import ingest_paths
from pipeline.storage.store import Store
from pipeline.testing import fake_models
from workbench.cli import main

DEEP = "[" * 100_000 + "]" * 100_000


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("exit-codes")
    (root / "corpus").mkdir()
    (root / "corpus" / "a.md").write_text("---\nid: a\n---\nThe default timeout is 30 seconds.\n", encoding="utf-8")
    with Store.open(root / "store") as store:
        ingest_paths(store, [root / "corpus"], PipelineConfig(), fake_models(), progress=False)
    (root / "bad").mkdir()
    (root / "bad" / "empty.md").write_text("", encoding="utf-8")
    (root / "bad" / "date.md").write_text("---\nid: d\ndate: 2024-13-45\n---\nBody.\n", encoding="utf-8")
    (root / "not-utf8.json").write_bytes(b"\xff\xfe{")
    (root / "deep.json").write_text(DEEP, encoding="utf-8")
    (root / "bigint.json").write_text("[" + "9" * 5000 + "]", encoding="utf-8")
    (root / "a-file").write_text("not a folder\n", encoding="utf-8")
    (root / "bigint-config.json").write_text('{"gate": {"closest_documents": ' + "9" * 5000 + "}}", encoding="utf-8")
    (root / "hugefloat-config.json").write_text('{"gate": {"confidence_threshold_dense": ' + "9" * 4000 + "}}",
                                                encoding="utf-8")
    (root / "golden.jsonl").write_text('{"id": "g1", "question": "What is the timeout?", "answerable": false}\n',
                                       encoding="utf-8")
    (root / "deep-golden.jsonl").write_text('{"id": "g1", "question": "What is the timeout?", "answerable": false}\n'
                                            + DEEP + "\n", encoding="utf-8")
    return {"root": str(root), "store": str(root / "store")}


CASES = [
    pytest.param(["ingest", "{root}/bad"], "problem: ", id="ingest-nothing-usable"),
    pytest.param(["ingest", "{root}/corpus", "--config", "{root}/not-utf8.json"], "not UTF-8",
                 id="ingest-config-not-utf8"),
    pytest.param(["search", "timeout", "--config", "{root}/deep.json"], "nested too deeply", id="search-config-deep"),
    pytest.param(["search", "timeout", "--history", "{root}/deep.json"], "nested too deeply",
                 id="search-history-deep"),
    pytest.param(["ask", "What is the timeout?", "--history", "{root}/not-utf8.json"], "not UTF-8",
                 id="ask-history-not-utf8"),
    pytest.param(["ask", "What is the timeout?", "--history", "{root}/bigint.json"], "not valid JSON",
                 id="ask-history-5000-digit-number"),
    pytest.param(["eval", "{root}/deep-golden.jsonl", "--no-nli"], "nested too deeply", id="eval-golden-deep-line"),
    pytest.param(["tune", "{root}/golden.jsonl", "--traces", "{root}/deep.json", "--out", "{root}/tune"],
                 "nested too deeply", id="tune-traces-deep"),
    pytest.param(["runs", "--store", "{root}/a-file"], "a-file", id="runs-store-is-a-file"),
    pytest.param(["docs", "--store", "{root}/a-file"], "a-file", id="docs-store-is-a-file"),
    pytest.param(["delete", "no-such-doc"], "no document with id", id="delete-unknown-id"),
    # issue 31, item 4: bounded reads, huge integers, bytes that are not text
    pytest.param(["search", "timeout", "--config", "/dev/zero"], "larger than", id="config-endless-file"),
    pytest.param(["ask", "What is the timeout?", "--history", "/dev/zero"], "larger than", id="history-endless-file"),
    pytest.param(["search", "timeout", "--config", "{root}/bigint-config.json"], "not a valid config",
                 id="config-5000-digit-integer"),
    pytest.param(["search", "timeout", "--config", "{root}/hugefloat-config.json"], "not a valid config",
                 id="config-integer-too-large-for-a-float"),
    pytest.param(["ask", "what is the timeout\udcff?"], "not valid UTF-8", id="question-not-utf8"),
]


@pytest.mark.parametrize(("args", "message"), CASES)
def test_bad_input_exits_2_with_one_line_in_every_command(inputs, capsys, args, message):
    args = [a.format(**inputs) for a in args]
    if "--store" not in args:
        args += ["--store", inputs["store"]]
    assert main(args) == 2
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip() and not line.startswith("note: ")]
    assert "Traceback" not in err and "internal error" not in err, err
    assert message in err, err
    if args[0] == "ingest" and message == "problem: ":
        assert len(lines) == 2 and all(line.startswith("problem: ") for line in lines), err
    elif args[0] == "eval":  # a bad golden line is one problem line; the good lines are still evaluated
        problems = [line for line in lines if line.startswith("problem: ")]
        assert len(problems) == 1 and "line 2" in problems[0] and "evaluated 1 cases" in err, err
    else:
        assert len(lines) == 1 and lines[0].startswith("error: "), err


def test_a_partly_bad_batch_is_ingested_and_exits_0(inputs, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr("pipeline.models.registry.default_models", fake_models)
    folder = Path(inputs["root"]) / "bad"
    (tmp_path / "good.md").write_text("---\nid: good\n---\nRetries back off exponentially.\n", encoding="utf-8")
    assert main(["ingest", str(folder), str(tmp_path / "good.md"), "--store", str(tmp_path / "s"),
                 "--set", "ingest.passage_vectors=false", "--json"]) == 0
    err = capsys.readouterr().err
    assert sum(line.startswith("problem: ") for line in err.splitlines()) == 2


@pytest.mark.parametrize("args", [
    pytest.param(["delete", "evil\nerror: forged\x1b[31m"], id="in-a-value"),
    pytest.param(["search", "timeout", "--config", "{root}/evil\nerror: forged\x1b[31m.json"], id="in-a-path"),
])
def test_an_error_line_cannot_be_split_or_coloured_by_the_input(inputs, capsys, args):
    assert main([a.format(**inputs) for a in args] + ["--store", inputs["store"]]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert "\x1b" not in line and "evil\\nerror: forged\\x1b[31m" in line


def test_an_error_line_names_a_huge_value_by_its_start(inputs, capsys):
    assert main(["delete", "x" * 100_000, "--store", inputs["store"]]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("error: no document with id") and len(line) < 2100 and "more characters" in line


@pytest.mark.parametrize("limit", ["-5", "0", "ten"])
def test_runs_limit_must_be_a_positive_number(inputs, capsys, limit):
    with pytest.raises(SystemExit) as exit_:
        main(["runs", "--limit", limit, "--store", inputs["store"]])
    assert exit_.value.code == 2
    assert "--limit" in capsys.readouterr().err


def test_a_damaged_catalogue_page_read_mid_command_is_one_line_naming_the_file(inputs, capsys, monkeypatch):
    """Garbage in the middle of store.sqlite is found only when a command reads that page (the store opened
    cleanly): SQLite's DatabaseError then names no file, so the line names the store's database files."""
    import sqlite3

    from pipeline.storage.store import Store

    def damaged(self):
        raise sqlite3.DatabaseError("database disk image is malformed")

    monkeypatch.setattr(Store, "documents", damaged)
    assert main(["docs", "--store", inputs["store"]]) == 2
    err = capsys.readouterr().err
    (line,) = err.splitlines()
    assert line.startswith("error: a database file of the store") and "store.sqlite" in line and "malformed" in line


def test_a_damaged_catalogue_header_is_one_line_naming_the_file(inputs, tmp_path, capsys):
    import shutil

    store = tmp_path / "store"
    shutil.copytree(inputs["store"], store)
    catalogue = store / "store.sqlite"
    data = bytearray(catalogue.read_bytes())
    data[100:4096] = (b"\x00garbage\xff" * 500)[:3996]            # the schema page, after the file header
    catalogue.write_bytes(bytes(data))
    for command in (["docs"], ["search", "timeout"]):
        assert main([*command, "--store", str(store)]) == 2
        (line,) = capsys.readouterr().err.splitlines()
        assert "store.sqlite" in line and "cannot be read" in line, line
