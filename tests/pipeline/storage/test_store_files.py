"""A damaged or lost ``store.sqlite`` (issue 14): one line naming the file and what to do, never a bare
``DatabaseError``; and a catalogue lost while the index still holds points never passes for an empty store.

The catalogue keeps the documents' text and says what every index point is; the index payloads carry chunk
texts but not the documents (their full text, source, format, metadata), so a lost catalogue cannot be
rebuilt from the index: the store refuses to open and says how to start again. The CLI side of the same
faults is in ``tests/reliability/test_store_faults.py``.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
from pathlib import Path

import pytest

from pipeline.config import PipelineConfig
from pipeline.ingestion.ingest import ingest_paths, needs_repair, repair
from pipeline.storage.store import Store, StoreError
from pipeline.testing import fake_models
from tests.support.stores import ingest_texts

DOCS = {f"note-{i}.md": f"---\nid: note-{i}\ntitle: Note {i}\n---\n# Note {i}\n\n" + " ".join(
    f"Relay node {i} keeps queue {k} warm for {i * 7 + k} seconds." for k in range(40)) + "\n" for i in range(12)}


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("store-files")
    ingest_texts(root, DOCS)
    return root


@pytest.fixture
def home(built, tmp_path) -> Path:
    shutil.copytree(built / "store", tmp_path / "store")
    return tmp_path / "store"


def _garbage(path: Path) -> None:
    path.write_bytes(os.urandom(8192))


def _truncated(path: Path) -> None:
    with path.open("r+b") as f:
        f.truncate(path.stat().st_size // 2)


def _directory(path: Path) -> None:
    path.unlink()
    (path / "x").mkdir(parents=True)


@pytest.mark.parametrize("damage", [_garbage, _truncated, _directory], ids=["garbage", "truncated", "directory"])
def test_a_damaged_catalogue_is_one_line_naming_the_file_and_the_remedy(home, damage):
    for suffix in ("-wal", "-shm"):
        assert not (home / f"store.sqlite{suffix}").exists()
    damage(home / "store.sqlite")
    with pytest.raises(StoreError) as info:
        Store.open(home)
    message = str(info.value)
    assert "\n" not in message and str(home / "store.sqlite") in message
    assert "backup" in message and "workbench ingest" in message
    with pytest.raises(StoreError) as again:   # the refused open released the shard: the same line, not "busy"
        Store.open(home, lock_wait_s=0)
    assert str(again.value) == message


@pytest.mark.parametrize("lose", [lambda p: p.write_bytes(b""), lambda p: p.unlink()], ids=["0-byte", "deleted"])
def test_a_lost_catalogue_over_a_full_index_is_refused_not_called_empty(home, lose):
    with Store.open(home) as store:
        points = store.index.count()
    assert points > 0
    lose(home / "store.sqlite")
    for _ in range(2):   # the refused open created a blank catalogue: the second open must refuse all the same
        with pytest.raises(StoreError) as info:
            Store.open(home)
        message = str(info.value)
        assert "\n" not in message and str(home / "store.sqlite") in message and f"{points} points" in message
        assert "workbench ingest" in message and "empty" in message and "is empty;" not in message


def test_the_remedy_the_message_names_gives_a_whole_store_under_a_new_catalogue_id(built, home):
    with Store.open(home) as store:
        old_id, old_docs = store.catalogue_id, {d.doc_id for d in store.documents()}
    (home / "store.sqlite").write_bytes(b"")
    (home / "shard").rename(home / "shard.orphaned")
    with Store.open(home) as store:
        ingest_paths(store, [built / "corpus"], PipelineConfig(), fake_models(), progress=False)
        assert {d.doc_id for d in store.documents()} == old_docs
        assert store.index.count() == store.chunk_count() and not needs_repair(store)
        assert store.catalogue_id and store.catalogue_id != old_id


def test_a_first_ingest_killed_before_its_first_commit_is_repaired_not_refused(tmp_path, monkeypatch):
    """Orphan points under a catalogue with no document are also what a killed first ingest leaves; that
    catalogue records the write (``pending``), so the store opens and a repair removes the orphans."""
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "a.md").write_text(DOCS["note-0.md"], encoding="utf-8")
    home = tmp_path / "store"
    with Store.open(home) as store:
        def killed(*args, **kwargs):
            raise KeyboardInterrupt("killed before the catalogue switched")

        monkeypatch.setattr(store.catalogue, "write_document", killed)
        with pytest.raises(KeyboardInterrupt):
            ingest_paths(store, [corpus], PipelineConfig(), fake_models(), progress=False)
        assert store.index.count() > 0 and store.chunk_count() == 0
    monkeypatch.undo()
    with Store.open(home) as store:
        assert needs_repair(store)
        repair(store, PipelineConfig(), fake_models())
        assert store.index.count() == 0


def test_a_catalogue_held_by_another_writer_is_waited_for_and_named(home, monkeypatch):
    from pipeline.storage import sqlite

    monkeypatch.setattr(sqlite, "BUSY_TIMEOUT_MS", 300)
    holder = sqlite3.connect(home / "store.sqlite", isolation_level=None)
    holder.execute("PRAGMA locking_mode=EXCLUSIVE")
    holder.execute("BEGIN EXCLUSIVE")
    try:
        with pytest.raises(StoreError) as info:
            Store.open(home)
        assert "locked by another process" in str(info.value) and str(home / "store.sqlite") in str(info.value)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    with Store.open(home) as store:
        assert store.chunk_count() > 0
