"""Progress of a long ingest in one line: ``"N/M chunks · X chunks/s · ETA m:ss"``.

:class:`Progress` is a pure record (chunks done, the total, seconds elapsed) whose rate, remaining time and text are
computed, never measured again, so the CLI, the app and a notebook show the same numbers for the same state:

- rate = done / elapsed (chunks per second since the run started, model loading included);
- ETA = (total - done) / rate, shown as ``m:ss`` (``h:mm:ss`` from one hour), 0:00 once everything is done;
- while the total is still being counted (the ingest's worker is still chunking, :mod:`pipeline.ingestion.ingest`),
  it is shown as ``M+`` and no ETA is given, since it would be too short.

Where it goes: ``progress`` of :func:`pipeline.ingestion.ingest.ingest_paths` is ``True`` (a
:class:`StreamReporter` on stderr: one line rewritten in place on a terminal, one line per update otherwise),
``False`` (nothing), or any callable that takes a :class:`Progress` (the app's ``st.progress`` bar, or ``print`` in
a notebook: ``str(progress)`` is the text). Callbacks run on the thread that called the ingest, never on its worker.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TextIO


@dataclass(frozen=True)
class Progress:
    done: int                 # chunks embedded so far
    total: int                # chunks to embed (so far, while ``counting``)
    elapsed_s: float          # since the run started
    counting: bool = False    # the total may still grow
    unit: str = "chunks"

    @property
    def rate(self) -> float | None:
        """Chunks per second, or None before the first chunk (or the first instant)."""
        return self.done / self.elapsed_s if self.done > 0 and self.elapsed_s > 0 else None

    @property
    def eta_s(self) -> float | None:
        """Seconds left at the current rate; 0 when done; None while counting or before a rate exists."""
        if not self.counting and self.done >= self.total:
            return 0.0
        rate = self.rate
        if self.counting or rate is None:
            return None
        return (self.total - self.done) / rate

    @property
    def fraction(self) -> float:
        """Done over total in [0, 1] (for a bar); 1 for an empty run."""
        if self.total <= 0:
            return 0.0 if self.counting else 1.0
        return min(max(self.done / self.total, 0.0), 1.0)

    def text(self) -> str:
        parts = [f"{self.done:,}/{self.total:,}{'+' if self.counting else ''} {self.unit}"]
        rate = self.rate
        if rate is not None:
            parts.append(f"{rate:.1f} {self.unit}/s")
        eta = self.eta_s
        if eta is not None:
            parts.append(f"ETA {format_duration(eta)}")
        return " · ".join(parts)

    def __str__(self) -> str:
        return self.text()


def format_duration(seconds: float) -> str:
    """``m:ss`` below an hour, ``h:mm:ss`` from one; rounded to the nearest second, never negative."""
    total = int(round(max(seconds, 0.0)))
    hours, rest = divmod(total, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


ProgressCallback = Callable[[Progress], None]


class StreamReporter:
    """Writes each :class:`Progress` to a text stream: on a terminal one line rewritten in place (and ended when
    the run closes), elsewhere one line per update at most every ``every_s`` seconds (the last one always)."""

    def __init__(self, stream: TextIO | None = None, every_s: float = 1.0) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.every_s = every_s
        self._tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self._last_at: float | None = None
        self._width = 0
        self._open = False

    def __call__(self, progress: Progress) -> None:
        now = time.monotonic()
        final = not progress.counting and progress.done >= progress.total
        if not final and self._last_at is not None and now - self._last_at < self.every_s and not self._tty:
            return
        self._last_at = now
        line = progress.text()
        if self._tty:
            self.stream.write("\r" + line + " " * max(self._width - len(line), 0))
            self._width = len(line)
            self._open = True
        else:
            self.stream.write(line + "\n")
        self.stream.flush()

    def close(self) -> None:
        if self._open:
            self.stream.write("\n")
            self.stream.flush()
            self._open = False


class ProgressTracker:
    """Counts chunks for one run and hands each state to ``callback`` (None: counts only)."""

    def __init__(self, callback: ProgressCallback | None, clock: Callable[[], float] = time.perf_counter) -> None:
        self.callback = callback
        self.clock = clock
        self.started = clock()
        self.done = 0
        self.total = 0
        self.counting = True

    def snapshot(self) -> Progress:
        return Progress(self.done, self.total, self.clock() - self.started, self.counting)

    def update(self, *, advanced: int = 0, total: int | None = None, counting: bool | None = None) -> Progress:
        """Count ``advanced`` more chunks and/or set the total; the callback hears the new state only when the
        count, the total or ``counting`` changed (so a reporter never prints the same line twice)."""
        before = (self.done, self.total, self.counting)
        self.done += advanced
        if total is not None:
            self.total = total
        if counting is not None:
            self.counting = counting
        state = self.snapshot()
        if self.callback is not None and (self.done, self.total, self.counting) != before:
            self.callback(state)
        return state

    def close(self) -> None:
        close = getattr(self.callback, "close", None)
        if callable(close):
            close()


def reporter_for(progress: bool | ProgressCallback | None) -> ProgressCallback | None:
    """What an ingest's ``progress`` argument means: True -> stderr, False/None -> nothing, a callable -> itself."""
    if progress is True:
        return StreamReporter(sys.stderr)
    if progress is False or progress is None:
        return None
    if callable(progress):
        return progress
    raise TypeError(f"progress must be a bool or a callable taking a Progress, not {type(progress).__name__}")
