"""The store: the Qdrant index (dense + BM25 sparse vectors) plus a SQLite catalogue of documents and chunks.

Layout under the data directory (``.workbench/`` or ``$WORKBENCH_HOME``): ``shard/`` (Qdrant Edge),
``store.sqlite`` (the catalogue, :mod:`pipeline.storage.catalogue`: documents with their full text, chunks,
term document frequencies, passage vectors, the corpus version), ``runs.sqlite`` (the audit log,
:mod:`pipeline.storage.runs`). ``QDRANT_URL`` moves the index to a Qdrant server.

Why a catalogue beside the index: the catalogue is the source of truth for what is *live*. A document is
replaced by first writing its new points, then switching the catalogue to them in one SQLite transaction,
then deleting the old points. A process killed at any moment leaves the catalogue pointing at either the old
or the new version, never a mix; search results are filtered to live points, and orphans are removed the
next time the store is opened (:mod:`pipeline.storage.recovery`). The catalogue also keeps every document's
text, so a damaged or missing index can be rebuilt (:func:`pipeline.ingestion.ingest.repair`).

Writes are batched (:meth:`Store.replace_documents`): the points of many documents are upserted, the index is
flushed once, and one SQLite transaction switches them all. A flush is an fsync of the shard, which once per
document dominated an ingest's time (the profile is in BENCHMARKS.md, "What changed (profiled first)"); once
per batch it is noise. The crash guarantee is unchanged: the new points are durable before the catalogue
names them, and the transaction switches every document of the batch or none.

One writer, many readers, in any number of processes (:mod:`pipeline.storage.lock`,
:mod:`pipeline.storage.share`): the first process to open the store takes ``shard.lock``, loads the embedded
shard and serves its index calls to every other process that opens the same data directory (the app, a
notebook and terminal commands at once); each process reads the catalogue itself. Every write runs inside
:meth:`Store.writing` (``write.lock``, one writer across all processes, whichever holds the shard). A process
that finds neither the lock nor a serving holder in time gets :class:`StoreBusy` before touching anything; a
busy store is never taken for a damaged one. The corpus version moves inside the catalogue transaction of a
write session's first commit, so committed content never sits under the version an answer was cached for.
"""

from __future__ import annotations

import functools
import os
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from pipeline.ingestion.documents import Chunk, Document
from pipeline.retrieval.bm25 import idf
from pipeline.storage import recovery, share
from pipeline.storage.catalogue import Catalogue, StoredChunk, StoredDocument, StoredPassages
from pipeline.storage.lock import POLL_S, FileLock, LockBusy, describe, read_holder
from pipeline.storage.qdrant_index import ClientIndex, EdgeIndex, IndexBusy, IndexDamaged, IndexHit, IndexPoint
from pipeline.storage.sqlite import LOCK_WAIT_S, StoreError, utc_now
from pipeline.storage.sqlite import lock_wait_s as _env_lock_wait_s

__all__ = ["DocumentWrite", "SearchHit", "Store", "StoreBusy", "StoreError", "StoredChunk", "StoredDocument",
           "StoredPassages", "data_dir", "point_id_for"]

CLOSE_WAIT_S = 600.0   # how long a closing holder waits for a write another process runs through it

_POINT_NAMESPACE = uuid.UUID("6f1c8a52-3a55-4d0e-9a43-5b1f0e2d7c11")


class StoreBusy(StoreError):
    """Another process holds the store (or is writing to it); nothing was touched. The message says who."""


def _busy_message(home: Path, holder: str, waited_s: float) -> str:
    who = f" ({holder})" if holder else ""
    return (f"the store {home} is in use by another process{who}, for example the Streamlit app, a notebook or "
            f"an ingest; waited {waited_s:g} s: retry when it has finished or stop it (WORKBENCH_LOCK_WAIT_S "
            "sets the wait), or point QDRANT_URL at a Qdrant server so several processes can share one index")


def _attach(home: Path, wait_s: float) -> tuple[FileLock | None, share.RemoteIndex | None, str]:
    """Hold the embedded shard (``shard.lock`` taken) or be served by the process that holds it, waiting up to
    ``wait_s`` for either; :class:`StoreBusy` when neither comes (a holder that does not serve: an older
    release, or one being torn down). Returns (the lock, None, whom it waited for) or (None, the served index, "")."""
    deadline = time.monotonic() + max(wait_s, 0.0)
    waited_for = ""
    while True:
        lock = FileLock(home / "shard.lock")
        try:
            return lock, None, lock.acquire(0, "reader") or waited_for
        except LockBusy as exc:
            waited_for = waited_for or exc.holder or "another process"
        except OSError as exc:
            raise StoreError(f"cannot lock the data directory {home}: {exc.strerror or exc}") from None
        try:
            return None, share.RemoteIndex(home / "shard", waited_for), ""
        except share.IndexGone:
            pass
        if time.monotonic() >= deadline:
            raise StoreBusy(_busy_message(home, describe(read_holder(home / "shard.lock")), wait_s))
        time.sleep(POLL_S)


class _ServedIndex:
    """The index of a store whose shard another process holds: every call runs in the holder
    (:class:`~pipeline.storage.share.RemoteIndex`). A read whose holder has stopped fails over
    (:meth:`Store._call_index`); a write, or anything inside a write session, does not (module docstring of
    :mod:`pipeline.storage.share`)."""

    kind = share.RemoteIndex.kind

    def __init__(self, store: Store, backend: share.RemoteIndex) -> None:
        self._store = store
        self.backend: Any = backend

    @property
    def holder(self) -> str:
        return getattr(self.backend, "holder", "")

    def __getattr__(self, op: str) -> Any:
        if op not in share.READS | share.WRITES:
            raise AttributeError(op)
        return functools.partial(self._store._call_index, op)

    def close(self) -> None:
        self.backend.close()


@dataclass(frozen=True)
class DocumentWrite:
    """One document's new version, ready to switch to: chunks, built points, tokens, and optionally each
    chunk's (passage key, window texts, vectors with the whole chunk first) for :class:`StoredPassages`."""
    doc: Document
    chunks: list[Chunk]
    points: list[IndexPoint]
    terms: list[list[str]]
    passages: list[tuple[str, tuple[str, ...], np.ndarray]] | None = None
    model: str = ""


@dataclass(frozen=True)
class SearchHit:
    chunk_id: str
    doc_id: str
    score: float
    payload: dict[str, Any]
    sparse: dict[int, float] | None = None


def data_dir(home: str | Path | None = None) -> Path:
    return Path(home or os.environ.get("WORKBENCH_HOME") or ".workbench").expanduser()


def point_id_for(doc: Document, ordinal: int) -> str:
    """A new point id per document *version*, so old and new chunks can coexist until the switch."""
    return str(uuid.uuid5(_POINT_NAMESPACE, f"{doc.doc_id}\x00{doc.content_hash}\x00{ordinal}"))


class Store:
    """Open with :meth:`open`; use as a context manager or call :meth:`close`."""

    def __init__(self, home: Path, catalogue: Catalogue, index: Any, dim: int,
                 shard_lock: FileLock | None = None, lock_wait_s: float = LOCK_WAIT_S) -> None:
        self.home = home
        self.catalogue = catalogue
        self.index = index
        self.dim = dim
        self.damage = ""
        self.waited_for = ""
        self.lock_wait_s = lock_wait_s
        self._lock = threading.RLock()
        self._shard_lock = shard_lock
        self._write_lock = FileLock(home / "write.lock")
        self._write_mutex = threading.RLock()
        self._write_depth = 0
        self._writer_thread = 0
        self._write_version: int | None = None
        self._server: share.Server | None = None
        self.serving_problem = ""

    @property
    def served_by(self) -> str:
        """Who runs this store's index calls: "" when this process holds the shard (or uses a server by
        ``QDRANT_URL``), else the holding process as its lock file describes it."""
        return (self.index.holder or "another process") if isinstance(self.index, _ServedIndex) else ""

    # -- opening ------------------------------------------------------------------------------------------
    @classmethod
    def open(cls, home: str | Path | None = None, *, dim: int = 384, url: str | None = None,
             lock_wait_s: float | None = None) -> Store:
        """Open the store under ``home``. With the embedded shard, take ``shard.lock`` and load the shard, or,
        when another process holds it, use that process's index through its socket (:attr:`served_by` says
        which); waiting up to ``lock_wait_s`` (default ``$WORKBENCH_LOCK_WAIT_S`` or 5 s) for either. A process
        that gets neither is refused with :class:`StoreBusy` before it touches anything, and the engine's own
        load is never attempted while another process holds the shard (that attempt damages the holder's
        files). ``waited_for`` says whom it waited for, if anyone."""
        lock_wait_s = _env_lock_wait_s() if lock_wait_s is None else lock_wait_s
        home = data_dir(home)
        try:
            home.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreError(f"cannot create data directory {home}: {exc.strerror or exc}") from None
        url = url if url is not None else os.environ.get("QDRANT_URL", "").strip()
        shard_lock, remote, waited_for = (None, None, "") if url else _attach(home, lock_wait_s)
        try:
            catalogue = Catalogue.open(home / "store.sqlite")
        except BaseException:
            if shard_lock is not None:
                shard_lock.release()
            if remote is not None:
                remote.close()
            raise
        stored_dim = catalogue.meta("dim")
        dim = int(stored_dim) if stored_dim else dim
        store = cls(home, catalogue, None, dim, shard_lock, lock_wait_s)
        store.waited_for = waited_for
        if remote is not None:  # another process holds the shard and serves it; it ran the checks below
            store.index = _ServedIndex(store, remote)
            return store
        if url:
            try:
                store.index = ClientIndex(url, dim)
            except Exception as exc:  # qdrant-client connection errors have many types
                store.close()
                raise StoreError(f"cannot reach the Qdrant index at {url}: {type(exc).__name__}: {exc}") from None
            return store
        store._open_shard()
        return store

    def _open_shard(self) -> None:
        """Holding ``shard.lock``: load the shard (setting a damaged one aside), check it, and serve it to the
        other processes that open this data directory (:mod:`pipeline.storage.share`)."""
        try:
            # No second wait: holding shard.lock, an engine lock error means a holder that does not take it.
            self.index = EdgeIndex(self.home / "shard", self.dim, lock_wait_s=0)
        except IndexBusy as exc:  # held by a process that does not take shard.lock (an older release)
            self.close()
            raise StoreBusy(_busy_message(self.home, str(exc)[:120], self.lock_wait_s)) from None
        except IndexDamaged as exc:
            self._set_aside_damaged_shard(f"index could not be opened ({exc})", self.lock_wait_s)
        lost = self._lost_catalogue()
        if lost:
            self.close()
            raise StoreError(lost)
        if not self.damage:
            problem = self.probe_index()
            if problem:
                self.index.close()
                self._set_aside_damaged_shard(f"index failed its health check ({problem})", self.lock_wait_s)
        try:
            self._server = share.Server(self.home / "shard", self._serve)
        except OSError as exc:  # e.g. a name still bound by a holder being torn down: others wait or are refused
            self._server = None
            self.serving_problem = f"cannot serve the index to other processes: {exc.strerror or exc}"

    def _serve(self, op: str, args: list) -> Any:
        """Run another process's index call on this holder's index (the server's handler)."""
        with self._lock:
            if self.index is None or isinstance(self.index, _ServedIndex):
                raise StoreError(f"the store {self.home} is closing in this process")
            if op in share.WRITES and not self._write_lock.is_taken_elsewhere():
                raise StoreError("an index write from outside a write session (write.lock is not held)")
            return getattr(self.index, op)(*args)

    def _call_index(self, op: str, *args: Any) -> Any:
        """A served store's index call. When the holder has stopped, a read outside a write session fails over
        (takes the shard, or connects to the next holder) and is retried, for up to the lock wait."""
        deadline = time.monotonic() + max(self.lock_wait_s, 0.0)
        while True:
            backend = self.index.backend if isinstance(self.index, _ServedIndex) else self.index
            try:
                return getattr(backend, op)(*args)
            except share.IndexGone:
                if op in share.WRITES or self._write_depth or time.monotonic() > deadline:
                    raise
                self._fail_over()

    def _fail_over(self) -> None:
        """The holder this store was served by stopped: connect to the next one, or hold the shard."""
        with self._lock:
            if not isinstance(self.index, _ServedIndex):
                return  # another thread already took the shard
            self.index.backend.close()
            shard_lock, remote, _ = _attach(self.home, self.lock_wait_s)
            if remote is not None:
                self.index.backend = remote
            else:
                self._shard_lock = shard_lock
                self._open_shard()

    def _lost_catalogue(self) -> str:
        """"" unless the catalogue was lost or replaced while the shard beside it still holds points: a
        catalogue that has never seen a write (no document, no meta but its id: a missing, 0-byte or new
        ``store.sqlite``) under an index that is not empty. The catalogue is the only copy of the documents'
        text and of what the points mean, so the store cannot answer, repair or even list what it holds; it
        must not pass for an empty store either. A first ingest killed before its first commit leaves orphan
        points too, but its catalogue already records the write (``pending``), so it is repaired as usual."""
        if self.catalogue.document_count() or self.catalogue.meta_keys() - {"catalogue_id"}:
            return ""
        points = self.index.count()
        if not points:
            return ""
        catalogue, shard = self.home / "store.sqlite", self.home / "shard"
        return (f"the catalogue {catalogue} is empty but the index {shard} holds {points} points: the catalogue "
                "(the documents' text and what each point is) was lost or replaced; restore store.sqlite from a "
                f"backup, or move {shard} aside (mv {shard} {shard}.orphaned) and ingest the corpus again "
                f"(workbench ingest PATH --store {self.home})")

    def _set_aside_damaged_shard(self, why: str, lock_wait_s: float) -> None:
        self.index, self.damage = recovery.set_aside_damaged_shard(self.home, self.dim, lock_wait_s, why)

    def probe_index(self) -> str:
        """:func:`pipeline.storage.recovery.probe_index` on this store: what failed, or "" when healthy."""
        return recovery.probe_index(self.catalogue, self.index, self.dim)

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._server is not None:  # stop serving first: no other process's call runs on a closing index
            if not self._write_depth:  # a process writing through this holder finishes its write first
                try:
                    self._write_lock.acquire(CLOSE_WAIT_S, "closing")
                except (LockBusy, OSError):
                    pass
            self._server.close()
            self._server = None
        with self._lock:
            try:
                if self.index is not None:
                    self.index.close()
                    self.index = None
                self.catalogue.close()
            finally:
                self._write_lock.release()
                if self._shard_lock is not None:
                    self._shard_lock.release()

    # -- the writer lock ------------------------------------------------------------------------------------
    @contextmanager
    def writing(self, what: str, wait_s: float | None = None) -> Iterator[Store]:
        """Be the store's one writer for the block (re-entrant in a thread): take ``write.lock``, waiting up
        to ``wait_s`` (default: the open's lock wait), else :class:`StoreBusy` before anything is touched.
        Every catalogue transaction inside that changes committed content moves the corpus version to one
        past the version it had when the outermost block began, in that same transaction, so a process
        killed at any point after a commit never leaves changed content under the old version."""
        wait_s = self.lock_wait_s if wait_s is None else wait_s
        if not self._write_mutex.acquire(timeout=max(wait_s, 0.0)):  # another thread of this process writes
            raise StoreBusy(_busy_message(self.home, "another session of this process is writing", wait_s))
        try:
            if self._write_depth == 0:
                self._writer_thread = threading.get_ident()
                try:
                    self._write_lock.acquire(wait_s, f"writer:{what}")
                except LockBusy as exc:
                    raise StoreBusy(_busy_message(self.home, exc.holder, wait_s)) from None
                if isinstance(self.index, _ServedIndex):  # under write.lock no holder is half-way through
                    try:                                    # closing: fail over now, before anything is sent
                        self._call_index("count")
                    except BaseException:
                        self._write_lock.release()
                        raise
                if self._shard_lock is not None:
                    self._shard_lock.set_role(f"writer:{what}")
                self._write_version = None
            self._write_depth += 1
            try:
                yield self
            finally:
                self._write_depth -= 1
                if self._write_depth == 0:
                    self._write_version = None
                    self._write_lock.release()
                    if self._shard_lock is not None:
                        self._shard_lock.set_role("reader")
        finally:
            self._write_mutex.release()

    @property
    def write_in_progress(self) -> bool:
        """True while a write session of this store is open (answers are not cached meanwhile)."""
        return self._write_depth > 0

    def another_writer_active(self) -> bool:
        """True when another process, another open store or another thread of this one is writing right now:
        an unfinished write seen from outside is a writer at work, not a crash, and must not be repaired."""
        if self._write_depth > 0:  # this store is writing: busy unless the asking thread is the writer
            return self._writer_thread != threading.get_ident()
        return not self._write_lock.held and self._write_lock.is_taken_elsewhere()

    def _bump_version(self) -> None:
        """Inside a catalogue transaction of a write session: the corpus version becomes the session's."""
        if self._write_version is None:
            self._write_version = self.corpus_version + 1
        self.catalogue.set_meta(corpus_version=self._write_version)

    def mark_changed(self) -> None:
        """Record that this write session changed what search returns without a catalogue switch (for
        example rewritten sparse vectors): the corpus version moves as it does for a switch."""
        with self.writing("ingest"), self._lock, self.catalogue.transaction():
            self._bump_version()

    # -- catalogue reads ------------------------------------------------------------------------------------
    def meta(self, key: str, default: str = "") -> str:
        return self.catalogue.meta(key, default)

    @property
    def corpus_version(self) -> int:
        return int(self.meta("corpus_version", "0"))

    @property
    def catalogue_id(self) -> str:
        """The random id of this catalogue (:mod:`pipeline.storage.catalogue`, ``m003_catalogue_id``)."""
        return self.meta("catalogue_id")

    @property
    def avgdl(self) -> float:
        return float(self.meta("avgdl", "0") or 0)

    def chunk_count(self) -> int:
        return self.catalogue.chunk_count()

    def is_empty(self) -> bool:
        return self.chunk_count() == 0

    def documents(self) -> list[StoredDocument]:
        return self.catalogue.documents()

    def document(self, doc_id: str) -> StoredDocument | None:
        return next((d for d in self.documents_by_ids([doc_id])), None)

    def documents_by_ids(self, doc_ids: list[str]) -> list[StoredDocument]:
        return self.catalogue.documents_by_ids(doc_ids)

    def document_text(self, doc_id: str) -> str | None:
        return self.catalogue.document_text(doc_id)

    def load_document(self, doc_id: str) -> Document | None:
        """The :class:`Document` as it was ingested, text included (for rebuilding the index without the
        source files); :meth:`document` is the catalogue row without the text."""
        return self.catalogue.load_document(doc_id)

    def chunks(self, doc_id: str | None = None) -> list[StoredChunk]:
        return self.catalogue.chunks(doc_id)

    def chunk_terms(self) -> dict[str, list[str]]:
        """Every live chunk's tokens, by point id (used to recompute sparse vectors when avgdl drifts)."""
        return self.catalogue.chunk_terms()

    def doc_freq(self, terms: list[str]) -> dict[str, int]:
        return self.catalogue.doc_freq(terms)

    def idf(self, terms: list[str]) -> dict[str, float]:
        n = self.chunk_count()
        df = self.doc_freq(list(terms))
        return {t: idf(n, df.get(t, 0)) for t in terms}

    def passage_vectors(self, chunk_ids: list[str]) -> dict[str, StoredPassages]:
        """The precomputed validation vectors of these chunks (chunks without any are absent)."""
        return self.catalogue.passage_vectors(chunk_ids)

    # -- search ---------------------------------------------------------------------------------------------
    def _live(self, hits: list[IndexHit]) -> list[SearchHit]:
        """Drop points the catalogue does not consider live (left over from an interrupted write)."""
        if not hits:
            return []
        live = self.catalogue.live_points([h.point_id for h in hits])
        return [SearchHit(live[h.point_id], str(h.payload.get("doc_id", "")), h.score, h.payload, h.sparse)
                for h in hits if h.point_id in live]

    def dense_search(self, vector: list[float], limit: int) -> list[SearchHit]:
        with self._lock:
            return self._live(self.index.query_dense(vector, limit))

    def keyword_search(self, indices: list[int], values: list[float], limit: int) -> list[SearchHit]:
        with self._lock:
            return self._live(self.index.query_sparse(indices, values, limit))

    # -- writes (used by pipeline.ingestion.ingest) ---------------------------------------------------------
    def set_meta(self, **values: Any) -> None:
        with self.writing("ingest"), self._lock:
            self.catalogue.set_meta(**values)

    def replace_document(self, doc: Document, chunks: list[Chunk], points: list[IndexPoint],
                         terms: list[list[str]]) -> int:
        """Atomically make ``doc`` (with its chunks and already-built points) the live version.

        Returns the number of old chunks removed.
        """
        return self.replace_documents([DocumentWrite(doc, chunks, points, terms)])

    def replace_documents(self, writes: list[DocumentWrite]) -> int:
        """Atomically make each document of ``writes`` the live version: every new point is upserted and
        flushed first, then one transaction switches the catalogue for all of them, then the old points are
        deleted. Returns the number of old chunks removed."""
        if not writes:
            return 0
        with self.writing("ingest"), self._lock:
            old = {w.doc.doc_id: self.catalogue.old_chunks(w.doc.doc_id) for w in writes}
            self.index.upsert([p for w in writes for p in w.points])
            self.index.flush()
            now = utc_now()
            with self.catalogue.transaction():
                for w in writes:
                    self.catalogue.write_document(w.doc, w.chunks, [p.point_id for p in w.points], w.terms,
                                                  w.passages, w.model, old[w.doc.doc_id], now)
                self._bump_version()
            new_points = {p.point_id for w in writes for p in w.points}
            stale = [o.point_id for chunks in old.values() for o in chunks if o.point_id not in new_points]
            self.index.delete(stale)
            return sum(len(chunks) for chunks in old.values())

    def retracted_documents(self) -> dict[str, tuple[str, frozenset[str]]]:
        """doc id → (title, distinct terms) of the documents ingested as retracted (read once per corpus version)."""
        version = self.corpus_version
        cached = getattr(self, "_retracted_cache", None)
        if cached is None or cached[0] != version:
            with self._lock:
                cached = (version, self.catalogue.retracted_documents())
            self._retracted_cache = cached
        return cached[1]

    def record_retracted(self, retracted: dict[str, tuple[str, list[str]]], live: list[str]) -> None:
        """Remember the documents an ingest found marked retracted; forget those that are live again."""
        known = self.retracted_documents()
        retracted = {d: (t, terms) for d, (t, terms) in retracted.items()
                     if d not in known or known[d] != (t, frozenset(terms))}
        live = [d for d in live if d in known]
        if not retracted and not live:
            return   # nothing new: no write
        with self.writing("ingest"), self._lock:
            with self.catalogue.transaction():
                self.catalogue.record_retracted(retracted, live)
            self._retracted_cache = None

    def delete_document(self, doc_id: str) -> int:
        """Remove a document from the catalogue and both indexes; returns the chunks removed (0 if unknown)."""
        with self.writing("delete"), self._lock:
            old = self.catalogue.old_chunks(doc_id)
            if not self.catalogue.has_document(doc_id):
                return 0
            with self.catalogue.transaction():
                self.catalogue.remove_document(doc_id, old)
                self._bump_version()
            self.index.delete([o.point_id for o in old])
            return len(old)

    def set_supersession(self, updates: dict[str, tuple[tuple[str, ...], str]]) -> None:
        """Record, per chunk id, the newer chunks that supersede it in part and why (empty clears it)."""
        with self.writing("ingest"), self._lock:
            points = {chunk_id: point_id for point_id, chunk_id in self.catalogue.live_points().items()}
            with self.catalogue.transaction():
                self.catalogue.set_supersession(updates)
                self._bump_version()
            for chunk_id, (by, why) in updates.items():
                if chunk_id in points:
                    self.index.set_payload(points[chunk_id], {"superseded_by": list(by), "superseded_reason": why})

    # -- recovery (used by pipeline.ingestion.ingest.repair) ------------------------------------------------
    def orphan_points(self) -> list[str]:
        """Index points the catalogue does not know (left by an interrupted write)."""
        return recovery.orphan_points(self.catalogue, self.index)

    def missing_points(self) -> list[str]:
        """Catalogue chunks whose point is not in the index (a damaged or replaced index)."""
        return recovery.missing_points(self.catalogue, self.index)
