"""The audit log: every ``ask`` writes exactly one ``query_runs`` row, with the full trace JSON.

SQLite in WAL mode (readers never block the writer; the Streamlit server's threads and a CLI process can
write to the same ``runs.sqlite``), a busy timeout so a concurrent writer waits instead of failing, and one
connection per ``RunLog`` guarded by a lock (sqlite3 connections must not be used by two threads at once).

Schema changes go through numbered migration functions (``m001_query_runs``, ``m002_...``), applied by
:func:`pipeline.storage.sqlite.apply_migrations`; never edit a released migration, add the next one.

A row keeps the columns a person queries by hand (question, rewritten query, config hash, corpus version,
gate decision and score, retrieved chunk ids and scores, answer, final confidence and limitations,
validation counts, per-stage timings, LLM calls, cache hit) and ``trace_json``, the exact
``Trace.to_json()`` from which :meth:`RunLog.get` rebuilds the run. History is never rewritten: deleting a
document leaves the runs that cited it in place.
"""

from __future__ import annotations

import dataclasses
import json
import sqlite3
import uuid
from dataclasses import dataclass
from typing import Any

from pipeline.storage.sqlite import Database, applied_migrations, transaction, utc_now
from pipeline.trace import Trace

# -- migrations (append only) ----------------------------------------------------------------------------

def m001_query_runs(db: sqlite3.Connection) -> None:
    db.execute("""
        CREATE TABLE query_runs (
            run_id TEXT PRIMARY KEY,
            created_at TEXT NOT NULL,
            question TEXT NOT NULL,
            rewritten_query TEXT NOT NULL DEFAULT '',
            config_hash TEXT NOT NULL DEFAULT '',
            corpus_version INTEGER NOT NULL DEFAULT 0,
            gate_decision TEXT NOT NULL DEFAULT '',
            gate_score REAL NOT NULL DEFAULT 0,
            answer TEXT NOT NULL DEFAULT '',
            llm_calls INTEGER NOT NULL DEFAULT 0,
            trace_json TEXT NOT NULL
        )""")


_M002_COLUMNS = {
    "retrieved_json": "TEXT NOT NULL DEFAULT '[]'",
    "confidence": "TEXT NOT NULL DEFAULT ''",
    "limitations_json": "TEXT NOT NULL DEFAULT '[]'",
    "supported": "INTEGER NOT NULL DEFAULT 0",
    "unsupported": "INTEGER NOT NULL DEFAULT 0",
    "uncited": "INTEGER NOT NULL DEFAULT 0",
    "fabricated_markers": "INTEGER NOT NULL DEFAULT 0",
    "timings_json": "TEXT NOT NULL DEFAULT '{}'",
    "cache_hit": "INTEGER NOT NULL DEFAULT 0",
}


def m002_answer_quality(db: sqlite3.Connection) -> None:
    """Retrieval scores, trust and validation outcomes as columns; backfilled from each row's trace JSON."""
    for name, decl in _M002_COLUMNS.items():
        db.execute(f"ALTER TABLE query_runs ADD COLUMN {name} {decl}")
    for run_id, trace_json in db.execute("SELECT run_id, trace_json FROM query_runs").fetchall():
        try:
            values = _m002_values(Trace.from_json(trace_json))
        except (TypeError, ValueError):
            continue  # an unreadable old trace keeps the defaults; the row itself is never lost
        sets = ", ".join(f"{k}=?" for k in values)
        db.execute(f"UPDATE query_runs SET {sets} WHERE run_id=?", (*values.values(), run_id))


def m003_created_at_index(db: sqlite3.Connection) -> None:
    db.execute("CREATE INDEX query_runs_created_at ON query_runs (created_at)")


MIGRATIONS = [m001_query_runs, m002_answer_quality, m003_created_at_index]


# -- row values ------------------------------------------------------------------------------------------

def _retrieved(trace: Trace) -> list[dict[str, Any]]:
    return [{"chunk_id": c.chunk_id, "doc_id": c.doc_id, "fused_score": c.fused_score,
             "rerank_score": trace.rerank_score(c.chunk_id)} for c in trace.ranked_candidates()]


def _m002_values(trace: Trace) -> dict[str, Any]:
    v = trace.validation
    return {"retrieved_json": json.dumps(_retrieved(trace)), "confidence": trace.confidence,
            "limitations_json": json.dumps(list(trace.limitations), ensure_ascii=False),
            "supported": v.supported, "unsupported": v.unsupported, "uncited": v.uncited,
            "fabricated_markers": len(v.fabricated_markers), "timings_json": json.dumps(trace.timings_ms),
            "cache_hit": int(trace.cache_hit)}


def row_values(trace: Trace) -> dict[str, Any]:
    """Every column of one ``query_runs`` row for ``trace``."""
    return {"run_id": trace.run_id, "created_at": trace.created_at, "question": trace.question,
            "rewritten_query": trace.rewrite.query, "config_hash": trace.config_hash,
            "corpus_version": trace.corpus_version, "gate_decision": trace.gate.decision,
            "gate_score": trace.gate.score, "answer": trace.answer, "llm_calls": trace.llm_calls,
            **_m002_values(trace), "trace_json": trace.to_json()}


@dataclass(frozen=True)
class RunSummary:
    """One row of ``workbench runs``."""
    run_id: str
    created_at: str
    question: str
    gate_decision: str
    gate_score: float
    rewritten_query: str = ""
    answer: str = ""
    confidence: str = ""
    supported: int = 0
    unsupported: int = 0
    uncited: int = 0
    fabricated_markers: int = 0
    llm_calls: int = 0
    cache_hit: bool = False
    corpus_version: int = 0
    config_hash: str = ""

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


_SUMMARY_COLUMNS = [f.name for f in dataclasses.fields(RunSummary)]


def _summary(row: tuple) -> RunSummary:
    values = dict(zip(_SUMMARY_COLUMNS, row, strict=True))
    values["cache_hit"] = bool(values["cache_hit"])
    return RunSummary(**values)


class RunLog(Database):
    """The ``query_runs`` table of one ``runs.sqlite``. Safe to share between threads and processes."""

    migrations = MIGRATIONS

    def record(self, trace: Trace) -> str:
        """Write one row for ``trace``; returns its run id.

        A trace without a run id or timestamp gets them. A run id already in the log (a trace recorded twice)
        gets a fresh one: a run is never overwritten and never dropped.
        """
        trace = dataclasses.replace(trace, run_id=trace.run_id or _new_id(), created_at=trace.created_at or utc_now())
        with self._lock, transaction(self._db) as db:
            while db.execute("SELECT 1 FROM query_runs WHERE run_id=?", (trace.run_id,)).fetchone():
                trace = dataclasses.replace(trace, run_id=_new_id())
            values = row_values(trace)
            db.execute(f"INSERT INTO query_runs ({', '.join(values)}) VALUES ({', '.join('?' * len(values))})",
                       tuple(values.values()))
        return trace.run_id

    def list(self, limit: int = 50) -> list[RunSummary]:
        """The most recent runs first."""
        with self._lock:
            rows = self._db.execute(f"SELECT {', '.join(_SUMMARY_COLUMNS)} FROM query_runs "
                                    "ORDER BY created_at DESC, rowid DESC LIMIT ?", (max(0, int(limit)),)).fetchall()
        return [_summary(row) for row in rows]

    def get(self, run_id: str) -> Trace | None:
        """The stored trace of one run, by its id or an unambiguous prefix of it."""
        run_id = run_id.strip()
        if not run_id:
            return None
        columns = "trace_json, run_id, created_at, question, answer"
        with self._lock:
            row = self._db.execute(f"SELECT {columns} FROM query_runs WHERE run_id=?", (run_id,)).fetchone()
            if row is None:
                rows = self._db.execute(f"SELECT {columns} FROM query_runs WHERE substr(run_id, 1, ?) = ? LIMIT 2",
                                        (len(run_id), run_id)).fetchall()
                row = rows[0] if len(rows) == 1 else None
        if row is None:
            return None
        try:
            return Trace.from_json(row[0])
        except (TypeError, ValueError) as exc:
            # A damaged row still shows what the columns kept, and says why the rest is missing.
            return Trace(question=row[3], answer=row[4], run_id=row[1], created_at=row[2],
                         degradations=(f"stored trace unreadable: {type(exc).__name__}: {exc}",))

    def count(self) -> int:
        with self._lock:
            return int(self._db.execute("SELECT COUNT(*) FROM query_runs").fetchone()[0])

    def applied_migrations(self) -> list[str]:
        with self._lock:
            return applied_migrations(self._db)


def _new_id() -> str:
    return uuid.uuid4().hex[:16]
