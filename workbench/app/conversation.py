"""Conversation mode on the Ask page: which earlier turns go with a question, and why.

Sending every earlier turn with every question drags the first topic into unrelated ones: the ``terms``
rewriter appends the earlier turns' identifiers, so "What is the capital of France?" after a question about
``max_retries`` is searched as "... max_retries 3.1 python asyncio" and may abstain where it would have
answered alone. So by default the history goes with a question only when the question needs it:

- it opens like a continuation: "and ...", "but ...", "what about ...", "same for ...";
- it points back at something it does not name: it, they, them, those, these, this, that (when it stands for
  a thing, not "the setting that controls ..."), "the same";
- it is elliptical: three words or fewer that open with a preposition or are only question words or a
  version ("in 3.2?", "for webhooks?", "why?", "3.0?"); a short keyword query ("webhook signature
  verification") stands alone.

A pronoun in a question that names its own identifier ("ERR_PAYLOAD_ENCODING on publish, what causes
that?") refers to that identifier, so it does not make a follow-up; version numbers do not count as a name
("does that apply to 3.2?" still is one). The rule is a heuristic and says which cue it used, so the
Rewrite panel can show why the history was or was not sent; "always" and "never" are there for the cases
it gets wrong.

The history sent is the current thread: the turns since the last question that stood alone, that one
included. A follow-up of an unrelated question is about that question, not about the first topic.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import NamedTuple

from pipeline.generation.rewrite import identifiers
from pipeline.trace import Message, Trace

MODES = {"follow-ups": "only for follow-ups", "always": "always", "never": "never"}
DEFAULT_MODE = "follow-ups"

_CONTINUATIONS = ("and", "but", "also", "or", "so", "then", "what about", "how about", "same for", "same with",
                  "what if", "ok so", "okay so", "ok and", "okay and", "what else", "anything else")
_POINTERS = {"it", "its", "it's", "they", "them", "their", "theirs", "those", "these", "this", "he", "she"}
_EXPLETIVE_IT = re.compile(r"\b(is|was|isn't|wasn't|will|would|does)\s+it\s+(possible|necessary|safe|ok|okay|true|"
                           r"recommended|required|allowed|better|worth|normal|expected)\b|\bit\s+(takes|is\s+possible)\b",
                           re.IGNORECASE)
# "that" stands for a thing when nothing follows it or a verb / "one" does; "the setting that controls" is
# a relative clause.
_THAT_AS_THING = re.compile(r"\bthat(\s*[?.!,]|\s*$|\s+(one|is|was|does|do|did|mean|means|apply|applies|work|"
                            r"works|change|changed|happen|happens|still|also|too|same|setting|value|limit|"
                            r"version|error|default|number)\b)", re.IGNORECASE)
_THAT_NOUN_AT_END = re.compile(r"\bthat\s+[a-z-]+\s*[?.!]*\s*$")
_TOO_AT_END = re.compile(r"\b(too|as well|either)(?=\s*[?.!]*\s*$)")
SHORT_WORDS = 9
_SAME = re.compile(r"\b(the same|same (limit|value|default|thing|setting|there|here|for))\b", re.IGNORECASE)
_WORD = re.compile(r"[\w'.-]+")
_PREPOSITIONS = {"in", "for", "on", "with", "without", "at", "from", "to", "about", "via", "under", "before",
                 "after", "since", "by"}
_BARE = {"why", "how", "when", "where", "which", "who", "what", "really", "example", "examples", "details", "more",
         "come", "else", "one"}
_VERSION = re.compile(r"^v?\d+(\.\d+)+$")


def _named_identifiers(question: str) -> list[str]:
    """The question's own identifiers, version numbers excluded (they qualify a subject, they are not one)."""
    return [i for i in identifiers(question) if not _VERSION.match(i)]


def follow_up_cue(question: str) -> str:
    """Why ``question`` reads as a follow-up that needs the earlier turns, or "" when it stands alone."""
    text = " ".join(question.strip().split())
    lowered = text.lower().lstrip("—-–:;,. ")
    for opening in _CONTINUATIONS:
        if lowered == opening or re.match(rf"{re.escape(opening)}\b", lowered):
            return f"it opens with \u201c{opening}\u201d"
    words = _WORD.findall(lowered)
    named = _named_identifiers(text)
    if 0 < len(words) <= 3 and not named and (words[0] in _PREPOSITIONS
                                              or all(w in _BARE or _VERSION.match(w) for w in words)):
        return f"it is elliptical (\u201c{text}\u201d has no subject of its own)"
    if named:
        return ""
    # In a long question a pronoun usually points at a noun of the same question ("If I delete an endpoint,
    # what happens to its subscriptions?"); it points back only in a short one, or as an opening subject.
    pointers = [w for i, w in enumerate(words) if w in _POINTERS and (len(words) <= SHORT_WORDS or i < 3)]
    if "it" in pointers and _EXPLETIVE_IT.search(text) and pointers.count("it") == 1:
        pointers.remove("it")
    if pointers:
        return f"\u201c{pointers[0]}\u201d points back at an earlier turn"
    if len(words) <= SHORT_WORDS and (_THAT_AS_THING.search(lowered) or _THAT_NOUN_AT_END.search(lowered)):
        return "\u201cthat\u201d points back at an earlier turn"
    same = _SAME.search(lowered) or _TOO_AT_END.search(lowered)
    if same and len(words) <= SHORT_WORDS:
        return f"\u201c{same.group(0)}\u201d points back at an earlier turn"
    return ""


class Turn(NamedTuple):
    """One question of the Ask page's conversation, its trace, and what was said about its history."""
    question: str
    trace: Trace
    history_note: str = ""
    history: tuple[Message, ...] = ()


@dataclass(frozen=True)
class HistoryChoice:
    history: tuple[Message, ...]
    note: str                          # one sentence for the Rewrite panel and the chat


def _as_messages(turns: list[Turn]) -> list[Message]:
    """The thread as chat messages; a thread opened with a given history (a golden case) starts with it."""
    out: list[Message] = list(turns[0].history) if turns else []
    for turn in turns:
        out += [Message("user", turn.question), Message("assistant", turn.trace.answer)]
    return out


def thread(turns: list[Turn]) -> list[Turn]:
    """The turns since the last one that stood alone (that one included)."""
    start = 0
    for i, turn in enumerate(turns):
        if not turn.history:
            start = i
    return turns[start:]


def choose_history(question: str, turns: list[Turn], mode: str) -> HistoryChoice:
    """The earlier turns to send with ``question`` under ``mode`` (a key of :data:`MODES`), and why."""
    if not turns:
        return HistoryChoice((), "")
    if mode == "never":
        return HistoryChoice((), "Conversation mode is off: earlier turns were not sent.")
    if mode == "always":
        sent = tuple(_as_messages(turns))
        return HistoryChoice(sent, f"Conversation mode \u201calways\u201d: the {len(turns)} earlier "
                                   f"question{'s' if len(turns) != 1 else ''} went with it.")
    cue = follow_up_cue(question)
    if not cue:
        return HistoryChoice((), "Read as a new question (no continuation, pointer or ellipsis): earlier turns "
                                 "were not sent.")
    current = thread(turns)
    sent = tuple(_as_messages(current))
    return HistoryChoice(sent, f"Read as a follow-up ({cue}): the last {len(current)} question"
                               f"{'s' if len(current) != 1 else ''} of this thread went with it.")
