"""Reciprocal-rank fusion: hand-computed scores, weights, tie-breaking, and the provenance kept per candidate."""

import pytest

from pipeline.config import PipelineConfig
from pipeline.context import StageContext
from pipeline.models.registry import Models
from pipeline.retrieval import retrieve
from pipeline.retrieval.retrieve import _reciprocal_rank_fusion
from pipeline.testing import FakeEmbedder


def _scores(items):
    return {it.item_id: it.fused_score for it in items}


def test_two_legs_equal_weights_hand_computed():
    fused = _reciprocal_rank_fusion([["a", "b", "c"], ["b", "d"]], k=60, weights=(1.0, 1.0))
    assert [it.item_id for it in fused] == ["b", "a", "d", "c"]
    assert _scores(fused) == pytest.approx({"b": 1 / 62 + 1 / 61, "a": 1 / 61, "d": 1 / 62, "c": 1 / 63})
    b = fused[0]
    assert b.ranks == (2, 1)
    assert b.contributions == pytest.approx((1 / 62, 1 / 61))
    a = fused[1]
    assert a.ranks == (1, None) and a.contributions == pytest.approx((1 / 61, 0.0))


def test_leg_weights_scale_each_legs_contribution():
    fused = _reciprocal_rank_fusion([["a", "b", "c"], ["b", "d"]], k=60, weights=(2.0, 1.0))
    assert [it.item_id for it in fused] == ["b", "a", "c", "d"]
    assert _scores(fused) == pytest.approx({"b": 2 / 62 + 1 / 61, "a": 2 / 61, "c": 2 / 63, "d": 1 / 62})


def test_k_controls_how_fast_contributions_decay():
    fused = _reciprocal_rank_fusion([["a", "b"], ["c", "b"]], k=1, weights=(1.0, 1.0))
    # b is second on both legs: 1/3 + 1/3 beats a first place on one leg (1/2).
    assert [it.item_id for it in fused][0] == "b"
    assert _scores(fused)["b"] == pytest.approx(2 / 3)
    assert _scores(fused)["a"] == pytest.approx(1 / 2)


def test_the_fused_scale_bounds_stated_in_the_trace_note():
    both_first = _reciprocal_rank_fusion([["x"], ["x"]], k=60, weights=(1.0, 1.0))[0]
    one_leg_first = _reciprocal_rank_fusion([["y"], []], k=60, weights=(1.0, 1.0))[0]
    assert both_first.fused_score == pytest.approx(2 / 61)  # ~0.033, the maximum
    assert one_leg_first.fused_score == pytest.approx(1 / 61)  # ~0.016


def test_ties_break_on_best_single_leg_rank_then_id():
    # "zz" is first on leg 0 (1/2); "aa" is second on leg 1 with weight 1.5 (1.5/3): exactly equal scores.
    fused = _reciprocal_rank_fusion([["zz"], ["r", "aa"]], k=1, weights=(1.0, 1.5))
    assert _scores(fused)["zz"] == _scores(fused)["aa"] == 0.5
    assert [it.item_id for it in fused] == ["r", "zz", "aa"]
    # equal score and equal best rank: ordered by id
    fused = _reciprocal_rank_fusion([["q"], ["b"]], k=60, weights=(1.0, 1.0))
    assert [it.item_id for it in fused] == ["b", "q"]


def test_an_id_repeated_within_a_leg_keeps_its_best_rank():
    fused = _reciprocal_rank_fusion([["a", "b", "a"]], k=60, weights=(1.0,))
    assert _scores(fused) == pytest.approx({"a": 1 / 61, "b": 1 / 62})


def test_empty_legs_and_bad_arguments():
    assert _reciprocal_rank_fusion([[], []], k=60, weights=(1.0, 1.0)) == []
    with pytest.raises(ValueError, match="weights"):
        _reciprocal_rank_fusion([["a"], ["b"]], k=60, weights=(1.0,))
    with pytest.raises(ValueError, match="k must be"):
        _reciprocal_rank_fusion([["a"]], k=0, weights=(1.0,))


def test_a_zero_weight_leg_adds_nothing():
    fused = _reciprocal_rank_fusion([["a", "b"], ["b", "a"]], k=60, weights=(1.0, 0.0))
    assert [it.item_id for it in fused] == ["a", "b"]
    assert _scores(fused) == pytest.approx({"a": 1 / 61, "b": 1 / 62})


def test_every_candidate_carries_its_provenance(demo_store_fake):
    cfg = PipelineConfig().with_overrides({"retrieve.dense_weight": 0.7, "retrieve.keyword_weight": 1.3,
                                           "retrieve.rrf_k": 40})
    trace = retrieve.run("retry backoff after ERR_TIMEOUT_502", cfg.retrieve, StageContext(Models(embedder=FakeEmbedder()), demo_store_fake, cfg.embedding))
    assert trace.candidates
    assert (trace.rrf_k, trace.dense_weight, trace.keyword_weight) == (40, 0.7, 1.3)
    for position, c in enumerate(trace.candidates, start=1):
        assert c.fused_rank == position
        expected_dense = 0.7 / (40 + c.dense_rank) if c.dense_rank else 0.0
        expected_keyword = 1.3 / (40 + c.keyword_rank) if c.keyword_rank else 0.0
        assert c.dense_contribution == pytest.approx(expected_dense)
        assert c.keyword_contribution == pytest.approx(expected_keyword)
        assert c.fused_score == pytest.approx(expected_dense + expected_keyword)
        assert (c.dense_rank is None) == (c.dense_score is None)
        assert (c.keyword_rank is None) == (c.keyword_score is None)
    scores = [c.fused_score for c in trace.candidates]
    assert scores == sorted(scores, reverse=True)
    assert len({c.chunk_id for c in trace.candidates}) == len(trace.candidates)
