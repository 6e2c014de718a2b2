"""The shard's holder serves its index to the other stores opened on the same data directory
(pipeline/storage/share.py): exact results, fail-over when the holder goes, writes only from a write session."""

from __future__ import annotations

import json
import socket
import threading
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.ingestion.ingest import ingest_documents, needs_repair
from pipeline.storage import share
from pipeline.storage.qdrant_index import IndexHit, IndexPoint
from pipeline.storage.store import Store, StoreError
from pipeline.testing import FakeEmbedder, fake_models
from tests.pipeline.storage.store_docs import CFG, doc, two_document_home


@pytest.fixture
def home(tmp_path):
    return two_document_home(tmp_path)


def _query(text: str) -> list[float]:
    return FakeEmbedder().encode([text])[0].tolist()


def test_a_served_reader_carries_on_when_its_holder_closes(home):
    holder = Store.open(home)
    reader = Store.open(home, lock_wait_s=2)
    assert reader.served_by
    before = [(h.chunk_id, h.score) for h in reader.dense_search(_query("alpha retries"), 5)]
    holder.close()
    after = [(h.chunk_id, h.score) for h in reader.dense_search(_query("alpha retries"), 5)]
    assert after == before and reader.served_by == "", "the reader took the shard over and found the same"
    with Store.open(home, lock_wait_s=2) as third:
        assert third.served_by and third.dense_search(_query("beta"), 5), "and now serves the next one"
    reader.close()


def test_a_closing_holder_waits_for_a_write_another_store_runs_through_it(home):
    holder = Store.open(home)
    writer = Store.open(home, lock_wait_s=2)
    inside, finished = threading.Event(), []

    def write() -> None:
        with writer.writing("ingest"):
            inside.set()
            time.sleep(0.5)
            ingest_documents(writer, [doc("gamma", "Gamma is new.")], CFG, fake_models(), progress=False)
            finished.append(time.monotonic())

    thread = threading.Thread(target=write)
    thread.start()
    assert inside.wait(30)
    holder.close()
    closed = time.monotonic()
    thread.join(30)
    assert finished and finished[0] <= closed, "the holder stopped serving in the middle of a write"
    writer.close()
    with Store.open(home) as store:
        assert {d.doc_id for d in store.documents()} == {"alpha", "beta", "gamma"} and not needs_repair(store)
        assert store.index.count() == store.chunk_count()


def test_the_holder_runs_a_write_only_inside_a_write_session_and_only_index_calls(home):
    with Store.open(home) as holder, Store.open(home, lock_wait_s=2) as other:
        with pytest.raises(StoreError, match="outside a write session"):
            other.index.delete(["not-a-point"])
        with pytest.raises(AttributeError):
            other.index.catalogue  # noqa: B018 - only index calls travel
        raw = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        raw.connect(share.address(home / "shard"))
        with raw, raw.makefile("rwb") as wire:
            for line in (b'{"op": "close"}\n', b"not json\n", b'{"op": "count", "args": [1, 2]}\n'):
                wire.write(line)
                wire.flush()
                assert "error" in json.loads(wire.readline())
        assert holder.index.count() == 2, "a bad request does not hurt the holder"


finite = st.floats(allow_nan=False, allow_infinity=False, width=64)
payloads = st.dictionaries(st.text(max_size=8), st.one_of(st.text(max_size=20), st.integers(-2**53, 2**53), finite,
                                                          st.lists(st.text(max_size=5), max_size=3)), max_size=4)


@settings(max_examples=200, deadline=None)
@given(st.text(min_size=1, max_size=40), finite, payloads,
       st.one_of(st.none(), st.dictionaries(st.integers(0, 2**32 - 1), finite, max_size=6)))
def test_a_hit_crosses_the_wire_unchanged(point_id, score, payload, sparse):
    hit = IndexHit(point_id, score, payload, sparse)
    row = json.loads(json.dumps(share._encode_result("query_dense", [hit])))
    assert share._hit_in(row[0]) == hit


@settings(max_examples=100, deadline=None)
@given(st.text(min_size=1, max_size=40), st.lists(finite, max_size=8), st.lists(st.integers(0, 2**32 - 1), max_size=5),
       payloads)
def test_a_point_crosses_the_wire_unchanged(point_id, dense, indices, payload):
    point = IndexPoint(point_id, dense, indices, [float(i) / 7 for i in indices], payload)
    args = json.loads(json.dumps([[share._point_out(point)]]))
    assert share._decode_args("upsert", args) == [[point]]
