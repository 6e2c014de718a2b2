"""Monitor page: the drift alarm with the runs behind it, rates per bucket, click-through per document, and the
page before enough runs are logged. (Opening a source and its click row: tests/workbench/app/test_browser.py.)"""

from __future__ import annotations

import dataclasses

from conftest import markdown_of, open_app, texts_of

from pipeline.storage.runs import RunLog
from tests.support.traces import abstained_trace, answered_trace

HOSTILE = "<img src=x onerror=alert(1)> how do I bake bread?"


def _log(home, answered: int, abstained: int) -> RunLog:
    log = RunLog(home / "runs.sqlite")
    for i in range(answered):
        log.record(dataclasses.replace(answered_trace(f"answered {i}"), created_at=f"2026-01-01T09:{i % 60:02d}:00Z"))
    for i in range(abstained):
        log.record(dataclasses.replace(abstained_trace(f"{HOSTILE} {i}"), created_at=f"2026-01-02T10:{i:02d}:00Z"))
    return log


def test_the_page_says_when_there_is_nothing_to_monitor(scratch_env):
    at = open_app("monitor")
    assert any("No runs yet" in i.value for i in at.info)


def test_an_abstention_surge_raises_the_alarm_and_lists_its_runs(scratch_env):
    log = _log(scratch_env, 100, 25)
    first = log.list(limit=200)[-1].run_id
    log.record_click(first, 1, "err-timeout-502", "err-timeout-502#0", clicked_at="2026-01-01T09:30:00Z")
    log.close()
    at = open_app("monitor")
    assert not at.exception
    errors = markdown_of(at)
    assert any(line.startswith("Alarm: abstention rate 0.0 % → 100.0 %") for line in errors)
    behind = next(df.value for df in at.dataframe if "metrics" in df.value.columns)
    assert len(behind) == 25 and set(behind["metrics"]) == {"abstention"}
    assert all(q.startswith(HOSTILE) for q in behind["question"])            # shown as text in a table
    buckets = next(df.value for df in at.dataframe if "bucket" in df.value.columns and "runs" in df.value.columns)
    assert list(buckets["bucket"]) == ["2026-01-01", "2026-01-02"] and list(buckets["runs"]) == [100, 25]
    assert "latency p50 (ms)" in buckets.columns and not any(c.endswith("_ms") for c in buckets.columns), \
        "headers a reader understands, not field names"
    docs = next(df.value for df in at.dataframe if "doc_id" in df.value.columns)
    row = docs[docs["doc_id"] == "err-timeout-502"].iloc[0]
    assert (row["runs_offered"], row["runs_clicked"], row["clicks"]) == (100, 1, 1)
    assert "onerror" not in "".join(h.value for h in at.html)               # never live HTML
    assert "2026-01-01" in texts_of(at)


def test_a_wider_recent_window_than_the_log_waits_for_more_runs(scratch_env):
    _log(scratch_env, 10, 0).close()
    at = open_app("monitor")
    assert any("Not checked yet" in v and "115 more" in v for v in markdown_of(at))
    at.selectbox(key="monitor.bucket").set_value("hour").run()
    buckets = next(df.value for df in at.dataframe if "bucket" in df.value.columns and "runs" in df.value.columns)
    assert list(buckets["bucket"]) == ["2026-01-01T09:00Z"]
