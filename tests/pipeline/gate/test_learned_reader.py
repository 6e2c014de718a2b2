"""The learned rule's reader set: it decides the runs the reader scored, once fitted; the first set decides the
rest, so a run without the reader is never read as "the reader found no answer"."""

import dataclasses

import numpy as np
import pytest

from pipeline.config import GateConfig
from pipeline.gate import learned
from pipeline.trace import EvidenceSignals

BASE = EvidenceSignals(window=0.7, coverage=0.8, critical=1.0, bm25=0.9, dense=0.6, dense_margin=0.05,
                       fused_norm=0.9)
FITTED = GateConfig(learned_r_intercept=-2.0, learned_r_reader=6.0)


def test_an_unfitted_reader_set_leaves_every_run_to_the_first_set():
    with_reader = dataclasses.replace(BASE, reader=0.01)
    assert learned.probabilities([with_reader], GateConfig())[0] == learned.probabilities([BASE], GateConfig())[0]


def test_the_reader_set_decides_where_the_reader_scored_and_reads_its_score():
    low, high = dataclasses.replace(BASE, reader=0.05), dataclasses.replace(BASE, reader=0.95)
    p = learned.probabilities([low, high, BASE], FITTED)
    assert p[0] == pytest.approx(1 / (1 + np.exp(-(-2.0 + 6.0 * 0.05))))
    assert p[1] == pytest.approx(1 / (1 + np.exp(-(-2.0 + 6.0 * 0.95))))
    assert p[2] == learned.probabilities([BASE], GateConfig())[0], "no reader score: the first set decides"
    names = [c.name for c in learned.contributions(high, FITTED)]
    assert names[-1] == "reader" and "reader" not in [c.name for c in learned.contributions(BASE, FITTED)]


def test_fitting_with_the_reader_column_fits_its_coefficient():
    rng = np.random.default_rng(0)
    reader = rng.random(200)
    labels = reader + 0.1 * rng.standard_normal(200) > 0.5
    values = np.hstack([rng.random((200, len(learned.FEATURES))), reader[:, None]])
    intercept, coefs = learned.fit(values, labels)
    assert len(coefs) == len(learned.READER_FEATURES)
    assert coefs[-1] > 5 * max(abs(coefs[:-1]))


@pytest.mark.parametrize("chosen, shared", [(0.3, 0.9), (0.95, 0.5)])
def test_the_intercept_shift_moves_the_operating_point_onto_the_shared_threshold(chosen, shared):
    intercept = 0.4
    z = np.linspace(-6, 6, 241)
    before = 1 / (1 + np.exp(-(intercept + z))) >= chosen
    after = 1 / (1 + np.exp(-(learned.shift_intercept(intercept, chosen, shared) + z))) >= shared
    assert np.array_equal(before, after)
