"""The audit log: every ``ask`` writes exactly one ``query_runs`` row, with the full trace JSON.

SQLite in WAL mode (readers never block the writer; the Streamlit server's threads and a CLI process can
write to the same ``runs.sqlite``), a busy timeout so a concurrent writer waits instead of failing, and one
connection per ``RunLog`` guarded by a lock (sqlite3 connections must not be used by two threads at once).

Schema changes go through numbered migration functions (``m001_query_runs``, ``m002_...``), applied by
:func:`pipeline.storage.sqlite.apply_migrations`; never edit a released migration, add the next one.

``citation_clicks`` (m004) holds one row each time a person opens a source of a run in the app (run id,
source number, document, chunk, time); :meth:`RunLog.monitor_rows` and :meth:`RunLog.clicks` are what
``workbench monitor`` reads.

A row keeps the columns a person queries by hand (question, rewritten query, config hash, corpus version,
gate decision and score, retrieved chunk ids and scores, answer, final confidence and limitations,
validation counts, per-stage timings, LLM calls, cache hit) and ``trace_json``, the exact
``Trace.to_json()`` from which :meth:`RunLog.get` rebuilds the run. History is never rewritten: deleting a
document leaves the runs that cited it in place.

**Durable, never blocking an answer.** :meth:`RunLog.record_or_spool` (what the engine calls) waits for a
locked ``runs.sqlite`` at most ``$WORKBENCH_LOCK_WAIT_S`` (default 5 s, the busy timeout). When the file
stays locked, is damaged or cannot be opened, the run is not lost: it is appended, as one JSON line, to the
spool ``runs.spool.jsonl`` beside it (under an exclusive ``flock``, then ``fsync``), and the returned trace
carries a degradation line saying so. The spool is written into ``query_runs`` by the next process or call
that opens the log or records a run successfully (:meth:`RunLog.drain_spool`): under the same ``flock``, in
one transaction, skipping run ids already present, and emptied only after the commit — so a run lands
exactly once even when a drain is killed between the commit and the truncation. A spool line that does not
parse (a write cut by a crash) is moved to ``runs.spool.unreadable.jsonl``, never dropped.

The log itself is kept, never set aside automatically: a damaged ``runs.sqlite`` makes ``workbench runs``
fail with one line naming the file and what to do (:class:`~pipeline.storage.sqlite.DatabaseUnusable`).
"""

from __future__ import annotations

import dataclasses
import fcntl
import json
import os
import sqlite3
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pipeline.storage.sqlite import Database, DatabaseUnusable, applied_migrations, lock_wait_s, transaction, utc_now
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


def _add_backfilled_columns(db: sqlite3.Connection, columns: dict[str, str],
                            values_of: Callable[[Trace], dict[str, object]]) -> None:
    """Add ``columns`` to query_runs and fill them from each row's trace JSON."""
    for name, decl in columns.items():
        db.execute(f"ALTER TABLE query_runs ADD COLUMN {name} {decl}")
    for run_id, trace_json in db.execute("SELECT run_id, trace_json FROM query_runs").fetchall():
        try:
            values = values_of(Trace.from_json(trace_json))
        except (TypeError, ValueError):
            continue  # an unreadable old trace keeps the defaults; the row itself is never lost
        sets = ", ".join(f"{k}=?" for k in values)
        db.execute(f"UPDATE query_runs SET {sets} WHERE run_id=?", (*values.values(), run_id))


def m002_answer_quality(db: sqlite3.Connection) -> None:
    """Retrieval scores, trust and validation outcomes as columns; backfilled from each row's trace JSON."""
    _add_backfilled_columns(db, _M002_COLUMNS, _m002_values)


def m003_created_at_index(db: sqlite3.Connection) -> None:
    db.execute("CREATE INDEX query_runs_created_at ON query_runs (created_at)")


_M004_COLUMNS = {
    "abstained": "INTEGER NOT NULL DEFAULT 0",
    "fallback": "INTEGER NOT NULL DEFAULT 0",
    "degradations": "INTEGER NOT NULL DEFAULT 0",
    "sources": "INTEGER NOT NULL DEFAULT 0",
    "source_docs_json": "TEXT NOT NULL DEFAULT '[]'",
    "latency_ms": "REAL NOT NULL DEFAULT 0",
    "llm_model": "TEXT NOT NULL DEFAULT ''",
    "prompt_tokens": "INTEGER NOT NULL DEFAULT 0",
    "completion_tokens": "INTEGER NOT NULL DEFAULT 0",
}


def m004_monitoring(db: sqlite3.Connection) -> None:
    """What ``workbench monitor`` counts, as columns (backfilled from each row's trace JSON), and the
    ``citation_clicks`` table: one row each time a person opens a source of a run in the app."""
    _add_backfilled_columns(db, _M004_COLUMNS, _m004_values)
    db.execute("""
        CREATE TABLE citation_clicks (
            click_id INTEGER PRIMARY KEY AUTOINCREMENT,
            run_id TEXT NOT NULL,
            source_number INTEGER NOT NULL,
            doc_id TEXT NOT NULL DEFAULT '',
            chunk_id TEXT NOT NULL DEFAULT '',
            clicked_at TEXT NOT NULL
        )""")
    db.execute("CREATE INDEX citation_clicks_run_id ON citation_clicks (run_id)")
    db.execute("CREATE INDEX citation_clicks_clicked_at ON citation_clicks (clicked_at)")


MIGRATIONS = [m001_query_runs, m002_answer_quality, m003_created_at_index, m004_monitoring]


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


def _m004_values(trace: Trace) -> dict[str, Any]:
    gen = trace.generation
    usage = [a.usage for a in gen.attempts]
    return {"abstained": int(trace.abstained or trace.gate.decision == "abstain"),
            "fallback": int(gen.status == "fallback"), "degradations": len(trace.degradations),
            "sources": len(gen.sources),
            "source_docs_json": json.dumps(sorted({s.doc_id for s in gen.sources}), ensure_ascii=False),
            "latency_ms": float(trace.timings_ms.get("total", 0.0)),
            "llm_model": gen.model if gen.attempts else "",
            "prompt_tokens": sum(int(u.get("prompt_tokens", 0) or 0) for u in usage),
            "completion_tokens": sum(int(u.get("completion_tokens", 0) or 0) for u in usage)}


def row_values(trace: Trace) -> dict[str, Any]:
    """Every column of one ``query_runs`` row for ``trace``."""
    return {"run_id": trace.run_id, "created_at": trace.created_at, "question": trace.question,
            "rewritten_query": trace.rewrite.query, "config_hash": trace.config_hash,
            "corpus_version": trace.corpus_version, "gate_decision": trace.gate.decision,
            "gate_score": trace.gate.score, "answer": trace.answer, "llm_calls": trace.llm_calls,
            **_m002_values(trace), **_m004_values(trace), "trace_json": trace.to_json()}


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


MONITOR_COLUMNS = ("run_id", "created_at", "question", "gate_decision", "abstained", "fallback", "unsupported",
                   "cache_hit", "degradations", "sources", "source_docs_json", "latency_ms", "llm_model",
                   "prompt_tokens", "completion_tokens", "clicked")
CLICK_COLUMNS = ("click_id", "run_id", "source_number", "doc_id", "chunk_id", "clicked_at")


def _summary(row: tuple) -> RunSummary:
    values = dict(zip(_SUMMARY_COLUMNS, row, strict=True))
    values["cache_hit"] = bool(values["cache_hit"])
    return RunSummary(**values)


class RunLog(Database):
    """The ``query_runs`` table of one ``runs.sqlite``, and its spool. Safe to share between threads and processes."""

    migrations = MIGRATIONS

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.spool_path = self.path.with_name(f"{self.path.stem}.spool.jsonl")
        self.unreadable_path = self.path.with_name(f"{self.path.stem}.spool.unreadable.jsonl")

    def busy_timeout_s(self) -> float:
        return lock_wait_s()

    def record(self, trace: Trace) -> str:
        """Write one row for ``trace``; returns its run id. :class:`DatabaseUnusable` when the log cannot take
        it (:meth:`record_or_spool` keeps the run then).

        A trace without a run id or timestamp gets them. A run id already in the log (a trace recorded twice)
        gets a fresh one: a run is never overwritten and never dropped.
        """
        trace = _stamped(trace)

        def write(db: sqlite3.Connection) -> str:
            with transaction(db):
                return _insert(db, trace)

        run_id = self._run(write)
        if self._spool_waiting():
            try:
                self.drain_spool()
            except (DatabaseUnusable, OSError):
                pass  # the run is in; the spooled ones wait for the next chance
        return run_id

    def record_or_spool(self, trace: Trace) -> Trace:
        """Record ``trace``; when ``runs.sqlite`` cannot take it now, spool it (see the module docstring).
        Returns the trace as kept: with its run id and timestamp, and a degradation line when it was spooled
        (or, were even the spool unwritable, when it could not be logged at all)."""
        trace = _stamped(trace)
        try:
            run_id = self.record(trace)
            return trace if run_id == trace.run_id else dataclasses.replace(trace, run_id=run_id)
        except DatabaseUnusable as exc:
            if exc.kind == "busy":
                what, then = "locked by another process", ""
            else:
                what = f"unusable ({exc.reason})"
                then = f" (move the damaged {self.path.name} aside to start a new one)"
            spooled = dataclasses.replace(trace, degradations=(*trace.degradations, (
                f"run log {self.path} is {what}; this run was kept in {self.spool_path.name} and is added to the "
                f"log when the log can be written{then}")))
        try:
            self._append_to_spool(spooled)
        except OSError as exc:
            return dataclasses.replace(trace, degradations=(*trace.degradations, (
                f"run log {self.path} and its spool {self.spool_path.name} could not be written "
                f"({exc.strerror or exc}); this run is not logged")))
        return spooled

    # -- the spool -------------------------------------------------------------------------------------------
    def _spool_waiting(self) -> bool:
        try:
            return self.spool_path.stat().st_size > 0
        except OSError:
            return False

    @contextmanager
    def _spool_locked(self) -> Iterator[int]:
        """The spool file, open for reading and appending, under an exclusive ``flock``."""
        created = not self.spool_path.exists()
        fd = os.open(self.spool_path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            if created:
                _fsync_dir(self.spool_path.parent)  # the new file's name survives a power cut too
            yield fd
        finally:
            os.close(fd)  # drops the flock

    def _append_to_spool(self, trace: Trace) -> None:
        line = (trace.to_json() + "\n").encode("utf-8")
        with self._lock, self._spool_locked() as fd:
            written = 0
            while written < len(line):
                written += os.write(fd, line[written:])
            os.fsync(fd)

    def drain_spool(self) -> int:
        """Write the spooled runs into ``query_runs`` exactly once and empty the spool; returns how many were
        added. :class:`DatabaseUnusable` (spool untouched) when the log cannot be written now."""
        if not self._spool_waiting():
            return 0
        with self._lock:
            self._run(lambda db: None)  # open first: an open drains, and must not wait on the lock taken below
            with self._spool_locked() as fd:
                return self._drain(fd)

    def _drain(self, fd: int) -> int:
        os.lseek(fd, 0, os.SEEK_SET)
        chunks = []
        while block := os.read(fd, 1 << 20):
            chunks.append(block)
        traces, unreadable = [], []
        for raw in b"".join(chunks).split(b"\n"):  # JSON escapes newlines: one line is one run
            if not raw.strip():
                continue
            try:
                traces.append(Trace.from_json(raw.decode("utf-8")))
            except (UnicodeDecodeError, TypeError, ValueError):
                unreadable.append(raw)

        def write(db: sqlite3.Connection) -> int:
            added = 0
            with transaction(db):
                for trace in traces:
                    row = db.execute("SELECT trace_json FROM query_runs WHERE run_id=?", (trace.run_id,)).fetchone()
                    if row is not None and row[0] == trace.to_json():
                        continue  # drained before, killed before the spool was emptied
                    _insert(db, trace)
                    added += 1
            return added

        added = self._run(write) if traces else 0
        if unreadable:
            with open(self.unreadable_path, "ab") as out:
                out.write(b"\n".join(unreadable) + b"\n")
                out.flush()
                os.fsync(out.fileno())
        os.ftruncate(fd, 0)
        os.fsync(fd)
        return added

    def _opened(self, db: sqlite3.Connection) -> None:
        if self._spool_waiting():
            try:
                with self._spool_locked() as fd:
                    self._drain(fd)
            except (DatabaseUnusable, OSError):
                pass  # best effort on open: the spool stays for the next chance

    # -- reads ---------------------------------------------------------------------------------------------
    def list(self, limit: int = 50) -> list[RunSummary]:
        """The most recent runs first."""
        rows = self._run(lambda db: db.execute(f"SELECT {', '.join(_SUMMARY_COLUMNS)} FROM query_runs "
                                               "ORDER BY created_at DESC, rowid DESC LIMIT ?",
                                               (max(0, int(limit)),)).fetchall())
        return [_summary(row) for row in rows]

    def get(self, run_id: str) -> Trace | None:
        """The stored trace of one run, by its id or an unambiguous prefix of it."""
        run_id = run_id.strip()
        if not run_id:
            return None
        columns = "trace_json, run_id, created_at, question, answer"

        def find(db: sqlite3.Connection):
            row = db.execute(f"SELECT {columns} FROM query_runs WHERE run_id=?", (run_id,)).fetchone()
            if row is None:
                rows = db.execute(f"SELECT {columns} FROM query_runs WHERE substr(run_id, 1, ?) = ? LIMIT 2",
                                  (len(run_id), run_id)).fetchall()
                row = rows[0] if len(rows) == 1 else None
            return row

        row = self._run(find)
        if row is None:
            return None
        try:
            return Trace.from_json(row[0])
        except (TypeError, ValueError) as exc:
            # A damaged row still shows what the columns kept, and says why the rest is missing.
            return Trace(question=row[3], answer=row[4], run_id=row[1], created_at=row[2],
                         degradations=(f"stored trace unreadable: {type(exc).__name__}: {exc}",))

    def monitor_rows(self, since: str | None = None, until: str | None = None,
                     limit: int | None = None) -> list[dict[str, Any]]:
        """The runs ``workbench monitor`` counts, oldest first: those created in [``since``, ``until``) (ISO UTC
        timestamps, either open), the most recent ``limit`` of them when given. ``clicked`` is 1 when a person
        opened at least one of the run's sources."""
        where, params = [], []
        if since:
            where.append("created_at >= ?")
            params.append(since)
        if until:
            where.append("created_at < ?")
            params.append(until)
        sql = (f"SELECT {', '.join('q.' + c for c in MONITOR_COLUMNS[:-1])}, EXISTS (SELECT 1 FROM citation_clicks c "
               "WHERE c.run_id = q.run_id) FROM query_runs q" + (f" WHERE {' AND '.join(where)}" if where else "")
               + " ORDER BY q.created_at DESC, q.rowid DESC" + (" LIMIT ?" if limit is not None else ""))
        if limit is not None:
            params.append(max(0, int(limit)))
        rows = self._run(lambda db: db.execute(sql, params).fetchall())
        return [dict(zip(MONITOR_COLUMNS, row, strict=True)) for row in reversed(rows)]

    def record_click(self, run_id: str, source_number: int, doc_id: str = "", chunk_id: str = "",
                     clicked_at: str | None = None) -> None:
        """One ``citation_clicks`` row: a person opened source ``[source_number]`` of run ``run_id``."""
        if not run_id:
            raise ValueError("a citation click needs the run id of the answer it belongs to")

        def write(db: sqlite3.Connection) -> None:
            with transaction(db):
                db.execute("INSERT INTO citation_clicks (run_id, source_number, doc_id, chunk_id, clicked_at) "
                           "VALUES (?, ?, ?, ?, ?)",
                           (run_id, int(source_number), doc_id, chunk_id, clicked_at or utc_now()))

        self._run(write)

    def clicks(self, since: str | None = None, until: str | None = None) -> list[dict[str, Any]]:
        """The citation clicks made in [``since``, ``until``), oldest first."""
        where, params = [], []
        if since:
            where.append("clicked_at >= ?")
            params.append(since)
        if until:
            where.append("clicked_at < ?")
            params.append(until)
        sql = (f"SELECT {', '.join(CLICK_COLUMNS)} FROM citation_clicks"
               + (f" WHERE {' AND '.join(where)}" if where else "") + " ORDER BY clicked_at, click_id")
        rows = self._run(lambda db: db.execute(sql, params).fetchall())
        return [dict(zip(CLICK_COLUMNS, row, strict=True)) for row in rows]

    def count(self) -> int:
        return int(self._run(lambda db: db.execute("SELECT COUNT(*) FROM query_runs").fetchone()[0]))

    def applied_migrations(self) -> list[str]:
        return self._run(applied_migrations)

    def _message(self, kind: str, reason: str) -> str:
        if kind == "busy":
            return (f"the run log {self.path} is locked by another process (waited {self.busy_timeout_s():g} s); "
                    "retry when it has finished (WORKBENCH_LOCK_WAIT_S sets the wait)")
        return (f"the run log {self.path} cannot be read ({reason}): move it aside (mv {self.path} "
                f"{self.path}.damaged) to start a new log, which takes in the runs kept meanwhile in "
                f"{self.spool_path.name}; sqlite3's .recover may salvage the old one")


def _stamped(trace: Trace) -> Trace:
    if trace.run_id and trace.created_at:
        return trace
    return dataclasses.replace(trace, run_id=trace.run_id or _new_id(), created_at=trace.created_at or utc_now())


def _insert(db: sqlite3.Connection, trace: Trace) -> str:
    """Insert one row inside the caller's transaction; a run id already taken gets a fresh one."""
    while db.execute("SELECT 1 FROM query_runs WHERE run_id=?", (trace.run_id,)).fetchone():
        trace = dataclasses.replace(trace, run_id=_new_id())
    values = row_values(trace)
    db.execute(f"INSERT INTO query_runs ({', '.join(values)}) VALUES ({', '.join('?' * len(values))})",
               tuple(values.values()))
    return trace.run_id


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _new_id() -> str:
    return uuid.uuid4().hex[:16]
