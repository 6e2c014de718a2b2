"""A memo of pure text functions for the span of one walk over many questions (the golden-set driver).

The generator, the validator and the gate analyse the texts of the chunks a question retrieves (their tokens,
their language, the mood of their sentences), and a walk over many questions retrieves the same chunks again and
again: the same pure function of the same text, computed once per question. :func:`memoised` marks such a
function. Inside :func:`text_memo` its results are kept per argument tuple until the block ends, so each
distinct text is analysed once; outside it (a single question, ``Pipeline.ask``) the function is simply called.
The memo belongs to the context that entered it (a :class:`contextvars.ContextVar`), so another thread or
session never sees it, and it is dropped when the block ends.

A memoised function must be pure and return an immutable value (a tuple, a string, a frozen dataclass): the kept
value is handed to every later caller.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, TypeVar

F = TypeVar("F", bound=Callable[..., Any])

_ACTIVE: ContextVar[dict | None] = ContextVar("pipeline_text_memo", default=None)


def memoised(fn: F) -> F:
    """``fn`` with its results kept inside :func:`text_memo` (its arguments must be hashable)."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        memo = _ACTIVE.get()
        if memo is None:
            return fn(*args, **kwargs)
        key = (fn, args, tuple(sorted(kwargs.items()))) if kwargs else (fn, args)
        try:
            return memo[key]
        except KeyError:
            value = memo[key] = fn(*args, **kwargs)
            return value
    return wrapper  # type: ignore[return-value]


@contextmanager
def text_memo() -> Iterator[dict]:
    """Keep the results of every :func:`memoised` function until the block ends (re-entrant: an inner block
    shares the outer one's memo). Yields the memo (its length: the distinct calls kept)."""
    memo = _ACTIVE.get()
    if memo is not None:
        yield memo
        return
    memo = {}
    token = _ACTIVE.set(memo)
    try:
        yield memo
    finally:
        _ACTIVE.reset(token)
