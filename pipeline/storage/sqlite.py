"""The one SQLite helper behind the catalogue (``store.sqlite``), the run log (``runs.sqlite``) and the answer
cache (``cache.sqlite``).

Every database is opened the same way (:func:`connect`): autocommit, WAL mode (readers never block the writer;
the Streamlit server's threads and CLI processes share the files), and a busy timeout so a concurrent writer
waits instead of failing. Writes go through :func:`transaction` (``BEGIN IMMEDIATE``: the write lock is taken
up front, so the busy timeout applies).

Schema changes go through numbered migration functions, as in simonw/llm: ``m001_...``, ``m002_...``, each
applied once, in order, inside one ``BEGIN IMMEDIATE`` transaction that also records its name in the
``migrations`` table — so two processes opening an old database at the same moment cannot both apply a
migration, and a crash mid-migration leaves the old schema intact. Never edit a released migration; add the
next one.

A database created before it had this bookkeeping (its tables exist, no migration is recorded) is adopted:
:func:`apply_migrations` asks the caller which migrations its schema already contains, records those as
applied without running them, and applies only the rest.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

BUSY_TIMEOUT_MS = 30_000
LOCK_WAIT_S = 5.0   # the default of WORKBENCH_LOCK_WAIT_S

Migration = Callable[[sqlite3.Connection], None]


class StoreError(RuntimeError):
    """A store problem the user can act on; the message says how (the CLI prints it as one line, exit 2)."""


class DatabaseUnusable(StoreError):
    """A SQLite file that cannot be used now: ``kind`` is "busy", "damaged" or "unopenable" (:func:`error_kind`)."""

    def __init__(self, message: str, path: Path, kind: str, reason: str) -> None:
        super().__init__(message)
        self.path, self.kind, self.reason = Path(path), kind, reason


def lock_wait_s() -> float:
    """``$WORKBENCH_LOCK_WAIT_S`` (default 5 s): how long a process waits for a lock another one holds."""
    try:
        return max(float(os.environ.get("WORKBENCH_LOCK_WAIT_S", "") or LOCK_WAIT_S), 0.0)
    except ValueError:
        raise StoreError("WORKBENCH_LOCK_WAIT_S must be a number of seconds") from None


_BUSY_CODES = ("SQLITE_BUSY", "SQLITE_LOCKED")
_DAMAGED_CODES = ("SQLITE_CORRUPT", "SQLITE_NOTADB", "SQLITE_IOERR_SHORT_READ", "SQLITE_FORMAT")


def error_kind(exc: BaseException) -> str:
    """"busy", "damaged" or "unopenable" for a SQLite error (see the module docstring)."""
    name = getattr(exc, "sqlite_errorname", "") or ""
    text = str(exc).lower()
    if name.startswith(_BUSY_CODES) or "locked" in text or "busy" in text:
        return "busy"
    if name.startswith(_DAMAGED_CODES) or any(w in text for w in ("not a database", "malformed", "short read")):
        return "damaged"
    return "unopenable"


def connect(path: Path, *, synchronous: str = "NORMAL", busy_timeout_s: float | None = None) -> sqlite3.Connection:
    """An autocommit connection in WAL mode with a busy timeout (default :data:`BUSY_TIMEOUT_MS`); callers open
    explicit transactions."""
    path.parent.mkdir(parents=True, exist_ok=True)
    busy_timeout_s = max(float(BUSY_TIMEOUT_MS / 1000 if busy_timeout_s is None else busy_timeout_s), 0.0)
    db = sqlite3.connect(str(path), timeout=busy_timeout_s, isolation_level=None, check_same_thread=False)
    try:
        db.execute(f"PRAGMA busy_timeout={int(busy_timeout_s * 1000)}")
        _retry_locked(lambda: db.execute("PRAGMA journal_mode=WAL"), busy_timeout_s)
        db.execute(f"PRAGMA synchronous={synchronous}")
    except BaseException:
        db.close()
        raise
    return db


def _retry_locked(fn: Callable[[], Any], wait_s: float) -> Any:
    """Switching to WAL takes an exclusive lock without honouring busy_timeout; retry it up to ``wait_s``."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            return fn()
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() >= deadline:
                raise
            time.sleep(0.05)


@contextmanager
def transaction(db: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """BEGIN IMMEDIATE (take the write lock up front, so the busy timeout applies) ... COMMIT or ROLLBACK."""
    db.execute("BEGIN IMMEDIATE")
    try:
        yield db
    except BaseException:
        db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")


def apply_migrations(db: sqlite3.Connection, migrations: list[Migration],
                     already_in_schema: Callable[[sqlite3.Connection], list[str]] | None = None) -> list[str]:
    """Apply the migrations not yet recorded, in order; returns the names applied now.

    ``already_in_schema`` serves databases made before the bookkeeping existed: when no migration is recorded,
    it is asked (inside the write transaction) which migrations the schema already contains, and those are
    recorded as applied without being run.
    """
    db.execute("CREATE TABLE IF NOT EXISTS migrations (name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)")
    recorded = set(applied_migrations(db))
    if all(m.__name__ in recorded for m in migrations):
        return []  # the usual open: up to date, and no write lock taken
    if already_in_schema is not None and not recorded:
        with transaction(db):  # re-checked under the write lock: another process may be adopting it now
            if not db.execute("SELECT 1 FROM migrations LIMIT 1").fetchone():
                known = {m.__name__ for m in migrations}
                db.executemany("INSERT INTO migrations (name, applied_at) VALUES (?, ?)",
                               [(name, utc_now()) for name in already_in_schema(db) if name in known])
    applied_now = []
    for migration in migrations:
        with transaction(db):
            if db.execute("SELECT 1 FROM migrations WHERE name=?", (migration.__name__,)).fetchone():
                continue
            migration(db)
            db.execute("INSERT INTO migrations (name, applied_at) VALUES (?, ?)", (migration.__name__, utc_now()))
            applied_now.append(migration.__name__)
    return applied_now


def applied_migrations(db: sqlite3.Connection) -> list[str]:
    """The names recorded in ``migrations``, sorted (they are numbered, so this is their order)."""
    return [r[0] for r in db.execute("SELECT name FROM migrations ORDER BY name")]


def table_exists(db: sqlite3.Connection, name: str) -> bool:
    return db.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name=?", (name,)).fetchone() is not None


def utc_now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


class Database:
    """One SQLite file shared by the threads of a process, opened by :func:`connect` on first use (never in the
    constructor) and migrated then with the subclass's ``migrations``; every use under one lock. The run log
    and the answer cache are this.

    Subclasses run their statements through :meth:`_run` (``fn(connection)`` under the lock): any SQLite error
    comes out as :class:`DatabaseUnusable`, its message built by :meth:`_message` (the subclass says what the
    file is and what to do), and a damaged or unopenable connection is dropped so the next use opens afresh.
    """

    migrations: list[Migration] = []

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._lock = threading.RLock()
        self._db: sqlite3.Connection | None = None

    def busy_timeout_s(self) -> float:
        return BUSY_TIMEOUT_MS / 1000

    def _connection(self) -> sqlite3.Connection:
        """The open connection (under ``self._lock``), opened and migrated now if it is not open yet."""
        if self._db is None:
            db = connect(self.path, busy_timeout_s=self.busy_timeout_s())
            try:
                apply_migrations(db, self.migrations)
            except BaseException:
                db.close()
                raise
            self._db = db
            self._opened(db)
        return self._db

    def _opened(self, db: sqlite3.Connection) -> None:
        """Called once per open, under the lock, after the migrations (the run log drains its spool here)."""

    def _run(self, fn: Callable[[sqlite3.Connection], Any]) -> Any:
        with self._lock:
            try:
                return fn(self._connection())
            except sqlite3.Error as exc:
                kind = error_kind(exc)
                if kind != "busy":
                    self._drop()
                reason = f"{exc}".strip() or type(exc).__name__
                raise DatabaseUnusable(self._message(kind, reason), self.path, kind, reason) from None

    def _message(self, kind: str, reason: str) -> str:
        if kind == "busy":
            return (f"{self.path} is locked by another process (waited {self.busy_timeout_s():g} s); retry when it "
                    "has finished")
        return f"{self.path} cannot be used ({reason}); move it aside and retry"

    def _drop(self) -> None:
        if self._db is not None:
            try:
                self._db.close()
            except sqlite3.Error:
                pass
            self._db = None

    def close(self) -> None:
        with self._lock:
            self._drop()
