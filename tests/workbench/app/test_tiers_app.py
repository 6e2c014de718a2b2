"""Tiered generation in the app: the sidebar takes ``generate.tiers`` as JSON text, the Ask page says which tiers
were tried and the Generation tab lists each attempt, and Compare can put "cheap only" beside "tiered". The two
models are an OpenAI-compatible stub with scripted replies (tests/support/openai_stub.py)."""

from __future__ import annotations

import json

import pytest
from conftest import ask, errors_of, html_of, markdown_of, open_app, texts_of

from tests.support.openai_stub import OpenAIStub, Reply

QUESTION = "What does ERR_TIMEOUT_502 mean?"


def _reply(answer: str, ids: list[int]) -> Reply:
    return Reply(json.dumps({"answer": answer, "used_source_ids": ids, "confidence": "HIGH", "limitations": []}),
                 prompt_tokens=900, completion_tokens=40)


@pytest.fixture
def stub(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    with OpenAIStub() as s:
        s.respond("gpt-4o-mini", lambda r: _reply("It means the <b>gateway</b> timed out [42].", [42]))
        s.respond("gpt-4o", lambda r: _reply("I don't know based on the provided sources.", []))
        yield s


def _tiers(stub) -> str:
    return json.dumps([{"backend": "litellm", "model": "openai/gpt-4o-mini", "api_base": stub.api_base},
                       {"backend": "litellm", "model": "openai/gpt-4o", "api_base": stub.api_base}])


def _set_tiers(at, text: str):
    at.text_input(key="sidebar.generate.tiers").set_value(text).run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_the_ask_page_shows_the_tiers_tried_and_each_attempt(app_env, stub):
    at = _set_tiers(open_app("ask"), _tiers(stub))
    assert not errors_of(at)
    ask(at, QUESTION)
    trace = at.session_state["ask.turns"][-1].trace
    assert [a.model for a in trace.generation.tiers] == ["openai/gpt-4o-mini", "openai/gpt-4o"]
    assert [r.model for r in stub.requests] == ["gpt-4o-mini", "gpt-4o"]
    page = html_of(at)
    assert "tiers tried: 1 openai/gpt-4o-mini (escalated: unsupported, fabricated) → 2 openai/gpt-4o (kept)" in page
    assert any(line.startswith("**Tiers** (kept: tier 2)") for line in markdown_of(at))
    shown = texts_of(at)
    assert "escalated because" in shown and "unsupported, fabricated" in shown
    assert "It means the <b>gateway</b> timed out [42]." in shown, "a tier's answer is shown as text, never HTML"
    assert "<b>gateway</b>" not in page


def test_a_bad_tiers_value_is_one_error_line_and_the_last_valid_config_is_used(app_env):
    at = _set_tiers(open_app("ask"), '[{"backend": "litellm"}]')
    assert len(at.error) == 1 and "generate.tiers[1]: a litellm tier needs a model" in errors_of(at)[0]


def test_compare_puts_cheap_only_beside_tiered(app_env, stub):
    at = _set_tiers(open_app("compare"), _tiers(stub))
    at.text_input(key="compare.question").set_value(QUESTION)
    box = at.selectbox(key="compare.preset")
    box.set_value(next(o for o in box.options if o.startswith("cheap only (tier 1 alone: openai/gpt-4o-mini)")))
    at.button(key="compare.run").click().run()
    assert not at.exception, [e.value for e in at.exception]
    page = html_of(at)
    assert "data-diff='tiers tried / cost'" in page
    assert "→ 2 openai/gpt-4o (kept)" in page and "A tiers tried" in page
    configs = next(df.value for df in at.dataframe if "setting" in df.value.columns)
    assert list(configs["setting"]) == ["generate.tiers"]
