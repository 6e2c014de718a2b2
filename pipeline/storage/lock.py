"""Process-level locks on a data directory: one process has the embedded shard open, one writer at a time.

Two lock files beside the shard, each held with ``fcntl.flock`` (the kernel releases it when the holder
exits or is killed, so a crash never leaves a stale lock behind):

- ``shard.lock``, held by the process that has the Qdrant Edge shard open, from before the engine loads the
  shard until after it is closed. The engine opens a shard in one process only, and a process that merely
  *tries* to load a shard another process holds rewrites files the holder is writing (a sparse vector
  storage's tracker journal), so the holder's next flush fails. So the engine's load is never called without
  this lock: a process that cannot take it within its wait is refused (:class:`LockBusy`) before it touches
  the shard, and a store that is merely busy is never taken for damaged, set aside or repaired.
- ``write.lock``, held by a writer (ingest, delete, repair) for its whole write. With the embedded shard the
  shard lock already keeps other processes out; the write lock also serialises writers inside one process
  (the app's sessions) and, with ``QDRANT_URL`` (many processes share a server's index), it is what stops a
  second writer, or a reader's repair, from taking a running writer's new points for orphans.

While it holds a lock, a process writes one line about itself into the lock file (pid, role, command), so
whoever is refused is told who holds the store and what to do.
"""

from __future__ import annotations

import fcntl
import json
import os
import sys
import time
from pathlib import Path

POLL_S = 0.05


class LockBusy(RuntimeError):
    """Another process (or another open store in this one) holds the lock; ``holder`` says who, if known."""

    def __init__(self, path: Path, holder: str) -> None:
        super().__init__(f"{path} is held by {holder or 'another process'}")
        self.path = path
        self.holder = holder


def _command() -> str:
    argv = [os.path.basename(sys.argv[0] or "python")] + sys.argv[1:]
    return " ".join(argv)[:160]


def describe(info: dict) -> str:
    """``pid 123, writing (ingest): workbench ingest docs/``: who holds a lock, from its line."""
    if not info:
        return ""
    role = info.get("role", "")
    what = f"writing ({role[len('writer:'):]})" if role.startswith("writer:") else "reading"
    return f"pid {info.get('pid', '?')}, {what}: {info.get('command', '')}".rstrip(": ")


class FileLock:
    """An exclusive ``flock`` on ``path``; not re-entrant (callers count their own nesting)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self, wait_s: float, role: str) -> str:
        """Take the lock, waiting up to ``wait_s``; :class:`LockBusy` naming the holder when it stays taken.
        Returns who held it while this waited ("" when it was free at once)."""
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        deadline = time.monotonic() + max(wait_s, 0.0)
        waited_for = ""
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                waited_for = waited_for or describe(read_holder(self.path)) or "another process"
                if time.monotonic() >= deadline:
                    holder = describe(read_holder(self.path))
                    os.close(fd)
                    raise LockBusy(self.path, holder) from None
                time.sleep(POLL_S)
            except BaseException:
                os.close(fd)
                raise
        self._fd = fd
        self.set_role(role)
        return waited_for

    def set_role(self, role: str) -> None:
        """Rewrite the holder line (a reader that starts writing says so)."""
        if self._fd is None:
            return
        line = json.dumps({"pid": os.getpid(), "role": role, "command": _command(), "since": int(time.time())})
        os.ftruncate(self._fd, 0)
        os.pwrite(self._fd, (line + "\n").encode(), 0)

    def release(self) -> None:
        if self._fd is None:
            return
        fd, self._fd = self._fd, None
        try:
            os.ftruncate(fd, 0)
        finally:
            os.close(fd)  # closing the descriptor drops the flock

    def is_taken_elsewhere(self) -> bool:
        """True when another holder has the lock now (never blocks; False when this object holds it)."""
        if self._fd is not None:
            return False
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError:
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        finally:
            os.close(fd)
        return False


def read_holder(path: Path) -> dict:
    try:
        text = path.read_text(encoding="utf-8").strip()
        return json.loads(text) if text else {}
    except (OSError, ValueError):
        return {}
