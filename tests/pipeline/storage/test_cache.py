"""The answer cache: only clean answers are served again; corpus changes and deletes invalidate."""

from __future__ import annotations

import dataclasses
import sqlite3

import pytest

from pipeline.config import PipelineConfig
from pipeline.ingestion.ingest import delete_document, ingest_paths
from pipeline.storage.cache import AnswerCache, cache_key, normalise_query, why_not_cacheable
from pipeline.trace import GenerationTrace
from tests.support.traces import abstained_trace, answered_trace


@pytest.fixture
def cache(tmp_path):
    c = AnswerCache(tmp_path / "cache.sqlite")
    yield c
    c.close()


def key_for(trace, query=None):
    return cache_key(query or trace.question, trace.corpus_version, trace.config_hash)


def test_a_clean_answer_is_stored_and_served_back_exactly(cache):
    trace = answered_trace()
    assert cache.put(key_for(trace), trace) is True
    assert cache.get(key_for(trace)) == trace


@pytest.mark.parametrize("variant", ["what is the default delivery timeout", "  What is the DEFAULT   delivery "
                                     "timeout ?? ", "What is the default delivery timeout.", "Ｗhat is the default "
                                     "delivery timeout?"])
def test_the_same_question_typed_differently_hits(cache, variant):
    trace = answered_trace("What is the default delivery timeout?")
    cache.put(key_for(trace), trace)
    assert cache.get(key_for(trace, variant)) == trace


def test_a_different_question_misses():
    assert normalise_query("What is the timeout?") != normalise_query("What is the timeout in 2.4?")
    assert cache_key("What is the timeout?", 1, "h") != cache_key("What is the timeout in 2.4?", 1, "h")


def test_a_corpus_change_or_another_config_misses(cache):
    trace = answered_trace(corpus_version=3)
    cache.put(key_for(trace), trace)
    assert cache.get(cache_key(trace.question, 4, trace.config_hash)) is None
    other = PipelineConfig().with_overrides(["generate.llm_temperature=0.7"]).config_hash()
    assert cache.get(cache_key(trace.question, 3, other)) is None


@pytest.mark.parametrize("dirty, reason", [
    ({"fabricated_markers": (7,)}, "fabricated marker"),
    ({"unsupported": 1}, "unsupported claim"),
    ({"uncited": 1}, "uncited claim"),
    ({"misattributed": 1}, "misattributed claim"),
    ({"status": "failed"}, "validation failed"),
    ({"supported": 0}, "no supported claim"),
])
def test_an_answer_with_a_validation_problem_is_never_cached(cache, dirty, reason):
    trace = answered_trace(**dirty)
    assert why_not_cacheable(trace) == reason
    assert cache.put(key_for(trace), trace) is False
    assert cache.get(key_for(trace)) is None and len(cache) == 0


@pytest.mark.parametrize("generation_changes, reason", [
    ({"status": "fallback", "backend": "extractive", "fallback_reason": "timeout"}, "generation fallback"),
    ({"is_abstention": True}, "abstention"),
    ({"status": "cached"}, "generation cached"),
])
def test_fallbacks_generator_abstentions_and_replays_are_not_cached(cache, generation_changes, reason):
    base = answered_trace()
    trace = dataclasses.replace(base, generation=dataclasses.replace(base.generation, **generation_changes))
    assert why_not_cacheable(trace) == reason
    assert cache.put(key_for(trace), trace) is False


def test_gate_abstentions_are_not_cached(cache):
    trace = abstained_trace()
    assert cache.put(key_for(trace), trace) is False
    assert why_not_cacheable(dataclasses.replace(trace, generation=GenerationTrace())) == "abstention"


def test_invalidating_a_document_drops_every_answer_generated_from_it(cache):
    a = answered_trace("q about a", doc_ids=("doc-a", "doc-b"))
    b = answered_trace("q about c", doc_ids=("doc-c",))
    cache.put(key_for(a), a)
    cache.put(key_for(b), b)
    assert cache.invalidate_documents(["doc-b"]) == 1
    assert cache.get(key_for(a)) is None
    assert cache.get(key_for(b)) == b
    assert cache.invalidate_documents([]) == 0


def test_prune_drops_entries_of_other_corpus_versions(cache):
    old, new = answered_trace("q", corpus_version=1), answered_trace("q", corpus_version=2)
    cache.put(key_for(old), old)
    cache.put(key_for(new), new)
    assert cache.prune(2) == 1
    assert cache.get(key_for(new)) == new and cache.get(key_for(old)) is None


def test_a_damaged_entry_is_a_miss_and_is_removed(tmp_path):
    path = tmp_path / "cache.sqlite"
    cache = AnswerCache(path)
    trace = answered_trace()
    cache.put(key_for(trace), trace)
    db = sqlite3.connect(path)
    db.execute("UPDATE answers SET trace_json='{\"question\": 5}'")
    db.commit()
    assert cache.get(key_for(trace)) is None
    assert len(cache) == 0


def test_the_cache_survives_reopening(tmp_path):
    trace = answered_trace()
    AnswerCache(tmp_path / "cache.sqlite").put(key_for(trace), trace)
    assert AnswerCache(tmp_path / "cache.sqlite").get(key_for(trace)) == trace


DOC = """---
id: {doc_id}
title: {doc_id}
---
The default delivery timeout is 15000 ms per attempt in {doc_id}.
"""


def test_after_delete_no_cached_answer_that_cited_the_document_is_served(tmp_path, store, models):
    """Issue 10's delete path: the key moves with the corpus version, and explicit invalidation backs it up."""
    folder = tmp_path / "corpus"
    folder.mkdir()
    for doc_id in ("doc-keep", "doc-gone"):
        (folder / f"{doc_id}.md").write_text(DOC.format(doc_id=doc_id), encoding="utf-8")
    ingest_paths(store, [folder], PipelineConfig(), models, progress=False)
    cache = AnswerCache(store.home / "cache.sqlite")
    trace = answered_trace(doc_ids=("doc-gone",), corpus_version=store.corpus_version)
    cache.put(key_for(trace), trace)
    assert cache.get(cache_key(trace.question, store.corpus_version, trace.config_hash)) == trace

    assert delete_document(store, "doc-gone") > 0
    assert cache.get(cache_key(trace.question, store.corpus_version, trace.config_hash)) is None
    assert cache.get(key_for(trace)) is None   # delete dropped it: not even under the old version's key
    assert cache.invalidate_documents(["doc-gone"]) == 0


def test_through_the_engine_a_clean_answer_is_served_again_without_an_llm_call(demo_store_fake, tmp_path):
    import json

    from pipeline.engine import Pipeline
    from pipeline.storage.runs import RunLog
    from pipeline.testing import FakeLLM, fake_models
    from pipeline.validation.claims import split_claims

    cfg = PipelineConfig().with_overrides(["generate.backend=litellm"])
    runs, cache = RunLog(tmp_path / "runs.sqlite"), AnswerCache(tmp_path / "cache.sqlite")
    question = "What does ERR_TIMEOUT_504 mean?"
    top = Pipeline(demo_store_fake, models=fake_models(), cfg=cfg, runs=runs, cache=cache).search(question)
    quoted = next(s.text for s in split_claims(top.ranked_candidates()[0].text) if s.is_claim)
    llm = FakeLLM([json.dumps({"answer": f"{quoted} [1]", "used_source_ids": [1], "confidence": "HIGH",
                               "limitations": []})])
    pipeline = Pipeline(demo_store_fake, models=fake_models(llm=llm), cfg=cfg, runs=runs, cache=cache)

    first = pipeline.ask(question)
    assert first.validation.supported == 1 and not first.cache_hit and len(cache) == 1
    again = pipeline.ask("what does err_timeout_504 mean")
    assert again.cache_hit and again.llm_calls == 0 and len(llm.requests) == 1
    assert again.answer == first.answer and again.validation == first.validation
    assert [r.cache_hit for r in runs.list()] == [True, False]
