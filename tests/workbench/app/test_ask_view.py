"""The Ask page's wait on an LLM provider: a live countdown of the provider's time limit, then the answer (or
the error) exactly as if the question had been asked directly."""

from __future__ import annotations

import threading

import pytest
from conftest import open_app

from pipeline.config import PipelineConfig
from workbench.app import ask_view


def _cfg(**generate) -> PipelineConfig:
    return PipelineConfig().with_overrides([f"generate.{k}={v}" for k, v in generate.items()])


class _Line:
    def __init__(self) -> None:
        self.shown: list[str] = []
        self.cleared = False

    def info(self, text: str) -> None:
        self.shown.append(text)

    def empty(self) -> None:
        self.cleared = True


@pytest.fixture
def line(monkeypatch) -> _Line:
    fake = _Line()
    monkeypatch.setattr(ask_view.st, "empty", lambda: fake)
    return fake


def test_the_countdown_names_the_model_and_the_time_left_of_every_try():
    cfg = _cfg(backend="litellm", model="openai/gpt-4o-mini", timeout_s=30, retries=1)
    assert ask_view.provider_budget_s(cfg) == 60
    text = ask_view.countdown_text(cfg, 12.4)
    assert "openai/gpt-4o-mini" in text and "12 s so far" in text and "in 48 s" in text and "2 tries of 30 s" in text
    late = ask_view.countdown_text(cfg, 75)
    assert "past the provider's time limit" in late and "quoted instead" in late


def test_the_countdown_ticks_while_the_provider_works_and_goes_when_it_answers(line):
    release = threading.Event()

    def slow():
        release.wait(5)
        return "the trace"

    cfg = _cfg(backend="litellm", model="m", timeout_s=30, retries=0)
    timer = threading.Timer(0.6, release.set)
    timer.start()
    assert ask_view.run_with_countdown(slow, cfg, tick_s=0.05) == "the trace"
    assert len(line.shown) >= 3 and all("If it has not answered in" in t for t in line.shown)
    assert line.shown[0].startswith("Asking m: 0 s so far") and line.cleared


def test_an_error_in_the_worker_reaches_the_caller_unchanged(line):
    def fails():
        raise ValueError("provider said no")

    with pytest.raises(ValueError, match="provider said no"):
        ask_view.run_with_countdown(fails, _cfg(backend="litellm", model="m"), tick_s=0.05)
    assert line.cleared


def test_the_ask_page_waits_on_a_provider_in_the_worker_and_shows_the_fallback(app_env):
    """A provider that refuses the connection: the question runs through the countdown's worker thread and the
    page shows the extractive fallback with its label, no exception."""
    from workbench.app.sidebar import value_key

    at = open_app()
    for key, value in {"generate.backend": "litellm", "generate.model": "openai/gpt-4o-mini",
                       "generate.api_base": "http://127.0.0.1:9/v1", "generate.timeout_s": 5.0,
                       "generate.retries": 0}.items():
        at.session_state[value_key(key)] = value
    at.switch_page("workbench/app/pages/ask.py").run()
    at.chat_input(key="ask.query").set_value("What does ERR_TIMEOUT_502 mean?").run()
    assert not at.exception, [e.value for e in at.exception]
    trace = at.session_state["ask.turns"][-1].trace
    assert trace.generation.requested_backend == "litellm" and trace.generation.backend == "extractive"
    assert any("fallback from litellm" in m.value for m in at.markdown) or \
        any("fallback from litellm" in h.value for h in at.html)
