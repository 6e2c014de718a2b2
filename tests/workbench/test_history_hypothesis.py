"""The history parser (``workbench ask --history FILE`` → :func:`pipeline.engine.coerce_history`): any bytes, any
JSON, give either a conversation of Messages or one clear line naming the problem — never a traceback."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipeline.engine import QuestionError, coerce_history
from pipeline.trace import Message
from workbench.cli import CliError, _read_history

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=40),
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.sampled_from(["role", "content", "history", "x"]),
                                                                 inner, max_size=4),
    max_leaves=20)
TURN = st.fixed_dictionaries({"role": st.sampled_from(["user", "assistant"]), "content": st.text(max_size=80)})


def _parse(raw: bytes):
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "history.json"
        path.write_bytes(raw)
        try:
            return coerce_history(_read_history(str(path)))
        except (CliError, QuestionError) as exc:
            message = str(exc)
            assert message.strip() and "\n" not in message.strip(), message
            return message


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=200))
def test_any_bytes_are_a_conversation_or_one_line(raw):
    out = _parse(raw)
    assert isinstance(out, (tuple, str))


@settings(max_examples=150, deadline=None)
@given(JSON)
def test_any_json_is_a_conversation_or_one_line(value):
    out = _parse(json.dumps(value).encode())
    if isinstance(out, tuple):
        assert all(isinstance(m, Message) and isinstance(m.content, str) for m in out)


@settings(max_examples=60, deadline=None)
@given(st.lists(TURN, max_size=8), st.booleans())
def test_a_well_formed_history_keeps_every_turn_in_order(turns, wrapped):
    value = {"history": turns} if wrapped else turns
    out = _parse(json.dumps(value).encode())
    assert [(m.role, m.content) for m in out] == [(t["role"], t["content"]) for t in turns]
