"""The workbench CLI as a user runs it: real entry point, subprocesses, JSON shapes from docs/ARCHITECTURE.md."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.stores import Borrowed

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


@pytest.mark.long
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
    assert result.returncode == 2
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


# -- eval and tune in process: the flags reach the one golden-set driver ------------------------------------------

@pytest.fixture
def in_process(monkeypatch, demo_store_fake):
    """``workbench.cli.main`` on the fake demo store with the fake models; every driver call is recorded."""
    from pipeline.testing import fake_models
    from workbench import cli, evaluate, tune

    monkeypatch.setattr(cli, "open_store", lambda args, cfg=None, repair=True: Borrowed(demo_store_fake))
    for module in (evaluate, tune):
        monkeypatch.setattr(module, "default_models", lambda: fake_models(reranker=False))
    calls, real = [], evaluate.run_cases

    def spy(golden, pipeline, *, generate=True, on_progress=None, **walk):
        calls.append((generate, len(golden.cases)))
        return real(golden, pipeline, generate=generate, on_progress=on_progress, **walk)

    monkeypatch.setattr(evaluate, "run_cases", spy)
    monkeypatch.setattr(tune, "run_cases", spy)
    return cli.main, calls


@pytest.fixture
def tiny_golden(tmp_path):
    lines = (ROOT / "golden" / "golden.jsonl").read_text(encoding="utf-8").splitlines()
    off_topic = [ln for ln in lines[4:] if '"off-topic"' in ln][:2]
    path = tmp_path / "tiny.jsonl"
    path.write_text("\n".join(lines[:4] + off_topic) + "\n", encoding="utf-8")
    return path


def test_eval_and_tune_run_the_golden_set_through_one_driver(in_process, tiny_golden, tmp_path, capsys):
    main, calls = in_process
    floors = tmp_path / "floors.json"
    floors.write_text(json.dumps({"floors": {"recall_at_10": 0.0}}), encoding="utf-8")
    out = tmp_path / "eval"
    assert main(["eval", str(tiny_golden), "--store", "x", "--json", "--no-nli", "--check", str(floors),
                 "--out", str(out), "--csv", str(tmp_path / "rows.csv")]) == 0
    captured = capsys.readouterr()
    printed = json.loads(captured.out)
    assert len(printed["rows"]) == 6
    assert {"correct_answer_rate", "partly_answer_rate", "wrong_answer_rate", "supported_but_wrong_rate",
            "trust_answerable", "trust_unanswerable", "correctness"} <= set(printed["summary"])
    assert set(printed["summary"]["trust_unanswerable"]) >= {"answered_correctly", "abstained", "answered_wrongly"}
    assert printed["summary"]["correctness"]["nli"] == "off", "--no-nli"
    assert all((r["correctness"] is None) == r["abstained"] for r in printed["rows"])
    assert "evaluated 6 cases" in captured.err and f"deploy gate passed: 1 floors and 0 ceilings in {floors}" \
        in captured.err
    assert {p.name for p in out.iterdir()} == {"traces.jsonl", "summary.json", "eval.json", "rows.csv"}
    assert (tmp_path / "rows.csv").read_text() == (out / "rows.csv").read_text()
    one_at_a_time = tmp_path / "one"
    assert main(["eval", str(tiny_golden), "--store", "x", "--json", "--no-nli", "--no-batch",
                 "--out", str(one_at_a_time)]) == 0
    alone = json.loads(capsys.readouterr().out)
    assert alone["summary"]["run"]["batched"] is False and printed["summary"]["run"]["batched"] is True
    assert [(r["id"], r["abstained"]) for r in alone["rows"]] == [(r["id"], r["abstained"]) for r in printed["rows"]]

    floors.write_text(json.dumps({"floors": {"recall_at_10": 1.01}}), encoding="utf-8")
    assert main(["eval", str(tiny_golden), "--store", "x", "--no-nli", "--check", str(floors), "--limit", "2"]) == 1
    captured = capsys.readouterr()
    assert "deploy gate FAILED" in captured.err
    assert "correct_answer_rate" in captured.out and "unanswerable: ok/part/abst/wrong" in captured.out, "the text summary too"

    tuned = tmp_path / "tune"
    assert main(["tune", str(tiny_golden), "--store", "x", "--out", str(tuned), "--grid", "5", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["cases"] == 6 and report["source"].startswith("searched 6 cases")
    assert (tuned / "traces.jsonl").is_file() and (tuned / "report.md").is_file()
    assert main(["tune", str(tiny_golden), "--store", "x", "--out", str(tuned), "--grid", "5"]) == 0
    assert "reused" in capsys.readouterr().out
    assert main(["tune", str(tiny_golden), "--out", str(tmp_path / "replay"), "--traces",
                 str(out / "traces.jsonl")]) == 0
    assert "replayed" in capsys.readouterr().out
    assert calls == [(True, 6), (True, 6), (True, 2), (False, 6)], \
        "eval asks (batched, then one at a time), tune searches once, reuse and replay run none"


@pytest.mark.parametrize("args, message", [
    (["--grid", "1"], "error: --grid must be at least 2, got 1"),
    (["--max-false-answer-rate", "2"], "error: --max-false-answer-rate must be between 0 and 1, got 2.0"),
    (["--traces", "/nonexistent/traces.jsonl"], "error: traces file /nonexistent/traces.jsonl not found"),
])
def test_bad_tune_flags_are_one_line_and_exit_2(in_process, tiny_golden, tmp_path, capsys, args, message):
    main, calls = in_process
    assert main(["tune", str(tiny_golden), "--out", str(tmp_path / "t"), *args]) == 2
    assert capsys.readouterr().err.startswith(message) and calls == []


@pytest.mark.parametrize("command", [["delete", "some-doc"], ["runs"], ["search", "webhook"], ["ingest", "golden/corpus"]])
def test_an_empty_store_argument_is_an_error_not_the_default_store(command, tmp_path, monkeypatch, capsys):
    from workbench.cli import main

    monkeypatch.chdir(tmp_path)  # the default store would be ./.workbench
    assert main([*command, "--store", ""]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --store is empty") and err.count("\n") == 1
    assert not (tmp_path / ".workbench").exists(), "nothing touched the default store"


# -- --history: the Ask page's rule decides which turns go with the question ----------------------------------------

def test_history_goes_with_a_follow_up_and_not_with_an_unrelated_question(in_process, tmp_path, capsys):
    main, _ = in_process
    history = tmp_path / "turns.json"
    history.write_text(json.dumps([{"role": "user", "content": "How do I rotate a webhook signing secret?"},
                                   {"role": "assistant", "content": "Rotate it with harborctl secrets rotate."}]))

    def search(question, *flags):
        assert main(["search", question, "--history", str(history), "--json", *flags]) == 0
        return json.loads(capsys.readouterr().out)

    unrelated = search("What is the capital of France?")
    assert unrelated["history"] == [] and "new question" in unrelated["history_note"]
    assert "rotate" not in unrelated["rewrite"]["query"].lower()
    follow_up = search("and how long does that take?")
    assert len(follow_up["history"]) == 2 and "follow-up" in follow_up["history_note"]
    assert "rotate" in follow_up["rewrite"]["query"].lower()
    forced = search("What is the capital of France?", "--history-mode", "always")
    assert len(forced["history"]) == 2
    assert main(["search", "and how long does that take?", "--history", str(history)]) == 0
    assert capsys.readouterr().out.startswith("Read as a follow-up (it opens with “and”)")
