"""The encoder models the stages call: a bi-encoder (embeddings), a cross-encoder (rerank logits) and an
NLI classifier, behind the two small protocols the stages rely on. Files come from :mod:`pipeline.models.resolve`."""

from __future__ import annotations

import threading
from typing import Protocol

import numpy as np

from pipeline.models.resolve import ONNX_FILE, ModelUnavailable, quiet_transformers, resolve_model

ONNX_NLI_TOKENS = 128   # a shipped NLI graph without its training record reads at most this many tokens per pair


def trained_tokens(folder) -> int:
    """The pair length a model trained here was trained at (its ``training.json``), else :data:`ONNX_NLI_TOKENS`."""
    import json

    try:
        return int(json.loads((folder / "training.json").read_text(encoding="utf-8"))["settings"]["max_tokens"])
    except (OSError, ValueError, KeyError, TypeError):
        return ONNX_NLI_TOKENS


def set_torch_threads(threads: int | None) -> None:
    """Torch's intra-op threads for this process; ``None``/0/negative leave torch's default. Evaluations run one
    small forward pass at a time, and on shared cores two intra-op threads wait on each other, so the CLI and the
    benchmarks default to one."""
    if threads and threads > 0:
        import torch

        torch.set_num_threads(threads)

# -- protocols the stages rely on ------------------------------------------------------------------------

class Embedder(Protocol):
    name: str
    dim: int
    calls: int

    def encode(self, texts: list[str]) -> np.ndarray:
        """L2-normalised float32 embeddings, shape (len(texts), dim); one call = one batched forward."""


class Reranker(Protocol):
    name: str

    def score(self, query: str, passages: list[str]) -> np.ndarray:
        """Raw relevance logits, one per passage (the rerank stage applies the sigmoid)."""


class SentenceEmbedder:
    """A sentence-transformers bi-encoder; encode() counts calls so tests can prove batching."""

    def __init__(self, name: str, batch_size: int = 64) -> None:
        resolved = resolve_model(name)
        from sentence_transformers import SentenceTransformer

        quiet_transformers()
        self.name = name
        self.source = resolved.source
        self.batch_size = batch_size
        self._model = SentenceTransformer(str(resolved.path), device="cpu")
        get_dim = getattr(self._model, "get_embedding_dimension", None) or self._model.get_sentence_embedding_dimension
        self.dim = int(get_dim())
        self.calls = 0
        self._lock = threading.Lock()

    def encode(self, texts: list[str], batch_size: int | None = None) -> np.ndarray:
        with self._lock:  # one forward at a time: torch already uses every core
            self.calls += 1
            if not texts:
                return np.zeros((0, self.dim), dtype=np.float32)
            vectors = self._model.encode(list(texts), batch_size=batch_size or self.batch_size,
                                         normalize_embeddings=True, convert_to_numpy=True,
                                         show_progress_bar=False)
        return np.asarray(vectors, dtype=np.float32)

    @property
    def max_tokens(self) -> int:
        """The encoder's token window: :meth:`encode` reads a text's first ``max_tokens`` tokens (specials included)."""
        return int(self._model.max_seq_length)

    def token_count(self, text: str) -> int:
        """Tokens the encoder's tokenizer makes of ``text`` untruncated (specials included)."""
        return len(self._model.tokenizer(text, truncation=False)["input_ids"])

    def encode_late(self, texts: list[str], spans: list[list[tuple[int, int]]],
                    batch_size: int | None = None) -> tuple[np.ndarray, list[list[np.ndarray | None]]]:
        """One forward pass per text gives its embedding *and* a vector per character span ("late chunking",
        Günther et al. 2024): the span's contextual token embeddings, mean-pooled and L2-normalised.

        The text embedding is the model's own (the same pooling, truncation and normalisation as :meth:`encode`).
        Spans the truncated pass does not reach whole are pooled from continuation passes
        (:func:`late_pool`); a span longer than the encoder's window gets ``None``: the caller encodes it
        separately."""
        import torch

        tokenizer, limit = self._model.tokenizer, self._model.max_seq_length

        def forward(batch: list[str]):
            features = tokenizer(batch, padding=True, truncation=True, max_length=limit,
                                 return_offsets_mapping=True, return_tensors="pt")
            offsets = features.pop("offset_mapping").numpy()
            with torch.inference_mode():
                out = self._model(dict(features))
            return (out["sentence_embedding"].float().numpy(), out["token_embeddings"].float().numpy(), offsets,
                    features["attention_mask"].numpy().astype(bool))

        with self._lock:
            self.calls += 1
            return late_pool(texts, spans, forward, batch_size or self.batch_size, self.dim)


def late_pool(texts: list[str], spans: list[list[tuple[int, int]]], forward, batch_size: int,
              dim: int) -> tuple[np.ndarray, list[list[np.ndarray | None]]]:
    """Late chunking over any encoder: ``forward(batch of texts)`` returns (text vectors, token embeddings,
    character offsets, attention mask) of one truncated pass.

    Each text's vector is its first pass's. A span lies in a pass when the pass read the text up to the span's
    end; spans past the truncation are pooled from a continuation pass over the text from the first such span's
    start (its tokens read in that segment's context), repeated until every span is pooled. Each continuation
    reads only what the previous passes did not, so a long text costs about its length in tokens instead of a
    second encoding of every window. A span that a pass starting at it cannot hold whole gets ``None``."""
    pooled = np.zeros((len(texts), dim), dtype=np.float32)
    windows: list[list[np.ndarray | None]] = [[None] * len(s) for s in spans]
    # (text index, character offset of the segment in the text, indices of the spans still to pool); offset 0 is
    # the text's first pass, a continuation starts at a pending span's start, always past 0
    pending = [(i, 0, list(range(len(spans[i])))) for i in range(len(texts))]
    while pending:
        segments = [texts[i][start:] for i, start, _ in pending]
        order = sorted(range(len(pending)), key=lambda j: -len(segments[j]))
        following = []
        for b in range(0, len(order), batch_size):
            batch = order[b:b + batch_size]
            vectors, tokens, offsets, mask = forward([segments[j] for j in batch])
            for row, j in enumerate(batch):
                i, start, todo = pending[j]
                if start == 0:
                    pooled[i] = vectors[row]
                real = mask[row] & (offsets[row][:, 1] > offsets[row][:, 0])
                read_to = int(offsets[row][real, 1].max()) if real.any() else 0
                whole = not segments[j][read_to:].strip()
                left = []
                for k in todo:
                    s, e = spans[i][k][0] - start, spans[i][k][1] - start
                    if whole or e <= read_to:
                        windows[i][k] = _pool_span(tokens[row], offsets[row], mask[row], s, e)
                    elif s <= 0:
                        continue  # it starts this pass and still does not fit: the caller encodes it alone
                    else:
                        left.append(k)
                if left:
                    following.append((i, min(spans[i][k][0] for k in left), left))
        pending = following
    return pooled, windows


def _pool_span(tokens: np.ndarray, offsets: np.ndarray, mask: np.ndarray, start: int, end: int) -> np.ndarray | None:
    """Mean of the token embeddings whose characters lie in ``[start, end)`` (special tokens excluded), L2-normalised;
    None when no token falls there."""
    inside = mask & (offsets[:, 1] > offsets[:, 0]) & (offsets[:, 0] < end) & (offsets[:, 1] > start)
    if not inside.any():
        return None
    v = tokens[inside].mean(axis=0)
    return (v / max(float(np.linalg.norm(v)), 1e-12)).astype(np.float32)


class CrossEncoderReranker:
    """A sentence-transformers CrossEncoder returning raw logits."""

    def __init__(self, name: str, max_tokens: int = 256, batch_size: int = 16) -> None:
        resolved = resolve_model(name)
        from sentence_transformers import CrossEncoder

        quiet_transformers()
        self.name = name
        self.source = resolved.source
        self.batch_size = batch_size
        self._model = CrossEncoder(str(resolved.path), max_length=max_tokens, device="cpu",
                                   activation_fn=_identity())
        self._lock = threading.Lock()

    def score(self, query: str, passages: list[str]) -> np.ndarray:
        with self._lock:
            if not passages:
                return np.zeros(0, dtype=np.float32)
            logits = self._model.predict([(query, p) for p in passages], batch_size=self.batch_size,
                                         show_progress_bar=False, convert_to_numpy=True)
        return np.asarray(logits, dtype=np.float32).reshape(len(passages), -1)[:, 0]


class NLIClassifier:
    """An entailment cross-encoder (MNLI-style): ``predict`` returns softmax probabilities over its labels.

    ``labels`` are the model's own ``id2label`` names, lower-cased, in logit order — checkpoints disagree on
    the order (``cross-encoder/nli-deberta-v3-small``: contradiction, entailment, neutral), so callers look a
    label up by name, never by position.
    """

    def __init__(self, name: str, max_tokens: int = 512, batch_size: int = 16) -> None:
        resolved = resolve_model(name)
        self.name = name
        self.source = resolved.source
        self.batch_size = batch_size
        self._lock = threading.Lock()
        onnx_path = resolved.path / ONNX_FILE
        if onnx_path.is_file():  # a model trained here, shipped as int8 ONNX (pipeline/models/weights/nli)
            from transformers import AutoConfig

            from pipeline.models.rerank_onnx import OnnxReranker

            id2label = AutoConfig.from_pretrained(str(resolved.path)).id2label or {}
            self._onnx = OnnxReranker(name, resolved.path, onnx_path,
                                      max_tokens=min(max_tokens, trained_tokens(resolved.path)), batch_size=batch_size)
            self._model = None
            count = len(id2label)
        else:
            from sentence_transformers import CrossEncoder

            quiet_transformers()
            self._onnx = None
            self._model = CrossEncoder(str(resolved.path), max_length=max_tokens, device="cpu",
                                       activation_fn=_identity())
            id2label = getattr(self._model.config, "id2label", None) or {}
            count = int(self._model.num_labels)
        self.labels = tuple(str(id2label.get(i, id2label.get(str(i), f"label_{i}"))).lower() for i in range(count))
        if "entailment" not in self.labels:
            raise ModelUnavailable(f"model {name!r} is not an NLI classifier: labels {self.labels} have no "
                                   "'entailment'")

    def predict(self, pairs: list[tuple[str, str]]) -> np.ndarray:
        """(premise, hypothesis) pairs → probabilities, shape (len(pairs), len(labels))."""
        if not pairs:
            return np.zeros((0, len(self.labels)), dtype=np.float32)
        if self._onnx is not None:
            logits = self._onnx.logits([p for p, _ in pairs], [h for _, h in pairs])
        else:
            with self._lock:
                logits = self._model.predict(list(pairs), batch_size=self.batch_size, show_progress_bar=False,
                                             convert_to_numpy=True)
        logits = np.asarray(logits, dtype=np.float64).reshape(len(pairs), len(self.labels))
        shifted = np.exp(logits - logits.max(axis=1, keepdims=True))
        return (shifted / shifted.sum(axis=1, keepdims=True)).astype(np.float32)


def _identity():
    import torch

    return torch.nn.Identity()
