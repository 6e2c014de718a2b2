"""The Ask page's conversation: its turns, and the history that goes with the next question.

The rule that decides which earlier turns go with a question is :func:`workbench.conversation.select_history`,
the same one ``workbench ask --history`` uses: the page turns its conversation into the list of messages the
CLI would read from a history file and asks that function, so both send the same turns for the same history.
"""

from __future__ import annotations

from typing import NamedTuple

from pipeline.trace import Message, Trace
from workbench.conversation import DEFAULT_MODE, MODES, HistoryChoice, select_history

__all__ = ["DEFAULT_MODE", "MODES", "HistoryChoice", "Turn", "as_messages", "choose_history"]


class Turn(NamedTuple):
    """One question of the Ask page's conversation, its trace, and what was said about its history."""
    question: str
    trace: Trace
    history_note: str = ""
    history: tuple[Message, ...] = ()


def as_messages(turns: list[Turn]) -> list[Message]:
    """The conversation as chat messages; one opened with a given history (a golden case) starts with it."""
    out: list[Message] = list(turns[0].history) if turns else []
    for turn in turns:
        out += [Message("user", turn.question), Message("assistant", turn.trace.answer)]
    return out


def choose_history(question: str, turns: list[Turn], mode: str) -> HistoryChoice:
    """The earlier turns to send with ``question`` under ``mode`` (a key of :data:`MODES`), and why."""
    return select_history(question, as_messages(turns), mode)
