"""Ingestion: load → chunk → tokenize → embed (batched, with a progress line) → write → supersession.

**Overlap.** Loading, chunking, BM25 tokenizing and splitting sentence windows run on one worker thread
(:mod:`pipeline.ingestion.prepare`): files are parsed while the embedder loads, and each document is prepared
while the encoder works on the previous group. The caller's thread encodes and does every write, in document
order, so the groups, vectors and rows are those of a sequential run (``overlap=False``) and the store's
crash-consistent write path is unchanged. **Progress** (``progress``: True for stderr, or a callable taking a
:class:`~pipeline.ingestion.progress.Progress`) is reported before and after each group's encoder call:
``N/M chunks · X chunks/s · ETA m:ss``.

Embedding and writing go in groups of whole documents of about ``ingest.batch_chunks`` chunks: one encoder
call per group (the embedder sorts the group's texts by length, so its mini-batches pad little) and one
batched write (:meth:`Store.replace_documents`: one index flush and one catalogue transaction). With
``ingest.passage_vectors`` the same call also embeds every chunk's sentence windows, stored for the
citation validator (:mod:`pipeline.validation.citations`) so that answering never embeds a chunk's passages.
With ``ingest.passage_vectors_mode = late`` the windows are instead pooled from the chunk's own forward pass
(:meth:`pipeline.models.encoders.SentenceEmbedder.encode_late`, located by :func:`window_spans`), so each chunk is
encoded once (a chunk longer than the encoder's token window in continuation passes over the rest of its text,
not window by window); an embedder without ``encode_late`` (the test fakes) encodes them separately.

The keyword leg's sparse vectors use ``keyword.k1``, ``keyword.b`` and ``keyword.heading_weight`` (a heading-path
word's term-frequency weight, :func:`chunk_sparse`); they are part of the build signature, so changing one
re-indexes every document on the next ingest (the heading weight only when it is not 1, so stores built before
the parameter existed are not rebuilt). So is ``embedding.precision`` when it is not fp32: an int8 store is
rebuilt in fp32 and the reverse, never mixed.

Incremental by content hash: an unchanged document is not re-chunked or re-embedded; a changed one
replaces all its old chunks atomically (:meth:`Store.replace_document`); a document whose front matter
says ``status: retracted`` is removed; its title and terms are kept aside (``Store.retracted_documents``) so an
abstention can say that what a question names is only in a retracted document. The corpus version increments
once per run that changed anything, in the catalogue transaction of the run's first commit (:meth:`Store.writing`),
so a run killed after any commit has already moved it and no answer cached under the old version is served again.

BM25 document weights depend on the corpus's average chunk length (the statistics are pure functions of
:mod:`pipeline.retrieval.bm25`). A fresh ingest computes it over all chunks before writing; an incremental
one recomputes it and, when it drifted by more than ``AVGDL_TOLERANCE``, rewrites every chunk's sparse vector
(no re-embedding), so the keyword leg keeps scoring with the corpus's real average length.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from pipeline.config import PipelineConfig
from pipeline.ingestion.documents import Chunk, Document, LoadProblem, load_paths
from pipeline.ingestion.prepare import Prepared, Preparer, Worker
from pipeline.ingestion.progress import ProgressCallback, ProgressTracker, reporter_for
from pipeline.ingestion.supersede import SupersedeInput, compute_supersession
from pipeline.models.registry import Models
from pipeline.retrieval.bm25 import AVGDL_TOLERANCE, average_length, avgdl_drifted, doc_sparse
from pipeline.storage.qdrant_index import IndexPoint
from pipeline.storage.store import DocumentWrite, Store, point_id_for
from pipeline.text.tokenize import tokenize
from pipeline.validation.passages import passage_key


@dataclass(frozen=True)
class IngestReport:
    documents: int                 # valid documents found in the given paths
    chunks: int                    # their chunks
    embedded: int                  # chunks embedded this run (0 when nothing changed)
    deleted: int                   # documents removed (retracted)
    corpus_version: int
    added: tuple[str, ...] = ()
    updated: tuple[str, ...] = ()
    unchanged: int = 0
    retracted: tuple[str, ...] = ()
    superseded_chunks: int = 0
    problems: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()

    def to_dict(self) -> dict:
        return {"documents": self.documents, "chunks": self.chunks, "embedded": self.embedded,
                "deleted": self.deleted, "corpus_version": self.corpus_version, "added": list(self.added),
                "updated": list(self.updated), "unchanged": self.unchanged, "retracted": list(self.retracted),
                "superseded_chunks": self.superseded_chunks, "problems": list(self.problems),
                "notes": list(self.notes)}


def build_signature(cfg: PipelineConfig, dim: int) -> str:
    """What the stored vectors depend on; a change means every chunk must be rebuilt. The passage-vector
    settings (``ingest.passage_vectors``, ``passage_vectors_mode``) are not part of it: both modes give the
    validator vectors of the same windows, so a change applies to the documents ingested from then on (ingest
    into a new store to redo the others)."""
    bm25 = [cfg.keyword.k1, cfg.keyword.b] + ([cfg.keyword.heading_weight] if cfg.keyword.heading_weight != 1.0
                                              else [])  # unchanged for stores built before the parameter
    signature = {"embedding": cfg.embedding.model, "dim": dim, "chunking": [cfg.chunking.max_tokens,
                 cfg.chunking.overlap_tokens], "bm25": bm25}
    if cfg.embedding.precision != "fp32":  # absent for fp32, so stores built before the setting are not rebuilt
        signature["precision"] = cfg.embedding.precision
    return json.dumps(signature, sort_keys=True)


def heading_token_count(heading_path: Iterable[str]) -> int:
    """How many of a chunk's indexed tokens come from its heading path: ``indexed_text`` is the heading path, a
    newline, then the text, and no token spans the newline, so they are the first this many."""
    return len(tokenize(" > ".join(heading_path)))


def chunk_sparse(terms: list[str], heading_path: Iterable[str], avgdl: float,
                 cfg: PipelineConfig) -> tuple[list[int], list[float]]:
    """A chunk's BM25 sparse vector under ``cfg.keyword`` (k1, b, heading weight)."""
    kw = cfg.keyword
    heading = heading_token_count(heading_path) if kw.heading_weight != 1.0 else 0
    return doc_sparse(terms, avgdl, kw.k1, kw.b, heading, kw.heading_weight)


def ingest_paths(store: Store, paths: Iterable[str | Path], cfg: PipelineConfig, models: Models,
                 progress: bool | ProgressCallback = True, overlap: bool = True) -> IngestReport:
    """Index the files under ``paths``. ``progress``: True (stderr), False, or a callable taking a
    :class:`~pipeline.ingestion.progress.Progress`; ``overlap=False`` prepares everything on this thread first."""
    paths = list(paths)
    with store.writing("ingest"):
        return _ingest(store, lambda: load_paths(paths), cfg, models, progress, False, overlap)


def ingest_documents(store: Store, documents: list[Document], cfg: PipelineConfig, models: Models,
                     problems: list[LoadProblem] | None = None, progress: bool | ProgressCallback = True,
                     rebuild: bool = False, overlap: bool = True) -> IngestReport:
    """Index ``documents``; unchanged ones (same content hash) are skipped unless ``rebuild`` (repair).

    The whole run is one write session (:meth:`Store.writing`): a second writer waits or is refused before
    anything is touched, and every commit moves the corpus version to the run's new version."""
    with store.writing("ingest"):
        return _ingest(store, lambda: (list(documents), list(problems or [])), cfg, models, progress, rebuild,
                       overlap)


def _ingest(store: Store, load: Callable[[], tuple[list[Document], list[LoadProblem]]], cfg: PipelineConfig,
            models: Models, progress: bool | ProgressCallback, rebuild: bool, overlap: bool) -> IngestReport:
    tracker = ProgressTracker(reporter_for(progress))
    worker = Worker(threaded=overlap)
    preparer: Preparer | None = None
    try:
        loading = worker.submit(load)  # files are parsed while the embedder loads
        embedder = models.embedder(cfg.embedding)
        documents, problems = loading.result()
        plan = _plan(store, documents, cfg, embedder, rebuild)
        preparer = Preparer(plan.changed, cfg)
        worker.submit(preparer.run)
        return _run(store, plan, preparer, problems, cfg, embedder, tracker)
    finally:
        if preparer is not None:
            preparer.stop()
        worker.close()
        tracker.close()


@dataclass
class _Plan:
    """What a run will do, decided from the documents and the store before anything is chunked."""
    signature: str
    force: bool
    existing: dict
    live_docs: list[Document]
    retracted: list[str]
    changed: list[Document]
    unchanged: int
    notes: list[str]
    marked_retracted: dict[str, tuple[str, list[str]]]   # every loaded document marked retracted: title, terms


def _plan(store: Store, documents: list[Document], cfg: PipelineConfig, embedder, rebuild: bool) -> _Plan:
    notes: list[str] = []
    signature = build_signature(cfg, embedder.dim)
    stored_signature = store.meta("build_signature")
    if stored_signature and stored_signature != signature and not store.is_empty():
        if json.loads(stored_signature).get("dim") != embedder.dim:
            from pipeline.storage.store import StoreError
            raise StoreError(f"the store at {store.home} was built with {json.loads(stored_signature)['embedding']} "
                             f"(dimension {json.loads(stored_signature)['dim']}); delete the data directory or use "
                             f"another --store to ingest with {cfg.embedding.model}")
        notes.append("chunking, BM25 or embedding settings changed since the last ingest: rebuilding every document")
        known = {d.doc_id for d in documents}
        documents = documents + [d for d in (store.load_document(s.doc_id) for s in store.documents())
                                 if d is not None and d.doc_id not in known]
        force = True
    else:
        force = rebuild
    existing = {d.doc_id: d for d in store.documents()}
    live_docs = [d for d in documents if not d.retracted]
    retracted = [d.doc_id for d in documents if d.retracted and d.doc_id in existing]
    notes.extend(f"{d.doc_id}: marked retracted; not indexed" for d in documents if d.retracted)
    changed = [d for d in live_docs if force or d.doc_id not in existing
               or existing[d.doc_id].content_hash != d.content_hash]
    marked = {d.doc_id: (d.title, tokenize(d.title + "\n" + d.text)) for d in documents if d.retracted}
    return _Plan(signature, force, existing, live_docs, retracted, changed, len(live_docs) - len(changed), notes,
                 marked)


ENCODED_AHEAD = 2   # encoded groups that may wait for the worker's last document before they are written


def _run(store: Store, plan: _Plan, preparer: Preparer, problems: list[LoadProblem], cfg: PipelineConfig,
         embedder, tracker: ProgressTracker) -> IngestReport:
    """Encode groups of whole documents as the worker prepares them; write each once the corpus's average chunk
    length is known (every changed document chunked), at most :data:`ENCODED_AHEAD` groups behind the encoder."""
    retracted, existing = plan.retracted, plan.existing
    added, updated, waiting = [], [], []
    state: dict = {}

    def settle() -> float:
        """The average chunk length after this run (stored chunks of untouched documents plus the new ones)."""
        if "avgdl" not in state:
            preparer.wait()
            if preparer.lengths:  # a run that embeds nothing shows no progress line
                tracker.update(total=len(preparer.lengths), counting=False)
            if preparer.ids or retracted:
                store.set_meta(pending="1")  # cleared below; if the process dies, the next open repairs
            replaced = set(preparer.ids) | set(retracted)
            state["kept_lengths"] = [c.token_count for c in store.chunks() if c.doc_id not in replaced]
            state["avgdl"] = average_length(state["kept_lengths"] + preparer.lengths)
        return state["avgdl"]

    def encode(group: list[Prepared]) -> None:
        finished = preparer.finished.is_set()  # the lengths are complete once it is set
        tracker.update(total=len(preparer.lengths), counting=not finished)
        dense, rest = _embed(group, embedder, cfg)
        tracker.update(advanced=sum(len(p.chunks) for p in group))
        waiting.append((group, dense, rest))
        if preparer.finished.is_set() or len(waiting) >= ENCODED_AHEAD:
            write()

    def write() -> None:
        avgdl = settle()
        while waiting:
            group, dense, rest = waiting.pop(0)
            store.replace_documents(_build_writes(group, dense, rest, embedder, cfg, avgdl))
            for p in group:
                (updated if p.doc.doc_id in existing else added).append(p.doc.doc_id)

    group: list[Prepared] = []
    size = 0
    for p in preparer.items():  # whole documents, grouped until a group holds at least ingest.batch_chunks chunks
        group.append(p)
        size += len(p.chunks)
        if size >= cfg.ingest.batch_chunks:
            encode(group)
            group, size = [], 0
    if group:
        encode(group)
    write()
    avgdl, kept_lengths = state["avgdl"], state["kept_lengths"]
    changed_ids = set(preparer.ids)
    problems = problems + preparer.problems
    failed = {d.doc_id for d in plan.changed} - changed_ids
    live_docs = [d for d in plan.live_docs if d.doc_id not in failed]
    notes = list(plan.notes)

    for doc_id in retracted:
        store.delete_document(doc_id)
    store.record_retracted(plan.marked_retracted, [d.doc_id for d in live_docs])
    if updated or retracted:
        _forget_cached_answers(store, updated + retracted)

    changed_anything = bool(changed_ids or retracted)
    previous_avgdl = store.avgdl
    if changed_anything and previous_avgdl and kept_lengths and (
            avgdl_drifted(previous_avgdl, avgdl, AVGDL_TOLERANCE) or plan.force):
        store.mark_changed()
        refresh_sparse(store, cfg, avgdl, skip=changed_ids)
        notes.append(f"average chunk length moved {previous_avgdl:.1f} → {avgdl:.1f} tokens: "
                     "sparse vectors of unchanged chunks rewritten")
    superseded = 0
    if changed_anything:
        superseded = update_supersession(store, cfg)
        store.index.optimize()
        store.index.flush()
        store.mark_changed()  # already moved by the run's first commit; kept explicit for a run that only rewrote
        store.set_meta(avgdl=avgdl, build_signature=plan.signature, dim=embedder.dim, pending="")
    else:
        superseded = sum(1 for c in store.chunks() if c.superseded_by)
    return IngestReport(
        documents=len(live_docs), chunks=len(preparer.lengths) + _stored_chunks_of(
            store, [d.doc_id for d in live_docs if d.doc_id not in changed_ids]),
        embedded=len(preparer.lengths), deleted=len(retracted), corpus_version=store.corpus_version,
        added=tuple(added), updated=tuple(updated), unchanged=plan.unchanged, retracted=tuple(retracted),
        superseded_chunks=superseded, problems=tuple(str(p) for p in problems), notes=tuple(notes))


def delete_document(store: Store, doc_id: str) -> int:
    """Remove a document from both legs; the corpus version moves in the transaction that removes it.
    Returns chunks removed (0: unknown id)."""
    with store.writing("delete"):
        removed = store.delete_document(doc_id)
        if removed:
            _forget_cached_answers(store, [doc_id])
            store.index.optimize()
            store.index.flush()
    return removed


def _forget_cached_answers(store: Store, doc_ids: list[str]) -> None:
    """No cached answer that cited a replaced or removed document is served again.

    The cache key already includes the corpus version, which every change bumps; dropping the entries that
    cite these documents makes the guarantee explicit instead of resting on one counter.
    """
    from pipeline.storage.cache import AnswerCache

    cache = AnswerCache(store.home / "cache.sqlite")
    try:
        cache.invalidate_documents(doc_ids)
    finally:
        cache.close()


def _stored_chunks_of(store: Store, doc_ids: list[str]) -> int:
    return sum(d.chunk_count for d in store.documents_by_ids(doc_ids))


def _embed(group: list[Prepared], embedder, cfg: PipelineConfig) -> tuple[np.ndarray, np.ndarray]:
    """One encoder call for the group: every chunk's indexed text and (``ingest.passage_vectors``) every sentence
    window the citation validator will compare claims with. Returns (chunk vectors, window vectors in order)."""
    chunks = [c for p in group for c in p.chunks]
    texts = [c.indexed_text for c in chunks]
    windows = [w for p in group for w in p.windows]
    if windows and cfg.ingest.passage_vectors_mode == "late" and hasattr(embedder, "encode_late"):
        return _late_vectors(chunks, windows, embedder)
    vectors = np.asarray(embedder.encode(texts + [w for ws in windows for w in ws]), dtype=np.float32)
    return vectors[:len(texts)], vectors[len(texts):]


def _build_writes(group: list[Prepared], dense: np.ndarray, rest: np.ndarray, embedder, cfg: PipelineConfig,
                  avgdl: float) -> list[DocumentWrite]:
    """The group's points (dense and BM25 sparse vectors, payload) and catalogue rows (with the passage vectors)."""
    with_windows = bool(cfg.ingest.passage_vectors) and any(p.chunks for p in group)
    writes, offset, window_offset = [], 0, 0
    for p in group:
        n = len(p.chunks)
        points, passages = [], [] if with_windows else None
        rows = zip(p.chunks, p.terms, dense[offset:offset + n], range(n), strict=True)
        for chunk, terms, vector, k in rows:
            indices, values = chunk_sparse(terms, chunk.heading_path, avgdl, cfg)
            points.append(IndexPoint(point_id_for(p.doc, chunk.ordinal), vector.tolist(), indices, values,
                                     _payload(p.doc, chunk)))
            if with_windows:
                w = p.windows[k]
                passages.append((passage_key(chunk.heading_path, chunk.text), w,
                                 np.vstack([vector[None, :], rest[window_offset:window_offset + len(w)]])))
                window_offset += len(w)
        offset += n
        writes.append(DocumentWrite(p.doc, p.chunks, points, p.terms, passages, embedder.name))
    return writes


def window_spans(chunk: Chunk, windows: tuple[str, ...]) -> list[tuple[int, int] | None]:
    """Where each sentence window lies in the chunk's ``indexed_text`` (character span), or None when it cannot be
    found. A window is a sentence, found verbatim, or two adjacent sentences joined by one space, whose span runs
    from the first's start to the second's end whatever whitespace separated them in the text."""
    offset = len(chunk.indexed_text) - len(chunk.text)
    text = _ChunkText(chunk.text)
    known = set(windows)
    spans: list[tuple[int, int] | None] = []
    for window in windows:
        start = text.text.find(window)
        if start >= 0:
            spans.append((offset + start, offset + start + len(window)))
            continue
        loose = text.loose_find(window)  # the sentence splitter reads a line break as a space
        if loose is not None:
            spans.append((offset + loose[0], offset + loose[1]))
            continue
        found = None
        for cut in (i for i, ch in enumerate(window) if ch == " "):
            first, second = window[:cut], window[cut + 1:]
            if first in known and second in known:
                found = text.adjacent(first, second) or text.in_order(first, second)
                if found:
                    break
        if found is None:
            found = text.by_words(window)
        spans.append(None if found is None else (offset + found[0], offset + found[1]))
    return spans


_MARKUP = frozenset("`*")


class _ChunkText:
    """A chunk's text and the two readings of it the window search falls back on, each made once per chunk: the
    plain form (whitespace runs as one space, no inline markup) and the word list."""

    def __init__(self, text: str) -> None:
        self.text = text

    @functools.cached_property
    def _plain(self) -> tuple[str, list[int]]:
        """The plain form and, per character of it, its index in ``text``."""
        kept: list[int] = []
        plain: list[str] = []
        for i, ch in enumerate(self.text):
            if ch in _MARKUP:
                continue
            if ch.isspace():
                if plain and plain[-1] == " ":
                    continue
                ch = " "
            kept.append(i)
            plain.append(ch)
        return "".join(plain), kept

    @functools.cached_property
    def _words(self) -> tuple[list[re.Match], list[str]]:
        words = list(re.finditer(r"\w+", self.text))
        return words, [m.group() for m in words]

    def loose_find(self, window: str) -> tuple[int, int] | None:
        """The span of ``window``, reading any run of whitespace as one space and ignoring the markup the sentence
        splitter drops: inline-code backticks and emphasis asterisks (```a.b``` reads ``a.b``, ``**Type:**`` reads
        ``Type:``)."""
        target = " ".join("".join(ch for ch in window if ch not in _MARKUP).split())
        if not target:
            return None
        plain, kept = self._plain
        at = plain.find(target)
        return (kept[at], kept[at + len(target) - 1] + 1) if at >= 0 else None

    def by_words(self, window: str) -> tuple[int, int] | None:
        """The span of the first run of the text's words equal to ``window``'s words, whatever punctuation and
        markup lie between them (a table row the splitter read without its ``|``, a list item without its
        marker)."""
        want = re.findall(r"\w+", window)
        if not want:
            return None
        words, tokens = self._words
        for i in range(len(tokens) - len(want) + 1):
            if tokens[i:i + len(want)] == want:
                return words[i].start(), words[i + len(want) - 1].end()
        return None

    def in_order(self, first: str, second: str) -> tuple[int, int] | None:
        """From ``first`` to ``second`` when both are located by their words and ``second`` follows ``first``."""
        a, b = self.by_words(first), self.by_words(second)
        return (a[0], b[1]) if a and b and b[0] >= a[1] else None

    def adjacent(self, first: str, second: str) -> tuple[int, int] | None:
        """The span of ``first`` followed, after whitespace only, by ``second``."""
        text = self.text
        start = text.find(first)
        while start >= 0:
            after = start + len(first)
            rest = text[after:]
            gap = len(rest) - len(rest.lstrip())
            if rest[gap:].startswith(second):
                return start, after + gap + len(second)
            start = text.find(first, start + 1)
        return None


def _late_vectors(chunks: list[Chunk], windows: list[tuple[str, ...]], embedder) -> tuple[np.ndarray, np.ndarray]:
    """``ingest.passage_vectors_mode = late``: one forward pass per chunk gives the chunk vector and every window
    vector it can (:meth:`SentenceEmbedder.encode_late`, with continuation passes past the encoder's token window);
    windows that cannot be located, or that are longer than that window, are encoded on their own in one more call.
    Returns (chunk vectors, window vectors in the order of ``windows``)."""
    spans = [window_spans(c, ws) for c, ws in zip(chunks, windows, strict=True)]
    dense, pooled = embedder.encode_late([c.indexed_text for c in chunks],
                                         [[sp for sp in s if sp is not None] for s in spans])
    out: list[np.ndarray | None] = []
    missing: list[tuple[int, str]] = []
    for ws, s, p in zip(windows, spans, pooled, strict=True):
        found = iter(p)
        for window, span in zip(ws, s, strict=True):
            vector = next(found) if span is not None else None
            if vector is None:
                missing.append((len(out), window))
            out.append(vector)
    if missing:
        extra = np.asarray(embedder.encode([w for _, w in missing]), dtype=np.float32)
        for (i, _), vector in zip(missing, extra, strict=True):
            out[i] = vector
    rest = np.vstack(out).astype(np.float32) if out else np.zeros((0, dense.shape[1]), dtype=np.float32)
    return np.asarray(dense, dtype=np.float32), rest


def _payload(doc: Document, chunk: Chunk) -> dict:
    return {"chunk_id": chunk.chunk_id, "doc_id": doc.doc_id, "title": doc.title, "text": chunk.text,
            "heading_path": list(chunk.heading_path), "kind": chunk.kind, "ordinal": chunk.ordinal,
            "version": doc.version, "effective_date": doc.effective_date,
            "product": doc.metadata.get("product", ""), "topic": doc.metadata.get("topic", ""),
            "doc_hash": doc.content_hash, "superseded_by": [], "superseded_reason": ""}


def refresh_sparse(store: Store, cfg: PipelineConfig, avgdl: float, skip: set[str] = frozenset()) -> int:
    """Rewrite the BM25 sparse vectors of every live chunk (except documents in ``skip``) for ``avgdl``."""
    stored = store.chunks()
    skip_points = {c.point_id for c in stored if c.doc_id in skip}
    headings = {c.point_id: c.heading_path for c in stored}
    items = []
    for point_id, terms in store.chunk_terms().items():
        if point_id in skip_points:
            continue
        indices, values = chunk_sparse(terms, headings.get(point_id, ()), avgdl, cfg)
        items.append((point_id, indices, values))
    store.index.update_sparse(items)
    return len(items)


def update_supersession(store: Store, cfg: PipelineConfig) -> int:
    """Recompute 'superseded in part' over the whole catalogue; returns how many chunks carry it."""
    docs = {d.doc_id: d for d in store.documents()}
    chunks = store.chunks()
    items, point_ids = [], []
    for c in chunks:
        d = docs[c.doc_id]
        group = d.metadata.get("product") or d.metadata.get("topic") or ""
        items.append(SupersedeInput(c.chunk_id, c.doc_id, d.title, group, d.version, d.effective_date, c.text))
        point_ids.append(c.point_id)
    if not items:
        return 0
    dense = store.index.dense_vectors(point_ids)
    dim = store.dim
    vectors = np.array([dense.get(pid) or [0.0] * dim for pid in point_ids], dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    vectors = vectors / np.maximum(norms, 1e-12)
    found = compute_supersession(items, vectors, cfg.ingest.supersede_similarity)
    updates = {}
    for c in chunks:
        new = found.get(c.chunk_id, ((), ""))
        if (tuple(c.superseded_by), c.superseded_reason) != new:
            updates[c.chunk_id] = new
    if updates:
        store.set_supersession(updates)
    return len(found)


def needs_repair(store: Store) -> bool:
    """Cheap check: an interrupted write, a replaced index, or point and chunk counts that disagree. A store
    another process is writing to right now is busy, not broken: False."""
    if store.another_writer_active():
        return False
    return bool(store.meta("pending") or getattr(store, "damage", "")) or store.index.count() != store.chunk_count()


def repair(store: Store, cfg: PipelineConfig, models: Models, progress: bool = False) -> list[str]:
    """Make the index match the catalogue: drop orphan points, rebuild missing ones from stored text.

    Runs as the store's one writer (:meth:`Store.writing`), so it never takes a running writer's new points
    for orphans; a document ends wholly in the catalogue and both legs, or wholly absent."""
    with store.writing("repair"):
        return _repair(store, cfg, models, progress)


def _repair(store: Store, cfg: PipelineConfig, models: Models, progress: bool) -> list[str]:
    actions = []
    if getattr(store, "damage", ""):
        actions.append(store.damage)
    orphans = store.orphan_points()
    if orphans:
        store.index.delete(orphans)
        actions.append(f"removed {len(orphans)} index points left by an interrupted write")
    missing = store.missing_points()
    if missing:
        doc_ids = sorted({cid.rsplit("#", 1)[0] for cid in missing})
        docs = [d for d in (store.load_document(doc_id) for doc_id in doc_ids) if d is not None]
        # Re-indexed in place, never deleted first: a process dying half-way must not lose a document's text.
        ingest_documents(store, docs, cfg, models, progress=progress, rebuild=True)
        actions.append(f"rebuilt {len(missing)} missing chunks of {len(docs)} documents from the stored text")
    if actions:
        store.index.optimize()
        store.index.flush()
    store.set_meta(pending="")
    store.damage = ""
    return actions
