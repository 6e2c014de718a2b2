"""The SciFact sweep's NumPy re-implementation ranks as the pipeline does, and its vector cache re-embeds nothing
it has seen."""

from __future__ import annotations

import numpy as np
import pytest

from benchmarks import scifact_tune as tune
from pipeline.config import PipelineConfig
from pipeline.context import StageContext
from pipeline.ingestion.documents import Document
from pipeline.ingestion.ingest import ingest_documents
from pipeline.models.registry import Models
from pipeline.retrieval import retrieve
from pipeline.storage.store import Store
from pipeline.testing import FakeEmbedder, fake_models

DOCS = [
    Document(doc_id="d1", title="Vitamin D and bone density", text="Vitamin D supplements raise bone density in "
             "older adults. Calcium intake matters too.", source="1", format="jsonl"),
    Document(doc_id="d2", title="Calcium", text="Calcium and vitamin D together reduce fractures; calcium alone "
             "does not reduce hip fractures.", source="2", format="jsonl"),
    Document(doc_id="d3", title="Sleep and memory", text="Sleep deprivation impairs memory consolidation in mice "
             "and in humans.", source="3", format="jsonl"),
    Document(doc_id="d4", title="Memory T cells", text="Memory T cells persist after infection; vitamin A shapes "
             "their homing to the gut.", source="4", format="jsonl"),
    Document(doc_id="d5", title="Fractures in the elderly", text="Hip fractures in elderly women follow falls; "
             "bone density predicts fracture risk.", source="5", format="jsonl"),
]
QUERIES = ["vitamin D bone density", "memory", "calcium fractures hip", "sleep memory mice", "fracture risk"]


class _Counting:
    def __init__(self):
        self.inner = FakeEmbedder()
        self.name, self.dim, self.texts = self.inner.name, self.inner.dim, []

    def encode(self, texts):
        self.texts.extend(texts)
        return self.inner.encode(texts)


def test_the_vector_cache_encodes_each_text_once_and_survives_a_restart(tmp_path):
    inner = _Counting()
    path = tmp_path / "vectors.npz"
    cached = tune.CachedEmbedder(path, lambda: inner)
    first = cached.encode(["a claim", "an abstract", "a claim"])
    assert inner.texts == ["a claim", "an abstract"] and cached.encoded == 2
    np.testing.assert_allclose(first, inner.inner.encode(["a claim", "an abstract", "a claim"]), rtol=1e-6)
    again = tune.CachedEmbedder(path, lambda: pytest.fail("the model must not load for cached texts"))
    np.testing.assert_array_equal(again.encode(["an abstract", "a claim"]), first[[1, 0]])
    assert again.encoded == 0 and again.dim == inner.dim


@pytest.mark.parametrize("k1, b, heading_weight", [(1.2, 0.75, 1.0), (0.9, 0.4, 3.0)])
def test_the_numpy_keyword_leg_ranks_as_the_pipelines(tmp_path, k1, b, heading_weight):
    cfg = PipelineConfig().with_overrides({"keyword.k1": k1, "keyword.b": b, "keyword.heading_weight": heading_weight,
                                           "ingest.passage_vectors": False})
    models = fake_models()
    corpus = tune.build_corpus(DOCS, cfg, models.embedder(cfg.embedding))
    matrix, vocab = tune.keyword_matrix(corpus, k1, b, heading_weight)
    numpy_runs = tune.keyword_runs(matrix, vocab, QUERIES, top_k=10)
    with Store.open(tmp_path / "store") as store:
        ingest_documents(store, DOCS, cfg, models, progress=False)
        ctx = StageContext(models, store, cfg.embedding)
        for query, run in zip(QUERIES, numpy_runs, strict=True):
            trace = retrieve.run(query, cfg.retrieve, ctx)
            by_kw = sorted((c for c in trace.candidates if c.keyword_rank), key=lambda c: c.keyword_rank)
            assert [corpus.doc_ids[i] for i in run.ids] == [c.doc_id for c in by_kw], query
            assert run.scores == pytest.approx([c.keyword_score for c in by_kw], rel=1e-4)


def test_a_chosen_setting_becomes_config_overrides_the_stage_runs_with(tmp_path):
    row = {"k1": 0.9, "b": 0.4, "heading_weight": 2.0,
           "setting": {"method": "convex", "alpha": 0.4, "normalisation": "tmm"}}
    cfg = PipelineConfig().with_overrides(tune.overrides_for(row))
    assert (cfg.keyword.k1, cfg.keyword.b, cfg.keyword.heading_weight) == (0.9, 0.4, 2.0)
    assert (cfg.retrieve.fusion, cfg.retrieve.convex_dense_weight, cfg.retrieve.convex_normalisation) == (
        "convex", 0.4, "tmm")
    rrf = PipelineConfig().with_overrides(tune.overrides_for(
        {**row, "setting": {"method": "rrf", "k": 20, "weights": (1.0, 1.5)}}))
    assert (rrf.retrieve.fusion, rrf.retrieve.rrf_k, rrf.retrieve.keyword_weight) == ("rrf", 20, 1.5)
    assert tune.describe(row["setting"]) == "convex alpha = 0.4, tmm"


def test_the_sweep_orders_settings_by_train_ndcg_and_covers_every_fusion(tmp_path):
    from benchmarks.scifact import evaluate

    cfg = PipelineConfig().with_overrides({"ingest.passage_vectors": False})
    embedder = Models(embedder=FakeEmbedder()).embedder(cfg.embedding)
    corpus = tune.build_corpus(DOCS, cfg, embedder)
    qids = [str(i) for i in range(len(QUERIES))]
    qrels = {"0": {"d1": 1}, "1": {"d3": 1}, "2": {"d2": 1}, "3": {"d3": 1}, "4": {"d5": 1}}
    result = tune.sweep(corpus, qids, QUERIES, embedder.encode(QUERIES), qrels, evaluate, top_k=10, shortlist=2)
    assert len(result["bm25"]) == len(tune.SWEEP_K1) * len(tune.SWEEP_B) * len(tune.SWEEP_HEADING)
    assert len(result["fusion"]) == 2 * len(tune.fusion_settings())
    for rows in (result["bm25"], result["fusion"]):
        scores = [r["ndcg10"] for r in rows]
        assert scores == sorted(scores, reverse=True)
        assert all(0.0 <= r["ndcg10"] <= 1.0 and 0.0 <= r["recall100"] <= 1.0 for r in rows)
