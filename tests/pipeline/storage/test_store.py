"""The store: incremental ingest, replacement, delete from both legs, corpus version, repair, backends."""

import json
import os
import subprocess
import sys
import textwrap

import pytest

from pipeline.config import PipelineConfig
from pipeline.ingestion.ingest import delete_document, ingest_paths, needs_repair, repair
from pipeline.retrieval.bm25 import query_weights, to_sparse
from pipeline.storage.store import Store, StoreError
from pipeline.text.tokenize import tokenize

DOC_A = """---
id: err-timeout-502
title: "ERR_TIMEOUT_502: endpoint did not respond in time"
product: harbor-relay
version: "3.1"
---
## What you see
Deliveries fail with ERR_TIMEOUT_502 when the endpoint does not answer within `delivery.timeout_ms`.

## How to fix it
Acknowledge quickly and process the event asynchronously.
"""

DOC_B = """---
id: guide-dlq
title: Replaying from the dead-letter queue
product: harbor-relay
---
Use `harborctl dlq replay --endpoint ep_01` to resend dead-lettered events.
"""


def corpus(tmp_path, **docs):
    folder = tmp_path / "corpus"
    folder.mkdir(exist_ok=True)
    for name, text in docs.items():
        (folder / f"{name}.md").write_text(text, encoding="utf-8")
    return folder


def keyword_ids(store, query, k=10):
    indices, values = to_sparse(query_weights(tokenize(query)))
    return [h.chunk_id for h in store.keyword_search(indices, values, k)]


def dense_ids(store, models, query, k=10):
    vector = models.embedder(PipelineConfig().embedding).encode([query])[0].tolist()
    return [h.chunk_id for h in store.dense_search(vector, k)]


def test_reingest_of_unchanged_documents_embeds_nothing(tmp_path, store, models, fake_embedder):
    folder = corpus(tmp_path, a=DOC_A, b=DOC_B)
    first = ingest_paths(store, [folder], PipelineConfig(), models, progress=False)
    assert (first.documents, first.embedded, first.corpus_version) == (2, first.chunks, 1)
    calls = fake_embedder.calls
    second = ingest_paths(store, [folder], PipelineConfig(), models, progress=False)
    assert second.embedded == 0 and second.unchanged == 2 and second.corpus_version == 1
    assert fake_embedder.calls == calls


def test_a_changed_document_replaces_all_its_old_chunks(tmp_path, store, models):
    folder = corpus(tmp_path, a=DOC_A, b=DOC_B)
    ingest_paths(store, [folder], PipelineConfig(), models, progress=False)
    (folder / "a.md").write_text(DOC_A.replace("## How to fix it\nAcknowledge quickly and process the event "
                                               "asynchronously.\n", "Raise the timeout to 30000 ms.\n"))
    report = ingest_paths(store, [folder], PipelineConfig(), models, progress=False)
    assert report.updated == ("err-timeout-502",) and report.embedded == 1 and report.corpus_version == 2
    texts = " ".join(c.text for c in store.chunks("err-timeout-502"))
    assert "30000 ms" in texts and "asynchronously" not in texts
    assert store.index.count() == store.chunk_count()  # old points are gone from the index
    assert keyword_ids(store, "asynchronously") == []


def test_delete_removes_a_document_from_both_legs(tmp_path, store, models):
    ingest_paths(store, [corpus(tmp_path, a=DOC_A, b=DOC_B)], PipelineConfig(), models, progress=False)
    assert any(c.startswith("err-timeout-502#") for c in keyword_ids(store, "ERR_TIMEOUT_502"))
    version = store.corpus_version
    assert delete_document(store, "err-timeout-502") == 2
    assert store.corpus_version == version + 1
    assert not any(c.startswith("err-timeout-502#") for c in keyword_ids(store, "ERR_TIMEOUT_502 endpoint"))
    assert not any(c.startswith("err-timeout-502#") for c in dense_ids(store, models, "endpoint did not respond"))
    assert store.document("err-timeout-502") is None
    assert delete_document(store, "no-such-doc") == 0


def test_a_document_marked_retracted_is_removed_on_reingest(tmp_path, store, models):
    folder = corpus(tmp_path, a=DOC_A, b=DOC_B)
    ingest_paths(store, [folder], PipelineConfig(), models, progress=False)
    (folder / "b.md").write_text(DOC_B.replace("product: harbor-relay", "product: harbor-relay\nstatus: retracted"))
    report = ingest_paths(store, [folder], PipelineConfig(), models, progress=False)
    assert report.retracted == ("guide-dlq",) and report.deleted == 1
    assert keyword_ids(store, "harborctl dlq replay") == []
    title, terms = store.retracted_documents()["guide-dlq"]   # kept aside: a question can still be about it
    assert "harborctl" in terms and title
    version = store.corpus_version
    ingest_paths(store, [folder], PipelineConfig(), models, progress=False)
    assert store.corpus_version == version and list(store.retracted_documents()) == ["guide-dlq"]  # no change
    (folder / "b.md").write_text(DOC_B)   # live again: indexed, no longer listed as retracted
    ingest_paths(store, [folder], PipelineConfig(), models, progress=False)
    assert store.retracted_documents() == {} and keyword_ids(store, "harborctl dlq replay")


def test_keyword_scores_use_the_corpus_average_length_after_a_change(tmp_path, store, models):
    folder = corpus(tmp_path, a=DOC_A)
    ingest_paths(store, [folder], PipelineConfig(), models, progress=False)
    before = store.avgdl
    (folder / "b.md").write_text(DOC_B + "\n" + " ".join(f"filler{i}" for i in range(300)))
    report = ingest_paths(store, [folder], PipelineConfig(), models, progress=False)
    assert store.avgdl > before * 1.5
    assert any("sparse vectors of unchanged chunks rewritten" in n for n in report.notes)


def test_an_interrupted_write_leaves_the_old_version_live_and_is_repaired(tmp_path, store, models, monkeypatch):
    folder = corpus(tmp_path, a=DOC_A)
    ingest_paths(store, [folder], PipelineConfig(), models, progress=False)
    (folder / "a.md").write_text(DOC_A.replace("asynchronously", "in a background worker"))

    # Die after the new points were written to the index, before the catalogue switched to them.
    real_db = store.catalogue.db
    monkeypatch.setattr(store.catalogue, "db", _Crashing(real_db, "DELETE FROM chunks"))
    with pytest.raises(RuntimeError):
        ingest_paths(store, [folder], PipelineConfig(), models, progress=False)
    monkeypatch.setattr(store.catalogue, "db", real_db)
    # the old version is what search returns; the new points exist but are not live
    assert keyword_ids(store, "asynchronously") and not keyword_ids(store, "background worker")
    assert needs_repair(store)
    actions = repair(store, PipelineConfig(), models)
    assert any("interrupted write" in a for a in actions)
    assert store.index.count() == store.chunk_count()
    report = ingest_paths(store, [folder], PipelineConfig(), models, progress=False)
    assert report.updated == ("err-timeout-502",)
    assert keyword_ids(store, "background worker") and not keyword_ids(store, "asynchronously")


class _Crashing:
    """A sqlite3 connection stand-in that raises on the first statement starting with ``prefix``."""

    def __init__(self, db, prefix):
        self._db, self._prefix, self._fired = db, prefix, False

    def execute(self, sql, *args):
        if not self._fired and sql.startswith(self._prefix):
            self._fired = True
            raise RuntimeError("killed")
        return self._db.execute(sql, *args)

    def __getattr__(self, name):
        return getattr(self._db, name)


def test_a_missing_index_is_rebuilt_from_the_stored_documents(tmp_path, models):
    home = tmp_path / "home"
    with Store.open(home) as s:
        ingest_paths(s, [corpus(tmp_path, a=DOC_A, b=DOC_B)], PipelineConfig(), models, progress=False)
        chunks = s.chunk_count()
    import shutil
    shutil.rmtree(home / "shard")
    with Store.open(home) as s:
        assert needs_repair(s)
        actions = repair(s, PipelineConfig(), models)
        assert any("rebuilt" in a for a in actions)
        assert s.index.count() == chunks
        assert keyword_ids(s, "ERR_TIMEOUT_502")


def test_a_second_process_is_served_the_holders_exact_results(tmp_path, models):
    home = tmp_path / "home"
    queries = ("ERR_TIMEOUT_502", "replay dead-lettered events", "timeout")
    with Store.open(home) as s:
        ingest_paths(s, [corpus(tmp_path, a=DOC_A, b=DOC_B)], PipelineConfig(), models, progress=False)
        vectors = {q: models.embedder(PipelineConfig().embedding).encode([q])[0].tolist() for q in queries}
        own = {q: ([(h.chunk_id, h.score) for h in s.dense_search(vectors[q], 10)],
                   [(h.chunk_id, h.score, h.sparse) for h in s.keyword_search(*to_sparse(query_weights(tokenize(q))), 10)])
               for q in queries}
        script = textwrap.dedent(f"""
            import json
            from pipeline.retrieval.bm25 import query_weights, to_sparse
            from pipeline.storage.store import Store
            from pipeline.text.tokenize import tokenize
            vectors = json.loads({json.dumps(vectors)!r})
            with Store.open({str(home)!r}, lock_wait_s=5) as store:
                print(json.dumps({{"served_by": store.served_by, "hits": {{q: (
                    [(h.chunk_id, h.score) for h in store.dense_search(v, 10)],
                    [(h.chunk_id, h.score, {{str(i): w for i, w in h.sparse.items()}})
                     for h in store.keyword_search(*to_sparse(query_weights(tokenize(q))), 10)])
                    for q, v in vectors.items()}}}}))
        """)
        out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert "Traceback" not in out.stderr, out.stderr
    served = json.loads(out.stdout)
    assert served["served_by"].startswith(f"pid {os.getpid()}"), "it was served by this process, not refused"
    for q in queries:
        dense, keyword = served["hits"][q]
        assert [tuple(h) for h in dense] == own[q][0] and dense, q
        assert [(c, score, {int(i): w for i, w in sparse.items()}) for c, score, sparse in keyword] == own[q][1], q


def test_the_qdrant_client_path_returns_the_same_results(tmp_path, models):
    folder = corpus(tmp_path, a=DOC_A, b=DOC_B)
    with Store.open(tmp_path / "edge") as edge, Store.open(tmp_path / "client",
                                                           url=f"local:{tmp_path / 'qdrant-local'}") as client:
        assert client.index.kind == "qdrant-client"
        for s in (edge, client):
            ingest_paths(s, [folder], PipelineConfig(), models, progress=False)
        for q in ("ERR_TIMEOUT_502", "replay dead-lettered events", "timeout"):
            assert keyword_ids(edge, q) == keyword_ids(client, q)
            assert dense_ids(edge, models, q) == dense_ids(client, models, q)


def test_an_unreachable_server_is_a_clear_store_error(tmp_path):
    with pytest.raises(StoreError, match="cannot reach the Qdrant index at http://127.0.0.1:9"):
        Store.open(tmp_path / "x", url="http://127.0.0.1:9")
