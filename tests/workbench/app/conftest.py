"""AppTest fixtures: the demo corpus ingested with the fake embedder into a temporary data directory, and
the app pointed at it with ``WORKBENCH_APP_MODELS=fake`` (``workbench.app.resources``: the only test hook)."""

from __future__ import annotations

import html
import re
import shutil
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from pipeline.config import PipelineConfig
from pipeline.ingestion.ingest import ingest_paths
from pipeline.storage.store import Store
from pipeline.testing import FAKE_WORLD, fake_models
from workbench.app.resources import MODELS_ENV

ROOT = Path(__file__).resolve().parents[3]
DEMO_CORPUS = ROOT / "golden" / "corpus"
APP = ROOT / "streamlit_app.py"
PAGES = "workbench/app/pages"


def ingest_fake(home: Path, paths: list[Path]) -> None:
    with Store.open(home) as store:
        ingest_paths(store, paths, PipelineConfig(), fake_models(), progress=False)


@pytest.fixture(scope="session")
def fake_demo_home(tmp_path_factory) -> Path:
    """The demo corpus, fake-embedded, closed again (the app opens it). Tests must not change it."""
    home = tmp_path_factory.mktemp("app-demo-fake")
    ingest_fake(home, [DEMO_CORPUS])
    return home


@pytest.fixture
def app_env(fake_demo_home, monkeypatch) -> Path:
    monkeypatch.setenv("WORKBENCH_HOME", str(fake_demo_home))
    monkeypatch.setenv(MODELS_ENV, "fake")
    return fake_demo_home


@pytest.fixture
def offline_env(fake_demo_home, monkeypatch) -> Path:
    """The demo corpus with the fakes minus the reranker: what a machine without the cross-encoder serves."""
    monkeypatch.setenv("WORKBENCH_HOME", str(fake_demo_home))
    monkeypatch.setenv(MODELS_ENV, "fake-offline")
    return fake_demo_home


@pytest.fixture
def scratch_env(tmp_path, monkeypatch) -> Path:
    """A small private store that a test may change (upload, delete)."""
    home = tmp_path / "store"
    ingest_fake(home, [DEMO_CORPUS / "errors" / "err-timeout-502.md", DEMO_CORPUS / "faq" / "faq-limits-3-1.md",
                       DEMO_CORPUS / "faq" / "faq-limits-2-4.md"])
    monkeypatch.setenv("WORKBENCH_HOME", str(home))
    monkeypatch.setenv(MODELS_ENV, "fake")
    return home


def open_app(page: str | None = None, settings: dict | None = FAKE_WORLD) -> AppTest:
    """The whole app (streamlit_app.py + st.navigation), optionally switched to one page, after one run.

    With the fakes (``WORKBENCH_APP_MODELS=fake``) the gate reads the fake reranker's term-overlap score of whole
    passages (``gate.signal=rerank``, ``rerank.granularity=passage``), the set-up these tests were written against;
    the shipped auto rule and the reader's sentence granularity are tested in tests/pipeline."""
    from workbench.app.sidebar import value_key

    at = AppTest.from_file(str(APP), default_timeout=120)
    for key, value in (settings or {}).items():
        at.session_state[value_key(key)] = value
    at.run()
    if page is not None:
        at.switch_page(f"{PAGES}/{page}.py").run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def html_of(at: AppTest) -> str:
    """Everything the page rendered through st.html, joined."""
    return "\n".join(h.value for h in at.html)


def markdown_sources(at: AppTest) -> list[str]:
    """Every Markdown-rendering element's source (markdown, caption, alerts, expander and tab labels)."""
    values = [m.value for m in at.markdown] + [c.value for c in at.caption]
    values += [e.value for e in (*at.error, *at.warning, *at.info, *at.success)]
    values += [e.label for e in at.expander] + [t.label for t in at.tabs]
    return values


def unmark(source: str) -> str:
    """What a reader sees of escaped Markdown: backslash escapes and entities resolved."""
    return html.unescape(re.sub(r"\\(.)", r"\1", source))


def markdown_of(at: AppTest) -> list[str]:
    return [unmark(v) for v in markdown_sources(at)]


def texts_of(at: AppTest) -> str:
    """Everything shown as plain text (st.text, st.code) and in dataframes."""
    parts = [t.value for t in at.text] + [c.value for c in at.code]
    parts += [df.value.to_csv() for df in at.dataframe]
    return "\n".join(parts)


def ask(at: AppTest, question: str, trace: bool = True) -> AppTest:
    """Ask ``question`` on the Ask page; with ``trace``, open the newest answer's trace (closed by default)."""
    at.chat_input(key="ask.query").set_value(question).run()
    assert not at.exception, [e.value for e in at.exception]
    latest = [t for t in at.toggle if t.key.startswith("ask.show_trace.") and t.key.endswith(".latest")]
    if trace and latest:
        latest[-1].set_value(True).run()
        assert not at.exception, [e.value for e in at.exception]
    return at


def errors_of(at: AppTest) -> list[str]:
    """The st.error lines of the page and the sidebar, as the reader sees them."""
    return [unmark(e.value) for e in at.error]


@pytest.fixture(scope="session")
def real_demo_home(tmp_path_factory, real_demo_prebuilt) -> Path:
    """The demo corpus ingested with the packaged MiniLM (what `make app` serves): a copy of the run's one
    prebuilt store (tests/conftest.py), closed so that a Streamlit subprocess can open it (the tests may add
    documents to theirs)."""
    home = tmp_path_factory.mktemp("app-demo-real")
    shutil.copytree(real_demo_prebuilt, home, dirs_exist_ok=True)
    return home
