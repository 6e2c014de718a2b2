"""The catalogue's numbered migrations: a blank database, and a ``store.sqlite`` written by release 0.1 (tables
created with ``CREATE TABLE IF NOT EXISTS``, no migration record) opened by the current code without losing a row."""

from __future__ import annotations

import sqlite3

import numpy as np

from pipeline.config import PipelineConfig
from pipeline.ingestion.ingest import ingest_paths, needs_repair
from pipeline.retrieval.bm25 import query_weights, to_sparse
from pipeline.storage import catalogue
from pipeline.storage.catalogue import Catalogue
from pipeline.storage.sqlite import apply_migrations
from pipeline.storage.store import Store
from pipeline.text.tokenize import tokenize

# The catalogue DDL of release 0.1 (``_SCHEMA`` of pipeline/storage/store.py), verbatim: the fixture every
# upgrade test starts from. Never edit it.
RELEASE_0_1_SCHEMA = """
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

RETRACTED_TABLE = """
CREATE TABLE retracted_documents (doc_id TEXT PRIMARY KEY, title TEXT NOT NULL, terms_json TEXT NOT NULL);
"""  # m004

TABLES = ("meta", "documents", "chunks", "terms", "passage_vectors")
ALL = [m.__name__ for m in catalogue.MIGRATIONS]


def release_0_1_db(path, schema: str = RELEASE_0_1_SCHEMA, chunks: bool = True) -> None:
    """A catalogue as release 0.1 left it, with a row in every table."""
    db = sqlite3.connect(path, isolation_level=None)
    db.executescript(schema)
    db.executemany("INSERT INTO meta VALUES (?, ?)", [("corpus_version", "3"), ("avgdl", "12.5"), ("dim", "384")])
    db.execute("INSERT INTO documents VALUES (?,?,?,?,?,?,?,?,?)", (
        "err-timeout-502", "ERR_TIMEOUT_502", "corpus/a.md", "markdown", "abc123", '{"version": "3.1"}',
        "Deliveries fail with ERR_TIMEOUT_502.", 1, "2026-01-01T00:00:00Z"))
    if chunks:
        db.execute("INSERT INTO chunks VALUES (?,?,?,?,?,?,?,?,?,?,?)", (
            "err-timeout-502#0", "err-timeout-502", 0, "p-0", "Deliveries fail with ERR_TIMEOUT_502.", '["What"]',
            "prose", 3, '["delivery", "fail", "err_timeout_502"]', '["other#1"]', "newer version"))
        db.execute("INSERT INTO terms VALUES ('delivery', 1)")
        if "passage_vectors" in schema:
            db.execute("INSERT INTO passage_vectors VALUES (?,?,?,?,?,?)", (
                "err-timeout-502#0", "fake", "key", 2, '["a"]', np.ones((2, 2), dtype=np.float32).tobytes()))
    db.close()


def dump(path) -> dict[str, list[tuple]]:
    """Every row of every catalogue table, except the catalogue id m003 adds (checked on its own)."""
    db = sqlite3.connect(path)
    try:
        return {t: [r for r in db.execute(f"SELECT * FROM {t} ORDER BY 1").fetchall()
                    if not (t == "meta" and r[0] == "catalogue_id")]
                for t in TABLES if db.execute("SELECT 1 FROM sqlite_master WHERE name=?", (t,)).fetchone()}
    finally:
        db.close()


def catalogue_id(path) -> str:
    db = sqlite3.connect(path)
    try:
        row = db.execute("SELECT value FROM meta WHERE key='catalogue_id'").fetchone()
        return row[0] if row else ""
    finally:
        db.close()


def schema(path) -> dict[str, object]:
    """Every table's columns (name, type, not null, default, primary key) and every index's columns."""
    db = sqlite3.connect(path)
    try:
        names = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table' AND name != 'migrations'")]
        out: dict[str, object] = {}
        for name in names:
            out[name] = [r[1:] for r in db.execute(f"PRAGMA table_info({name})")]
            for index in db.execute(f"PRAGMA index_list({name})").fetchall():
                out[f"{name}.{index[1]}"] = (index[2], [r[2] for r in db.execute(f"PRAGMA index_info({index[1]})")])
            out[f"{name}.fk"] = [r[2:5] for r in db.execute(f"PRAGMA foreign_key_list({name})")]
        return out
    finally:
        db.close()


def test_a_blank_database_gets_every_migration_and_exactly_the_release_0_1_schema(tmp_path):
    cat = Catalogue.open(tmp_path / "store.sqlite")
    assert cat.applied_migrations() == ALL == ["m001_catalogue", "m002_passage_vectors", "m003_catalogue_id",
                                               "m004_retracted_documents"]
    cat.close()
    assert len(catalogue_id(tmp_path / "store.sqlite")) == 32
    reference = tmp_path / "reference.sqlite"
    sqlite3.connect(reference).executescript(RELEASE_0_1_SCHEMA + RETRACTED_TABLE).connection.close()
    assert schema(tmp_path / "store.sqlite") == schema(reference)
    db = sqlite3.connect(tmp_path / "store.sqlite")
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_a_release_0_1_catalogue_is_adopted_without_touching_a_row(tmp_path):
    path = tmp_path / "store.sqlite"
    release_0_1_db(path)
    before = dump(path)
    cat = Catalogue.open(path)
    assert cat.applied_migrations() == ALL
    assert cat.documents()[0].doc_id == "err-timeout-502" and cat.chunks()[0].superseded_by == ("other#1",)
    assert cat.passage_vectors(["err-timeout-502#0"])["err-timeout-502#0"].vectors.shape == (2, 2)
    assert apply_migrations(cat.db, catalogue.MIGRATIONS, catalogue._already_in_schema) == []  # nothing twice
    cat.close()
    assert dump(path) == before and catalogue_id(path)
    assert schema(path) == schema(_blank(tmp_path))


def test_the_previous_release_gets_only_the_catalogue_id_and_every_row_is_kept(tmp_path):
    """Upgrade from the release before m003 (m001 and m002 recorded): one new meta row, nothing else."""
    path = tmp_path / "store.sqlite"
    release_0_1_db(path)
    db = sqlite3.connect(path, isolation_level=None)
    apply_migrations(db, catalogue.MIGRATIONS[:2], catalogue._already_in_schema)
    db.close()
    before = dump(path)
    assert catalogue_id(path) == ""
    cat = Catalogue.open(path)
    assert cat.applied_migrations() == ALL
    first = cat.meta("catalogue_id")
    cat.close()
    assert dump(path) == before and catalogue_id(path) == first != ""
    Catalogue.open(path).close()
    assert catalogue_id(path) == first, "the id is made once, never again on a later open"
    assert catalogue_id(_blank(tmp_path)) != first, "every catalogue gets its own"


def test_a_catalogue_older_than_passage_vectors_gets_only_that_migration(tmp_path):
    path = tmp_path / "store.sqlite"
    release_0_1_db(path, schema=RELEASE_0_1_SCHEMA.split("CREATE TABLE IF NOT EXISTS passage_vectors")[0])
    before = dump(path)
    cat = Catalogue.open(path)
    assert cat.applied_migrations() == ALL
    assert cat.passage_vectors(["err-timeout-502#0"]) == {}
    cat.close()
    assert {t: rows for t, rows in dump(path).items() if t != "passage_vectors"} == before
    assert schema(path) == schema(_blank(tmp_path))


def test_a_store_over_a_release_0_1_catalogue_answers(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    release_0_1_db(home / "store.sqlite", chunks=False)
    with Store.open(home) as store:
        assert [d.doc_id for d in store.documents()] == ["err-timeout-502"]
        assert store.document("err-timeout-502").version == "3.1"
        assert store.load_document("err-timeout-502").text == "Deliveries fail with ERR_TIMEOUT_502."
        assert (store.corpus_version, store.avgdl) == (3, 12.5)
        assert store.catalogue.applied_migrations() == ALL


def test_an_ingested_store_without_migration_records_reopens_whole(tmp_path, models):
    """Release 0.1 on disk: a real ingest, then the bookkeeping removed (its schema is the same, test above)."""
    home, folder = tmp_path / "home", tmp_path / "corpus"
    folder.mkdir()
    (folder / "a.md").write_text("---\nid: err-timeout-502\n---\nDeliveries fail with ERR_TIMEOUT_502 when the "
                                 "endpoint does not answer within `delivery.timeout_ms`.\n", encoding="utf-8")
    with Store.open(home) as store:
        ingest_paths(store, [folder], PipelineConfig(), models, progress=False)
        chunks = store.chunk_count()
    before = dump(home / "store.sqlite")
    db = sqlite3.connect(home / "store.sqlite")
    db.execute("DROP TABLE migrations")
    db.commit()
    db.close()
    with Store.open(home) as store:
        assert store.damage == "" and not needs_repair(store)
        assert [d.doc_id for d in store.documents()] == ["err-timeout-502"] and store.chunk_count() == chunks
        indices, values = to_sparse(query_weights(tokenize("ERR_TIMEOUT_502")))
        assert [h.doc_id for h in store.keyword_search(indices, values, 5)] == ["err-timeout-502"]
        assert store.catalogue.applied_migrations() == ALL
    assert dump(home / "store.sqlite") == before


def test_the_release_before_m004_gets_only_the_retracted_table_and_every_row_is_kept(tmp_path):
    path = tmp_path / "store.sqlite"
    release_0_1_db(path)
    db = sqlite3.connect(path, isolation_level=None)
    apply_migrations(db, catalogue.MIGRATIONS[:3], catalogue._already_in_schema)
    db.close()
    before = dump(path)
    cat = Catalogue.open(path)
    assert cat.applied_migrations() == ALL and cat.retracted_documents() == {}
    with cat.transaction():
        cat.record_retracted({"advisory-1": ("RETRACTED advisory", ["hra-2024-03", "dlq", "dlq"])}, [])
    assert cat.retracted_documents() == {"advisory-1": ("RETRACTED advisory", frozenset({"hra-2024-03", "dlq"}))}
    with cat.transaction():
        cat.record_retracted({}, ["advisory-1"])   # live again: forgotten
    assert cat.retracted_documents() == {}
    cat.close()
    assert dump(path) == before
    assert schema(path) == schema(_blank(tmp_path))


def _blank(tmp_path):
    path = tmp_path / "blank.sqlite"
    Catalogue.open(path).close()
    return path
