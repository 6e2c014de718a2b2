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
