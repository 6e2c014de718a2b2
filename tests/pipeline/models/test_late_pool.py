"""late_pool: late chunking over any encoder, with continuation passes for spans past the encoder's window.

The fake encoder here reads at most ``limit`` words per pass and gives every word a fixed vector of its own (no
context), so a span's pooled vector has one right value whichever pass it came from: the normalised mean of its
words' vectors."""

import re
import zlib

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.models.encoders import late_pool

DIM = 16


def _word_vector(word: str) -> np.ndarray:
    return np.random.default_rng(zlib.crc32(word.encode())).standard_normal(DIM).astype(np.float32)


class _Reader:
    """A truncating encoder: each pass reads the first ``limit`` words of each text; records what it read."""

    def __init__(self, limit: int) -> None:
        self.limit, self.passes = limit, []

    def __call__(self, batch: list[str]):
        words = [[m for m in re.finditer(r"\S+", t)][: self.limit] for t in batch]
        self.passes.extend(len(w) for w in words)
        width = max(1, max(len(w) for w in words))
        tokens = np.zeros((len(batch), width, DIM), dtype=np.float32)
        offsets = np.zeros((len(batch), width, 2), dtype=np.int64)
        mask = np.zeros((len(batch), width), dtype=bool)
        for r, ws in enumerate(words):
            for c, m in enumerate(ws):
                tokens[r, c], offsets[r, c], mask[r, c] = _word_vector(m.group()), (m.start(), m.end()), True
        vectors = tokens.sum(axis=1)
        return vectors, tokens, offsets, mask


def _expected(text: str, start: int, end: int) -> np.ndarray:
    v = np.sum([_word_vector(m.group()) for m in re.finditer(r"\S+", text[start:end])], axis=0)
    return v / np.linalg.norm(v)


def _sentences(text: str) -> list[tuple[int, int]]:
    return [m.span() for m in re.finditer(r"[^.]+\.", text)]


def test_spans_past_the_window_are_pooled_from_a_continuation_pass_not_left_out():
    text = " ".join(f"Step {i} moves the event along." for i in range(30))  # 180 words
    spans = _sentences(text)
    reader = _Reader(limit=50)
    pooled, windows = late_pool([text], [spans], reader, batch_size=4, dim=DIM)
    assert all(w is not None for w in windows[0])
    for (s, e), w in zip(spans, windows[0], strict=True):
        np.testing.assert_allclose(w, _expected(text, s, e), atol=1e-5)
    np.testing.assert_allclose(pooled[0], _Reader(50)([text])[0][0])  # the text's vector: its first pass's
    assert sum(reader.passes) <= 180 + 6 * len(reader.passes)  # about the text once, not once per window


def test_a_span_longer_than_the_window_is_left_for_the_caller():
    text = "one two three four five six seven eight nine ten. Short tail."
    long_span, tail = (0, text.index(".") + 1), (text.index("Short"), len(text))
    _, windows = late_pool([text], [[long_span, tail]], _Reader(limit=4), batch_size=2, dim=DIM)
    assert windows[0][0] is None
    np.testing.assert_allclose(windows[0][1], _expected(text, *tail), atol=1e-5)


words = st.text(alphabet="abcdefgh", min_size=1, max_size=5)


@settings(max_examples=60, deadline=None)
@given(sentences=st.lists(st.lists(words, min_size=1, max_size=8), min_size=1, max_size=12),
       limit=st.integers(min_value=1, max_value=20), batch=st.integers(min_value=1, max_value=3))
def test_every_span_that_fits_the_window_gets_exactly_its_own_words(sentences, limit, batch):
    text = " ".join(" ".join(ws) + "." for ws in sentences)
    spans = _sentences(text)
    # also overlapping two-sentence windows, as the validator makes them
    spans += [(a[0], b[1]) for a, b in zip(spans, spans[1:], strict=False)]
    _, windows = late_pool([text, "x"], [spans, []], _Reader(limit), batch_size=batch, dim=DIM)
    for (s, e), w in zip(spans, windows[0], strict=True):
        fits = len(text[s:e].split()) <= limit
        assert (w is not None) == fits
        if fits:
            np.testing.assert_allclose(w, _expected(text, s, e), atol=1e-4)
