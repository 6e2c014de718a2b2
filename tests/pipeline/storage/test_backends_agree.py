"""The embedded index (Qdrant Edge) and the client path (qdrant-client, local mode here; a server or cluster
with ``QDRANT_URL``) hold the same collection layout and return the same top-10 on the demo corpus: per leg
and after fusion, same chunks in the same order. ``benchmarks/perf.py`` times both paths on the same queries.
"""

import pytest

from pipeline.config import PipelineConfig
from pipeline.context import StageContext
from pipeline.ingestion.ingest import ingest_paths
from pipeline.models.registry import Models
from pipeline.retrieval import retrieve
from pipeline.retrieval.bm25 import query_weights, to_sparse
from pipeline.storage.store import Store
from pipeline.testing import FakeEmbedder
from pipeline.text.tokenize import tokenize
from tests.conftest import DEMO_CORPUS

QUERIES = ["ERR_TIMEOUT_502", "how do I rotate the webhook signing secret", "delivery.timeout_ms default",
           "retry backoff schedule for failed deliveries", "endpoint disabled after repeated failures",
           "rate limit per API key", "what changed in release 3.0", "dead letter queue retention",
           "configure TLS certificates", "harborctl deliveries list", "payload size limit",
           "three node cluster quorum"]


@pytest.fixture(scope="module")
def client_store(tmp_path_factory):
    home = tmp_path_factory.mktemp("demo-client")
    s = Store.open(home, url=f"local:{home / 'qdrant-local'}")
    ingest_paths(s, [DEMO_CORPUS], PipelineConfig(), Models(embedder=FakeEmbedder()), progress=False)
    yield s
    s.close()


def test_both_backends_hold_the_same_chunks(demo_store_fake, client_store):
    assert client_store.index.kind == "qdrant-client" and demo_store_fake.index.kind == "qdrant-edge"
    assert client_store.index.count() == demo_store_fake.index.count() == demo_store_fake.chunk_count()


@pytest.mark.parametrize("query", QUERIES)
def test_each_leg_returns_the_same_top10(demo_store_fake, client_store, query):
    vector = [float(x) for x in FakeEmbedder().encode([query])[0]]
    edge = [h.chunk_id for h in demo_store_fake.dense_search(vector, 10)]
    client = [h.chunk_id for h in client_store.dense_search(vector, 10)]
    assert edge == client
    indices, values = to_sparse(query_weights(tokenize(query)))
    edge_kw = demo_store_fake.keyword_search(indices, values, 10)
    client_kw = client_store.keyword_search(indices, values, 10)
    assert [h.chunk_id for h in edge_kw] == [h.chunk_id for h in client_kw]
    assert [h.score for h in edge_kw] == pytest.approx([h.score for h in client_kw], rel=1e-5)


@pytest.mark.parametrize("query", QUERIES)
def test_the_fused_top10_is_the_same(demo_store_fake, client_store, query):
    cfg, models = PipelineConfig(), Models(embedder=FakeEmbedder())
    edge = retrieve.run(query, cfg.retrieve, StageContext(models, demo_store_fake, cfg.embedding)).candidates[:10]
    client = retrieve.run(query, cfg.retrieve, StageContext(models, client_store, cfg.embedding)).candidates[:10]
    assert [c.chunk_id for c in edge] == [c.chunk_id for c in client]
