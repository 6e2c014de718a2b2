"""The store: the Qdrant index (dense + BM25 sparse vectors) plus a SQLite catalogue of documents and chunks.

Layout under the data directory (``.workbench/`` or ``$WORKBENCH_HOME``): ``shard/`` (Qdrant Edge),
``store.sqlite`` (documents with their full text, chunks, term document frequencies, the corpus version),
``runs.sqlite`` (the audit log, :mod:`pipeline.storage.runs`). ``QDRANT_URL`` moves the index to a Qdrant server.

Why a catalogue beside the index: the catalogue is the source of truth for what is *live*. A document is
replaced by first writing its new points, then switching the catalogue to them in one SQLite transaction,
then deleting the old points. A process killed at any moment leaves the catalogue pointing at either the old
or the new version, never a mix; search results are filtered to live points, and orphans are removed the
next time the store is opened. The catalogue also keeps every document's text, so a damaged or missing
index can be rebuilt (:func:`pipeline.ingestion.ingest.repair`).

Writes are batched (:meth:`Store.replace_documents`): the points of many documents are upserted, the index is
flushed once, and one SQLite transaction switches them all. A flush is an fsync of the shard; once per
document it was 78 % of a 3,000-chunk ingest (36 ms x 548 documents, profiled with pyinstrument), once per
batch it is noise. The crash guarantee is unchanged: the new points are durable before the catalogue
names them, and the transaction switches every document of the batch or none.

``passage_vectors`` holds, per chunk, what the citation validator compares claims with (the chunk's dense
vector and its sentence windows' vectors, :mod:`pipeline.validation.citations`), computed at ingestion so an answer's
one encoder call carries only its claims. Rows live and die with their chunk.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from pipeline.ingestion.documents import Chunk, Document
from pipeline.storage.qdrant_index import ClientIndex, EdgeIndex, IndexBusy, IndexDamaged, IndexHit, IndexPoint
from pipeline.text.tokenize import idf, to_sparse

_POINT_NAMESPACE = uuid.UUID("6f1c8a52-3a55-4d0e-9a43-5b1f0e2d7c11")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS documents (
    doc_id TEXT PRIMARY KEY, title TEXT NOT NULL, source TEXT NOT NULL, format TEXT NOT NULL,
    content_hash TEXT NOT NULL, metadata_json TEXT NOT NULL, text TEXT NOT NULL,
    chunk_count INTEGER NOT NULL, ingested_at TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS chunks (
    chunk_id TEXT PRIMARY KEY, doc_id TEXT NOT NULL REFERENCES documents(doc_id), ordinal INTEGER NOT NULL,
    point_id TEXT NOT NULL UNIQUE, text TEXT NOT NULL, heading_path_json TEXT NOT NULL, kind TEXT NOT NULL,
    token_count INTEGER NOT NULL, terms_json TEXT NOT NULL,
    superseded_by_json TEXT NOT NULL DEFAULT '[]', superseded_reason TEXT NOT NULL DEFAULT '');
CREATE INDEX IF NOT EXISTS chunks_doc ON chunks(doc_id);
CREATE TABLE IF NOT EXISTS terms (term TEXT PRIMARY KEY, df INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS passage_vectors (
    chunk_id TEXT PRIMARY KEY, model TEXT NOT NULL, passage_key TEXT NOT NULL, dim INTEGER NOT NULL,
    passages_json TEXT NOT NULL, vectors BLOB NOT NULL);
"""


class StoreError(RuntimeError):
    """A store problem the user can act on; the message says how."""


@dataclass(frozen=True)
class StoredDocument:
    doc_id: str
    title: str
    source: str
    format: str
    content_hash: str
    metadata: dict[str, str]
    chunk_count: int
    ingested_at: str

    @property
    def version(self) -> str:
        return self.metadata.get("version", "")

    @property
    def effective_date(self) -> str:
        return self.metadata.get("effective_date", "")


@dataclass(frozen=True)
class StoredChunk:
    chunk_id: str
    doc_id: str
    ordinal: int
    point_id: str
    text: str
    heading_path: tuple[str, ...]
    kind: str
    token_count: int
    superseded_by: tuple[str, ...]
    superseded_reason: str


@dataclass(frozen=True)
class StoredPassages:
    """A chunk's precomputed validation vectors: row 0 is the whole chunk (its dense vector), row i the
    sentence window ``passages[i - 1]``; ``passage_key`` says which text and windowing they were made from."""
    chunk_id: str
    model: str
    passage_key: str
    passages: tuple[str, ...]
    vectors: np.ndarray


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

    def __init__(self, home: Path, db: sqlite3.Connection, index: Any, dim: int) -> None:
        self.home = home
        self._db = db
        self.index = index
        self.dim = dim
        self._lock = threading.RLock()

    # -- opening ------------------------------------------------------------------------------------------
    @classmethod
    def open(cls, home: str | Path | None = None, *, dim: int = 384, url: str | None = None,
             lock_wait_s: float = 5.0) -> Store:
        home = data_dir(home)
        try:
            home.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreError(f"cannot create data directory {home}: {exc.strerror or exc}") from None
        db = sqlite3.connect(home / "store.sqlite", timeout=30, check_same_thread=False, isolation_level=None)
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA busy_timeout=30000")
        db.executescript(_SCHEMA)
        stored_dim = db.execute("SELECT value FROM meta WHERE key='dim'").fetchone()
        dim = int(stored_dim[0]) if stored_dim else dim
        url = url if url is not None else os.environ.get("QDRANT_URL", "").strip()
        store = cls(home, db, None, dim)
        store.damage = ""
        try:
            store.index = ClientIndex(url, dim) if url else EdgeIndex(home / "shard", dim, lock_wait_s=lock_wait_s)
        except IndexBusy:
            db.close()
            raise StoreError(
                f"the store {home} is in use by another process (for example the Streamlit app or another "
                "ingest); stop that process and retry, or point QDRANT_URL at a Qdrant server so several "
                "processes can share one index") from None
        except IndexDamaged as exc:
            store._set_aside_damaged_shard(f"index could not be opened ({exc})", lock_wait_s)
        except Exception as exc:  # qdrant-client connection errors have many types
            db.close()
            raise StoreError(f"cannot reach the Qdrant index at {url}: {type(exc).__name__}: {exc}") from None
        if isinstance(store.index, EdgeIndex) and not store.damage:
            problem = store.probe_index()
            if problem:
                store.index.close()
                store._set_aside_damaged_shard(f"index failed its health check ({problem})", lock_wait_s)
        return store

    def _set_aside_damaged_shard(self, why: str, lock_wait_s: float) -> None:
        """Move the shard aside (kept for inspection, never deleted) and start an empty one; the next repair
        rebuilds every chunk from the catalogue's stored text."""
        damaged = self.home / f"shard.damaged-{int(time.time())}"
        shutil.move(str(self.home / "shard"), damaged)
        self.index = EdgeIndex(self.home / "shard", self.dim, lock_wait_s=lock_wait_s)
        self.damage = f"{why}; moved it to {damaged.name} and started a new one"

    def probe_index(self) -> str:
        """A cheap health check on open: one stored chunk must come back whole — its dense vector readable, its
        payload intact, itself found by a dense query with that vector and by a keyword query with its own
        terms, with a positive BM25 score. A shard can load and count right yet fail each of these (a
        truncated vector file, an overwritten payload page, a lost id mapping that corrupts the IDF
        statistics); then every search would be wrong until someone deleted the shard by hand. Returns what
        failed, or "" when healthy (or empty)."""
        row = self._db.execute("SELECT point_id, doc_id, terms_json FROM chunks ORDER BY point_id LIMIT 1").fetchone()
        if row is None:
            return ""
        point_id, doc_id, terms_json = row
        try:
            vector = self.index.dense_vectors([point_id]).get(point_id) or []
            if len(vector) != self.dim or not np.all(np.isfinite(vector)) or not np.any(vector):
                return f"chunk point {point_id} has no readable dense vector"
            dense = {h.point_id: h for h in self.index.query_dense(list(vector), 5)}
            if point_id not in dense or dense[point_id].score < 0.99:
                return "a chunk's own vector does not find it on the dense leg"
            if dense[point_id].payload.get("doc_id") != doc_id:
                return "a chunk's payload does not match the catalogue"
            terms = sorted(set(json.loads(terms_json)))[:32]
            if terms:
                indices, values = to_sparse({t: 1.0 for t in terms})
                sparse = self.index.query_sparse(indices, values, 50)
                if any(h.score < 0 or not np.isfinite(h.score) for h in sparse):
                    return "the keyword leg returns negative BM25 scores (corrupt term statistics)"
                if point_id not in {h.point_id for h in sparse}:
                    return "a chunk's own terms do not find it on the keyword leg"
        except Exception as exc:  # the bindings raise bare exceptions for unreadable storage
            return f"{type(exc).__name__}: {str(exc)[:200]}"
        return ""

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        with self._lock:
            if self.index is not None:
                self.index.close()
                self.index = None
            self._db.close()

    # -- catalogue reads ------------------------------------------------------------------------------------
    def meta(self, key: str, default: str = "") -> str:
        row = self._db.execute("SELECT value FROM meta WHERE key=?", (key,)).fetchone()
        return row[0] if row else default

    @property
    def corpus_version(self) -> int:
        return int(self.meta("corpus_version", "0"))

    @property
    def avgdl(self) -> float:
        return float(self.meta("avgdl", "0") or 0)

    def chunk_count(self) -> int:
        return self._db.execute("SELECT COUNT(*) FROM chunks").fetchone()[0]

    def is_empty(self) -> bool:
        return self.chunk_count() == 0

    def documents(self) -> list[StoredDocument]:
        rows = self._db.execute("SELECT doc_id, title, source, format, content_hash, metadata_json, chunk_count, "
                                "ingested_at FROM documents ORDER BY doc_id").fetchall()
        return [StoredDocument(r[0], r[1], r[2], r[3], r[4], json.loads(r[5]), r[6], r[7]) for r in rows]

    def document(self, doc_id: str) -> StoredDocument | None:
        return next((d for d in self.documents_by_ids([doc_id])), None)

    def documents_by_ids(self, doc_ids: list[str]) -> list[StoredDocument]:
        if not doc_ids:
            return []
        marks = ",".join("?" * len(doc_ids))
        rows = self._db.execute(f"SELECT doc_id, title, source, format, content_hash, metadata_json, chunk_count, "
                                f"ingested_at FROM documents WHERE doc_id IN ({marks})", doc_ids).fetchall()
        return [StoredDocument(r[0], r[1], r[2], r[3], r[4], json.loads(r[5]), r[6], r[7]) for r in rows]

    def document_text(self, doc_id: str) -> str | None:
        row = self._db.execute("SELECT text FROM documents WHERE doc_id=?", (doc_id,)).fetchone()
        return row[0] if row else None

    def stored_document(self, doc_id: str) -> Document | None:
        """The document as it was ingested (for rebuilding the index without the source files)."""
        row = self._db.execute("SELECT doc_id, title, text, source, format, metadata_json FROM documents "
                               "WHERE doc_id=?", (doc_id,)).fetchone()
        if not row:
            return None
        return Document(doc_id=row[0], title=row[1], text=row[2], source=row[3], format=row[4],
                        metadata=json.loads(row[5]))

    def chunks(self, doc_id: str | None = None) -> list[StoredChunk]:
        sql = ("SELECT chunk_id, doc_id, ordinal, point_id, text, heading_path_json, kind, token_count, "
               "superseded_by_json, superseded_reason FROM chunks")
        rows = (self._db.execute(sql + " WHERE doc_id=? ORDER BY ordinal", (doc_id,)) if doc_id
                else self._db.execute(sql + " ORDER BY doc_id, ordinal")).fetchall()
        return [StoredChunk(r[0], r[1], r[2], r[3], r[4], tuple(json.loads(r[5])), r[6], r[7],
                            tuple(json.loads(r[8])), r[9]) for r in rows]

    def chunk_terms(self) -> dict[str, list[str]]:
        """Every live chunk's tokens, by point id (used to recompute sparse vectors when avgdl drifts)."""
        return {r[0]: json.loads(r[1]) for r in self._db.execute("SELECT point_id, terms_json FROM chunks")}

    def doc_freq(self, terms: list[str]) -> dict[str, int]:
        if not terms:
            return {}
        marks = ",".join("?" * len(terms))
        rows = self._db.execute(f"SELECT term, df FROM terms WHERE term IN ({marks})", list(terms)).fetchall()
        return {t: df for t, df in rows}

    def idf(self, terms: list[str]) -> dict[str, float]:
        n = self.chunk_count()
        df = self.doc_freq(list(terms))
        return {t: idf(n, df.get(t, 0)) for t in terms}

    # -- search ---------------------------------------------------------------------------------------------
    def _live(self, hits: list[IndexHit]) -> list[SearchHit]:
        """Drop points the catalogue does not consider live (left over from an interrupted write)."""
        if not hits:
            return []
        ids = [h.point_id for h in hits]
        marks = ",".join("?" * len(ids))
        live = dict(self._db.execute(f"SELECT point_id, chunk_id FROM chunks WHERE point_id IN ({marks})",
                                     ids).fetchall())
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
        with self._lock:
            self._db.executemany("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)",
                                 [(k, str(v)) for k, v in values.items()])

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
        with self._lock:
            old = {}
            for w in writes:
                rows = self._db.execute("SELECT point_id, terms_json, chunk_id FROM chunks WHERE doc_id=?",
                                        (w.doc.doc_id,)).fetchall()
                old[w.doc.doc_id] = rows
            self.index.upsert([p for w in writes for p in w.points])
            self.index.flush()
            now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
            self._db.execute("BEGIN IMMEDIATE")
            try:
                for w in writes:
                    self._write_document(w, old[w.doc.doc_id], now)
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            new_points = {p.point_id for w in writes for p in w.points}
            stale = [r[0] for rows in old.values() for r in rows if r[0] not in new_points]
            self.index.delete(stale)
            return sum(len(rows) for rows in old.values())

    def _write_document(self, w: DocumentWrite, old_rows: list, now: str) -> None:
        doc = w.doc
        self._db.executemany("DELETE FROM passage_vectors WHERE chunk_id=?", [(r[2],) for r in old_rows])
        self._db.execute("DELETE FROM chunks WHERE doc_id=?", (doc.doc_id,))
        self._db.execute("INSERT OR REPLACE INTO documents VALUES (?,?,?,?,?,?,?,?,?)", (
            doc.doc_id, doc.title, doc.source, doc.format, doc.content_hash,
            json.dumps(doc.metadata, sort_keys=True), doc.text, len(w.chunks), now))
        self._db.executemany("INSERT INTO chunks VALUES (?,?,?,?,?,?,?,?,?,?,?)", [
            (c.chunk_id, c.doc_id, c.ordinal, p.point_id, c.text, json.dumps(list(c.heading_path)), c.kind,
             len(t), json.dumps(t), "[]", "") for c, p, t in zip(w.chunks, w.points, w.terms, strict=True)])
        if w.passages is not None:
            self._db.executemany("INSERT OR REPLACE INTO passage_vectors VALUES (?,?,?,?,?,?)", [
                (c.chunk_id, w.model, key, int(vectors.shape[1]), json.dumps(list(texts)),
                 np.ascontiguousarray(vectors, dtype=np.float32).tobytes())
                for c, (key, texts, vectors) in zip(w.chunks, w.passages, strict=True)])
        self._adjust_df([json.loads(r[1]) for r in old_rows], -1)
        self._adjust_df(w.terms, +1)

    def passage_vectors(self, chunk_ids: list[str]) -> dict[str, StoredPassages]:
        """The precomputed validation vectors of these chunks (chunks without any are absent)."""
        if not chunk_ids:
            return {}
        marks = ",".join("?" * len(chunk_ids))
        rows = self._db.execute(f"SELECT chunk_id, model, passage_key, dim, passages_json, vectors FROM "
                                f"passage_vectors WHERE chunk_id IN ({marks})", list(chunk_ids)).fetchall()
        return {r[0]: StoredPassages(r[0], r[1], r[2], tuple(json.loads(r[4])),
                                     np.frombuffer(r[5], dtype=np.float32).reshape(-1, r[3])) for r in rows}

    def delete_document(self, doc_id: str) -> int:
        """Remove a document from the catalogue and both indexes; returns the chunks removed (0 if unknown)."""
        with self._lock:
            rows = self._db.execute("SELECT point_id, terms_json FROM chunks WHERE doc_id=?", (doc_id,)).fetchall()
            exists = self._db.execute("SELECT 1 FROM documents WHERE doc_id=?", (doc_id,)).fetchone()
            if not exists:
                return 0
            self._db.execute("BEGIN IMMEDIATE")
            try:
                self._db.execute("DELETE FROM passage_vectors WHERE chunk_id IN "
                                 "(SELECT chunk_id FROM chunks WHERE doc_id=?)", (doc_id,))
                self._db.execute("DELETE FROM chunks WHERE doc_id=?", (doc_id,))
                self._db.execute("DELETE FROM documents WHERE doc_id=?", (doc_id,))
                self._adjust_df([json.loads(r[1]) for r in rows], -1)
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self.index.delete([r[0] for r in rows])
            return len(rows)

    def _adjust_df(self, term_lists: list[list[str]], delta: int) -> None:
        counts: dict[str, int] = {}
        for terms in term_lists:
            for term in set(terms):
                counts[term] = counts.get(term, 0) + delta
        self._db.executemany("INSERT INTO terms(term, df) VALUES (?, ?) ON CONFLICT(term) DO UPDATE SET df = df + ?",
                             [(t, max(d, 0), d) for t, d in counts.items()])
        if delta < 0:
            self._db.execute("DELETE FROM terms WHERE df <= 0")

    def set_supersession(self, updates: dict[str, tuple[tuple[str, ...], str]]) -> None:
        """Record, per chunk id, the newer chunks that supersede it in part and why (empty clears it)."""
        with self._lock:
            points = dict(self._db.execute("SELECT chunk_id, point_id FROM chunks").fetchall())
            self._db.execute("BEGIN IMMEDIATE")
            try:
                self._db.executemany("UPDATE chunks SET superseded_by_json=?, superseded_reason=? WHERE chunk_id=?",
                                     [(json.dumps(list(by)), why, cid) for cid, (by, why) in updates.items()])
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            for chunk_id, (by, why) in updates.items():
                if chunk_id in points:
                    self.index.set_payload(points[chunk_id], {"superseded_by": list(by), "superseded_reason": why})

    def orphan_points(self) -> list[str]:
        """Index points the catalogue does not know (left by an interrupted write)."""
        live = {r[0] for r in self._db.execute("SELECT point_id FROM chunks")}
        return [pid for pid in self.index.point_ids() if pid not in live]

    def missing_points(self) -> list[str]:
        """Catalogue chunks whose point is not in the index (a damaged or replaced index)."""
        present = set(self.index.point_ids())
        return [cid for cid, pid in self._db.execute("SELECT chunk_id, point_id FROM chunks") if pid not in present]
