"""The ingest's worker: everything before the encoder — parse files, chunk, tokenize for BM25, split each chunk into
the validator's sentence windows — done on one background thread while the encoder works on the previous group.

:func:`pipeline.ingestion.ingest.ingest_paths` submits two jobs to a :class:`Worker`, in order: loading the files
(parsed while the embedder loads) and then a :class:`Preparer` over the documents that changed, which hands each
prepared document to the encoder through a queue, in input order, as soon as it is ready. So the groups the encoder
sees, and everything written, are exactly those of a sequential run (``Worker(threaded=False)`` runs the same jobs
inline, which is how the tests compare the two).

A document that fails to chunk is a problem line, never the run's end (one bad file never sinks a batch); the
worker never touches the store (the catalogue's SQLite connection stays on the caller's thread, and so do all
writes, which keeps the store's crash-consistent write path as it is). An unexpected error on the worker is raised
again on the caller's thread when it next asks for a document; the caller stops the worker on its own errors.

Why the queue is not bounded: the keyword leg's weights need the corpus's average chunk length before the first
write, so every changed document is chunked before anything is written. Chunking is cheap next to encoding and the
sequential path held all chunks in memory too; what the caller bounds instead is how many *encoded* groups wait
for that average (:data:`pipeline.ingestion.ingest.ENCODED_AHEAD`).
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field

from pipeline.config import PipelineConfig
from pipeline.ingestion.chunking import chunk_document
from pipeline.ingestion.documents import Chunk, Document, LoadProblem
from pipeline.text.tokenize import tokenize
from pipeline.validation.passages import chunk_passages


@dataclass
class Prepared:
    doc: Document
    chunks: list[Chunk]
    terms: list[list[str]] = field(default_factory=list)
    windows: list[tuple[str, ...]] = field(default_factory=list)   # per chunk (ingest.passage_vectors), else []


def prepare_document(doc: Document, cfg: PipelineConfig) -> Prepared:
    """Chunks, their BM25 tokens and (``ingest.passage_vectors``) their sentence windows."""
    chunks = chunk_document(doc, cfg.chunking)
    windows = [tuple(chunk_passages(c.text)[1:]) for c in chunks] if cfg.ingest.passage_vectors else []
    return Prepared(doc, chunks, [tokenize(c.indexed_text) for c in chunks], windows)


class Worker:
    """One background thread running jobs in submission order (``threaded=False``: each job runs at submission)."""

    def __init__(self, threaded: bool = True) -> None:
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ingest-prepare") if threaded else None

    def submit(self, fn: Callable, *args) -> Future:
        if self._pool is not None:
            return self._pool.submit(fn, *args)
        done: Future = Future()
        try:
            done.set_result(fn(*args))
        except BaseException as exc:  # noqa: BLE001 — handed to whoever reads the result, as the pool would
            done.set_exception(exc)
        return done

    def close(self) -> None:
        """Drop jobs not started; wait for the running one (a :class:`Preparer` stops at its next document)."""
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)


class Preparer:
    """Prepares ``documents`` in order (:meth:`run`, on the worker) and yields them to the caller (:meth:`items`).

    Once :attr:`finished` is set, :attr:`lengths` (every prepared chunk's token count, in order), :attr:`ids` and
    :attr:`problems` are complete."""

    _END = object()

    def __init__(self, documents: list[Document], cfg: PipelineConfig) -> None:
        self.documents = documents
        self.cfg = cfg
        self.lengths: list[int] = []
        self.ids: list[str] = []
        self.problems: list[LoadProblem] = []
        self.finished = threading.Event()
        self._queue: queue.Queue = queue.Queue()
        self._stop = threading.Event()
        self._error: BaseException | None = None

    def run(self) -> None:
        try:
            for doc in self.documents:
                if self._stop.is_set():
                    break
                try:
                    prepared = prepare_document(doc, self.cfg)
                except Exception as exc:  # noqa: BLE001 — one document never sinks the batch
                    self.problems.append(LoadProblem(doc.source, f"could not be chunked ({type(exc).__name__}: "
                                                     f"{exc}); skipped — please report this document"))
                    continue
                self.lengths.extend(len(t) for t in prepared.terms)
                self.ids.append(doc.doc_id)
                self._queue.put(prepared)
        except BaseException as exc:  # noqa: BLE001 — raised again on the caller's thread
            self._error = exc
        finally:
            self.finished.set()
            self._queue.put(self._END)

    def items(self) -> Iterator[Prepared]:
        while True:
            item = self._queue.get()
            if item is self._END:
                break
            yield item
        self.wait()

    def wait(self) -> None:
        """Block until every document is prepared; raise the worker's unexpected error, if any."""
        self.finished.wait()
        if self._error is not None:
            raise self._error

    def stop(self) -> None:
        self._stop.set()
