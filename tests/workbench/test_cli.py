"""The workbench CLI as a user runs it: real entry point, subprocesses, JSON shapes from DESIGN.md."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
ENV.pop("QDRANT_URL", None)


def workbench(*args, timeout=600):
    return subprocess.run([sys.executable, "-m", "workbench.cli", *args], cwd=ROOT, env=ENV, capture_output=True,
                          text=True, timeout=timeout)


def one_line_error(result):
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert "Traceback" not in result.stderr
    assert len(lines) == 1, result.stderr
    return lines[0]


@pytest.mark.slow
def test_demo_corpus_ingest_reingest_delete_search(tmp_path):
    store = str(tmp_path / "store")
    first = workbench("ingest", "golden/corpus", "--store", store, "--json")
    assert first.returncode == 0, first.stderr
    report = json.loads(first.stdout)
    assert {"documents", "chunks", "embedded", "deleted", "corpus_version"} <= set(report)
    assert report["documents"] >= 80 and report["embedded"] == report["chunks"] > 0

    again = json.loads(workbench("ingest", "golden/corpus", "--store", store, "--json").stdout)
    assert again["embedded"] == 0 and again["corpus_version"] == report["corpus_version"]

    deleted = workbench("delete", "err-timeout-502", "--store", store, "--json")
    assert deleted.returncode == 0, deleted.stderr
    assert json.loads(deleted.stdout)["chunks_removed"] > 0

    found = workbench("search", "ERR_TIMEOUT_502 endpoint did not respond in time", "--store", store, "--json")
    assert found.returncode == 0, found.stderr
    trace = json.loads(found.stdout)
    assert trace["retrieval"]["candidates"], "search should still find other documents"
    assert all(c["doc_id"] != "err-timeout-502" for c in trace["retrieval"]["candidates"])
    assert json.loads(workbench("docs", "--store", store, "--json").stdout)["corpus_version"] == \
        report["corpus_version"] + 1

    missing = workbench("delete", "err-timeout-502", "--store", store)
    assert missing.returncode == 2
    assert "no document with id 'err-timeout-502'" in one_line_error(missing)


@pytest.mark.slow
def test_bad_files_are_reported_one_line_each_and_the_rest_ingested(tmp_path):
    folder = tmp_path / "batch"
    folder.mkdir()
    (folder / "good.md").write_text("---\nid: good\ntitle: Good\n---\nHarbor Relay retries with backoff.\n")
    (folder / "empty.md").write_text("")
    (folder / "binary.txt").write_bytes(b"\x00\x01\x02")
    (folder / "fm.md").write_text("---\nid: [x\n---\nbody\n")
    (folder / "dup.md").write_text("---\nid: good\n---\nAnother body.\n")
    result = workbench("ingest", str(folder), "--store", str(tmp_path / "s"), "--json")
    assert result.returncode == 0
    assert json.loads(result.stdout)["documents"] == 1
    problems = [line for line in result.stderr.splitlines() if line.startswith("problem: ")]
    assert len(problems) == 4 and "Traceback" not in result.stderr


def test_all_bad_input_exits_non_zero(tmp_path):
    (tmp_path / "empty.md").write_text("   \n")
    result = workbench("ingest", str(tmp_path / "empty.md"), "--store", str(tmp_path / "s"))
    assert result.returncode == 1
    assert "empty document" in result.stderr and "Traceback" not in result.stderr


@pytest.mark.parametrize("args, message", [
    (["--set", "gate.treshold=0.3"], "unknown config key gate.treshold"),
    (["--set", "retrieve.rrf_k=abc"], "retrieve.rrf_k must be an integer"),
    (["--config", "/nonexistent/config.json"], "cannot read config file"),
])
def test_bad_config_is_one_clear_line(tmp_path, args, message):
    result = workbench("search", "anything", "--store", str(tmp_path / "s"), *args)
    assert result.returncode == 2
    assert message in one_line_error(result)


def test_searching_an_empty_store_says_to_ingest_first(tmp_path):
    result = workbench("ask", "How do I replay events?", "--store", str(tmp_path / "s"))
    assert result.returncode == 2
    assert "ingest documents first" in one_line_error(result)
