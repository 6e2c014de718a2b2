"""Gate lab: what-if sliders replay the gate on the stored trace; retrieval and rerank are not re-run."""

from __future__ import annotations

import re

import numpy as np
from conftest import ask, html_of, open_app, unmark

from pipeline.config import PipelineConfig
from workbench.app import resources


def _decision(at, label: str) -> str:
    match = re.search(rf"class='wb-gate-{label}' data-decision='(\w+)'", html_of(at))
    assert match, f"no {label} decision on the page"
    return match.group(1)


def _model_calls() -> tuple[int, int]:
    models = resources.models()
    cfg = PipelineConfig()
    return models.embedder(cfg.embedding).calls, models.reranker(cfg.rerank).calls


def test_page_renders_before_any_question(app_env):
    at = open_app("gate_lab")
    assert not at.error
    assert any("Score a question" in i.value for i in at.info)


def test_a_threshold_slider_flips_the_decision_without_recomputing_retrieval(app_env):
    at = open_app("gate_lab")
    at.text_input(key="gate.question").set_value("What does ERR_TIMEOUT_502 mean?")
    at.button(key="gate.search").click().run()
    assert _decision(at, "stored") == "answer"
    assert _decision(at, "what-if") == "answer"
    before = _model_calls()

    at.slider(key="gate.whatif.rerank").set_value(0.99).run()
    assert _decision(at, "what-if") == "abstain", "the rerank threshold above the top score abstains"
    assert _decision(at, "stored") == "answer", "the stored run is unchanged"
    assert "The decision flips: answer → abstain" in html_of(at)
    assert _model_calls() == before, "no encoder or reranker call: the gate was replayed on stored scores"

    at.selectbox(key="gate.whatif.signal").set_value("fused").run()
    at.slider(key="gate.whatif.fused").set_value(0.0).run()
    assert _decision(at, "what-if") == "answer"
    fused = at.slider(key="gate.whatif.fused")
    assert fused.max == 0.0328, "the slider ends just above the highest possible fused score, 2/61"
    fused.set_value(fused.max).run()
    assert _decision(at, "what-if") == "abstain", "no fused score reaches the slider's end (two legs max 2/61)"
    assert _model_calls() == before


def test_the_last_ask_answer_can_be_opened(app_env):
    at = ask(open_app(), "What does ERR_TIMEOUT_502 mean?")
    at.switch_page("workbench/app/pages/gate_lab.py").run()
    at.button(key="gate.use_ask").click().run()
    assert _decision(at, "stored") == "answer"
    assert at.slider(key="gate.whatif.rerank").value == PipelineConfig().gate.confidence_threshold_rerank


def test_empty_question_is_an_error(app_env):
    at = open_app("gate_lab")
    at.button(key="gate.search").click().run()
    assert len(at.error) == 1 and "empty" in at.error[0].value


def test_what_if_sliders_show_each_threshold_at_its_precision(app_env):
    at = open_app("gate_lab")
    at.text_input(key="gate.question").set_value("What does ERR_TIMEOUT_502 mean?")
    at.button(key="gate.search").click().run()
    dense = at.slider(key="gate.whatif.dense")
    assert dense.proto.format == "%.3f" and dense.value == PipelineConfig().gate.confidence_threshold_dense, \
        "0.595 is shown as 0.595, not 0.59"
    assert dense.proto.step == 0.005
    fused = at.slider(key="gate.whatif.fused")
    assert fused.proto.format == "%.5f" and fused.value == PipelineConfig().gate.confidence_threshold_fused
    scales = next(df.value for df in at.dataframe if "what-if threshold" in df.value.columns)
    assert scales.set_index("scale").loc["fused", "what-if threshold"] == \
        f"{PipelineConfig().gate.confidence_threshold_fused:.5f}"


def test_the_learned_rule_shows_its_signals_and_each_terms_contribution(app_env):
    at = open_app("gate_lab")
    at.text_input(key="gate.question").set_value("What does ERR_TIMEOUT_502 mean?")
    at.button(key="gate.search").click().run()
    at.selectbox(key="gate.whatif.signal").set_value("learned").run()
    terms = next(df.value for df in at.dataframe if "contribution" in df.value.columns).set_index("term")
    assert list(terms.index) == ["intercept", "window", "coverage", "critical", "bm25", "dense", "dense_margin",
                                 "fused_norm"]
    window = terms.loc["window"]
    assert abs(window["contribution"] - window["value"] * window["coefficient"]) < 1e-3
    evidence = next(df.value for df in at.dataframe if "signal" in df.value.columns
                    and "value" in df.value.columns).set_index("signal")
    assert evidence.loc["critical terms missing", "value"] == "none"  # the page states ERR_TIMEOUT_502
    at.slider(key="gate.whatif.learned").set_value(1.0).run()
    assert _decision(at, "what-if") == "abstain"
    # the abstention says which case it is, in words, before any number
    assert "class='wb-gate-case'>The documents cover this topic, but no passage states the answer." in html_of(at)


def test_the_label_free_estimate_shows_beside_the_labelled_curve(app_env):
    at = open_app("gate_lab")
    at.number_input(key="gate.golden.calibration.probes").set_value(12).run()
    at.button(key="gate.golden.calibration.run").click().run(timeout=300)
    assert not at.exception, [e.value for e in at.exception]
    table = next(df.value for df in at.dataframe if "estimated false answers" in df.value.columns)
    assert list(table["setting"]) == ["configured", "calibrated for ≤ 5.0 % false answers"]
    assert table["estimated false answers"].between(0, 1).all() and table["estimated answered"].between(0, 1).all()
    assert "measured false answers" not in table.columns, "no labels yet: the estimate alone"
    report = next(c.value for c in at.caption if "rule read:" in unmark(c.value))
    assert "rule read: rerank" in unmark(report) and "  \n" in report, "one line per figure"

    at.button(key="gate.golden.run").click().run(timeout=300)  # the golden set's labels
    table = next(df.value for df in at.dataframe if "estimated false answers" in df.value.columns)
    assert {"measured answered", "measured false answers"} <= set(table.columns)
    error = table["false answers: estimate − measured (points)"]
    assert np.allclose(error, 100 * (table["estimated false answers"] - table["measured false answers"]), atol=0.01)
    points = next(df.value for df in at.dataframe if "label" in df.value.columns)
    assert {"estimate (configured)", "estimate (calibrated)", "calibrated, measured"} <= set(points["label"])
    assert any(c.key == "gate.golden.tradeoff" for c in at.get("plotly_chart"))


def test_a_single_evidence_signal_is_a_what_if_rule_with_its_own_threshold(app_env):
    at = open_app("gate_lab")
    at.text_input(key="gate.question").set_value("What does ERR_TIMEOUT_502 mean?")
    at.button(key="gate.search").click().run()
    assert "window" in at.selectbox(key="gate.whatif.signal").options
    assert not [s for s in at.slider if s.key == "gate.whatif.window"], "shown only while it is the rule chosen"
    at.selectbox(key="gate.whatif.signal").set_value("window").run()
    window = at.slider(key="gate.whatif.window")
    assert window.value == PipelineConfig().gate.confidence_threshold_window and window.proto.format == "%.3f"
    scales = next(df.value for df in at.dataframe if "what-if threshold" in df.value.columns).set_index("scale")
    assert scales.loc["window", "read by the what-if gate"] and not scales.loc["rerank", "read by the what-if gate"]
    value = float(scales.loc["window", "top score"])  # the run's best sentence-window cosine
    window.set_value(round(value - 0.005, 3)).run()
    assert _decision(at, "what-if") == "answer"
    at.slider(key="gate.whatif.window").set_value(round(value + 0.005, 3)).run()
    assert _decision(at, "what-if") == "abstain"
    assert f"window score {value:.2f}" in html_of(at) and f"&lt; threshold {round(value + 0.005, 3):g}" in html_of(at), \
        "the reason names the signal, its value and the threshold"


def _reader_outcome(at) -> str:
    match = re.search(r"class='wb-reader-outcome' data-outcome='(\w+)'", html_of(at))
    assert match, "no reader step on the page"
    return match.group(1)


def test_the_reader_after_the_gate_can_be_switched_off_and_its_threshold_moved(app_env):
    at = open_app("gate_lab", settings=None)   # the shipped settings: the reader scores sentences
    at.text_input(key="gate.question").set_value("What does ERR_TIMEOUT_502 mean?")
    at.button(key="gate.search").click().run()
    at.selectbox(key="gate.whatif.signal").set_value("fused").run()
    at.slider(key="gate.whatif.fused").set_value(0.0).run()   # the gate answers: the reader's step decides
    assert at.toggle(key="gate.whatif.reader_on").value, "on when the run has reader scores"
    assert _reader_outcome(at) == "answer" and "best sentence:" in html_of(at)
    at.slider(key="gate.whatif.reader_min").set_value(1.0).run()
    assert _reader_outcome(at) == "abstain", "no sentence reaches a threshold of 1"
    assert re.search(r"scores 0\.\d{3} &lt; 1: no sentence answers|scores 0\.\d{3} < 1: no sentence answers",
                     html_of(at))
    at.toggle(key="gate.whatif.reader_on").set_value(False).run()
    assert _reader_outcome(at) == "answer", "without the reader the most similar sentences are quoted"
    assert _decision(at, "what-if") == "answer", "the gate's own decision is unchanged by the reader step"
