"""A two-document store the lock and sharing tests start from (alpha and beta, fake models, no passage vectors)."""

from __future__ import annotations

from pathlib import Path

from pipeline.config import PipelineConfig
from pipeline.ingestion.documents import Document
from pipeline.ingestion.ingest import ingest_documents
from pipeline.storage.store import Store
from pipeline.testing import fake_models

CFG = PipelineConfig().with_overrides({"ingest.passage_vectors": False})


def doc(doc_id: str, text: str) -> Document:
    return Document(doc_id=doc_id, title=doc_id, text=text, source=f"{doc_id}.md", format="md", metadata={})


def two_document_home(root: Path) -> Path:
    with Store.open(root / "store") as store:
        ingest_documents(store, [doc("alpha", "Alpha retries five times."), doc("beta", "Beta waits.")], CFG,
                         fake_models(), progress=False)
    return root / "store"
