"""Gate lab: what-if sliders replay the gate on the stored trace; retrieval and rerank are not re-run."""

from __future__ import annotations

import re

from conftest import ask, html_of, open_app

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
    at.slider(key="gate.whatif.fused").set_value(0.05).run()
    assert _decision(at, "what-if") == "abstain", "no fused score reaches 0.05 (two legs max 2/61)"
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
