"""The data directory's lock protocol (pipeline/storage/lock.py): a busy store is refused, never damaged."""

from __future__ import annotations

import os
import threading

import pytest

from pipeline.ingestion.ingest import ingest_documents, needs_repair
from pipeline.storage import share
from pipeline.storage.lock import FileLock, LockBusy
from pipeline.storage.store import Store, StoreBusy
from pipeline.testing import fake_models
from tests.pipeline.storage.store_docs import CFG, doc, two_document_home


@pytest.fixture
def home(tmp_path):
    return two_document_home(tmp_path)


def test_a_second_open_while_the_store_is_held_is_served_and_its_write_waits_for_the_holders(home):
    with Store.open(home) as holder:
        with Store.open(home, lock_wait_s=0.2) as second:
            assert second.served_by.startswith(f"pid {os.getpid()}, reading")
            with holder.writing("ingest"), pytest.raises(StoreBusy) as refused:
                with second.writing("delete", wait_s=0.2):
                    pass
            message = str(refused.value)
            assert str(home) in message and "in use by another process" in message
            assert f"pid {os.getpid()}, writing (ingest)" in message
            ingest_documents(second, [doc("gamma", "Gamma is new.")], CFG, fake_models(), progress=False)
        assert not list(home.glob("shard.damaged-*")), "a busy shard was set aside as damaged"
        assert {d.doc_id for d in holder.documents()} == {"alpha", "beta", "gamma"}
    with Store.open(home) as store:
        assert store.damage == "" and not needs_repair(store)
        assert store.index.count() == store.chunk_count() == 3


def test_a_holder_that_does_not_serve_refuses_others_in_one_line_naming_it(home, monkeypatch):
    def cannot_serve(*args, **kwargs):
        raise OSError(98, "Address already in use")

    monkeypatch.setattr(share, "Server", cannot_serve)
    with Store.open(home) as holder:
        assert "cannot serve" in holder.serving_problem
        with pytest.raises(StoreBusy) as refused:
            Store.open(home, lock_wait_s=0.2)
        message = str(refused.value)
        assert str(home) in message and "in use by another process" in message and "QDRANT_URL" in message
        assert f"pid {os.getpid()}, reading" in message
        assert holder.dense_search([1.0] + [0.0] * (holder.dim - 1), 2), "the holder is unharmed"


def test_an_unfinished_write_is_busy_not_broken_while_its_writer_holds_the_write_lock(home):
    with Store.open(home) as store:
        store.set_meta(pending="1")  # as a writer in the middle of a run leaves it
        writer = FileLock(home / "write.lock")
        writer.acquire(0, "writer:ingest")
        try:
            assert not needs_repair(store)
            with pytest.raises(StoreBusy, match="writing \\(ingest\\)"):
                with store.writing("repair", wait_s=0.1):
                    pass
        finally:
            writer.release()
        assert needs_repair(store)  # the writer is gone and left it unfinished: a crash, repair it


def test_a_second_writer_thread_waits_then_is_refused_and_the_first_is_unharmed(home):
    with Store.open(home) as store:
        inside, leave = threading.Event(), threading.Event()

        def first() -> None:
            with store.writing("ingest"):
                inside.set()
                leave.wait(30)

        thread = threading.Thread(target=first)
        thread.start()
        try:
            assert inside.wait(30)
            assert store.another_writer_active()
            with pytest.raises(StoreBusy):
                with store.writing("delete", wait_s=0.1):
                    pass
        finally:
            leave.set()
            thread.join(30)
        assert not store.another_writer_active()
        with store.writing("delete", wait_s=0.1):
            assert store.delete_document("beta") > 0


def test_a_lock_is_released_when_its_holder_closes(tmp_path):
    first, second = FileLock(tmp_path / "x.lock"), FileLock(tmp_path / "x.lock")
    first.acquire(0, "reader")
    with pytest.raises(LockBusy) as busy:
        second.acquire(0, "reader")
    assert f"pid {os.getpid()}, reading" in busy.value.holder
    first.release()
    second.acquire(0, "reader")
    second.release()
