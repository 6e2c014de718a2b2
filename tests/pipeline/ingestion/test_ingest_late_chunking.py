"""ingest.passage_vectors_mode = late: the sentence-window vectors come from the chunk's own forward pass, so
ingestion encodes each chunk once; the chunk vector is unchanged and every window still gets a vector."""

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from pipeline.config import PipelineConfig
from pipeline.ingestion.documents import Chunk, Document
from pipeline.ingestion.ingest import ingest_documents, window_spans
from pipeline.models.registry import Models
from pipeline.storage.store import Store
from pipeline.validation.passages import chunk_passages


class _Recording:
    """The real embedder, recording how many texts each path encodes."""

    def __init__(self, inner):
        self.inner, self.name, self.dim, self.calls = inner, inner.name, inner.dim, 0
        self.encoded, self.late = [], []

    def encode(self, texts):
        self.encoded.extend(texts)
        return self.inner.encode(texts)

    def encode_late(self, texts, spans):
        self.late.extend(texts)
        return self.inner.encode_late(texts, spans)


DOC = Document(doc_id="retries", title="Retries", source="r.md", format="md",
               text="Relay retries a failed delivery five times. The backoff doubles after each attempt. "
                    "After the last attempt the event goes to the dead-letter queue. Operators can replay it.")


def _stored(tmp_path, mode, embedder):
    cfg = PipelineConfig().with_overrides({"ingest.passage_vectors_mode": mode})
    with Store.open(tmp_path / mode) as store:
        ingest_documents(store, [DOC], cfg, Models(embedder=embedder), progress=False)
        chunk = store.chunks()[0]
        return chunk, store.passage_vectors([chunk.chunk_id])[chunk.chunk_id]


def test_late_mode_encodes_each_chunk_once_and_keeps_the_chunk_vector(tmp_path, real_models):
    embedder = real_models.embedder(PipelineConfig().embedding)
    separate, late = _Recording(embedder), _Recording(embedder)
    chunk, sep = _stored(tmp_path, "separate", separate)
    _, lat = _stored(tmp_path, "late", late)
    windows = chunk_passages(chunk.text)[1:]
    assert len(windows) >= 4
    assert len(separate.encoded) == 1 + len(windows) and not separate.late
    assert late.late == [separate.encoded[0]] and late.encoded == []  # one forward pass, nothing encoded twice
    assert lat.passages == sep.passages and lat.vectors.shape == sep.vectors.shape
    np.testing.assert_allclose(lat.vectors[0], sep.vectors[0], atol=1e-5)  # the chunk vector is the model's own
    norms = np.linalg.norm(lat.vectors[1:], axis=1)
    np.testing.assert_allclose(norms, 1.0, atol=1e-5)
    cosines = np.sum(lat.vectors[1:] * sep.vectors[1:], axis=1)
    assert (cosines > 0.3).all() and not np.allclose(cosines, 1.0)  # same meaning, contextual vectors


def test_windows_past_the_token_limit_come_from_a_continuation_pass_not_a_second_encoding(tmp_path, real_models):
    embedder = real_models.embedder(PipelineConfig().embedding)
    long_text = " ".join(f"Sentence number {i} talks about delivery attempt {i} in some detail." for i in range(60))
    doc = Document(doc_id="long", title="Long", text=long_text, source="l.md", format="md")
    cfg = PipelineConfig().with_overrides({"ingest.passage_vectors_mode": "late", "chunking.max_tokens": 4000})
    late = _Recording(embedder)
    with Store.open(tmp_path / "long") as store:
        ingest_documents(store, [doc], cfg, Models(embedder=late), progress=False)
        chunk = store.chunks()[0]
        entry = store.passage_vectors([chunk.chunk_id])[chunk.chunk_id]
    assert late.late and late.encoded == []  # the tail windows were pooled from the chunk's continuation passes
    assert entry.vectors.shape[0] == len(entry.passages) + 1
    np.testing.assert_allclose(entry.vectors[0], embedder.encode(late.late)[0], atol=1e-5)  # the model's own
    tail = [i for i, p in enumerate(entry.passages) if "number 59 " in p]
    assert tail  # the last sentence lies far past the encoder's 256-token window
    separate = embedder.encode([entry.passages[i] for i in tail])
    cosines = np.sum(entry.vectors[[i + 1 for i in tail]] * separate, axis=1)
    assert (cosines > 0.3).all()  # pooled from text that was read: the same meaning as encoding it alone


def test_a_fake_embedder_without_late_pooling_falls_back_to_separate_windows(tmp_path):
    from pipeline.testing import FakeEmbedder

    chunk, entry = _stored(tmp_path, "late", FakeEmbedder())
    assert entry.vectors.shape[0] == len(chunk_passages(chunk.text))


def _chunk(text, heading=("Guide", "Retries")):
    return Chunk(chunk_id="d#0", doc_id="d", ordinal=0, text=text, heading_path=heading, kind="prose")


def test_window_spans_point_at_the_windows_in_the_indexed_text():
    chunk = _chunk("First sentence here.\nSecond sentence there. Third one is last.")
    windows = tuple(chunk_passages(chunk.text)[1:])
    spans = window_spans(chunk, windows)
    singles = [w for w in windows if w in chunk.text]
    for window, span in zip(windows, spans, strict=True):
        assert span is not None
        if window in singles:
            assert chunk.indexed_text[span[0]:span[1]] == window
    pair = windows.index("First sentence here. Second sentence there.")
    s, e = spans[pair]
    assert chunk.indexed_text[s:e] == "First sentence here.\nSecond sentence there."  # spans the newline
    assert window_spans(chunk, ("Not in this chunk at all.",)) == [None]


def test_a_sentence_broken_over_lines_or_with_inline_code_is_still_located():
    chunk = _chunk("ERR_X_557: give it time with all\nQuorum needs a `console.interval_ms` for now. **Type:** then "
                   "it stops.")
    windows = tuple(chunk_passages(chunk.text)[1:])
    spans = window_spans(chunk, windows)
    assert None not in spans   # the splitter reads the line break as a space and drops the backticks
    for window, (s, e) in zip(windows, spans, strict=True):
        plain = chunk.indexed_text[s:e].replace("`", "").replace("*", "")
        assert " ".join(plain.split()) == " ".join(window.replace("*", "").split())


_word = st.text(alphabet="abcdefghij", min_size=2, max_size=7)
_sentence = st.lists(_word, min_size=3, max_size=8).map(lambda ws: " ".join(ws).capitalize() + ".")


@given(st.lists(_sentence, min_size=1, max_size=6), st.sampled_from([" ", "\n", "  "]))
def test_every_located_window_covers_its_words(sentences, separator):
    chunk = _chunk(separator.join(sentences))
    windows = tuple(chunk_passages(chunk.text)[1:])
    for window, span in zip(windows, window_spans(chunk, windows), strict=True):
        if span is None:
            continue
        covered = chunk.indexed_text[span[0]:span[1]]
        assert covered.split() == window.split()
        assert span[0] >= len(chunk.indexed_text) - len(chunk.text)  # never inside the heading


def test_late_is_the_default_and_switching_the_mode_does_not_rebuild_the_store(tmp_path):
    from pipeline.ingestion.ingest import build_signature
    from pipeline.testing import FakeEmbedder

    assert PipelineConfig().ingest.passage_vectors_mode == "late"
    separate = PipelineConfig().with_overrides({"ingest.passage_vectors_mode": "separate"})
    assert build_signature(PipelineConfig(), 384) == build_signature(separate, 384)  # stores from before stay
    with Store.open(tmp_path / "s") as store:
        ingest_documents(store, [DOC], separate, Models(embedder=FakeEmbedder()), progress=False)
        version = store.corpus_version
        again = ingest_documents(store, [DOC], PipelineConfig(), Models(embedder=FakeEmbedder()), progress=False)
        assert again.embedded == 0 and store.corpus_version == version   # nothing re-encoded, nothing changed
        assert not any("rebuilding" in note for note in again.notes)
