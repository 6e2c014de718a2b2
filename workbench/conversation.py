"""Conversation: which earlier turns go with a question, and why — one rule for the Ask page and the CLI.

Sending every earlier turn with every question drags the first topic into unrelated ones: the ``terms``
rewriter appends the earlier turns' identifiers, so "What is the capital of France?" after a question about
``max_retries`` is searched as "... max_retries 3.1 python asyncio" and may abstain where it would have
answered alone. So by default (:data:`DEFAULT_MODE`) the history goes with a question only when the question
needs it:

- it opens like a continuation: "and ...", "but ...", "what about ...", "same for ...";
- it points back at something it does not name: it, they, them, those, these, this, that (when it stands for
  a thing, not "the setting that controls ..."), "that flag" after a verb or preposition, "the same";
- it is elliptical: three words or fewer that open with a preposition or are only question words or a
  version ("in 3.2?", "for webhooks?", "why?", "3.0?"); a short keyword query ("webhook signature
  verification") stands alone;
- it shares its topic with the previous question: a content word ("postgres", "tokens" after "token") or a
  release line ("3.1.2" after "3.1.1").

A pronoun in a question that names its own identifier ("ERR_PAYLOAD_ENCODING on publish, what causes
that?") refers to that identifier, so it does not make a follow-up; version numbers do not count as a name
("does that apply to 3.2?" still is one). The rule is a heuristic and says which cue it used, so the app and
the CLI can show why the history was or was not sent; "always" and "never" are there for the cases it gets
wrong.

The history sent is the current thread: the turns since the last question that stood alone, that one
included. A follow-up of an unrelated question is about that question, not about the first topic.

:func:`select_history` is the one implementation: the Ask page (:mod:`workbench.app.conversation`) and
``workbench ask/search --history`` call it on the same list of messages, so they send the same turns.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from pipeline.trace import Message

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


# "that" / "those" / "these" as the object of a verb or a preposition: "what happens to that header",
# "if I leave that flag off", "how many of those can I chain"; after a noun it opens a relative clause
# ("the setting that controls retries") and points at nothing earlier.
_DEMONSTRATIVE_OBJECT = re.compile(
    r"\b(to|of|on|for|with|in|about|from|into|leave|keep|use|set|change|enable|disable|turn|rotate|have|does|do|"
    r"is|are|did|apply|skip|remove|delete|chain|configure)\s+(that|those|these)\b")
LONG_FOLLOW_UP_WORDS = 14
# words too common in this kind of question to say two questions share a topic
_STOP = frozenset("""a about above after again all also am an and any are as at be because been before being
below between both but by can cannot could did do does doing done down during each else ever every few for from
get gets getting go goes going got had has have having how however i if in into is it its itself just know let
like make makes many may me might more most much must my need needs no not now of off ok okay on once one only or
other our out over own please same should so some still such than that the their them then there these they this
those through to too under until up us use used using very want was way we well were what when where whether
which while who why will with without would yes you your default defaults work works""".split())
_RELEASE = re.compile(r"\bv?(\d+\.\d+)(?:\.\d+)?\b")
_PUNCTUATION = "\"'`.,;:!?()[]{}<>\u201c\u201d\u2018\u2019"


def _topic_words(text: str) -> dict[str, str]:
    """The content words of ``text`` keyed by the keyword leg's own tokens (:func:`whole_tokens`: lower case,
    plural endings off, so "tokens" and "token" share a topic), plus its release lines."""
    from pipeline.text.tokenize import whole_tokens

    words: dict[str, str] = {}
    for piece in text.lower().split():
        tokens = [t for t in whole_tokens(piece) if len(t) >= 4 and t[0].isalpha() and t not in _STOP]
        surface = piece.strip(_PUNCTUATION)
        words.update({t: surface if len(tokens) == 1 else t for t in tokens})
    words.update({f"release {m}": m for m in _RELEASE.findall(text.lower())})
    return words


def _shared_topic(question: str, previous: str) -> str:
    """A content word or release line ``question`` shares with ``previous`` ("" for none)."""
    if not previous:
        return ""
    mine, theirs = _topic_words(question), _topic_words(previous)
    for key, word in mine.items():
        if key in theirs:
            return word
    return ""


def _named_identifiers(question: str) -> list[str]:
    """The question's own identifiers, version numbers excluded (they qualify a subject, they are not one)."""
    from pipeline.generation.rewrite import identifiers  # the pipeline loads on first use: the CLI parser is fast

    return [i for i in identifiers(question) if not _VERSION.match(i)]


def follow_up_cue(question: str, previous: str = "") -> str:
    """Why ``question`` reads as a follow-up that needs the earlier turns, or "" when it stands alone.
    ``previous`` is the question asked before it ("" for none): a shared topic makes a follow-up."""
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
    shared = _shared_topic(text, previous)
    if shared:
        return f"it shares \u201c{shared}\u201d with the previous question"
    # In a long question a pronoun usually points at a noun of the same question ("If I delete an endpoint,
    # what happens to its subscriptions?"); it points back only in a short one, or as an opening subject.
    pointers = [w for i, w in enumerate(words) if w in _POINTERS and (len(words) <= SHORT_WORDS or i < 3)]
    if "it" in pointers and _EXPLETIVE_IT.search(text) and pointers.count("it") == 1:
        pointers.remove("it")
    if pointers:
        return f"\u201c{pointers[0]}\u201d points back at an earlier turn"
    if len(words) <= SHORT_WORDS and (_THAT_AS_THING.search(lowered) or _THAT_NOUN_AT_END.search(lowered)):
        return "\u201cthat\u201d points back at an earlier turn"
    demonstrative = _DEMONSTRATIVE_OBJECT.search(lowered)
    if demonstrative and len(words) <= LONG_FOLLOW_UP_WORDS:
        return f"\u201c{demonstrative.group(2)}\u201d points back at an earlier turn"
    same = _SAME.search(lowered) or _TOO_AT_END.search(lowered)
    if same and len(words) <= SHORT_WORDS:
        return f"\u201c{same.group(0)}\u201d points back at an earlier turn"
    return ""


@dataclass(frozen=True)
class HistoryChoice:
    history: tuple[Message, ...]
    note: str                          # one sentence for the Rewrite panel, the chat and the terminal
    cue: str = ""                      # why the question read as a follow-up ("" when it did not)


def _user_questions(history: Sequence[Message]) -> list[tuple[int, str]]:
    return [(i, m.content) for i, m in enumerate(history) if m.role == "user"]


def thread_start(history: Sequence[Message]) -> int:
    """Where the current thread begins in ``history``: at the last user question that stood alone (the
    first message when none did, so a given history without questions is kept whole)."""
    start, previous = 0, ""
    for i, question in _user_questions(history):
        if not follow_up_cue(question, previous):
            start = i
        previous = question
    return start


def _count(history: Sequence[Message]) -> str:
    n = len(_user_questions(history))
    return f"{n} question{'s' if n != 1 else ''}" if n else f"{len(history)} message{'s' if len(history) != 1 else ''}"


def select_history(question: str, history: Sequence[Message | dict], mode: str = DEFAULT_MODE) -> HistoryChoice:
    """The earlier turns to send with ``question`` under ``mode`` (a key of :data:`MODES`), and why. Raises
    ``ValueError`` for an unknown mode and :class:`pipeline.errors.QuestionError` for turns that cannot be
    asked (as the pipeline would)."""
    if mode not in MODES:
        raise ValueError(f"unknown conversation mode {mode!r}: choose one of {', '.join(MODES)}")
    from pipeline.engine import coerce_history

    turns = coerce_history(history)
    if not turns:
        return HistoryChoice((), "")
    if mode == "never":
        return HistoryChoice((), "Conversation mode is off: earlier turns were not sent.")
    if mode == "always":
        return HistoryChoice(turns, f"Conversation mode \u201calways\u201d: the earlier {_count(turns)} went with it.")
    asked = _user_questions(turns)
    cue = follow_up_cue(question, asked[-1][1] if asked else "")
    if not cue:
        return HistoryChoice((), "Read as a new question (no continuation, pointer, ellipsis or shared topic): "
                                 "earlier turns were not sent.")
    sent = turns[thread_start(turns):]
    which = ("the previous question went with it" if len(_user_questions(sent)) == 1
             else f"the last {_count(sent)} of this thread went with it")
    return HistoryChoice(sent, f"Read as a follow-up ({cue}): {which}.", cue)
