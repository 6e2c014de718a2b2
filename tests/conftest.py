"""Shared fixtures. Tests never need a network: HF_HUB_OFFLINE=1, litellm's local cost map, fakes from
``pipeline.testing``, and the packaged MiniLM for the tests that exercise real embeddings."""

from __future__ import annotations

import fcntl
import os
import shutil

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.pop("QDRANT_URL", None)

from pathlib import Path  # noqa: E402

import pytest  # noqa: E402

from pipeline.config import PipelineConfig  # noqa: E402
from pipeline.ingestion.ingest import ingest_paths  # noqa: E402
from pipeline.models.registry import Models  # noqa: E402
from pipeline.storage.store import Store  # noqa: E402
from pipeline.testing import FakeEmbedder, FakeReranker  # noqa: E402

pytest_plugins = ["tests.support.strict_skips"]

ROOT = Path(__file__).resolve().parent.parent
DEMO_CORPUS = ROOT / "golden" / "corpus"


@pytest.fixture
def cfg() -> PipelineConfig:
    return PipelineConfig()


@pytest.fixture
def fake_embedder() -> FakeEmbedder:
    return FakeEmbedder()


@pytest.fixture
def models(fake_embedder) -> Models:
    """Fake embedder and reranker; no LLM (the default generator is extractive)."""
    return Models(embedder=fake_embedder, reranker=FakeReranker())


@pytest.fixture
def store(tmp_path):
    """An empty store in a temporary data directory (closed after the test)."""
    s = Store.open(tmp_path / "store")
    yield s
    s.close()


@pytest.fixture(scope="session")
def demo_store_fake(tmp_path_factory):
    """The demo corpus ingested once per session with the fake embedder (fast). Treat as read-only."""
    home = tmp_path_factory.mktemp("demo-fake")
    s = Store.open(home)
    ingest_paths(s, [DEMO_CORPUS], PipelineConfig(), Models(embedder=FakeEmbedder()), progress=False)
    yield s
    s.close()


@pytest.fixture(scope="session")
def real_models():
    """The packaged all-MiniLM-L6-v2 (offline) and the committed reader (the offline cross-encoder)."""
    return Models()


@pytest.fixture(scope="session")
def real_demo_prebuilt(tmp_path_factory) -> Path:
    """The demo corpus ingested with the packaged MiniLM once for the whole run, however many pytest-xdist workers
    ask (the first builds it under an exclusive lock in the run's shared temporary folder, the others wait and
    reuse it); closed, so a fixture copies it before opening. ``WORKBENCH_TEST_REAL_HOME`` names a store ingested
    the same way beforehand, used instead."""
    prebuilt = os.environ.get("WORKBENCH_TEST_REAL_HOME", "")
    if prebuilt and (Path(prebuilt) / "store.sqlite").exists():
        return Path(prebuilt)
    base = tmp_path_factory.getbasetemp()
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    home, done = shared / "demo-real-prebuilt", shared / "demo-real-prebuilt.done"
    with open(shared / "demo-real-prebuilt.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not done.exists():
            shutil.rmtree(home, ignore_errors=True)      # a half-built one from a worker that died
            with Store.open(home) as store:
                ingest_paths(store, [DEMO_CORPUS], PipelineConfig(), Models(), progress=False)
            done.write_text("ok")
    return home


@pytest.fixture(scope="session")
def demo_store_real(tmp_path_factory, real_demo_prebuilt):
    """The demo corpus ingested with the real MiniLM embedder (a copy of :func:`real_demo_prebuilt`). Treat as
    read-only."""
    home = tmp_path_factory.mktemp("demo-real")
    shutil.copytree(real_demo_prebuilt, home, dirs_exist_ok=True)
    s = Store.open(home)
    yield s
    s.close()
