"""The query_runs audit log: one row per ask, the full trace back, migrations on blank and old databases."""

from __future__ import annotations

import dataclasses
import json
import sqlite3

from pipeline.storage import runs, sqlite
from pipeline.storage.runs import RunLog, RunSummary
from tests.support.traces import abstained_trace, answered_trace


def test_a_recorded_run_comes_back_as_the_same_trace(tmp_path):
    log = RunLog(tmp_path / "runs.sqlite")
    trace = answered_trace(run_id="abc123")
    assert log.record(trace) == "abc123"
    assert log.get("abc123") == trace


def test_a_run_gets_an_id_and_timestamp_when_it_has_none(tmp_path):
    log = RunLog(tmp_path / "runs.sqlite")
    run_id = log.record(dataclasses.replace(answered_trace(), created_at=""))
    stored = log.get(run_id)
    assert run_id and stored.run_id == run_id and stored.created_at


def test_the_row_has_the_columns_a_person_queries_by_hand(tmp_path):
    path = tmp_path / "runs.sqlite"
    RunLog(path).record(answered_trace(run_id="r1", unsupported=1, fabricated_markers=(7,)))
    db = sqlite3.connect(path)
    db.row_factory = sqlite3.Row
    row = dict(db.execute("SELECT * FROM query_runs WHERE run_id='r1'").fetchone())
    assert row["question"] == "What is the default delivery timeout?"
    assert row["rewritten_query"] == row["question"]
    assert row["gate_decision"] == "answer" and row["gate_score"] == 0.9
    assert row["answer"] == "The default is 15000 ms [1]." and row["confidence"] == "HIGH"
    assert (row["supported"], row["unsupported"], row["uncited"], row["fabricated_markers"]) == (1, 1, 0, 1)
    assert row["llm_calls"] == 1 and row["cache_hit"] == 0 and row["corpus_version"] == 3
    assert json.loads(row["retrieved_json"]) == [
        {"chunk_id": "err-timeout-502#0", "doc_id": "err-timeout-502", "fused_score": 0.03, "rerank_score": 0.9}]
    assert json.loads(row["timings_json"])["total"] == 830.25
    assert json.loads(row["limitations_json"]) == []
    assert json.loads(row["trace_json"])["question"] == row["question"]
    assert row["config_hash"] == answered_trace().config_hash


def test_list_shows_the_most_recent_runs_first(tmp_path):
    log = RunLog(tmp_path / "runs.sqlite")
    log.record(answered_trace("first question", run_id="a"))
    log.record(abstained_trace("second question"))
    log.record(dataclasses.replace(answered_trace("third question", run_id="c"), created_at="2025-11-12T09:16:00Z"))
    listed = log.list()
    assert [r.question for r in listed] == ["third question", "second question", "first question"]
    assert isinstance(listed[0], RunSummary)
    assert (listed[1].gate_decision, listed[1].gate_score) == ("abstain", 0.02)
    assert [r.question for r in log.list(limit=1)] == ["third question"]
    assert listed[0].to_dict()["run_id"] == "c" and listed[0].to_dict()["cache_hit"] is False


def test_recording_the_same_run_id_twice_keeps_both_runs(tmp_path):
    log = RunLog(tmp_path / "runs.sqlite")
    first = log.record(answered_trace("q1", run_id="same"))
    second = log.record(answered_trace("q2", run_id="same"))
    assert first == "same" and second != "same"
    assert log.count() == 2
    assert log.get("same").question == "q1" and log.get(second).question == "q2"


def test_get_accepts_an_unambiguous_prefix_and_nothing_else(tmp_path):
    log = RunLog(tmp_path / "runs.sqlite")
    log.record(answered_trace("q1", run_id="abcd1111"))
    log.record(answered_trace("q2", run_id="abcd2222"))
    assert log.get("abcd1").question == "q1"
    assert log.get("abcd") is None          # ambiguous
    assert log.get("zzz") is None and log.get("") is None


def test_migrations_on_a_blank_database_are_recorded_in_order(tmp_path):
    log = RunLog(tmp_path / "runs.sqlite")
    assert log.applied_migrations() == [m.__name__ for m in runs.MIGRATIONS]
    assert log.applied_migrations()[0] == "m001_query_runs"


def test_reopening_applies_nothing_twice_and_keeps_the_rows(tmp_path):
    path = tmp_path / "runs.sqlite"
    RunLog(path).record(answered_trace(run_id="keep"))
    again = RunLog(path)
    assert again.count() == 1 and again.get("keep") is not None
    db = sqlite3.connect(path)
    assert db.execute("SELECT COUNT(*) FROM migrations").fetchone()[0] == len(runs.MIGRATIONS)


def test_an_m001_only_database_is_upgraded_and_old_rows_are_backfilled(tmp_path):
    path = tmp_path / "runs.sqlite"
    old = sqlite.connect(path)
    sqlite.apply_migrations(old, [runs.m001_query_runs])
    trace = answered_trace(run_id="old1", unsupported=1)
    old.execute("INSERT INTO query_runs (run_id, created_at, question, gate_decision, gate_score, answer, "
                "llm_calls, trace_json) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                ("old1", trace.created_at, trace.question, "answer", 0.9, trace.answer, 1, trace.to_json()))
    old.execute("INSERT INTO query_runs (run_id, created_at, question, trace_json) VALUES "
                "('broken', '2025-01-01T00:00:00Z', 'unreadable', '{not json')")
    old.close()

    log = RunLog(path)
    assert log.applied_migrations() == [m.__name__ for m in runs.MIGRATIONS]
    by_id = {r.run_id: r for r in log.list()}
    assert set(by_id) == {"old1", "broken"}           # nothing lost, even the unreadable row
    assert (by_id["old1"].supported, by_id["old1"].unsupported, by_id["old1"].confidence) == (1, 1, "HIGH")
    assert by_id["broken"].supported == 0
    assert log.get("broken").question == "unreadable"
    assert log.get("broken").degradations[0].startswith("stored trace unreadable")
    assert log.get("old1") == trace
    log.record(answered_trace(run_id="new1"))           # and the upgraded table takes new rows
    assert log.count() == 3


def test_the_log_is_in_wal_mode_with_a_busy_timeout(tmp_path):
    path = tmp_path / "runs.sqlite"
    RunLog(path)
    db = sqlite.connect(path)
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert db.execute("PRAGMA busy_timeout").fetchone()[0] == sqlite.BUSY_TIMEOUT_MS
