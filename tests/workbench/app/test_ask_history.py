"""The Ask page sends the history the CLI would send for the same conversation (one rule, one function)."""

from __future__ import annotations

from pipeline.trace import Message
from tests.support.traces import answered_trace
from workbench.app.conversation import Turn, as_messages, choose_history
from workbench.conversation import select_history


def _turn(question: str, history=()) -> Turn:
    return Turn(question, answered_trace(question), "", tuple(history))


def test_the_page_and_the_cli_choose_the_same_turns_for_the_same_conversation():
    turns = [_turn("what's the default max_retries in 3.1?"), _turn("What is the capital of France?"),
             _turn("and its population?")]
    for question in ("and in 3.2?", "How are deliveries signed?", "why?"):
        for mode in ("follow-ups", "always", "never"):
            page = choose_history(question, turns, mode)
            cli = select_history(question, [{"role": m.role, "content": m.content} for m in as_messages(turns)], mode)
            assert page == cli, (question, mode)
    assert [m.content for m in choose_history("and in 3.2?", turns, "follow-ups").history if m.role == "user"] == [
        "What is the capital of France?", "and its population?"]


def test_a_golden_case_opened_with_its_history_keeps_it_for_the_follow_up():
    opened = [_turn("does it apply to webhooks?", history=(
        Message("user", "what's the default max_retries in 3.1?"), Message("assistant", "8")))]
    sent = choose_history("and for 3.2?", opened, "follow-ups").history
    assert [m.content for m in sent if m.role == "user"] == ["what's the default max_retries in 3.1?",
                                                             "does it apply to webhooks?"]
