"""The evaluation's embedding memo: each distinct text encoded once per run, and encoded ahead, in batches.

A golden run (:func:`workbench.evaluate.run_cases`) asks the embedder for the same texts many times: the
validator encodes the claims of every answer, and the same source sentences are quoted by many answers.
:class:`MemoEmbedder` wraps the run's embedder so each distinct text is encoded once; a stage's call for texts
already seen is a lookup.

**Encoding ahead.** One forward pass per question pays the model's fixed cost per call hundreds of times.
:meth:`MemoEmbedder.prime` encodes the texts the next step will ask for, for many questions at once, in one
call: the batched walk primes a block's queries before retrieving them, its claims before validating them and
its answers' correctness texts before they are scored. Which texts a step will ask for is learnt by a dry run
of the step with a :class:`TextRecorder` (an embedder that only lists what it is asked for), so the list is the
step's own and never a second copy of its rules. A text the dry run missed is simply encoded when a stage asks.

**In the background.** Inside :meth:`MemoEmbedder.background`, :meth:`~MemoEmbedder.prime` with ``wait=False``
hands the batch to one worker thread and returns; a stage that asks for a text still being encoded waits for
that batch. The model's forward pass releases the GIL, so on two cores one block's encoding runs beside the
next block's retrieval and generation (with a shorter thread switch interval while it runs:
:data:`SWITCH_INTERVAL_S`). Which texts go into which call is decided by the calling thread, in its
order, so a run's batches (and vectors) do not depend on thread timing.

**Vectors.** A text's vector is the model's: batched with other texts it differs from the one-at-a-time vector
only by float rounding (padding is masked out), so cosines agree to about 1e-7 and every decision, hit and
verdict of an evaluation is the same (``tests/workbench/test_evaluate_batch.py``).
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager

import numpy as np

SWITCH_INTERVAL_S = 0.0005
"""Python's thread switch interval while the worker runs (default 5 ms). The forward pass releases the GIL inside
each tensor operation but needs it back between them; with the default, the worker waits up to 5 ms each time
behind the calling thread's Python (retrieval, generation), and encoding ahead takes longer than it saves."""


class MemoEmbedder:
    """Wraps an embedder so each distinct text is encoded once per evaluation run (and can be encoded ahead)."""

    def __init__(self, inner) -> None:
        self.inner = inner
        self.name = inner.name
        self.dim = inner.dim
        self.calls = 0      # encode() calls: what the stages asked for
        self.texts = 0      # texts they asked for
        self.encoded = 0    # distinct texts the model encoded
        self.batches = 0    # calls to the model
        self._memo: dict[str, np.ndarray] = {}
        self._pending: dict[str, Future] = {}
        self._lock = threading.Lock()
        self._worker: ThreadPoolExecutor | None = None
        self._users = 0     # callers inside background(); the worker stops when the last one leaves
        self._switch = sys.getswitchinterval()

    def encode(self, texts: list[str], batch_size: int | None = None) -> np.ndarray:
        with self._lock:
            self.calls += 1
            self.texts += len(texts)
            waiting = {id(f): f for t in texts if (f := self._pending.get(t)) is not None}
        for future in waiting.values():
            future.exception()    # wait; a failed batch leaves its texts to be encoded below (and fail here)
        with self._lock:
            missing = [t for t in dict.fromkeys(texts) if t not in self._memo]
        if missing:
            self._encode(missing, batch_size)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        with self._lock:
            return np.vstack([self._memo[t] for t in texts])

    def prime(self, texts: Sequence[str], wait: bool = True) -> int:
        """Encode every text of ``texts`` neither memoised nor already being encoded, in one call to the model;
        with ``wait=False`` inside :meth:`background`, in the worker thread. Returns how many texts it took."""
        with self._lock:
            missing = [t for t in dict.fromkeys(texts) if t not in self._memo and t not in self._pending]
            if not missing:
                return 0
            future: Future | None = None
            if self._worker is not None and not wait:
                future = self._worker.submit(self._encode, missing, None)
                for t in missing:
                    self._pending.setdefault(t, future)
        if future is None:
            self._encode(missing, None)
        return len(missing)

    @contextmanager
    def background(self) -> Iterator[MemoEmbedder]:
        """One worker thread for :meth:`prime` ``(wait=False)`` while the block runs; on leaving, every batch
        handed to it has been encoded (or has failed, leaving its texts to be encoded when asked for)."""
        with self._lock:
            self._users += 1
            if self._worker is None:
                self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="eval-encode")
                self._switch = sys.getswitchinterval()
                sys.setswitchinterval(min(self._switch, SWITCH_INTERVAL_S))
            worker = self._worker
        try:
            yield self
        finally:
            with self._lock:
                self._users -= 1
                last = not self._users
                if last:
                    self._worker = None
            if last:
                worker.shutdown(wait=True)
                sys.setswitchinterval(self._switch)

    def counts(self) -> dict[str, int]:
        """What the memo has done so far: encode() calls and texts asked for, texts encoded, calls to the model."""
        with self._lock:
            return {"calls": self.calls, "texts": self.texts, "encoded": self.encoded, "batches": self.batches}

    def _encode(self, missing: list[str], batch_size: int | None) -> None:
        try:
            vectors = self.inner.encode(missing, batch_size=batch_size) if batch_size else self.inner.encode(missing)
            vectors = np.asarray(vectors, dtype=np.float32)
            with self._lock:
                self._memo.update(zip(missing, vectors, strict=True))
                self.encoded += len(missing)
                self.batches += 1
        finally:
            with self._lock:
                for t in missing:
                    self._pending.pop(t, None)


class TextRecorder:
    """An embedder that encodes nothing: it lists the texts it is asked for and answers zero vectors. A dry run
    of a step with it says which texts the real step will ask for (:meth:`MemoEmbedder.prime`). It carries the
    real embedder's name and dimension, so a stage that checks stored vectors against the embedder's name (the
    validator) asks for the same texts as with the real one."""

    def __init__(self, name: str, dim: int) -> None:
        self.name, self.dim = name, dim
        self.recorded: list[str] = []

    def encode(self, texts: list[str], batch_size: int | None = None) -> np.ndarray:
        self.recorded += texts
        return np.zeros((len(texts), self.dim), dtype=np.float32)

    def embedder(self, cfg) -> TextRecorder:
        """So that it stands in for the models of a :class:`~pipeline.context.StageContext`."""
        return self

    def nli(self, name: str):
        """A dry run reads nothing: the validator's NLI check is skipped (its result is thrown away)."""
        from pipeline.models.resolve import ModelUnavailable

        raise ModelUnavailable("a dry run of the validator (texts recorded, nothing read)")
