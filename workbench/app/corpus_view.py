"""Corpus page helpers: uploads saved under the data directory, and the tables of documents, chunks and
supersession (plain rows for ``st.dataframe``, which shows text as text)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from pipeline.ingestion.documents import SUPPORTED_SUFFIXES
from pipeline.ingestion.ingest import IngestReport
from pipeline.ingestion.progress import Progress
from pipeline.storage.store import Store

UPLOAD_TYPES = sorted(s.lstrip(".") for s in SUPPORTED_SUFFIXES)


def save_uploads(files, home: Path) -> list[Path]:
    """Write uploaded files to ``<data dir>/uploads/`` under their base names (a later upload of the same
    name replaces the file, and re-ingesting it replaces the document: ingestion is by document id)."""
    folder = Path(home) / "uploads"
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for f in files:
        name = Path(f.name).name.strip() or "upload.txt"
        path = folder / name
        path.write_bytes(f.getvalue())
        paths.append(path)
    return paths


def sharing_note(store: Store) -> str:
    """One line on who runs this store's index: this app (and it serves the other processes on the data
    directory), or another process that serves it to the app (:mod:`pipeline.storage.share`)."""
    if store.served_by:
        return (f"data directory {store.home} — its index is held by another process ({store.served_by}) and "
                "served to this app; if that process stops, the app takes the index over at its next search")
    if store.serving_problem:
        return f"data directory {store.home} — {store.serving_problem}: other processes are refused while the app runs"
    return (f"data directory {store.home} — this app holds the index and serves it to the CLI, notebooks and any "
            "other process that opens this data directory; an ingest from the CLI works while the app runs")


def ingest_progress(bar) -> Callable[[Progress], None]:
    """The ingest's progress callback for a Streamlit bar (``st.progress``): the share embedded and the same line the
    CLI prints, "N/M chunks · X chunks/s · ETA m:ss"."""
    def update(progress: Progress) -> None:
        bar.progress(progress.fraction, text=f"Embedding: {progress.text()}")
    return update


def report_lines(report: IngestReport) -> tuple[str, list[str], list[str]]:
    """(summary, problems, notes) of one ingest, one line each."""
    summary = (f"{len(report.added)} added, {len(report.updated)} updated, {report.unchanged} unchanged, "
               f"{report.deleted} retracted; {report.embedded} chunks embedded; corpus version {report.corpus_version}")
    return summary, [_short(p) for p in report.problems], list(report.notes)


def _short(problem: str) -> str:
    """"/data/uploads/x.md: message" -> "x.md: message": the user knows the file by its name."""
    source, sep, message = problem.partition(": ")
    return f"{Path(source).name}: {message}" if sep else problem


def document_rows(store: Store) -> list[dict]:
    return [{"document": d.doc_id, "title": d.title, "version": d.version, "effective date": d.effective_date,
             "product": d.metadata.get("product", ""), "topic": d.metadata.get("topic", ""), "format": d.format,
             "chunks": d.chunk_count, "source": d.source, "ingested at": d.ingested_at} for d in store.documents()]


def chunk_rows(store: Store, doc_id: str) -> list[dict]:
    return [{"#": c.ordinal, "chunk": c.chunk_id, "heading path": " › ".join(c.heading_path), "kind": c.kind,
             "tokens": c.token_count, "superseded by": ", ".join(c.superseded_by),
             "superseded reason": c.superseded_reason, "text": c.text} for c in store.chunks(doc_id)]


def supersession_rows(store: Store) -> list[dict]:
    """Every chunk contested by a newer one, with both sides' documents and versions."""
    docs = {d.doc_id: d for d in store.documents()}
    chunks = store.chunks()
    doc_of = {c.chunk_id: c.doc_id for c in chunks}
    rows = []
    for c in chunks:
        if not c.superseded_by:
            continue
        old = docs.get(c.doc_id)
        newer = [doc_of.get(cid, "") for cid in c.superseded_by]
        rows.append({"older chunk": c.chunk_id, "document": c.doc_id, "version": old.version if old else "",
                     "superseded in part by": ", ".join(c.superseded_by),
                     "newer versions": ", ".join(sorted({docs[d].version or "–" for d in newer if d in docs})),
                     "reason": c.superseded_reason, "text": c.text})
    return rows
