"""The delete path (issue 10, part 5), as a user drives it: ask (the answer is cached), ``workbench delete``,
ask again. After the delete no chunk of the document comes back from either leg, no cached answer that
cited it is served, and the audit log still holds the old runs unchanged (history is not rewritten).
"""

from __future__ import annotations

import json
import sqlite3

from pipeline.config import PipelineConfig
from pipeline.engine import Pipeline
from pipeline.ingestion.ingest import ingest_paths
from pipeline.retrieval.bm25 import query_weights, to_sparse
from pipeline.storage.runs import RunLog
from pipeline.storage.store import Store
from pipeline.testing import FakeEmbedder, fake_models
from pipeline.text.tokenize import tokenize
from tests.reliability.rel_support import BENIGN, QUESTION, workbench

GONE = "mg-timeout"


def _legs(store: Store, text: str) -> tuple[set[str], set[str]]:
    indices, values = to_sparse(query_weights(tokenize(text)))
    keyword = {h.doc_id for h in store.keyword_search(indices, values, 100)}
    vector = FakeEmbedder().encode([text])[0].tolist()  # the store was embedded with this deterministic embedder
    dense = {h.doc_id for h in store.dense_search(vector, 100)}
    return keyword, dense


def test_after_delete_neither_leg_nor_the_cache_serves_it_and_the_old_runs_stay(tmp_path):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for name, text in BENIGN.items():
        (corpus / name).write_text(text, encoding="utf-8")
    home = tmp_path / "store"
    cfg = PipelineConfig()  # the offline default: extractive answers, cache on, every run logged
    with Store.open(home) as store:
        ingest_paths(store, [corpus], cfg, fake_models(), progress=False)
        chunk_text = store.chunks(GONE)[0].text
        before = _legs(store, chunk_text)
        pipeline = Pipeline(store, fake_models(), cfg)
        first = pipeline.ask(QUESTION)
        assert GONE in {s.doc_id for s in first.generation.sources} and "[1]" in first.answer
        assert pipeline.ask(QUESTION).cache_hit, "the clean answer is cached before the delete"
        pipeline.cache.close()
        pipeline.runs.close() if hasattr(pipeline.runs, "close") else None
    assert GONE in before[0] and GONE in before[1], "both legs found it before"

    deleted = workbench("delete", GONE, "--store", str(home), "--json", timeout=120)
    assert deleted.returncode == 0, deleted.stderr
    assert json.loads(deleted.stdout)["chunks_removed"] >= 1

    with Store.open(home) as store:
        keyword, dense = _legs(store, chunk_text)
        assert GONE not in keyword, "the keyword leg still returns a chunk of the deleted document"
        assert GONE not in dense, "the dense leg still returns a chunk of the deleted document"
        assert keyword and dense, "the other documents are still there"
        with sqlite3.connect(home / "cache.sqlite") as cache:
            assert cache.execute("SELECT COUNT(*) FROM answer_documents WHERE doc_id=?", (GONE,)).fetchone() == (0,)
        after = Pipeline(store, fake_models(), cfg).ask(QUESTION)
        assert not after.cache_hit, "a cached answer that cited the deleted document was served"
        assert GONE not in {c.doc_id for c in after.retrieval.candidates}
        assert GONE not in {s.doc_id for s in after.generation.sources}

    log = RunLog(home / "runs.sqlite")
    old = log.get(first.run_id)
    assert old is not None and old.to_json() == first.to_json(), "history is not rewritten"
    assert {r.run_id for r in log.list()} >= {first.run_id, after.run_id}
    shown = workbench("runs", "show", first.run_id, "--store", str(home), timeout=120)
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["generation"]["sources"][0]["doc_id"] == GONE
