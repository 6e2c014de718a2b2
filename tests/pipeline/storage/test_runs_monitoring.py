"""m004: the columns ``workbench monitor`` counts and the citation_clicks table, on a blank database and on an
m003 one (old rows backfilled from their traces); recording clicks and reading runs for a time window."""

from __future__ import annotations

import dataclasses
import json
import sqlite3

import pytest

from pipeline.storage import runs, sqlite
from pipeline.storage.runs import RunLog
from pipeline.trace import LLMAttempt
from tests.support.traces import abstained_trace, answered_trace


def _at(trace, created_at):
    return dataclasses.replace(trace, created_at=created_at)


def test_a_blank_log_has_the_click_table_and_the_monitor_columns(tmp_path):
    path = tmp_path / "runs.sqlite"
    RunLog(path).count()
    db = sqlite3.connect(path)
    columns = {r[1] for r in db.execute("PRAGMA table_info(query_runs)")}
    assert set(runs._M004_COLUMNS) <= columns
    assert {r[1] for r in db.execute("PRAGMA table_info(citation_clicks)")} == {
        "click_id", "run_id", "source_number", "doc_id", "chunk_id", "clicked_at"}
    assert "m004_monitoring" in RunLog(path).applied_migrations()


def test_an_m003_log_is_upgraded_and_its_rows_backfilled(tmp_path):
    path = tmp_path / "runs.sqlite"
    old = sqlite.connect(path)
    sqlite.apply_migrations(old, runs.MIGRATIONS[:3])
    for trace in (answered_trace(run_id="ans", unsupported=2), dataclasses.replace(abstained_trace(), run_id="abs")):
        values = {k: v for k, v in runs.row_values(trace).items() if k not in runs._M004_COLUMNS}
        old.execute(f"INSERT INTO query_runs ({', '.join(values)}) VALUES ({', '.join('?' * len(values))})",
                    tuple(values.values()))
    old.execute("INSERT INTO query_runs (run_id, created_at, question, trace_json) VALUES "
                "('broken', '2025-01-01T00:00:00Z', 'unreadable', '{not json')")
    old.close()

    log = RunLog(path)
    assert log.applied_migrations() == [m.__name__ for m in runs.MIGRATIONS]
    rows = {r["run_id"]: r for r in log.monitor_rows()}
    assert set(rows) == {"ans", "abs", "broken"}
    assert (rows["ans"]["abstained"], rows["ans"]["unsupported"], rows["ans"]["sources"]) == (0, 2, 1)
    assert json.loads(rows["ans"]["source_docs_json"]) == ["err-timeout-502"]
    assert rows["ans"]["latency_ms"] == 830.25
    assert rows["abs"]["abstained"] == 1 and rows["abs"]["sources"] == 0
    assert rows["broken"]["abstained"] == 0 and rows["broken"]["clicked"] == 0
    log.record_click("ans", 1, "err-timeout-502", "err-timeout-502#0")   # the upgraded log takes clicks
    assert [c["run_id"] for c in log.clicks()] == ["ans"]


def test_a_click_is_recorded_with_its_run_source_document_and_time(tmp_path):
    log = RunLog(tmp_path / "runs.sqlite")
    run_id = log.record(answered_trace(run_id="r1"))
    log.record_click(run_id, 1, "err-timeout-502", "err-timeout-502#0", clicked_at="2026-01-02T03:04:05Z")
    log.record_click(run_id, 1, "err-timeout-502", "err-timeout-502#0")
    clicks = log.clicks()
    assert [(c["run_id"], c["source_number"], c["doc_id"], c["chunk_id"]) for c in clicks] == [
        ("r1", 1, "err-timeout-502", "err-timeout-502#0")] * 2
    assert clicks[0]["clicked_at"] == "2026-01-02T03:04:05Z" and clicks[1]["clicked_at"] > "2026"
    assert log.monitor_rows()[0]["clicked"] == 1
    assert [c["clicked_at"] for c in log.clicks(since="2026-06-01T00:00:00Z")] == [clicks[1]["clicked_at"]]
    with pytest.raises(ValueError, match="run id"):
        log.record_click("", 1)


def test_monitor_rows_are_a_time_window_oldest_first(tmp_path):
    log = RunLog(tmp_path / "runs.sqlite")
    for i, when in enumerate(["2026-01-01T10:00:00Z", "2026-01-01T11:00:00Z", "2026-01-02T09:00:00Z"]):
        log.record(_at(answered_trace(f"q{i}", run_id=f"r{i}"), when))
    assert [r["run_id"] for r in log.monitor_rows()] == ["r0", "r1", "r2"]
    assert [r["run_id"] for r in log.monitor_rows(since="2026-01-01T11:00:00Z")] == ["r1", "r2"]
    assert [r["run_id"] for r in log.monitor_rows(until="2026-01-02T00:00:00Z")] == ["r0", "r1"]
    assert [r["run_id"] for r in log.monitor_rows(limit=2)] == ["r1", "r2"]


def test_llm_tokens_fallback_and_degradations_are_counted(tmp_path):
    log = RunLog(tmp_path / "runs.sqlite")
    trace = answered_trace(run_id="llm")
    gen = dataclasses.replace(trace.generation, status="fallback", model="gpt-4o-mini", attempts=(
        LLMAttempt(usage={"prompt_tokens": 100, "completion_tokens": 20}),
        LLMAttempt(usage={"prompt_tokens": 150, "completion_tokens": 5})))
    log.record(dataclasses.replace(trace, generation=gen, degradations=("a", "b")))
    row = log.monitor_rows()[0]
    assert (row["fallback"], row["degradations"], row["llm_model"]) == (1, 2, "gpt-4o-mini")
    assert (row["prompt_tokens"], row["completion_tokens"]) == (250, 25)
