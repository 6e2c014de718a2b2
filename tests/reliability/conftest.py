"""Fixtures of the reliability suite: the injection corpus and a benign corpus in small fake-embedded stores,
and a small store built by the real CLI. Helpers live in ``rel_support``.

The CLI runs as ``python -m workbench.cli`` in a subprocess with ``HF_HUB_OFFLINE=1`` and no ``QDRANT_URL``,
so what is checked is what a user sees on the terminal: exit code, stderr lines, JSON on stdout.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.config import PipelineConfig
from pipeline.ingestion.ingest import ingest_paths
from pipeline.storage.store import Store
from pipeline.testing import fake_models
from tests.reliability.injection_corpus import corpus_files
from tests.reliability.rel_support import BENIGN, ROOT, workbench
from tests.support.stores import ingest_texts


@pytest.fixture(scope="module")
def benign_home(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("benign")
    report = ingest_texts(root, BENIGN)
    assert report.documents == 3 and not report.problems
    return root


@pytest.fixture
def benign_store(benign_home):
    with Store.open(benign_home / "store") as store:
        yield store



@pytest.fixture(scope="session")
def injection_store(tmp_path_factory):
    """Every injection document, ingested with the fake embedder. Read-only for the tests."""
    home = tmp_path_factory.mktemp("injections")
    store = Store.open(home)
    report = ingest_paths(store, corpus_files(), PipelineConfig(), fake_models(), progress=False)
    assert report.problems == () and report.documents == 27, report
    yield store
    store.close()


@pytest.fixture(scope="module")
def cli_store(tmp_path_factory) -> Path:
    """A small store ingested by the real CLI (packaged MiniLM), closed again so CLI subprocesses can open it."""
    home = tmp_path_factory.mktemp("cli-store")
    corpus = ROOT / "golden" / "corpus"
    files = [corpus / "errors" / "err-timeout-502.md", corpus / "faq" / "faq-limits-3-1.md",
             corpus / "guides" / "guide-replay-from-dlq.md"]
    assert all(f.exists() for f in files)
    result = workbench("ingest", *map(str, files), "--store", str(home), "--json",
                       "--set", "ingest.passage_vectors=false")
    assert result.returncode == 0, result.stderr
    return home
