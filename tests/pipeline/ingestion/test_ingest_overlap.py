"""Ingestion prepares documents on a worker thread while the encoder runs: the store ends exactly as a sequential
run leaves it, one bad document still leaves the others indexed, a crash on either side loses no document, and the
progress line counts every embedded chunk."""

import threading

import numpy as np
import pytest

import pipeline.ingestion.prepare as prepare
from pipeline.config import PipelineConfig
from pipeline.ingestion.documents import load_paths
from pipeline.ingestion.ingest import ingest_documents, ingest_paths, needs_repair
from pipeline.models.registry import Models
from pipeline.storage.store import Store
from pipeline.testing import FakeEmbedder, FakeReranker
from tests.conftest import DEMO_CORPUS

SMALL_GROUPS = {"ingest.batch_chunks": 40}  # many groups, so the worker and the encoder interleave


def _models(embedder=None) -> Models:
    return Models(embedder=embedder or FakeEmbedder(), reranker=FakeReranker())


def _snapshot(store: Store) -> dict:
    chunks = store.chunks()
    ids = [c.point_id for c in chunks]
    dense = store.index.dense_vectors(ids)
    passages = store.passage_vectors([c.chunk_id for c in chunks])
    return {"chunks": [(c.chunk_id, c.text, c.heading_path, c.token_count, c.superseded_by) for c in chunks],
            "dense": {pid: np.asarray(dense[pid]) for pid in ids},
            "passages": {k: (v.model, v.passage_key, v.passages, v.vectors) for k, v in passages.items()},
            "terms": store.chunk_terms(), "avgdl": store.avgdl,
            "documents": [(d.doc_id, d.content_hash, d.chunk_count) for d in store.documents()]}


def _ingest(home, overlap: bool, cfg: PipelineConfig, paths=(DEMO_CORPUS,)):
    writes = []
    with Store.open(home) as store:
        original = store.replace_documents
        store.replace_documents = lambda batch: (writes.append(batch), original(batch))[1]
        report = ingest_paths(store, list(paths), cfg, _models(), progress=False, overlap=overlap)
        return report, writes, _snapshot(store)


def _same_writes(a, b) -> None:
    assert [[w.doc.doc_id for w in batch] for batch in a] == [[w.doc.doc_id for w in batch] for batch in b]
    for wa, wb in zip((w for batch in a for w in batch), (w for batch in b for w in batch), strict=True):
        assert [c.chunk_id for c in wa.chunks] == [c.chunk_id for c in wb.chunks] and wa.terms == wb.terms
        for pa, pb in zip(wa.points, wb.points, strict=True):
            assert (pa.point_id, pa.dense, pa.sparse_indices, pa.sparse_values, pa.payload) == \
                   (pb.point_id, pb.dense, pb.sparse_indices, pb.sparse_values, pb.payload)
        assert (wa.passages is None) == (wb.passages is None) and wa.model == wb.model
        for (ka, ta, va), (kb, tb, vb) in zip(wa.passages or [], wb.passages or [], strict=True):
            assert ka == kb and ta == tb and np.array_equal(va, vb)


@pytest.mark.parametrize("passage_vectors", [True, False])
def test_the_worker_leaves_the_store_exactly_as_a_sequential_run(tmp_path, passage_vectors):
    cfg = PipelineConfig().with_overrides({**SMALL_GROUPS, "ingest.passage_vectors": passage_vectors})
    seq_report, seq_writes, seq = _ingest(tmp_path / "sequential", False, cfg)
    par_report, par_writes, par = _ingest(tmp_path / "overlapped", True, cfg)
    assert len(seq_writes) > 3 and seq_report.embedded > 500   # the demo corpus, in many groups
    assert par_report.to_dict() == seq_report.to_dict()
    _same_writes(par_writes, seq_writes)
    assert par["chunks"] == seq["chunks"] and par["terms"] == seq["terms"] and par["avgdl"] == seq["avgdl"]
    assert par["documents"] == seq["documents"]
    assert all(np.array_equal(par["dense"][k], seq["dense"][k]) for k in seq["dense"])
    assert bool(seq["passages"]) == passage_vectors and par["passages"].keys() == seq["passages"].keys()
    for key, (model, pkey, texts, vectors) in seq["passages"].items():
        other = par["passages"][key]
        assert other[:3] == (model, pkey, texts) and np.array_equal(other[3], vectors)


def test_the_encoder_starts_before_the_worker_has_chunked_every_document(tmp_path, monkeypatch):
    """The last document is only chunked once the encoder has run: a sequential run could never finish this."""
    docs, problems = load_paths([DEMO_CORPUS])
    live = [d for d in docs if not d.retracted]
    last = live[-1].doc_id
    encoded = threading.Event()
    real = prepare.prepare_document

    def prepare_after_the_encoder(doc, cfg):
        if doc.doc_id == last:
            assert encoded.wait(60), "the encoder never ran while the worker was still chunking"
        return real(doc, cfg)

    class Signalling(FakeEmbedder):
        def encode(self, texts, batch_size=None):
            encoded.set()
            return super().encode(texts, batch_size)

    monkeypatch.setattr(prepare, "prepare_document", prepare_after_the_encoder)
    cfg = PipelineConfig().with_overrides(SMALL_GROUPS)
    with Store.open(tmp_path / "store") as store:
        report = ingest_documents(store, docs, cfg, _models(Signalling()), problems=problems, progress=False)
        assert report.documents == len(live) and not report.problems
        assert last in {d.doc_id for d in store.documents()}


def test_a_document_that_fails_in_the_middle_is_one_problem_and_the_others_are_indexed(tmp_path, monkeypatch):
    docs, _ = load_paths([DEMO_CORPUS])
    bad = [d for d in docs if not d.retracted][len(docs) // 2].doc_id
    real = prepare.chunk_document

    def chunk_or_fail(doc, cfg):
        if doc.doc_id == bad:
            raise ValueError("table parser gave up")
        return real(doc, cfg)

    monkeypatch.setattr(prepare, "chunk_document", chunk_or_fail)
    folder = tmp_path / "corpus"
    folder.mkdir()
    (folder / "broken.jsonl").write_text('{"id": "fine", "text": "Relay retries eight times."}\n{not json\n',
                                         encoding="utf-8")
    cfg = PipelineConfig().with_overrides(SMALL_GROUPS)
    with Store.open(tmp_path / "store") as store:
        report = ingest_paths(store, [DEMO_CORPUS, folder], cfg, _models(), progress=False)
        stored = {d.doc_id for d in store.documents()}
        assert not needs_repair(store)
    assert stored == {d.doc_id for d in docs if d.doc_id != bad and not d.retracted} | {"fine"}
    assert report.documents == len(stored) and len(report.problems) == 2
    chunking, parsing = sorted(report.problems, key=lambda p: "broken.jsonl" in p)
    assert "could not be chunked (ValueError: table parser gave up)" in chunking
    assert "broken.jsonl" in parsing and "Traceback" not in "".join(report.problems)


def _versions(folder, word: str, n: int = 30):
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(n):
        (folder / f"note-{i:02d}.md").write_text(
            f"---\nid: note-{i:02d}\ntitle: Note {i}\n---\n# Note {i}\n\nRelay node {i} keeps queue {i} warm "
            f"({word}) for {i * 7} seconds.\n\nThe key ring {i} rotates every {i % 5 + 1} days ({word}).\n",
            encoding="utf-8")
    return folder


def _state(store: Store) -> dict[str, str]:
    return {d.doc_id: ("new" if any("betaversion" in c.text for c in store.chunks(d.doc_id)) else "old")
            for d in store.documents()}


def test_a_crash_on_the_worker_writes_nothing_and_loses_nothing(tmp_path, monkeypatch):
    cfg = PipelineConfig().with_overrides({"ingest.batch_chunks": 4})
    with Store.open(tmp_path / "store") as store:
        ingest_paths(store, [_versions(tmp_path / "old", "alphaversion")], cfg, _models(), progress=False)
    real = prepare.prepare_document

    def crash_at_the_twentieth(doc, cfg):
        if doc.doc_id == "note-20":
            raise KeyboardInterrupt  # not a document's fault: the run stops
        return real(doc, cfg)

    monkeypatch.setattr(prepare, "prepare_document", crash_at_the_twentieth)
    with Store.open(tmp_path / "store") as store:
        with pytest.raises(KeyboardInterrupt):
            ingest_paths(store, [_versions(tmp_path / "new", "betaversion")], cfg, _models(), progress=False)
        assert set(_state(store).values()) == {"old"} and len(_state(store)) == 30
        assert not needs_repair(store)


def test_a_crash_in_the_encoder_leaves_every_document_whole_old_or_new(tmp_path):
    cfg = PipelineConfig().with_overrides({"ingest.batch_chunks": 4})
    with Store.open(tmp_path / "store") as store:
        ingest_paths(store, [_versions(tmp_path / "old", "alphaversion")], cfg, _models(), progress=False)

    class FailsOnTheFifthCall(FakeEmbedder):
        def encode(self, texts, batch_size=None):
            if self.calls == 4:
                raise RuntimeError("out of memory")
            return super().encode(texts, batch_size)

    with Store.open(tmp_path / "store") as store:
        with pytest.raises(RuntimeError, match="out of memory"):
            ingest_paths(store, [_versions(tmp_path / "new", "betaversion")], cfg, _models(FailsOnTheFifthCall()),
                         progress=False)
    with Store.open(tmp_path / "store") as store:
        state = _state(store)
        assert len(state) == 30 and "new" in state.values() and "old" in state.values()
        for doc_id, version in state.items():  # no document is a mix of versions
            texts = [c.text for c in store.chunks(doc_id)]
            assert all(("betaversion" in t) == (version == "new") for t in texts), doc_id


def test_progress_counts_every_embedded_chunk_and_ends_complete(tmp_path, capsys):
    seen = []
    cfg = PipelineConfig().with_overrides(SMALL_GROUPS)
    with Store.open(tmp_path / "store") as store:
        report = ingest_paths(store, [DEMO_CORPUS], cfg, _models(), progress=seen.append)
    assert seen and [p.done for p in seen] == sorted(p.done for p in seen)
    last = seen[-1]
    assert last.done == last.total == report.embedded and not last.counting
    assert last.text().startswith(f"{report.embedded:,}/{report.embedded:,} chunks · ")
    assert capsys.readouterr().out == ""                     # a callback, never stdout


def test_progress_true_writes_the_line_to_stderr_only(tmp_path, capsys):
    with Store.open(tmp_path / "store") as store:
        report = ingest_paths(store, [DEMO_CORPUS], PipelineConfig(), _models(), progress=True)
    out, err = capsys.readouterr()
    assert out == "" and f"{report.embedded:,}/{report.embedded:,} chunks" in err and "ETA 0:00" in err


def test_a_run_that_changes_nothing_shows_no_progress(tmp_path):
    seen = []
    with Store.open(tmp_path / "store") as store:
        ingest_paths(store, [DEMO_CORPUS], PipelineConfig(), _models(), progress=False)
        again = ingest_paths(store, [DEMO_CORPUS], PipelineConfig(), _models(), progress=seen.append)
    assert again.embedded == 0 and seen == []
