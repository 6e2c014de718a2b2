"""workbench tune: the sweep replays the gate's own rule (pipeline.gate.rule), the recommendation is the best point
within the false-answer bound, and the report, plots and reused traces land under --out."""

from __future__ import annotations

import contextlib
import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import plotly.graph_objects as go
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.config import GateConfig, PipelineConfig
from pipeline.engine import Pipeline
from pipeline.gate import rule as gate_rule
from pipeline.gate import signals as gate_signals
from pipeline.gate.stage import GateInputs, decide
from pipeline.testing import fake_models
from pipeline.trace import EvidenceSignals
from workbench import evaluate, figures, tune
from workbench.golden import load_golden
from workbench.metrics import roc_auc
from workbench.sweep import (
    SIGNALS,
    Scores,
    best_setting,
    candidate_thresholds,
    cross_validate,
    extract,
    folds,
    rates,
    sweep,
    thresholds_of,
)

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "golden" / "golden.jsonl"


def scores(dense, answerable, fused=None, rerank=None) -> Scores:
    n = len(dense)
    nan = np.full(n, np.nan)
    return Scores(ids=tuple(f"c{i}" for i in range(n)), answerable=np.array(answerable, dtype=bool),
                  rerank=nan if rerank is None else np.array(rerank, dtype=float),
                  fused=np.full(n, 0.03) if fused is None else np.array(fused, dtype=float),
                  dense=np.array(dense, dtype=float), inputs=())


def answers(s: Scores, rule: str, **thresholds) -> np.ndarray:
    """The rule over the cases, thresholds not given as configured by default."""
    t = {**thresholds_of(GateConfig()), **thresholds}
    return gate_rule.answers(s.rerank, s.fused, s.dense, rule, t["t_rerank"], t["t_fused"], t["t_dense"],
                             s.learned, t["t_learned"], s.evidence_values,
                             {name: t[f"t_{name}"] for name in gate_rule.EVIDENCE})


def replay_decisions(s: Scores, rule: str, cfg: GateConfig) -> np.ndarray:
    """The same decisions through pipeline.gate.stage.decide, one trace at a time."""
    gcfg = replace(cfg, signal=rule)
    return np.array([decide(i, gcfg).decision == "answer" for i in s.inputs], dtype=bool)


def test_roc_auc_counts_ties_as_half_and_needs_both_classes():
    assert roc_auc([0.9, 0.8, 0.2, 0.1], [True, True, False, False]) == 1.0
    assert roc_auc([0.1, 0.2, 0.8, 0.9], [True, True, False, False]) == 0.0
    assert roc_auc([0.5, 0.5, 0.5, 0.5], [True, False, True, False]) == 0.5
    assert roc_auc([0.9, 0.4, 0.6, 0.1], [True, True, False, False]) == 0.75
    assert roc_auc([0.9, 0.8], [True, True]) is None
    assert roc_auc([float("-inf"), 0.3, 0.2, 0.5], [True, True, False, False]) == 0.25, \
        "no evidence (-inf) ranks below every score"
    with pytest.raises(ValueError, match="NaN"):
        roc_auc([float("nan"), 0.2], [True, False])


def test_best_setting_answers_the_most_answerable_within_the_bound():
    # answerable 0.9 0.8 0.7 0.25 | unanswerable 0.75 and 19 × 0.3 (20 unanswerable: one false answer = 5 %)
    s = scores([0.9, 0.8, 0.7, 0.25, 0.75] + [0.3] * 19, [True] * 4 + [False] * 20)
    best = best_setting(s, "dense", GateConfig(), max_far=0.05)
    assert best["answer_rate_answerable"] == 0.75 and best["false_answer_rate_unanswerable"] == 0.05
    assert 0.3 < best["t_dense"] < 0.7                     # a midpoint, never on a case's score
    strict = best_setting(s, "dense", GateConfig(), max_far=0.0)
    assert strict["answer_rate_answerable"] == 0.5 and 0.75 < strict["t_dense"] < 0.8


def test_candidate_thresholds_cover_every_outcome():
    t = candidate_thresholds(np.array([0.2, 0.5, 0.5, np.nan, 0.9]))
    assert t[0] < 0.2 and t[-1] > 0.9 and np.allclose(t[1:-1], [0.35, 0.7])


def test_fused_and_dense_needs_both_and_dense_falls_back_to_fused_without_a_dense_score():
    s = scores([0.7, 0.7, np.nan], [True, False, True], fused=[0.032, 0.016, 0.032])
    # each half is the gate's own decision, so the dense half also falls back to fused
    assert answers(s, "fused_and_dense", t_fused=0.03, t_dense=0.6).tolist() == [True, False, True]
    assert answers(s, "dense", t_fused=0.03, t_dense=0.6).tolist() == [True, True, True]
    assert answers(s, "dense", t_fused=0.033, t_dense=0.6).tolist() == [True, True, False]


UNIT = st.one_of(st.none(), st.floats(0.0, 1.0))
SCORE = st.one_of(st.none(), st.floats(0.0, 1.0))


@st.composite
def gate_inputs(draw) -> GateInputs:
    """One run's gate inputs: any scale or evidence signal may be missing."""
    rerank, fused, dense = draw(SCORE), draw(SCORE), draw(SCORE)
    evidence = draw(st.builds(EvidenceSignals, window=UNIT, coverage=UNIT, critical=UNIT, bm25=UNIT, dense=UNIT,
                              dense_margin=UNIT, fused_norm=UNIT))
    return GateInputs(rerank_ran=rerank is not None, dense_available=dense is not None,
                      top_chunk_id="" if fused is None else "top",
                      best_rerank=None if rerank is None else ("r", rerank),
                      best_fused=None if fused is None else ("f", fused),
                      best_dense=None if dense is None else ("d", dense), signals=evidence)


@settings(max_examples=60, deadline=None)
@given(inputs=st.lists(gate_inputs(), min_size=1, max_size=12), rule=st.sampled_from(gate_rule.EVIDENCE),
       threshold=st.floats(0.0, 1.0))
def test_the_sweep_decides_a_single_signal_rule_as_the_gate_does(inputs, rule, threshold):
    """Scores built from the gate's inputs (the sweep's extraction) replay every single-signal rule exactly as
    pipeline.gate.stage.decide decides each run, a missing value abstaining in both."""
    s = Scores(ids=tuple(str(i) for i in range(len(inputs))), answerable=np.ones(len(inputs), dtype=bool),
               rerank=np.full(len(inputs), np.nan), fused=np.array([np.nan if i.best_fused is None
                                                                    else i.best_fused[1] for i in inputs]),
               dense=np.full(len(inputs), np.nan), inputs=tuple(inputs))
    cfg = replace(GateConfig(), **{f"confidence_threshold_{rule}": threshold})
    assert s.answers(rule, **thresholds_of(cfg)).tolist() == replay_decisions(s, rule, cfg).tolist()
    measured = np.isfinite(s.signal(rule)) & np.isfinite(s.fused)
    assert not s.answers(rule, **{**thresholds_of(cfg), f"t_{rule}": -1.0})[~measured].any()


def test_best_setting_of_a_single_signal_rule_never_answers_a_case_without_its_value():
    # window: answerable 0.9 0.8 and one not measured | unanswerable 0.75 and 0.3
    window = np.array([0.9, 0.8, np.nan, 0.75, 0.3])
    s = Scores(ids=tuple("abcde"), answerable=np.array([True, True, True, False, False]),
               rerank=np.full(5, np.nan), fused=np.full(5, 0.03), dense=np.full(5, 0.9), inputs=(),
               evidence_values={"window": window})
    best = best_setting(s, "window", GateConfig(), max_far=0.0)
    assert 0.75 < best["t_window"] < 0.8 and best["answer_rate_answerable"] == pytest.approx(2 / 3)
    loosest = best_setting(s, "window", GateConfig(), max_far=1.0)
    assert loosest["answer_rate_answerable"] == pytest.approx(2 / 3), "the unmeasured case abstains at any threshold"
    # a signal with no values at all is not swept, and its rule abstains everywhere
    assert "coverage" not in s.available() and not s.answers("coverage", **thresholds_of(GateConfig())).any()


def test_folds_are_stratified_and_partition_the_cases():
    y = np.array([True] * 13 + [False] * 7)
    parts = folds(y, k=5)
    assert sorted(np.concatenate(parts).tolist()) == list(range(20))
    assert all(y[p].any() and (~y[p]).any() for p in parts)


@pytest.fixture(scope="module")
def traces(demo_store_fake):
    """Search traces for 40 golden cases: the first 20 with the fake reranker, the rest without one."""
    golden = load_golden(GOLDEN)
    cases = golden.cases[:40]
    cfg = PipelineConfig()
    with_rerank = Pipeline(demo_store_fake, fake_models(), cfg, log_runs=False)
    without = Pipeline(demo_store_fake, fake_models(reranker=False), cfg, log_runs=False)
    out = [(with_rerank if i < 20 else without).search(c.question, history=[m.__dict__ for m in c.history])
           for i, c in enumerate(cases)]
    return cases, out


def test_vectorised_decisions_agree_with_gate_replay_on_a_grid(traces):
    cases, ts = traces
    s = extract([c.id for c in cases], [c.answerable for c in cases], ts)
    assert np.isfinite(s.rerank[:20]).all() and np.isnan(s.rerank[20:]).all()
    rng = np.random.default_rng(1)
    for _ in range(30):
        cfg = GateConfig(confidence_threshold_rerank=float(rng.choice(s.rerank[:20])),
                         confidence_threshold_fused=float(rng.choice(s.fused)),
                         confidence_threshold_dense=float(rng.choice(s.dense)),  # thresholds ON observed scores
                         confidence_threshold_learned=float(rng.choice(s.learned)),
                         **{f"confidence_threshold_{name}": float(rng.choice(s.signal(name)))
                            for name in gate_rule.EVIDENCE})
        for rule in ("auto", "fused", "dense", "fused_and_dense", "learned", *gate_rule.EVIDENCE):
            fast = s.answers(rule, **thresholds_of(cfg))
            assert fast.tolist() == answers(s, rule, **thresholds_of(cfg)).tolist(), rule
            assert fast.tolist() == replay_decisions(s, rule, cfg).tolist(), rule
    # the stored gate decision is the default config's replay
    assert answers(s, "auto").tolist() == [t.gate.decision == "answer" for t in ts]


def test_sweep_report_per_signal_and_grids(traces):
    cases, ts = traces
    s = extract([c.id for c in cases], [c.answerable for c in cases], ts)
    report = sweep(s, GateConfig(), max_far=0.2, grid_size=6)
    # every rule is swept, each single evidence signal among them
    assert set(report["rules"]) == {"rerank", "fused", "dense", "learned", "fused_and_dense", *gate_rule.EVIDENCE}
    # every evidence signal alone is measured: windows stored at ingestion for every case, rerank for 20
    assert set(report["evidence"]) == set(gate_signals.NAMES)
    assert report["evidence"]["window"]["cases_with_score"] == len(cases)
    assert report["evidence"]["rerank"]["cases_with_score"] == 20
    assert 0.0 <= report["evidence"]["coverage"]["roc_auc"] <= 1.0
    assert "replay_check" not in report     # the sweep runs the gate's own rule: nothing left to cross-check
    for name in ("rerank", "fused", "dense", *gate_rule.EVIDENCE):
        rule = report["rules"][name]
        assert 0.0 <= rule["roc_auc"] <= 1.0
        best, curve = rule["best"], rule["curve"]
        feasible = [a for a, f in zip(curve["answer_rate_answerable"], curve["false_answer_rate_unanswerable"],
                                      strict=True) if f <= 0.2]
        if best is None:  # rerank: the unreranked half answers on the fused scale whatever t_rerank is
            assert not feasible
        else:
            assert best["false_answer_rate_unanswerable"] <= 0.2
            assert best["answer_rate_answerable"] == max(feasible)
    assert report["rules"]["dense"]["best"] is not None
    grid = report["grids"]["fused_and_dense"]
    assert np.array(grid["answer_rate_answerable"]).shape == (len(grid["ys"]), len(grid["xs"]))
    defaults = GateConfig()  # the configured thresholds are on the grid
    assert defaults.confidence_threshold_fused in grid["xs"] and defaults.confidence_threshold_dense in grid["ys"]
    cv = cross_validate(s, "dense", GateConfig(), 0.2)
    assert 0.0 <= cv["answer_rate_answerable"] <= 1.0


def test_figures_are_plain_plotly_figures():
    s = scores([0.9, 0.8, 0.4, 0.3], [True, True, False, False], fused=[0.03, 0.02, 0.03, 0.01])
    report = sweep(s, GateConfig(), max_far=0.5, grid_size=3)
    curves = {n: report["rules"][n]["curve"] for n in ("fused", "dense")}
    trade = figures.tradeoff_figure(curves, [{"label": "current", **report["current_gate"]}], 0.05)
    assert isinstance(trade, go.Figure) and [t.name for t in trade.data] == ["fused", "dense", "current"]
    dist = figures.score_distributions_figure({"fused": s.fused, "dense": s.dense, "rerank": s.rerank},
                                              s.answerable, {"dense": {"current": 0.45, "recommended": 0.6}})
    assert len(dist.data) == 4                            # two signals with scores × (answerable, unanswerable)
    heat = figures.heatmap_figure(report["grids"]["fused_and_dense"], max_far=0.0)
    assert isinstance(heat.data[0], go.Heatmap) and len(heat.data) == 2   # crossed-out cells drawn on top


def test_the_distributions_figure_holds_every_signal_of_the_sweep():
    """With a cross-encoder every swept signal has scores: ten panels, one per signal."""
    rng = np.random.default_rng(0)
    values = {name: rng.random(8) for name in SIGNALS}
    fig = figures.score_distributions_figure(values, [True, False] * 4)
    assert [a.text for a in fig.layout.annotations] == list(SIGNALS) and len(fig.data) == 2 * len(SIGNALS)


def _labels(fig) -> dict[str, tuple[float, str]]:
    return {a.text: (a.x, a.xanchor) for a in fig.layout.annotations if a.text.startswith(("current", "recommended"))}


def test_close_threshold_lines_put_their_labels_on_opposite_sides():
    """Two thresholds a hair apart (0.574 and 0.595) must not print their labels over each other: each label
    reads away from the other line; equal thresholds share one label."""
    scores, answerable = {"dense": [0.2, 0.5, 0.6, 0.7]}, [False, False, True, True]
    fig = figures.score_distributions_figure(scores, answerable, {"dense": {"current": 0.595, "recommended": 0.574}})
    labels = _labels(fig)
    assert labels["current 0.595"][1] == "left" and labels["recommended 0.574"][1] == "right"
    swapped = _labels(figures.score_distributions_figure(
        scores, answerable, {"dense": {"current": 0.5, "recommended": 0.6}}))
    assert swapped["current 0.5"][1] == "right" and swapped["recommended 0.6"][1] == "left"
    same = _labels(figures.score_distributions_figure(
        scores, answerable, {"dense": {"current": 0.595, "recommended": 0.595}}))
    assert list(same) == ["current = recommended 0.595"]


def _tune(monkeypatch, store, golden, out, config=None, **kw):
    cfg = PipelineConfig.from_json(Path(config).read_text(encoding="utf-8")) if config else PipelineConfig()
    return tune.run_tune(golden, cfg, out=out, grid=8, open_store=lambda: contextlib.nullcontext(store),
                         models=fake_models(reranker=False), **kw)


@pytest.fixture(scope="module")
def small_golden(tmp_path_factory):
    lines = GOLDEN.read_text(encoding="utf-8").splitlines()
    path = tmp_path_factory.mktemp("golden") / "small.jsonl"
    path.write_text("\n".join(lines[:30]) + "\n", encoding="utf-8")
    return path


def test_tune_writes_report_and_plots_and_reuses_its_traces(demo_store_fake, small_golden, tmp_path,
                                                            monkeypatch, capsys):
    out = tmp_path / "tune"
    assert _tune(monkeypatch, demo_store_fake, small_golden, out) == 0
    first = capsys.readouterr().out
    assert first.startswith("# Gate threshold sweep") and "searched 30 cases" in first
    for name in ("report.md", "report.json", "tradeoff.html", "distributions.html", "heatmap.html",
                 "traces.jsonl", "traces.meta.json"):
        assert (out / name).is_file(), name
    report = json.loads((out / "report.json").read_text())
    assert report["cases"] == 30 and report["recommendation"]
    assert "fused" in report["rules"] and "dense" in report["rules"]

    assert _tune(monkeypatch, demo_store_fake, small_golden, out) == 0
    assert "reused" in capsys.readouterr().out
    assert json.loads((out / "report.json").read_text())["rules"]["dense"]["best"] == report["rules"]["dense"]["best"]


def test_tune_replays_an_evaluations_traces_without_a_store(demo_store_fake, small_golden, tmp_path, monkeypatch,
                                                            capsys):
    monkeypatch.setattr(evaluate, "default_models", lambda: fake_models(reranker=False))
    ev = evaluate.evaluate(load_golden(small_golden), demo_store_fake, fake_models(reranker=False),
                           PipelineConfig(), nli=False)
    evaluate.write_outputs(tmp_path / "eval", ev)

    def no_store():
        raise AssertionError("the store must not be opened when --traces is given")

    assert tune.run_tune(small_golden, PipelineConfig(), out=tmp_path / "t", traces=tmp_path / "eval" / "traces.jsonl",
                         grid=5, json_output=True, open_store=no_store) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["source"].startswith("replayed") and report["cases"] == 30
    # the sweep's current point is exactly what the evaluation measured
    # (the summary rounds to 4 decimals)
    current = report["current_gate"]
    assert current["answer_rate_answerable"] == pytest.approx(ev.summary["answer_rate_answerable"], abs=5e-5)
    assert current["false_answer_rate_unanswerable"] == pytest.approx(ev.summary["false_answer_rate_unanswerable"],
                                                                      abs=5e-5)


def test_tune_never_rewrites_the_config_file(demo_store_fake, small_golden, tmp_path, monkeypatch, capsys):
    config = tmp_path / "config.json"
    config.write_text(PipelineConfig().to_json(), encoding="utf-8")
    before = config.read_bytes()
    assert _tune(monkeypatch, demo_store_fake, small_golden, tmp_path / "t", config=str(config)) == 0
    assert config.read_bytes() == before
    assert "never changes the config" in capsys.readouterr().out


def test_rates_are_nan_when_a_class_is_missing():
    ar, far = rates(np.array([True, False]), np.array([True, True]))
    assert ar == 0.5 and np.isnan(far)
    assert replace(GateConfig(), signal="dense").signal == "dense"
