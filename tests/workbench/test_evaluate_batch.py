"""Batched evaluation and trace reuse (issue 19): ``workbench eval`` walks the golden set in blocks with what each
step encodes encoded ahead, and a re-run whose settings differ only after retrieval reuses the earlier retrieval.
A user sees the same rows as the one-at-a-time walk (and as a fresh run), fewer encoder calls, and cases/s."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import numpy as np
import pytest

from pipeline.config import PipelineConfig
from pipeline.ingestion.documents import load_paths
from pipeline.ingestion.ingest import ingest_documents
from pipeline.storage.store import Store
from pipeline.testing import FakeEmbedder, fake_models
from tests.support.traces import timeless
from workbench import evaluate, walk
from workbench.golden import load_golden
from workbench.memo import MemoEmbedder, TextRecorder
from workbench.summary import render_summary

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "golden" / "golden.jsonl"
CORPUS = ROOT / "golden" / "corpus"
FLOATS = ("gate_score", "best_fused_score", "best_dense_cosine", "top_rerank_score", "latency_ms")
TOLERANCE = 1e-5   # a batched vector's float rounding (~1e-7 on a cosine) after the six-decimal rounding of window
                   # cosines and the learned gate's logistic, which scales a cosine's change by its coefficient


def _rows(evaluation) -> list[dict]:
    """Every row as the CLI's JSON has it, without its wall-clock time."""
    return [{k: v for k, v in r.to_dict().items() if k != "latency_ms"} for r in evaluation.rows]


def _content(trace) -> dict:
    """A trace without when it ran, its id and its times."""
    return timeless(trace)


def _golden(cases: int):
    golden = load_golden(GOLDEN)
    return dataclasses.replace(golden, cases=golden.cases[:cases])


@pytest.fixture
def small_blocks(monkeypatch):
    """Blocks of 7 cases, so a few dozen cases cross several blocks and end on a partial one."""
    monkeypatch.setattr(walk, "BATCH_CASES", 7)


# -- the fakes: identical, to the bit ----------------------------------------------------------------------------

@pytest.mark.parametrize("reranker", [True, False])
def test_batched_rows_and_traces_are_the_one_at_a_time_ones(demo_store_fake, small_blocks, reranker):
    golden = _golden(40)
    assert any(c.history for c in golden.cases), "follow-ups go through the rewrite"
    one = evaluate.evaluate(golden, demo_store_fake, fake_models(reranker=reranker), PipelineConfig(), nli=False,
                            batch=False)
    batched = evaluate.evaluate(golden, demo_store_fake, fake_models(reranker=reranker), PipelineConfig(), nli=False)
    assert _rows(batched) == _rows(one)
    assert [_content(t) for t in batched.traces] == [_content(t) for t in one.traces]
    for key, value in one.summary.items():
        if key not in ("run", "latency_ms", "latency_note"):
            assert batched.summary[key] == value, key
    run, before = batched.summary["run"], one.summary["run"]
    assert run["batched"] and not before["batched"]
    assert run["texts_encoded"] == before["texts_encoded"], "the same texts, once each"
    blocks = -(-40 // walk.BATCH_CASES)
    assert run["encoder_calls"] <= 3 * blocks < before["encoder_calls"], "queries, claims, answers: a call each a block"
    assert run["cases_per_s"] > 0 and run["seconds_total"] >= run["seconds"]


def test_the_one_at_a_time_walk_stays_reachable_from_the_driver(demo_store_fake):
    pipeline = evaluate.eval_pipeline(demo_store_fake, fake_models(), PipelineConfig())
    run = evaluate.run_cases(_golden(5), pipeline, batch=False)
    assert not run.batched and len(run.traces) == 5 and pipeline.models.memo.batches > 5


def test_a_tiered_run_and_a_run_without_validation_batch_alike(demo_store_fake, small_blocks):
    golden = _golden(15)
    for overrides in ({"validate.enabled": False}, {"generate.tiers": [{"backend": "extractive"}]}):
        cfg = PipelineConfig().with_overrides(overrides)
        one = evaluate.evaluate(golden, demo_store_fake, fake_models(), cfg, nli=False, batch=False)
        batched = evaluate.evaluate(golden, demo_store_fake, fake_models(), cfg, nli=False)
        assert _rows(batched) == _rows(one), overrides


def test_the_cli_prints_cases_per_second(demo_store_fake, capsys):
    evaluation = evaluate.evaluate(_golden(6), demo_store_fake, fake_models(), PipelineConfig(), nli=False)
    text = render_summary(evaluation.summary)
    assert f"speed: {evaluation.summary['run']['cases_per_s']:.1f} cases/s (6 cases in" in text and "batched" in text


# -- reuse: a re-run with a new threshold asks only the gate onwards ------------------------------------------------

def test_a_rerun_that_changes_only_the_gate_reuses_retrieval_and_matches_a_fresh_run(demo_store_fake, small_blocks):
    golden, models = _golden(30), fake_models()
    cosine = PipelineConfig().with_overrides({"validate.nli": "off"})   # a threshold the rows show: the cosine's
    first = evaluate.evaluate(golden, demo_store_fake, models, cosine, nli=False)
    stricter = cosine.with_overrides({"gate.confidence_threshold_rerank": 0.9, "validate.claim_threshold": 0.7})
    reused = evaluate.evaluate(golden, demo_store_fake, models, stricter, nli=False, reuse=first)
    fresh = evaluate.evaluate(golden, demo_store_fake, fake_models(), stricter, nli=False)
    assert _rows(reused) == _rows(fresh) and _rows(reused) != _rows(first)
    assert [_content(t) for t in reused.traces] == [_content(t) for t in fresh.traces]
    assert reused.summary["run"]["reused_retrieval"] == 30 and fresh.summary["run"]["reused_retrieval"] == 0
    assert all(a.retrieval is b.retrieval for a, b in zip(first.traces, reused.traces, strict=True))
    assert reused.summary["run"]["texts_encoded"] < fresh.summary["run"]["texts_encoded"], \
        "the earlier run's vectors are kept too"
    assert "retrieval of 30 cases reused" in render_summary(reused.summary)


def test_the_one_at_a_time_walk_reuses_too(demo_store_fake):
    golden, models = _golden(8), fake_models()
    first = evaluate.evaluate(golden, demo_store_fake, models, PipelineConfig(), nli=False, batch=False)
    dense = PipelineConfig().with_overrides({"gate.signal": "dense"})
    reused = evaluate.evaluate(golden, demo_store_fake, models, dense, nli=False, batch=False, reuse=first)
    fresh = evaluate.evaluate(golden, demo_store_fake, fake_models(), dense, nli=False, batch=False)
    assert _rows(reused) == _rows(fresh) and reused.summary["run"]["reused_retrieval"] == 8


def test_a_rerun_that_retrieves_otherwise_reuses_nothing(demo_store_fake):
    golden, models = _golden(8), fake_models()
    first = evaluate.evaluate(golden, demo_store_fake, models, PipelineConfig(), nli=False)
    other = PipelineConfig().with_overrides({"retrieve.rrf_k": 10})
    again = evaluate.evaluate(golden, demo_store_fake, models, other, nli=False, reuse=first)
    fresh = evaluate.evaluate(golden, demo_store_fake, fake_models(), other, nli=False)
    assert again.summary["run"]["reused_retrieval"] == 0 and _rows(again) == _rows(fresh)


def test_only_the_same_question_and_history_are_reused(demo_store_fake):
    golden, models = _golden(6), fake_models()
    first = evaluate.evaluate(golden, demo_store_fake, models, PipelineConfig(), nli=False)
    cases = list(golden.cases)
    cases[0] = dataclasses.replace(cases[0], question=cases[0].question + " And in version 2.4?")
    edited = dataclasses.replace(golden, cases=tuple(cases))
    again = evaluate.evaluate(edited, demo_store_fake, models, PipelineConfig(), nli=False, reuse=first)
    assert again.summary["run"]["reused_retrieval"] == 5
    assert again.traces[0].question == cases[0].question and again.traces[0].retrieval is not first.traces[0].retrieval


# -- the memo: ahead, in the background, the same vectors -------------------------------------------------------------

def test_the_memo_encodes_ahead_in_the_background_and_answers_the_same_vectors():
    inner = FakeEmbedder()
    memo = MemoEmbedder(inner)
    switch = sys.getswitchinterval()
    with memo.background():
        assert sys.getswitchinterval() <= switch, "the worker gets the GIL back sooner while it runs"
        assert memo.prime(["a b", "c", "a b"], wait=False) == 2
        assert memo.prime(["c", "d"], wait=False) == 1, "what is on its way is not asked for twice"
        got = memo.encode(["d", "a b", "e"])
    assert np.array_equal(got, inner.encode(["d", "a b", "e"])) and sys.getswitchinterval() == switch
    assert memo.counts() == {"calls": 1, "texts": 3, "encoded": 4, "batches": 3}


def test_a_failing_batch_in_the_background_fails_where_the_text_is_asked_for():
    class Flaky(FakeEmbedder):
        def encode(self, texts, batch_size=None):
            if "boom" in texts:
                raise RuntimeError("model down")
            return super().encode(texts)

    memo = MemoEmbedder(Flaky())
    with memo.background():
        memo.prime(["boom", "fine"], wait=False)
        with pytest.raises(RuntimeError, match="model down"):
            memo.encode(["boom"])
        assert memo.encode(["fine"]).shape == (1, memo.dim), "the batch failed; the text is encoded when asked"


def test_the_recorder_lists_what_a_step_asks_for():
    recorder = TextRecorder("m", 4)
    assert recorder.encode(["x", "y"]).shape == (2, 4) and recorder.embedder(None) is recorder
    assert recorder.recorded == ["x", "y"]


# -- the real packaged MiniLM: the same decisions, hits and verdicts ----------------------------------------------

@pytest.fixture(scope="module")
def real_slice(tmp_path_factory, real_models):
    """A slice of the golden set of every kind (answerable, follow-ups, off-topic, in-domain unanswerable) and a store
    of the documents it expects plus a few others, ingested with the real embedder."""
    golden = load_golden(GOLDEN)
    answerable = [c for c in golden.cases if c.answerable and not c.history][:10]
    follow_ups = [c for c in golden.cases if c.history][:4]
    off_topic = [c for c in golden.cases if "off-topic" in c.tags][:3]
    unanswerable = [c for c in golden.cases if not c.answerable and "off-topic" not in c.tags][:3]
    cases = answerable + follow_ups + off_topic + unanswerable
    wanted = {d for c in cases for d in c.expected_doc_ids}
    documents, _ = load_paths([CORPUS])
    documents = sorted(documents, key=lambda d: d.doc_id)
    picked = [d for d in documents if d.doc_id in wanted] + [d for d in documents if d.doc_id not in wanted][:6]
    store = Store.open(tmp_path_factory.mktemp("batch-real"))
    ingest_documents(store, picked, PipelineConfig(), real_models, progress=False)
    yield dataclasses.replace(golden, cases=tuple(cases)), store
    store.close()


@pytest.mark.long
@pytest.mark.slow
def test_with_the_real_embedder_batching_changes_no_decision_hit_or_verdict(real_slice, real_models, small_blocks):
    """Batched, a text's MiniLM vector differs from its vector alone by float rounding only: every row is the same but
    for the last digit of the scores (:data:`TOLERANCE`), and every claim gets the same verdict."""
    golden, store = real_slice
    one = evaluate.evaluate(golden, store, real_models, PipelineConfig(), nli=False, batch=False)
    batched = evaluate.evaluate(golden, store, real_models, PipelineConfig(), nli=False)
    assert batched.summary["run"]["encoder_calls"] < one.summary["run"]["encoder_calls"]
    for a, b in zip(_rows(batched), _rows(one), strict=True):
        assert {k: v for k, v in a.items() if k not in FLOATS} == {k: v for k, v in b.items() if k not in FLOATS}
        for key in FLOATS[:-1]:
            assert (a[key] is None) == (b[key] is None) and (a[key] is None or abs(a[key] - b[key]) <= TOLERANCE), key
    for x, y in zip(batched.traces, one.traces, strict=True):
        assert [c.verdict for c in x.validation.claims] == [c.verdict for c in y.validation.claims]
        assert [c.chunk_id for c in x.ranked_candidates()] == [c.chunk_id for c in y.ranked_candidates()]
    assert any(not r.abstained for r in batched.rows) and any(r.abstained for r in batched.rows)
