"""The two retrieval legs: identifiers survive, matched terms explain the BM25 score, failures degrade."""

import numpy as np
import pytest

from pipeline.config import PipelineConfig
from pipeline.context import StageContext
from pipeline.models.registry import Models
from pipeline.retrieval import retrieve
from pipeline.testing import FakeEmbedder
from pipeline.text.tokenize import tokenize
from pipeline.trace import Trace


@pytest.fixture
def fake():
    return Models(embedder=FakeEmbedder())


def _by_keyword(trace):
    return sorted((c for c in trace.candidates if c.keyword_rank), key=lambda c: c.keyword_rank)


def _by_dense(trace):
    return sorted((c for c in trace.candidates if c.dense_rank), key=lambda c: c.dense_rank)


def test_an_error_code_ranks_the_chunk_containing_it_first_on_the_keyword_leg(demo_store_fake, fake):
    trace = retrieve.run("ERR_TIMEOUT_502", PipelineConfig().retrieve, StageContext(fake, demo_store_fake, PipelineConfig().embedding))
    assert trace.status == "ran" and trace.keyword_status == "ran"
    assert "err_timeout_502" in trace.query_terms
    first = _by_keyword(trace)[0]
    assert first.keyword_rank == 1
    assert "ERR_TIMEOUT_502" in first.text
    assert first.doc_id == "err-timeout-502"
    assert any(m.term == "err_timeout_502" for m in first.matched_terms)


def test_the_exact_identifier_beats_pages_that_only_share_its_parts(demo_store_fake, fake):
    trace = retrieve.run("ERR_TIMEOUT_502", PipelineConfig().retrieve, StageContext(fake, demo_store_fake, PipelineConfig().embedding))
    ranked = _by_keyword(trace)
    with_code = [c.keyword_rank for c in ranked if "err_timeout_502" in tokenize(c.text)]
    parts_only = [c.keyword_rank for c in ranked if "err_timeout_502" not in tokenize(" ".join(c.heading_path)
                                                                                        + " " + c.text)]
    assert with_code and parts_only
    assert min(with_code) < min(parts_only)


def test_matched_terms_add_up_to_the_engines_bm25_score(demo_store_fake, fake):
    trace = retrieve.run("how do I rotate the signing secret for webhook deliveries", PipelineConfig().retrieve, StageContext(fake, demo_store_fake, PipelineConfig().embedding))
    hits = _by_keyword(trace)
    assert len(hits) > 5
    idfs = demo_store_fake.idf(sorted({m.term for c in hits for m in c.matched_terms}))
    for c in hits:
        assert c.matched_terms, c.chunk_id
        for m in c.matched_terms:
            assert m.idf == pytest.approx(idfs[m.term])
            assert m.contribution == pytest.approx(m.query_weight * m.doc_weight * m.idf)
        assert sum(m.contribution for m in c.matched_terms) == pytest.approx(c.keyword_score, rel=1e-4)
        contributions = [m.contribution for m in c.matched_terms]
        assert contributions == sorted(contributions, reverse=True)


def test_repeated_query_terms_count_twice(demo_store_fake, fake):
    once = retrieve.run("webhook", PipelineConfig().retrieve, StageContext(fake, demo_store_fake, PipelineConfig().embedding))
    twice = retrieve.run("webhook webhook", PipelineConfig().retrieve, StageContext(fake, demo_store_fake, PipelineConfig().embedding))
    top_once, top_twice = _by_keyword(once)[0], _by_keyword(twice)[0]
    assert top_twice.matched_terms[0].query_weight == 2.0
    assert top_twice.keyword_score == pytest.approx(2 * top_once.keyword_score, rel=1e-4)


def test_each_leg_keeps_its_own_rank_and_score(demo_store_fake, fake):
    trace = retrieve.run("configure the retry policy", PipelineConfig().retrieve, StageContext(fake, demo_store_fake, PipelineConfig().embedding))
    dense = _by_dense(trace)
    assert [c.dense_rank for c in dense] == list(range(1, len(dense) + 1)) == list(range(1, trace.dense_hits + 1))
    cosines = [c.dense_score for c in dense]
    assert cosines == sorted(cosines, reverse=True)
    assert all(-1.0001 <= s <= 1.0001 for s in cosines)
    keyword = _by_keyword(trace)
    assert [c.keyword_rank for c in keyword] == list(range(1, trace.keyword_hits + 1))
    assert [c.keyword_score for c in keyword] == sorted((c.keyword_score for c in keyword), reverse=True)


def test_top_k_per_leg_is_respected(demo_store_fake, fake):
    cfg = PipelineConfig().with_overrides({"retrieve.dense_top_k": 5, "retrieve.keyword_top_k": 3})
    trace = retrieve.run("delivery timeout", cfg.retrieve, StageContext(fake, demo_store_fake, cfg.embedding))
    assert trace.dense_hits == 5 and trace.keyword_hits == 3
    assert len(trace.candidates) <= 8
    assert max(c.dense_rank or 0 for c in trace.candidates) == 5


def test_a_query_of_only_stop_words_still_runs_the_dense_leg(demo_store_fake, fake):
    trace = retrieve.run("what is it that they were", PipelineConfig().retrieve, StageContext(fake, demo_store_fake, PipelineConfig().embedding))
    assert trace.status == "ran"
    assert trace.query_terms == ()
    assert trace.keyword_status == "no-terms" and trace.keyword_hits == 0
    assert trace.dense_status == "ran" and trace.dense_hits > 0
    assert all(c.keyword_rank is None and c.keyword_contribution == 0.0 for c in trace.candidates)
    assert "no keyword terms" in trace.reason


def test_the_same_query_gives_the_same_order(demo_store_fake, fake):
    a = retrieve.run("endpoint disabled after failures", PipelineConfig().retrieve, StageContext(fake, demo_store_fake, PipelineConfig().embedding))
    b = retrieve.run("endpoint disabled after failures", PipelineConfig().retrieve, StageContext(fake, demo_store_fake, PipelineConfig().embedding))
    assert [c.chunk_id for c in a.candidates] == [c.chunk_id for c in b.candidates]


def test_candidates_carry_the_chunk_payload_and_timings(demo_store_fake, fake):
    trace = retrieve.run("ERR_TIMEOUT_502", PipelineConfig().retrieve, StageContext(fake, demo_store_fake, PipelineConfig().embedding))
    top = trace.candidates[0]
    assert top.title and top.text and top.heading_path and top.heading_path[0] == top.title
    assert top.version and top.effective_date
    assert {"embed_query", "dense", "keyword", "fusion"} <= set(trace.timings_ms)
    assert "total" not in trace.timings_ms  # the stage's wall time is the engine's to measure
    again = Trace.from_json(Trace(question="q", retrieval=trace).to_json()).retrieval
    assert again == trace


class _BrokenEmbedder:
    name, dim, calls = "broken", 384, 0

    def encode(self, texts):
        raise RuntimeError("CUDA out of memory")


class _BrokenStore:
    def dense_search(self, vector, limit):
        raise ConnectionError("qdrant unreachable")

    def keyword_search(self, indices, values, limit):
        raise ConnectionError("qdrant unreachable")

    def idf(self, terms):
        raise ConnectionError("qdrant unreachable")


def test_a_failing_embedder_degrades_to_the_keyword_leg(demo_store_fake):
    trace = retrieve.run("ERR_TIMEOUT_502", PipelineConfig().retrieve, StageContext(Models(embedder=_BrokenEmbedder()), demo_store_fake, PipelineConfig().embedding))
    assert trace.status == "ran"
    assert trace.dense_status == "failed" and trace.dense_hits == 0
    assert "CUDA out of memory" in trace.reason
    assert trace.candidates[0].doc_id == "err-timeout-502"
    assert all(c.dense_rank is None for c in trace.candidates)


def test_an_unreachable_index_is_recorded_not_raised(fake):
    trace = retrieve.run("ERR_TIMEOUT_502", PipelineConfig().retrieve, StageContext(fake, _BrokenStore(), PipelineConfig().embedding))
    assert trace.status == "failed"
    assert trace.candidates == ()
    assert "dense search failed" in trace.reason and "keyword search failed" in trace.reason


def test_an_embedder_returning_junk_is_recorded(demo_store_fake):
    class Junk:
        name, dim, calls = "junk", 384, 0

        def encode(self, texts):
            return np.zeros((0, 384), dtype=np.float32)  # no row for the query

    trace = retrieve.run("webhook retries", PipelineConfig().retrieve, StageContext(Models(embedder=Junk()), demo_store_fake, PipelineConfig().embedding))
    assert trace.status == "ran" and trace.dense_status == "failed"
    assert trace.keyword_hits > 0


@pytest.mark.slow
@pytest.mark.long
def test_with_real_embeddings_the_error_page_leads_the_fused_list(demo_store_real, real_models):
    trace = retrieve.run("ERR_TIMEOUT_502", PipelineConfig().retrieve, StageContext(real_models, demo_store_real, PipelineConfig().embedding))
    top = trace.candidates[0]
    assert top.doc_id == "err-timeout-502"
    assert top.keyword_rank == 1 and top.dense_rank is not None
