"""Conversation mode: a question carries the earlier turns only when it reads as a follow-up."""

from __future__ import annotations

import json

import pytest
from conftest import ROOT

from tests.support.traces import answered_trace
from workbench.app.conversation import Turn, choose_history, follow_up_cue, thread


@pytest.mark.parametrize("question", [
    "and in 3.2?", "and what about the backoff?", "what about webhooks?", "Does that apply to 3.2?",
    "How do I fix it?", "in 2.4?", "why?", "is there a windows version too?", "ok they renewed it. now what?",
    "we're still on 3.0 — same limit there?"])
def test_follow_ups_are_recognised_and_the_cue_is_named(question):
    assert follow_up_cue(question), question


@pytest.mark.parametrize("question", [
    "What is the capital of France?", "What does ERR_TIMEOUT_502 mean?", "What's the default lifetime of an API token?",
    "Is it possible to replay a dead-letter entry?", "What is the setting that controls retries?",
    "webhook signature verification", "If I delete an endpoint, what happens to its subscriptions?",
    "we're getting ERR_PAYLOAD_ENCODING on publish, what causes that?"])
def test_standalone_questions_are_not_follow_ups(question):
    assert follow_up_cue(question) == "", question


def test_on_the_golden_set_few_standalone_questions_are_taken_for_follow_ups():
    cases = [json.loads(line) for line in (ROOT / "golden" / "golden.jsonl").read_text().splitlines() if line.strip()]
    standalone = [c["question"] for c in cases if not c.get("history")]
    follow_ups = [c["question"] for c in cases if c.get("history")]
    wrongly_followed = [q for q in standalone if follow_up_cue(q)]
    found = [q for q in follow_ups if follow_up_cue(q)]
    assert len(wrongly_followed) <= len(standalone) // 50, wrongly_followed
    assert len(found) >= len(follow_ups) * 2 // 3, set(follow_ups) - set(found)


def _turn(question: str, history=()) -> Turn:
    return Turn(question, answered_trace(question), "", tuple(history))


def test_an_unrelated_question_gets_no_history_and_says_why():
    turns = [_turn("what's the default max_retries in 3.1?")]
    choice = choose_history("What is the capital of France?", turns, "follow-ups")
    assert choice.history == ()
    assert "new question" in choice.note and "not sent" in choice.note


def test_a_follow_up_gets_its_thread_only():
    first = _turn("what's the default max_retries in 3.1?")
    second = _turn("What is the capital of France?")           # stood alone: a new thread starts here
    choice = choose_history("and in 3.2?", [first, second], "follow-ups")
    assert [m.content for m in choice.history if m.role == "user"] == ["What is the capital of France?"]
    assert "follow-up" in choice.note and "“and”" in choice.note
    assert thread([first, second]) == [second]


def test_always_and_never():
    turns = [_turn("what's the default max_retries in 3.1?")]
    assert len(choose_history("What is the capital of France?", turns, "always").history) == 2
    never = choose_history("and in 3.2?", turns, "never")
    assert never.history == () and "off" in never.note
    assert choose_history("and in 3.2?", [], "follow-ups").history == ()
