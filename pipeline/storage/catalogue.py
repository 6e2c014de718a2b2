"""The catalogue: ``store.sqlite``, the source of truth for what is live in the index.

Tables: ``meta`` (corpus version, avgdl, build signature, dimension, the pending-write marker), ``documents``
(each document with its full text, so the index can be rebuilt without the source files), ``chunks`` (each
live chunk with its index point id, tokens and supersession), ``terms`` (each term's document frequency, for
the IDF the store reports) and ``passage_vectors`` (per chunk, the vectors the citation validator compares
claims with, :mod:`pipeline.validation.citations`; rows live and die with their chunk).

The schema goes through numbered migrations (:mod:`pipeline.storage.sqlite`): ``m001_catalogue`` is the
first release's tables, ``m002_passage_vectors`` the table added with stored passage vectors,
``m003_catalogue_id`` a random id in ``meta`` that names this catalogue (the answer cache keys on it, so a
catalogue lost and rebuilt, whose corpus version counts from zero again, never meets an old answer). A catalogue
written by release 0.1, which created its tables with ``CREATE TABLE IF NOT EXISTS`` and kept no migration
record, is adopted on open: the migrations whose tables it already holds are recorded as applied, the
rest run, and no row is touched.

A file that cannot be used (not a database, damaged, locked for longer than the busy timeout, a directory
in its place) is refused on open with a :class:`~pipeline.storage.sqlite.StoreError` naming the file and
what to do; :meth:`Catalogue.open` reads the meta table and counts the chunks first, so a truncated file is
caught there and not in the middle of a search.

This module only reads and writes rows; the order of index and catalogue writes that keeps a crash
harmless is :class:`pipeline.storage.store.Store`'s. The BM25 arithmetic is :mod:`pipeline.retrieval.bm25`'s;
the catalogue only persists its document frequencies.
"""

from __future__ import annotations

import json
import sqlite3
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from pipeline.ingestion.documents import Chunk, Document
from pipeline.retrieval.bm25 import df_deltas
from pipeline.storage.sqlite import (
    DatabaseUnusable,
    applied_migrations,
    apply_migrations,
    connect,
    error_kind,
    table_exists,
    transaction,
)

# -- migrations (append only) ----------------------------------------------------------------------------

def m001_catalogue(db: sqlite3.Connection) -> None:
    """The first release's tables: meta, documents, chunks (with supersession), terms."""
    db.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
    db.execute("""
        CREATE TABLE documents (
            doc_id TEXT PRIMARY KEY, title TEXT NOT NULL, source TEXT NOT NULL, format TEXT NOT NULL,
            content_hash TEXT NOT NULL, metadata_json TEXT NOT NULL, text TEXT NOT NULL,
            chunk_count INTEGER NOT NULL, ingested_at TEXT NOT NULL)""")
    db.execute("""
        CREATE TABLE chunks (
            chunk_id TEXT PRIMARY KEY, doc_id TEXT NOT NULL REFERENCES documents(doc_id), ordinal INTEGER NOT NULL,
            point_id TEXT NOT NULL UNIQUE, text TEXT NOT NULL, heading_path_json TEXT NOT NULL, kind TEXT NOT NULL,
            token_count INTEGER NOT NULL, terms_json TEXT NOT NULL,
            superseded_by_json TEXT NOT NULL DEFAULT '[]', superseded_reason TEXT NOT NULL DEFAULT '')""")
    db.execute("CREATE INDEX chunks_doc ON chunks(doc_id)")
    db.execute("CREATE TABLE terms (term TEXT PRIMARY KEY, df INTEGER NOT NULL)")


def m002_passage_vectors(db: sqlite3.Connection) -> None:
    """Each chunk's precomputed validation vectors (whole chunk first, then its sentence windows)."""
    db.execute("""
        CREATE TABLE passage_vectors (
            chunk_id TEXT PRIMARY KEY, model TEXT NOT NULL, passage_key TEXT NOT NULL, dim INTEGER NOT NULL,
            passages_json TEXT NOT NULL, vectors BLOB NOT NULL)""")


def m003_catalogue_id(db: sqlite3.Connection) -> None:
    """A random id naming this catalogue; no existing row is changed."""
    db.execute("INSERT OR IGNORE INTO meta(key, value) VALUES ('catalogue_id', ?)", (uuid.uuid4().hex,))


def m004_retracted_documents(db: sqlite3.Connection) -> None:
    """Documents marked retracted (not indexed): their title and distinct terms, so that an abstention can say
    that what the question names is in a retracted document; no existing row is changed."""
    db.execute("CREATE TABLE retracted_documents (doc_id TEXT PRIMARY KEY, title TEXT NOT NULL, "
               "terms_json TEXT NOT NULL)")


MIGRATIONS = [m001_catalogue, m002_passage_vectors, m003_catalogue_id, m004_retracted_documents]


def _already_in_schema(db: sqlite3.Connection) -> list[str]:
    """The migrations a catalogue made before migrations were recorded (release 0.1) already contains."""
    if not table_exists(db, "documents"):
        return []  # a blank database: every migration runs
    return (["m001_catalogue"] + (["m002_passage_vectors"] if table_exists(db, "passage_vectors") else [])
            + (["m004_retracted_documents"] if table_exists(db, "retracted_documents") else []))


def unusable_message(path: Path, kind: str, reason: str) -> str:
    """What a user is told about a ``store.sqlite`` that cannot be opened, and what to do."""
    if kind == "busy":
        return f"the catalogue {path} is locked by another process; retry when it has finished"
    what = "is a directory" if path.is_dir() else f"cannot be read ({reason})"
    return (f"the catalogue {path} {what}: it lists the store's documents and keeps their text, so the store "
            f"cannot be used; restore it from a backup, or move the data directory {path.parent} aside and "
            "ingest the corpus again into a new one (workbench ingest PATH --store DIR)")


# -- rows ------------------------------------------------------------------------------------------------

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
class OldChunk:
    """A chunk about to be replaced or removed: what the write needs to undo it."""
    point_id: str
    terms: list[str]
    chunk_id: str


_DOCUMENT_COLUMNS = "doc_id, title, source, format, content_hash, metadata_json, chunk_count, ingested_at"
_CHUNK_COLUMNS = ("chunk_id, doc_id, ordinal, point_id, text, heading_path_json, kind, token_count, "
                  "superseded_by_json, superseded_reason")


def _document(r: tuple) -> StoredDocument:
    return StoredDocument(r[0], r[1], r[2], r[3], r[4], json.loads(r[5]), r[6], r[7])


def _marks(values: list) -> str:
    return ",".join("?" * len(values))


class Catalogue:
    """One ``store.sqlite`` connection. Not locked: :class:`~pipeline.storage.store.Store` serialises writes."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self.db = db

    @classmethod
    def open(cls, path: Path) -> Catalogue:
        """Open and migrate ``path``; :class:`~pipeline.storage.sqlite.DatabaseUnusable` (one line naming the
        file and what to do) when it is not a usable catalogue."""
        db = None
        try:
            # synchronous=FULL (SQLite's default, as release 0.1 had it): a commit that switched documents
            # survives a power cut, not only a killed process.
            db = connect(path, synchronous="FULL")
            apply_migrations(db, MIGRATIONS, already_in_schema=_already_in_schema)
            db.execute("SELECT key, value FROM meta").fetchall()
            db.execute("SELECT COUNT(*) FROM chunks").fetchone()
        except sqlite3.Error as exc:
            if db is not None:
                db.close()
            kind, reason = error_kind(exc), str(exc).strip() or type(exc).__name__
            raise DatabaseUnusable(unusable_message(path, kind, reason), path, kind, reason) from None
        except BaseException:
            if db is not None:
                db.close()
            raise
        return cls(db)

    def close(self) -> None:
        self.db.close()

    def applied_migrations(self) -> list[str]:
        return applied_migrations(self.db)

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        with transaction(self.db) as db:
            yield db

    # -- reads ----------------------------------------------------------------------------------------------
    def meta(self, key: str, default: str = "") -> str:
        row = self.db.execute("SELECT value FROM meta WHERE key=?", (key,)).fetchone()
        return row[0] if row else default

    def meta_keys(self) -> set[str]:
        return {r[0] for r in self.db.execute("SELECT key FROM meta")}

    def document_count(self) -> int:
        return self.db.execute("SELECT COUNT(*) FROM documents").fetchone()[0]

    def chunk_count(self) -> int:
        return self.db.execute("SELECT COUNT(*) FROM chunks").fetchone()[0]

    def documents(self) -> list[StoredDocument]:
        rows = self.db.execute(f"SELECT {_DOCUMENT_COLUMNS} FROM documents ORDER BY doc_id").fetchall()
        return [_document(r) for r in rows]

    def documents_by_ids(self, doc_ids: list[str]) -> list[StoredDocument]:
        if not doc_ids:
            return []
        rows = self.db.execute(f"SELECT {_DOCUMENT_COLUMNS} FROM documents WHERE doc_id IN ({_marks(doc_ids)})",
                               doc_ids).fetchall()
        return [_document(r) for r in rows]

    def document_text(self, doc_id: str) -> str | None:
        row = self.db.execute("SELECT text FROM documents WHERE doc_id=?", (doc_id,)).fetchone()
        return row[0] if row else None

    def load_document(self, doc_id: str) -> Document | None:
        """The document as it was ingested (for rebuilding the index without the source files)."""
        row = self.db.execute("SELECT doc_id, title, text, source, format, metadata_json FROM documents "
                              "WHERE doc_id=?", (doc_id,)).fetchone()
        if not row:
            return None
        return Document(doc_id=row[0], title=row[1], text=row[2], source=row[3], format=row[4],
                        metadata=json.loads(row[5]))

    def has_document(self, doc_id: str) -> bool:
        return self.db.execute("SELECT 1 FROM documents WHERE doc_id=?", (doc_id,)).fetchone() is not None

    def chunks(self, doc_id: str | None = None) -> list[StoredChunk]:
        sql = f"SELECT {_CHUNK_COLUMNS} FROM chunks"
        rows = (self.db.execute(sql + " WHERE doc_id=? ORDER BY ordinal", (doc_id,)) if doc_id
                else self.db.execute(sql + " ORDER BY doc_id, ordinal")).fetchall()
        return [StoredChunk(r[0], r[1], r[2], r[3], r[4], tuple(json.loads(r[5])), r[6], r[7],
                            tuple(json.loads(r[8])), r[9]) for r in rows]

    def old_chunks(self, doc_id: str) -> list[OldChunk]:
        rows = self.db.execute("SELECT point_id, terms_json, chunk_id FROM chunks WHERE doc_id=?",
                               (doc_id,)).fetchall()
        return [OldChunk(r[0], json.loads(r[1]), r[2]) for r in rows]

    def chunk_terms(self) -> dict[str, list[str]]:
        """Every live chunk's tokens, by point id."""
        return {r[0]: json.loads(r[1]) for r in self.db.execute("SELECT point_id, terms_json FROM chunks")}

    def first_chunk(self) -> tuple[str, str, list[str]] | None:
        """(point id, doc id, tokens) of the chunk with the lowest point id, or None when empty."""
        row = self.db.execute("SELECT point_id, doc_id, terms_json FROM chunks ORDER BY point_id LIMIT 1").fetchone()
        return (row[0], row[1], json.loads(row[2])) if row else None

    def live_points(self, point_ids: list[str] | None = None) -> dict[str, str]:
        """chunk id by point id, for the given points that are live (all live points when None)."""
        if point_ids is None:
            return dict(self.db.execute("SELECT point_id, chunk_id FROM chunks").fetchall())
        if not point_ids:
            return {}
        return dict(self.db.execute(f"SELECT point_id, chunk_id FROM chunks WHERE point_id IN ({_marks(point_ids)})",
                                    point_ids).fetchall())

    def doc_freq(self, terms: list[str]) -> dict[str, int]:
        if not terms:
            return {}
        rows = self.db.execute(f"SELECT term, df FROM terms WHERE term IN ({_marks(terms)})", list(terms)).fetchall()
        return {t: df for t, df in rows}

    def passage_vectors(self, chunk_ids: list[str]) -> dict[str, StoredPassages]:
        if not chunk_ids:
            return {}
        rows = self.db.execute(f"SELECT chunk_id, model, passage_key, dim, passages_json, vectors FROM "
                               f"passage_vectors WHERE chunk_id IN ({_marks(chunk_ids)})", list(chunk_ids)).fetchall()
        return {r[0]: StoredPassages(r[0], r[1], r[2], tuple(json.loads(r[4])),
                                     np.frombuffer(r[5], dtype=np.float32).reshape(-1, r[3])) for r in rows}

    def retracted_documents(self) -> dict[str, tuple[str, frozenset[str]]]:
        """doc id → (title, distinct terms) of every document an ingest saw marked retracted."""
        rows = self.db.execute("SELECT doc_id, title, terms_json FROM retracted_documents ORDER BY doc_id")
        return {r[0]: (r[1], frozenset(json.loads(r[2]))) for r in rows}

    # -- writes (inside the caller's transaction, except set_meta) ------------------------------------------
    def record_retracted(self, retracted: dict[str, tuple[str, list[str]]], live: list[str]) -> None:
        """Remember ``retracted`` (doc id → title, terms); forget documents that are live again."""
        self.db.executemany("INSERT OR REPLACE INTO retracted_documents(doc_id, title, terms_json) VALUES (?, ?, ?)",
                            [(d, t, json.dumps(sorted(set(terms)))) for d, (t, terms) in retracted.items()])
        self.db.executemany("DELETE FROM retracted_documents WHERE doc_id=?", [(d,) for d in live])

    def set_meta(self, **values: Any) -> None:
        self.db.executemany("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)",
                            [(k, str(v)) for k, v in values.items()])

    def write_document(self, doc: Document, chunks: list[Chunk], point_ids: list[str], terms: list[list[str]],
                       passages: list[tuple[str, tuple[str, ...], np.ndarray]] | None, model: str,
                       old: list[OldChunk], now: str) -> None:
        """Make these rows ``doc``'s: its old chunks, passage vectors and their term counts go."""
        self.db.executemany("DELETE FROM passage_vectors WHERE chunk_id=?", [(o.chunk_id,) for o in old])
        self.db.execute("DELETE FROM chunks WHERE doc_id=?", (doc.doc_id,))
        self.db.execute("INSERT OR REPLACE INTO documents VALUES (?,?,?,?,?,?,?,?,?)", (
            doc.doc_id, doc.title, doc.source, doc.format, doc.content_hash,
            json.dumps(doc.metadata, sort_keys=True), doc.text, len(chunks), now))
        self.db.executemany("INSERT INTO chunks VALUES (?,?,?,?,?,?,?,?,?,?,?)", [
            (c.chunk_id, c.doc_id, c.ordinal, pid, c.text, json.dumps(list(c.heading_path)), c.kind,
             len(t), json.dumps(t), "[]", "") for c, pid, t in zip(chunks, point_ids, terms, strict=True)])
        if passages is not None:
            self.db.executemany("INSERT OR REPLACE INTO passage_vectors VALUES (?,?,?,?,?,?)", [
                (c.chunk_id, model, key, int(vectors.shape[1]), json.dumps(list(texts)),
                 np.ascontiguousarray(vectors, dtype=np.float32).tobytes())
                for c, (key, texts, vectors) in zip(chunks, passages, strict=True)])
        self.adjust_df([o.terms for o in old], -1)
        self.adjust_df(terms, +1)

    def remove_document(self, doc_id: str, old: list[OldChunk]) -> None:
        self.db.execute("DELETE FROM passage_vectors WHERE chunk_id IN "
                        "(SELECT chunk_id FROM chunks WHERE doc_id=?)", (doc_id,))
        self.db.execute("DELETE FROM chunks WHERE doc_id=?", (doc_id,))
        self.db.execute("DELETE FROM documents WHERE doc_id=?", (doc_id,))
        self.adjust_df([o.terms for o in old], -1)

    def adjust_df(self, term_lists: list[list[str]], delta: int) -> None:
        """Persist :func:`pipeline.retrieval.bm25.df_deltas`; terms no chunk holds any more are dropped."""
        counts = df_deltas(term_lists, delta)
        self.db.executemany("INSERT INTO terms(term, df) VALUES (?, ?) ON CONFLICT(term) DO UPDATE SET df = df + ?",
                            [(t, max(d, 0), d) for t, d in counts.items()])
        if delta < 0:
            self.db.execute("DELETE FROM terms WHERE df <= 0")

    def set_supersession(self, updates: dict[str, tuple[tuple[str, ...], str]]) -> None:
        self.db.executemany("UPDATE chunks SET superseded_by_json=?, superseded_reason=? WHERE chunk_id=?",
                            [(json.dumps(list(by)), why, cid) for cid, (by, why) in updates.items()])
