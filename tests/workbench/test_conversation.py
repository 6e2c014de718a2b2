"""Conversation: a question carries the earlier turns only when it reads as a follow-up, and then only its
thread — one rule (workbench.conversation.select_history) for the Ask page and ``workbench ask --history``."""

from __future__ import annotations

import json

import pytest
from conftest import ROOT
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.engine import QuestionError
from pipeline.trace import Message
from workbench.conversation import MODES, follow_up_cue, select_history, thread_start


def _golden() -> list[dict]:
    return [json.loads(line) for line in (ROOT / "golden" / "golden.jsonl").read_text().splitlines() if line.strip()]


def _previous_question(case: dict) -> str:
    asked = [m["content"] for m in case.get("history", []) if m["role"] == "user"]
    return asked[-1] if asked else ""


@pytest.mark.parametrize("question", [
    "and in 3.2?", "and what about the backoff?", "what about webhooks?", "Does that apply to 3.2?",
    "How do I fix it?", "in 2.4?", "why?", "is there a windows version too?", "ok they renewed it. now what?",
    "we're still on 3.0 — same limit there?", "what happens to that header during a secret rotation?",
    "what's the default grace if I leave that flag off?", "how many of those can I chain on one endpoint?"])
def test_follow_ups_are_recognised_and_the_cue_is_named(question):
    assert follow_up_cue(question), question


@pytest.mark.parametrize("question", [
    "What is the capital of France?", "What does ERR_TIMEOUT_502 mean?", "What's the default lifetime of an API token?",
    "Is it possible to replay a dead-letter entry?", "What is the setting that controls retries?",
    "webhook signature verification", "If I delete an endpoint, what happens to its subscriptions?",
    "we're getting ERR_PAYLOAD_ENCODING on publish, what causes that?"])
def test_standalone_questions_are_not_follow_ups(question):
    assert follow_up_cue(question) == "", question


def test_a_shared_topic_with_the_previous_question_makes_a_follow_up_and_an_unrelated_one_does_not():
    previous = "how do I move from sled to postgres?"
    cue = follow_up_cue("can I go back the other way later if postgres doesn't work out?", previous)
    assert "postgres" in cue
    assert "token" in follow_up_cue("will the upgrade shorten the tokens we already have?",
                                    "we're on 3.0, is the default token TTL 30 days?")
    assert "3.1" in follow_up_cue("when's 3.1.2 coming out?", "what did 3.1.1 fix?")
    assert follow_up_cue("What is the capital of France?", "How do I rotate a webhook signing secret?") == ""
    assert follow_up_cue("can I go back the other way later if postgres doesn't work out?") == ""


def test_on_the_golden_set_follow_ups_are_found_and_few_standalone_questions_are_taken_for_them():
    cases = _golden()
    standalone = [c["question"] for c in cases if not c.get("history")]
    follow_ups = [c for c in cases if c.get("history")]
    wrongly_followed = [q for q in standalone if follow_up_cue(q)]
    missed = [c["question"] for c in follow_ups if not follow_up_cue(c["question"], _previous_question(c))]
    assert len(wrongly_followed) <= len(standalone) // 50, wrongly_followed
    assert len(missed) <= len(follow_ups) // 10, missed


def _messages(*questions: str) -> list[Message]:
    out = []
    for q in questions:
        out += [Message("user", q), Message("assistant", f"(answer to {q})")]
    return out


def test_an_unrelated_question_gets_no_history_and_says_why():
    choice = select_history("What is the capital of France?", _messages("How do I rotate a webhook signing secret?"))
    assert choice.history == () and choice.cue == ""
    assert "new question" in choice.note and "not sent" in choice.note


def test_a_follow_up_gets_its_thread_only():
    history = _messages("what's the default max_retries in 3.1?", "What is the capital of France?")
    choice = select_history("and in 3.2?", history)
    assert [m.content for m in choice.history if m.role == "user"] == ["What is the capital of France?"]
    assert "follow-up" in choice.note and "“and”" in choice.note
    assert thread_start(history) == 2
    chained = _messages("How do I rotate a webhook signing secret?", "and how long does that take?")
    assert len(select_history("and can I undo it?", chained).history) == 4


def test_always_never_and_a_history_of_dicts_like_the_cli_reads():
    history = [{"role": "user", "content": "what's the default max_retries in 3.1?"},
               {"role": "assistant", "content": "8"}]
    assert len(select_history("What is the capital of France?", history, "always").history) == 2
    never = select_history("and in 3.2?", history, "never")
    assert never.history == () and "off" in never.note
    assert select_history("and in 3.2?", [], "follow-ups").history == ()
    with pytest.raises(ValueError, match="unknown conversation mode"):
        select_history("and in 3.2?", history, "sometimes")
    with pytest.raises(QuestionError):
        select_history("and in 3.2?", [{"role": "user"}])
    assert set(MODES) == {"follow-ups", "always", "never"}


@settings(max_examples=150, deadline=None)
@given(question=st.text(max_size=200), turns=st.lists(st.tuples(st.sampled_from(["user", "assistant", "system"]),
                                                                 st.text(max_size=120)), max_size=8))
def test_any_text_gets_a_choice_whose_history_is_a_suffix_of_the_conversation(question, turns):
    history = [Message(role, content) for role, content in turns]
    for mode in MODES:
        choice = select_history(question, history, mode)
        sent = list(choice.history)
        assert sent == (history[len(history) - len(sent):] if sent else [])
        assert isinstance(choice.note, str) and (choice.note or not history)
