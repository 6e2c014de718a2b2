"""Convex fusion (retrieve.fusion = convex): hand-computed normalisations, the weight, what the trace records,
and that the RRF default is unchanged."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pipeline.config import ConfigError, PipelineConfig
from pipeline.context import StageContext
from pipeline.models.registry import Models
from pipeline.retrieval import retrieve
from pipeline.retrieval.retrieve import LegScores, fuse, normalise_scores
from pipeline.testing import FakeEmbedder
from pipeline.trace import Trace


def _scores(items):
    return {it.item_id: it.fused_score for it in items}


def test_minmax_and_theoretical_minmax_hand_computed():
    assert normalise_scores([0.8, 0.6, 0.4], "minmax", -1.0) == pytest.approx([1.0, 0.5, 0.0])
    # tmm measures from the lowest possible cosine (-1): close cosines stay close
    assert normalise_scores([0.8, 0.6, 0.4], "tmm", -1.0) == pytest.approx([1.0, 1.6 / 1.8, 1.4 / 1.8])
    assert normalise_scores([12.0, 3.0], "tmm", 0.0) == pytest.approx([1.0, 0.25])
    assert normalise_scores([5.0], "minmax", 0.0) == [1.0]  # one hit: nothing to stretch
    assert normalise_scores([], "minmax", 0.0) == []
    with pytest.raises(ValueError, match="normalisation"):
        normalise_scores([1.0], "zscore", 0.0)


def test_convex_fusion_hand_computed_with_a_leg_missing_an_item():
    dense = LegScores(("a", "b", "c"), (0.9, 0.7, 0.5))
    keyword = LegScores(("b", "d"), (10.0, 4.0))
    fused = fuse([dense, keyword], "convex", alpha=0.6, normalisation="minmax")
    # dense minmax: a 1, b 0.5, c 0; keyword minmax: b 1, d 0
    assert _scores(fused) == pytest.approx({"b": 0.6 * 0.5 + 0.4 * 1.0, "a": 0.6, "c": 0.0, "d": 0.0})
    assert [it.item_id for it in fused][:2] == ["b", "a"]
    b = next(it for it in fused if it.item_id == "b")
    assert b.ranks == (2, 1) and b.normalised == pytest.approx((0.5, 1.0))
    assert b.contributions == pytest.approx((0.3, 0.4))
    a = next(it for it in fused if it.item_id == "a")
    assert a.normalised == (1.0, None) and a.contributions == pytest.approx((0.6, 0.0))
    # c and d tie at 0: the better single-leg rank wins (d is 2nd on its leg, c 3rd on its)
    assert [it.item_id for it in fused][2:] == ["d", "c"]


def test_alpha_moves_the_order_between_the_legs():
    dense = LegScores(("a", "b"), (0.9, 0.1))
    keyword = LegScores(("b", "a"), (9.0, 1.0))
    assert fuse([dense, keyword], "convex", alpha=0.8)[0].item_id == "a"
    assert fuse([dense, keyword], "convex", alpha=0.2)[0].item_id == "b"
    assert [it.item_id for it in fuse([dense, keyword], "convex", alpha=1.0)] == ["a", "b"]


def test_bad_fusion_arguments_name_the_problem():
    legs = [LegScores(("a",), (1.0,)), LegScores(("a",), (1.0,))]
    with pytest.raises(ValueError, match="alpha"):
        fuse(legs, "convex", alpha=1.5)
    with pytest.raises(ValueError, match="fusion must be"):
        fuse(legs, "borda")
    with pytest.raises(ValueError, match="legs"):
        fuse(legs[:1], "convex")
    with pytest.raises(ConfigError):
        PipelineConfig().with_overrides({"retrieve.fusion": "borda"})
    with pytest.raises(ConfigError):
        PipelineConfig().with_overrides({"retrieve.convex_dense_weight": 1.5})


def test_rrf_through_fuse_is_the_rrf_function():
    legs = [LegScores(("a", "b", "c"), (3.0, 2.0, 1.0)), LegScores(("b", "d"), (5.0, 1.0))]
    fused = fuse(legs, "rrf", k=60, weights=(1.0, 1.0))
    assert _scores(fused) == pytest.approx({"b": 1 / 62 + 1 / 61, "a": 1 / 61, "d": 1 / 62, "c": 1 / 63})


_leg = st.lists(st.tuples(st.sampled_from("abcdefgh"), st.floats(-1.0, 50.0, allow_nan=False)), max_size=8,
                unique_by=lambda t: t[0])


@given(_leg, _leg, st.floats(0.0, 1.0), st.sampled_from(["minmax", "tmm"]))
def test_convex_scores_stay_in_unit_range_and_sorted(dense, keyword, alpha, normalisation):
    dense = sorted(dense, key=lambda t: -t[1])
    keyword = sorted(((i, abs(s)) for i, s in keyword), key=lambda t: -t[1])
    legs = [LegScores(tuple(i for i, _ in dense), tuple(s for _, s in dense)),
            LegScores(tuple(i for i, _ in keyword), tuple(s for _, s in keyword))]
    fused = fuse(legs, "convex", alpha=alpha, normalisation=normalisation)
    assert {it.item_id for it in fused} == {i for i, _ in dense} | {i for i, _ in keyword}
    scores = [it.fused_score for it in fused]
    assert scores == sorted(scores, reverse=True)
    assert all(-1e-9 <= s <= 1 + 1e-9 for s in scores)
    for it in fused:
        assert all(n is None or -1e-9 <= n <= 1 + 1e-9 for n in it.normalised)


def test_the_stage_records_convex_scores_and_keeps_the_rrf_value(demo_store_fake):
    models = Models(embedder=FakeEmbedder())
    cfg = PipelineConfig().with_overrides({"retrieve.fusion": "convex", "retrieve.convex_dense_weight": 0.3,
                                           "retrieve.convex_normalisation": "tmm"})
    ctx = StageContext(models, demo_store_fake, cfg.embedding)
    trace = retrieve.run("retry backoff after ERR_TIMEOUT_502", cfg.retrieve, ctx)
    rrf = retrieve.run("retry backoff after ERR_TIMEOUT_502", PipelineConfig().retrieve, ctx)
    assert trace.candidates
    assert (trace.fusion, trace.convex_dense_weight, trace.convex_normalisation) == ("convex", 0.3, "tmm")
    assert "normalised" in trace.fused_scale_note and "normalised" not in rrf.fused_scale_note
    rrf_by_id = {c.chunk_id: c.fused_score for c in rrf.candidates}
    for c in trace.candidates:
        expected_dense = 0.3 * c.dense_norm if c.dense_norm is not None else 0.0
        expected_keyword = 0.7 * c.keyword_norm if c.keyword_norm is not None else 0.0
        assert (c.dense_norm is None) == (c.dense_rank is None)
        assert (c.keyword_norm is None) == (c.keyword_rank is None)
        assert c.dense_contribution == pytest.approx(expected_dense)
        assert c.keyword_contribution == pytest.approx(expected_keyword)
        assert c.fused_score == pytest.approx(expected_dense + expected_keyword)
        assert c.rrf_score == pytest.approx(rrf_by_id[c.chunk_id])  # the gate's RRF scale is still there
    scores = [c.fused_score for c in trace.candidates]
    assert scores == sorted(scores, reverse=True)
    assert {c.chunk_id for c in trace.candidates} == set(rrf_by_id)
    # the default stays RRF: fused_score is the RRF value and no normalised scores are claimed
    assert rrf.fusion == "rrf" and all(c.dense_norm is None and c.fused_score == c.rrf_score
                                       for c in rrf.candidates)


def test_the_fused_gate_rule_reads_the_rrf_value_under_convex_fusion(demo_store_fake):
    """A convex fused score is in [0, 1]: compared with the RRF-scale threshold every question would pass."""
    from pipeline.gate import stage as gate
    from pipeline.trace import RerankTrace

    ctx = StageContext(Models(embedder=FakeEmbedder()), demo_store_fake, PipelineConfig().embedding)
    convex = PipelineConfig().with_overrides({"retrieve.fusion": "convex", "gate.signal": "fused"})
    rrf = PipelineConfig().with_overrides({"gate.signal": "fused"})
    for question in ("retry backoff after ERR_TIMEOUT_502", "how do I bake sourdough bread"):
        by_convex = gate.run(retrieve.run(question, convex.retrieve, ctx), RerankTrace(status="skipped"), convex.gate)
        by_rrf = gate.run(retrieve.run(question, rrf.retrieve, ctx), RerankTrace(status="skipped"), rrf.gate)
        assert by_convex.conditions[0].score == pytest.approx(by_rrf.conditions[0].score)
        assert by_convex.conditions[0].score < 2 / (rrf.retrieve.rrf_k + 1) + 1e-9
        assert by_convex.decision == by_rrf.decision


def test_a_convex_trace_round_trips_and_an_old_trace_reads_as_rrf(demo_store_fake):
    cfg = PipelineConfig().with_overrides({"retrieve.fusion": "convex"})
    trace = retrieve.run("retry backoff", cfg.retrieve, StageContext(Models(embedder=FakeEmbedder()),
                                                                     demo_store_fake, cfg.embedding))
    full = Trace(question="retry backoff", retrieval=trace)
    assert Trace.from_json(full.to_json()) == full
    old = full.to_dict()  # a trace stored before the fields existed
    old["retrieval"].pop("fusion")
    for c in old["retrieval"]["candidates"]:
        for key in ("rrf_score", "dense_norm", "keyword_norm"):
            c.pop(key)
    assert Trace.from_dict(old).retrieval.fusion == "rrf"
