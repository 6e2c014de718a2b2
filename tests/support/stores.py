"""Small stores for tests: a few documents given as text, written under ``root/corpus`` and ingested with the
fake models into ``root/store``."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from pipeline.config import PipelineConfig
from pipeline.ingestion.ingest import ingest_paths
from pipeline.storage.store import Store
from pipeline.testing import fake_models


def ingest_texts(root: Path, files: Mapping[str, str]):
    """Write ``files`` (name → text) to ``root/corpus``, ingest them into ``root/store``; the ingest report."""
    corpus = root / "corpus"
    corpus.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (corpus / name).write_text(text, encoding="utf-8")
    with Store.open(root / "store") as store:
        return ingest_paths(store, [corpus], PipelineConfig(), fake_models(), progress=False)


class Borrowed:
    """A session store lent to code that opens and closes its own (the CLI's ``open_store``): it may not close it."""

    def __init__(self, store):
        self._store = store

    def __getattr__(self, name):
        return getattr(self._store, name)

    def close(self):
        pass

    def __enter__(self):
        return self._store

    def __exit__(self, *exc):
        return False
