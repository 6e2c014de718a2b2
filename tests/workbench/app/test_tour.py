"""Demo tour page: each scenario runs with one click and says what it just showed."""

from __future__ import annotations

from conftest import html_of, markdown_of, open_app, texts_of

from pipeline.config import PipelineConfig
from workbench.app import explain
from workbench.app.scenarios import SCENARIOS


def test_the_tour_states_its_config(app_env):
    at = open_app("tour")
    assert any("default configuration" in m and explain.gate_summary(PipelineConfig()) in m for m in markdown_of(at))
    assert any(c.value.startswith("The gate answers") for c in at.sidebar.caption), "the sidebar says the rule that runs"
    assert not any("fused and dense" in m for m in markdown_of(at))
    assert [s.value for s in at.subheader] == [f"{i}. {s.title}" for i, s in enumerate(SCENARIOS, start=1)]


def test_out_of_scope_abstains_with_zero_llm_calls_and_closest_documents(app_env):
    at = open_app("tour")
    at.button(key="tour.out-of-scope").click().run()
    assert "wb-abstention" in html_of(at)
    saw = [s.value for s in at.success]
    assert len(saw) == 1 and saw[0].startswith("What you just saw: Nothing in the corpus is close")
    assert not at.warning, "it behaved as described"
    assert any("LLM calls for generation: 0" in m for m in markdown_of(at))


def test_run_all_shows_every_scenario_and_the_provider_down_fallback(app_env):
    at = open_app("tour")
    at.button(key="tour.run_all").click().run()
    assert not at.exception and not at.error
    assert len(at.success) == len(SCENARIOS)
    page = html_of(at)
    assert "fallback from litellm: the LLM provider could not be reached" in page, "a short label for the fallback"
    assert "Connection" not in page, "the provider's exception is not in the answer's label"
    assert "Connection" in texts_of(at), "it is one click away, under 'Why the litellm answer was not used'"
    assert any(e.label == "Why the litellm answer was not used" for e in at.expander)
    at.toggle(key="tour.provider-down.trace").set_value(True).run()
    assert any("Fell back from litellm to extractive" in m for m in markdown_of(at))
