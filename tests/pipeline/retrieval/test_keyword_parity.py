"""The keyword leg against the reference implementation, rank-bm25, on the demo corpus with the same tokens.

Both sides see identical input: every chunk's stored tokens (the project's tokenizer over the heading path
and text, exactly what ingestion indexed), the same k1 and b from the config, and the same average length
(rank-bm25 averages over the corpus it is given, which is every live chunk, as ingestion does).

One deliberate difference is removed before comparing. rank-bm25's ``BM25Okapi`` uses the Robertson-
Spärck Jones IDF ``ln((N - n + 0.5) / (n + 0.5))``, negative for terms in more than half the chunks, and
floors those at ``epsilon * mean idf``. The engine (Qdrant's IDF modifier, as Lucene does) uses
``ln(1 + (N - n + 0.5) / (n + 0.5))``, which is always positive. So the reference here is a small
subclass of ``BM25Okapi`` whose ``_calc_idf`` plugs in the engine's IDF; everything else — the
term-frequency saturation, length normalisation, and summing over repeated query tokens — is rank-bm25's
own ``get_scores``. With that, the top-10 must be identical.
"""

import math

import numpy as np
import pytest
from rank_bm25 import BM25Okapi

from pipeline.config import PipelineConfig
from pipeline.context import StageContext
from pipeline.models.registry import Models
from pipeline.retrieval import retrieve
from pipeline.retrieval.bm25 import idf as engine_idf
from pipeline.testing import FakeEmbedder
from pipeline.text.tokenize import tokenize

QUERIES = [
    "ERR_TIMEOUT_502",
    "how do I rotate the webhook signing secret",
    "delivery.timeout_ms default",
    "retry backoff schedule for failed deliveries",
    "endpoint disabled after repeated failures",
    "rate limit per API key",
    "what changed in release 3.0",
    "dead letter queue retention",
    "configure TLS certificates",
    "ERR_AUTH_401 invalid token",
    "harborctl deliveries list",
    "payload size limit",
]


class EngineIdfBM25(BM25Okapi):
    """rank-bm25's Okapi scoring with the engine's IDF, ln(1 + (N - n + 0.5) / (n + 0.5))."""

    def _calc_idf(self, nd):
        for word, freq in nd.items():
            self.idf[word] = engine_idf(self.corpus_size, freq)
        self.average_idf = sum(self.idf.values()) / max(len(self.idf), 1)


@pytest.fixture(scope="module")
def reference(demo_store_fake):
    terms_by_point = demo_store_fake.chunk_terms()
    chunk_of = {c.point_id: c.chunk_id for c in demo_store_fake.chunks()}
    point_ids = sorted(terms_by_point)
    corpus = [terms_by_point[p] for p in point_ids]
    cfg = PipelineConfig()
    bm25 = EngineIdfBM25(corpus, k1=cfg.keyword.k1, b=cfg.keyword.b)
    return bm25, [chunk_of[p] for p in point_ids], point_ids


def _reference_top(bm25, chunk_ids, point_ids, query, n=10):
    scores = bm25.get_scores(tokenize(query))
    # the engine breaks score ties by point id; do the same
    order = sorted(range(len(scores)), key=lambda i: (-scores[i], point_ids[i]))
    return [(chunk_ids[i], float(scores[i])) for i in order[:n] if scores[i] > 0]


def test_the_reference_sees_the_same_corpus_statistics(demo_store_fake, reference):
    bm25, chunk_ids, _ = reference
    assert bm25.corpus_size == demo_store_fake.chunk_count()
    assert bm25.avgdl == pytest.approx(demo_store_fake.avgdl, rel=1e-9)


@pytest.mark.parametrize("query", QUERIES)
def test_keyword_top10_equals_rank_bm25_with_the_engines_idf(demo_store_fake, reference, query):
    bm25, chunk_ids, point_ids = reference
    expected = _reference_top(bm25, chunk_ids, point_ids, query)
    cfg = PipelineConfig().with_overrides({"retrieve.keyword_top_k": 10})
    trace = retrieve.run(query, cfg.retrieve, StageContext(Models(embedder=FakeEmbedder()), demo_store_fake, cfg.embedding))
    got = sorted((c for c in trace.candidates if c.keyword_rank), key=lambda c: c.keyword_rank)
    assert expected, f"no reference hits for {query!r}"
    assert [c.chunk_id for c in got] == [cid for cid, _ in expected]
    # the engine scores in float32; the scores agree to that precision
    assert np.allclose([c.keyword_score for c in got], [s for _, s in expected], rtol=1e-4)


def test_unmodified_okapi_idf_differs_only_in_the_idf():
    """The two IDFs agree on rare terms and part ways on common ones (negative, then floored, in Okapi)."""
    n_docs = 1000
    rare, common = 3, 700
    okapi = lambda n: math.log(n_docs - n + 0.5) - math.log(n + 0.5)  # noqa: E731
    assert engine_idf(n_docs, rare) == pytest.approx(okapi(rare), abs=0.01)
    assert okapi(common) < 0 < engine_idf(n_docs, common)
