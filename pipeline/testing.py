"""Deterministic fakes for tests and notebooks: FakeLLM, FakeEmbedder, FakeReranker, FakeNLI.

They are real enough to exercise behaviour, not stubs that return constants:

- ``FakeEmbedder`` hashes the project's tokens into signed buckets (a feature-hashing bag of words), so
  texts that share terms have a high cosine and unrelated texts a low one. It counts ``encode`` calls, which
  is how tests prove the citation validator makes one batched call per answer.
- ``FakeReranker`` scores a passage by the fraction of query terms it contains, as a logit in [-4, 4].
- ``FakeNLI`` reads by words: a hypothesis with a number its premise lacks, more negations than its premise, or
  the premise's own words with a negation dropped is a contradiction; one whose every word is in the premise an
  entailment; else neutral.
- ``FakeLLM`` replays a queue of scripted replies (strings, ``LLMReply`` objects, or exceptions to raise as
  provider failures) and records every request it received, so a test can assert on the exact prompt.
"""

from __future__ import annotations

import hashlib
import threading
from collections import deque
from collections.abc import Iterable

import numpy as np

from pipeline.models.llm import LLMReply, LLMRequest
from pipeline.models.registry import Models
from pipeline.text.tokenize import tokenize

# The settings the fakes' tests were written against: the gate reads the fake reranker's term-overlap score of
# whole passages. The shipped default (auto reads the learned rule; the reader scores sentences) is calibrated on
# real models, so with FakeEmbedder's hashed vectors it abstains on cases whose purpose is another stage
# (a locked cache, an injected order): such tests apply these overrides; the shipped rule is tested with real models.
FAKE_WORLD = {"gate.signal": "rerank", "rerank.granularity": "passage"}


class FakeEmbedder:
    def __init__(self, dim: int = 384, name: str = "fake-hashing-embedder") -> None:
        self.name = name
        self.dim = dim
        self.calls = 0
        self.texts_seen = 0
        self._lock = threading.Lock()

    def _vector(self, text: str) -> np.ndarray:
        vec = np.zeros(self.dim, dtype=np.float32)
        for token in tokenize(text):
            digest = hashlib.blake2b(token.encode("utf-8"), digest_size=8).digest()
            bucket = int.from_bytes(digest[:4], "little") % self.dim
            sign = 1.0 if digest[4] & 1 else -1.0
            vec[bucket] += sign
        norm = float(np.linalg.norm(vec))
        if norm == 0.0:
            vec[0] = 1.0  # texts with no tokens still get a unit vector
            return vec
        return vec / norm

    def encode(self, texts: list[str], batch_size: int | None = None) -> np.ndarray:
        with self._lock:
            self.calls += 1
            self.texts_seen += len(texts)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.vstack([self._vector(t) for t in texts]).astype(np.float32)


class FakeReranker:
    def __init__(self, name: str = "fake-overlap-reranker") -> None:
        self.name = name
        self.calls = 0
        self.pairs_scored = 0

    def score(self, query: str, passages: list[str]) -> np.ndarray:
        self.calls += 1
        self.pairs_scored += len(passages)
        q = set(tokenize(query))
        if not q:
            return np.full(len(passages), -4.0, dtype=np.float32)
        out = [8.0 * len(q & set(tokenize(p))) / len(q) - 4.0 for p in passages]
        return np.asarray(out, dtype=np.float32)


class FakeNLI:
    """An NLI classifier by word sets (see the module docstring); counts calls and pairs."""

    labels = ("entailment", "neutral", "contradiction")
    _NEGATIONS = frozenset({"not", "no", "never", "cannot", "without"})

    def __init__(self, name: str = "fake-word-nli") -> None:
        self.name = name
        self.calls = 0
        self.pairs = 0

    def _label(self, premise: str, hypothesis: str) -> int:
        import re

        p, h = set(tokenize(premise)), set(tokenize(hypothesis))
        p_words, h_words = re.findall(r"[a-z]+", premise.lower()), re.findall(r"[a-z]+", hypothesis.lower())
        p_neg = sum(w in self._NEGATIONS for w in p_words)
        h_neg = sum(w in self._NEGATIONS for w in h_words)
        numbers = {t for t in h if any(ch.isdigit() for ch in t)}
        dropped = h_neg < p_neg and len(set(p_words) - set(h_words) - self._NEGATIONS) == 0
        if numbers - p or h_neg > p_neg or dropped:
            return 2
        return 0 if h <= p else 1

    def predict(self, pairs: list[tuple[str, str]]) -> np.ndarray:
        self.calls += 1
        self.pairs += len(pairs)
        out = np.full((len(pairs), 3), 0.05, dtype=np.float32)
        for row, (premise, hypothesis) in enumerate(pairs):
            out[row, self._label(premise, hypothesis)] = 0.9
        return out


class FakeLLM:
    """Replays scripted replies in order; records every request.

    Each scripted item is a ``str`` (the reply text), an ``LLMReply`` (returned as is — use it to script a
    timeout: ``LLMReply(error="timed out", error_kind="timeout")``), or an ``Exception`` instance (raised, to
    check that callers survive a backend that raises).
    """

    def __init__(self, replies: Iterable[str | LLMReply | Exception] = (), name: str = "fake-llm") -> None:
        self.name = name
        self._queue: deque = deque(replies)
        self.requests: list[LLMRequest] = []
        self._lock = threading.Lock()

    def script(self, *replies: str | LLMReply | Exception) -> FakeLLM:
        self._queue.extend(replies)
        return self

    @property
    def remaining(self) -> int:
        return len(self._queue)

    def complete(self, request: LLMRequest) -> LLMReply:
        with self._lock:
            self.requests.append(request)
            if not self._queue:
                return LLMReply(error="FakeLLM has no scripted reply left", error_kind="other")
            item = self._queue.popleft()
        if isinstance(item, Exception):
            raise item
        if isinstance(item, LLMReply):
            return item
        return LLMReply(text=str(item), usage={"prompt_tokens": 0, "completion_tokens": len(str(item).split())},
                        latency_ms=1.0)

    @property
    def prompts(self) -> list[str]:
        """Every request flattened to text, for assertions on what the model was shown."""
        return ["\n".join(f"{m.role}: {m.content}" for m in r.messages) for r in self.requests]


def fake_models(llm: FakeLLM | None = None, rewrite_llm: FakeLLM | None = None, *, reranker: bool = True,
                embedder: FakeEmbedder | None = None, nli: object | None = None) -> Models:
    """Models wired to the fakes; ``reranker=False`` simulates an unresolvable cross-encoder; ``nli`` replaces
    :class:`FakeNLI` (the shipped classifier, where a test is about what the validator reads)."""
    return Models(embedder=embedder or FakeEmbedder(), reranker=FakeReranker() if reranker else None,
                  llm=llm, rewrite_llm=rewrite_llm, nli=nli or FakeNLI(),
                  reranker_unavailable=None if reranker else
                  "cross-encoder not available offline (simulated by pipeline.testing.fake_models)")
