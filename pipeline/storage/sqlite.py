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

import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

BUSY_TIMEOUT_MS = 30_000

Migration = Callable[[sqlite3.Connection], None]


def connect(path: Path, *, synchronous: str = "NORMAL") -> sqlite3.Connection:
    """An autocommit connection in WAL mode with a busy timeout; callers open explicit transactions."""
    path.parent.mkdir(parents=True, exist_ok=True)
    db = sqlite3.connect(str(path), timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None,
                         check_same_thread=False)
    db.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
    _retry_locked(lambda: db.execute("PRAGMA journal_mode=WAL"))
    db.execute(f"PRAGMA synchronous={synchronous}")
    return db


def _retry_locked(fn: Callable[[], Any], attempts: int = 50) -> Any:
    """Switching to WAL takes an exclusive lock without honouring busy_timeout; retry it briefly."""
    for attempt in range(attempts):
        try:
            return fn()
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or attempt == attempts - 1:
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
    """One SQLite file shared by the threads of a process: opened by :func:`connect`, migrated on open with the
    subclass's ``migrations``, every use under one lock. The run log and the answer cache are this."""

    migrations: list[Migration] = []

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        self._db = connect(self.path)
        with self._lock:
            apply_migrations(self._db, self.migrations)

    def close(self) -> None:
        with self._lock:
            self._db.close()
