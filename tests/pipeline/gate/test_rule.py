"""The gate's one rule: pipeline.gate.stage.decide takes its verdict from pipeline.gate.rule.answers, and a
threshold grid decided in one broadcast call equals the thresholds decided one by one; a single evidence signal
is a rule of its own, and a signal that was not measured abstains."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.config import GateConfig
from pipeline.gate import rule
from pipeline.gate.stage import GateInputs, decide, evidence_arrays, learned_scores, score_arrays
from pipeline.trace import EvidenceSignals

NAN = float("nan")
# scores around the thresholds' own ranges (rerank [0, 1], fused ~[0, 0.033], cosine [-1, 1]), NaN: no score
SCORE = st.one_of(st.just(NAN), st.floats(-1.0, 1.0), st.sampled_from([0.0, 1 / 61, 0.03201, 0.45, 0.595]))
THRESHOLD = st.one_of(st.floats(-1.0, 1.0), st.sampled_from([0.0, 1 / 61, 0.03201, 0.45, 0.595]))


UNIT = st.one_of(st.none(), st.floats(0.0, 1.0))
EVIDENCE = st.builds(EvidenceSignals, window=UNIT, coverage=UNIT, critical=UNIT, bm25=UNIT, dense=UNIT,
                     dense_margin=UNIT, fused_norm=UNIT)


def inputs_of(rerank: float, fused: float, dense: float, evidence: EvidenceSignals = EvidenceSignals()) -> GateInputs:
    """GateInputs as gate_inputs builds them: a scale with a score is present, NaN means it is absent."""
    def best(chunk_id, score):
        return None if math.isnan(score) else (chunk_id, score)

    return GateInputs(rerank_ran=not math.isnan(rerank), no_rerank_reason="" if not math.isnan(rerank) else "rerank "
                      "skipped", no_retrieval_reason="retrieval found no candidates" if math.isnan(fused) else "",
                      dense_available=not math.isnan(dense), top_chunk_id="" if math.isnan(fused) else "top",
                      best_rerank=best("r", rerank), best_fused=best("f", fused), best_dense=best("d", dense),
                      signals=evidence)


@settings(max_examples=400, deadline=None)
@given(scores=st.tuples(SCORE, SCORE, SCORE), data=st.data(), signal=st.sampled_from(rule.SIGNALS),
       evidence=EVIDENCE, t_learned=st.floats(0.0, 1.0))
def test_decide_answers_exactly_when_the_rule_does(scores, data, signal, evidence, t_learned):
    rerank, fused, dense = scores
    # thresholds anywhere, or exactly on one of the case's scores (the boundary answers)
    on_a_score = st.sampled_from([s for s in scores if not math.isnan(s)] or [0.0])
    t_rerank, t_fused, t_dense = (data.draw(st.one_of(THRESHOLD, on_a_score)) for _ in range(3))
    values = {name: getattr(evidence, name) for name in rule.EVIDENCE}
    on_a_value = st.sampled_from([v for v in values.values() if v is not None] or [0.0])
    t_evidence = {name: data.draw(st.one_of(st.floats(0.0, 1.0), on_a_value)) for name in rule.EVIDENCE}
    cfg = GateConfig(signal=signal, confidence_threshold_rerank=t_rerank, confidence_threshold_fused=t_fused,
                     confidence_threshold_dense=t_dense, confidence_threshold_learned=t_learned,
                     **{f"confidence_threshold_{name}": t for name, t in t_evidence.items()})
    inputs = inputs_of(rerank, fused, dense, evidence)
    learned = learned_scores([inputs], cfg)
    verdict = rule.answers([rerank], [fused], [dense], signal, t_rerank, t_fused, t_dense, learned, t_learned,
                           {name: [NAN if v is None else v] for name, v in values.items()}, t_evidence)
    assert verdict.shape == (1,)
    g = decide(inputs, cfg)
    assert (g.decision == "answer") == bool(verdict[0])
    # the trace around the verdict agrees with it: the scale is the rule's, an answer passed every condition
    assert g.scale == rule.scale(signal, not math.isnan(rerank), not math.isnan(dense), not math.isnan(fused))
    assert g.signals == evidence
    not_measured = signal in rule.EVIDENCE and values[signal] is None
    if g.decision == "answer":
        assert all(c.passed for c in g.conditions) and g.margin >= 0
    elif not math.isnan(fused):
        assert not all(c.passed for c in g.conditions)
        assert g.margin < 0 or not_measured  # a signal without a value has no margin to speak of
    if signal in rule.EVIDENCE and not math.isnan(fused):
        # a single-signal rule records its signal, the run's value and its threshold
        (c,) = g.conditions
        assert (c.scale, c.threshold) == (signal, t_evidence[signal])
        if not not_measured:
            assert c.score == values[signal] and c.passed == (values[signal] >= t_evidence[signal])
        else:
            assert g.decision == "abstain" and f"no {signal} value" in g.reason
    # the sweep's extraction hands the rule the same arrays
    assert np.array_equal(np.stack(score_arrays([inputs])), np.array([[rerank], [fused], [dense]]), equal_nan=True)
    extracted = evidence_arrays([inputs])
    assert all(np.array_equal(extracted[n], [NAN if v is None else v], equal_nan=True) for n, v in values.items())


def _cases(n: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    rerank, fused, dense = rng.random(n), rng.random(n) * 0.033, rng.uniform(-0.2, 1.0, n)
    rerank[rng.random(n) < 0.4] = np.nan
    dense[rng.random(n) < 0.2] = np.nan
    fused[rng.random(n) < 0.05] = np.nan
    return rerank, fused, dense


@pytest.mark.parametrize("signal", [s for s in rule.SIGNALS if s not in rule.EVIDENCE])
def test_a_threshold_grid_equals_the_thresholds_one_by_one(signal):
    rerank, fused, dense = _cases(60, seed=7)
    t_rerank, t_fused, t_dense = np.linspace(0, 1, 5), np.linspace(0, 0.033, 6), np.linspace(-0.2, 1.0, 7)
    # a 2-D grid over (fused, dense) per rerank threshold, and the full 3-D grid: cases on the last axis
    for tr in t_rerank:
        grid = rule.answers(rerank, fused, dense, signal, tr, t_fused[:, None, None], t_dense[None, :, None])
        assert grid.shape == (len(t_fused), len(t_dense), len(fused))
        for i, tf in enumerate(t_fused):
            for j, td in enumerate(t_dense):
                one = rule.answers(rerank, fused, dense, signal, tr, tf, td)
                assert np.array_equal(grid[i, j], one), (tr, tf, td)
    cube = rule.answers(rerank, fused, dense, signal, t_rerank[:, None, None, None], t_fused[:, None, None],
                        t_dense[:, None])
    assert cube.shape == (len(t_rerank), len(t_fused), len(t_dense), len(fused))
    for a, tr in enumerate(t_rerank):
        assert np.array_equal(cube[a], rule.answers(rerank, fused, dense, signal, tr, t_fused[:, None, None],
                                                    t_dense[None, :, None]))


def test_the_scales_and_their_fallbacks():
    has_rerank, has_dense = np.array([True, True, False, False]), np.array([True, False, True, False])
    assert rule.scale("auto", has_rerank, has_dense).tolist() == ["rerank", "rerank", "fused_and_dense", "fused"]
    assert rule.scale("auto", has_rerank, has_dense, True).tolist() == ["learned"] * 4, \
        "auto is the learned rule (its reader set reads the reader's score where it ran)"
    assert rule.scale("learned", has_rerank, has_dense, [True, False, True, False]).tolist() == [
        "learned", "fused", "learned", "fused"]
    assert rule.scale("rerank", has_rerank, has_dense).tolist() == ["rerank", "rerank", "fused", "fused"]
    assert rule.scale("fused", has_rerank, has_dense).tolist() == ["fused"] * 4
    assert rule.scale("dense", has_rerank, has_dense).tolist() == ["dense", "fused", "dense", "fused"]
    assert rule.scale("fused_and_dense", has_rerank, has_dense).tolist() == ["fused_and_dense", "fused"] * 2
    for name in rule.EVIDENCE:  # no fallback: every case is read on the signal, measured or not
        assert rule.scale(name, has_rerank, has_dense, [True, False, True, False]).tolist() == [name] * 4
    with pytest.raises(ValueError, match="unknown gate signal"):
        rule.scale("cosine", True, True)


def test_no_fused_score_abstains_whatever_the_signal():
    evidence, t_evidence = {n: [0.9] for n in rule.EVIDENCE}, dict.fromkeys(rule.EVIDENCE, 0.0)
    for signal in rule.SIGNALS:
        assert not rule.answers([0.9], [NAN], [0.9], signal, 0.0, 0.0, 0.0, [0.9], 0.0, evidence, t_evidence)[0]
        assert rule.answers([0.9], [0.03], [0.9], signal, 0.0, 0.0, 0.0, [0.9], 0.0, evidence, t_evidence)[0]


@pytest.mark.parametrize("signal", rule.EVIDENCE)
def test_a_single_signal_rule_reads_that_signal_alone_and_a_missing_value_abstains(signal):
    # values at, below and above the threshold, one not measured; every other score would answer
    values = {name: np.array([0.5, 0.49, 0.8, NAN]) if name == signal else np.full(4, 0.0) for name in rule.EVIDENCE}
    t_evidence = {name: 0.5 if name == signal else 0.99 for name in rule.EVIDENCE}
    high = np.full(4, 0.99)
    verdict = rule.answers(high, np.full(4, 0.033), high, signal, 0.0, 0.0, 0.0, high, 0.0, values, t_evidence)
    assert verdict.tolist() == [True, False, True, False]
    # the other signals' values and thresholds do not move it
    others = {name: np.full(4, 1.0) if name != signal else v for name, v in values.items()}
    assert rule.answers(high, np.full(4, 0.033), high, signal, 0.0, 0.0, 0.0, high, 0.0, others,
                        {**t_evidence, **{n: 0.0 for n in rule.EVIDENCE if n != signal}}).tolist() == verdict.tolist()
    # no values for the signal at all: every case abstains, never falls back to another scale
    missing = {name: v for name, v in values.items() if name != signal}
    assert not rule.answers(high, np.full(4, 0.033), high, signal, 0.0, 0.0, 0.0, high, 0.0, missing,
                            t_evidence).any()
    with pytest.raises(ValueError, match=f"needs its threshold.*{signal}"):
        rule.answers(high, np.full(4, 0.033), high, signal, 0.0, 0.0, 0.0, high, 0.0, values, {})


@pytest.mark.parametrize("signal", rule.EVIDENCE)
def test_a_single_signal_threshold_grid_equals_the_thresholds_one_by_one(signal):
    rerank, fused, dense = _cases(60, seed=11)
    rng = np.random.default_rng(11)
    values = rng.random(60)
    values[rng.random(60) < 0.2] = np.nan
    evidence = {signal: values}
    t = np.linspace(0, 1, 9)
    grid = rule.answers(rerank, fused, dense, signal, 0.45, 0.03, 0.6, None, 0.5, evidence, {signal: t[:, None]})
    assert grid.shape == (len(t), len(fused))
    for i, ti in enumerate(t):
        one = rule.answers(rerank, fused, dense, signal, 0.45, 0.03, 0.6, None, 0.5, evidence, {signal: ti})
        assert np.array_equal(grid[i], one)
        assert np.array_equal(one, ~np.isnan(fused) & ~np.isnan(values) & (np.nan_to_num(values) >= ti))


@pytest.mark.parametrize("signal", ["auto", "learned"])
def test_a_learned_threshold_grid_equals_the_thresholds_one_by_one(signal):
    rerank, fused, dense = _cases(60, seed=3)
    learned = np.random.default_rng(3).random(60)
    t = np.linspace(0, 1, 9)
    grid = rule.answers(rerank, fused, dense, signal, 0.45, 0.03, 0.6, learned, t[:, None])
    for i, tl in enumerate(t):
        assert np.array_equal(grid[i], rule.answers(rerank, fused, dense, signal, 0.45, 0.03, 0.6, learned, tl))
    # wherever a learned probability was given, both rules answer exactly when it reaches t
    given = ~np.isnan(fused)
    assert np.array_equal(grid[4][given], learned[given] >= t[4])
