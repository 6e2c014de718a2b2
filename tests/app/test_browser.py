"""The app in a real browser: `streamlit run` on 127.0.0.1 against the demo corpus (real MiniLM, as `make app`
serves it), driven by headless Debian Chromium through Playwright. Screenshots go to test-output/.

Checks: an answer's markers are coloured by verdict; the out-of-scope tour scenario abstains; a document
whose text carries ``<script>`` and ``<img onerror>`` is ingested through the Corpus page, retrieved and
shown, and no script of it ever runs (``window.__pwned`` stays undefined, no dialog opens).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from conftest import ROOT

pytestmark = [pytest.mark.browser, pytest.mark.slow]

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--no-first-run",
                 "--disable-component-update", "--disable-sync"]
OUT = ROOT / "test-output"
WAIT_MS = 180_000
EMERALD_RGB = "rgb(4, 120, 87)"

HOSTILE = """---
id: zorblat-widget-notes
title: Zorblat widget notes
product: harbor-relay
---
# Zorblat widget

The zorblat status widget renders <script>window.__pwned=1</script> inside the page header.
The zorblat widget logo is <img src=x onerror="window.__pwned=1"> in the page footer.
"""


def _skip_reason() -> str:
    if not Path(CHROMIUM).exists():
        return f"{CHROMIUM} is not installed (apt-get install chromium; .ci/run installs it)"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "the playwright Python package is not installed"
    return ""


if _skip_reason():
    pytest.skip(_skip_reason(), allow_module_level=True)

from playwright.sync_api import Page, expect, sync_playwright  # noqa: E402


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def app_url(real_demo_home):
    port = _free_port()
    env = {**os.environ, "WORKBENCH_HOME": str(real_demo_home), "HF_HUB_OFFLINE": "1",
           "WORKBENCH_APP_MODELS": "default", "TOKENIZERS_PARALLELISM": "false"}
    streamlit = shutil.which("streamlit", path=str(Path(sys.executable).parent)) or "streamlit"
    log = (OUT / "streamlit-browser-test.log")
    OUT.mkdir(exist_ok=True)
    with log.open("w") as out:
        proc = subprocess.Popen([streamlit, "run", "streamlit_app.py", "--server.address", "127.0.0.1",
                                 "--server.port", str(port), "--server.headless", "true",
                                 "--browser.gatherUsageStats", "false", "--server.fileWatcherType", "none"],
                                cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
        try:
            url = f"http://127.0.0.1:{port}"
            deadline = time.monotonic() + 90
            while True:
                try:
                    if urllib.request.urlopen(f"{url}/_stcore/health", timeout=2).read() == b"ok":
                        break
                except OSError:
                    pass
                if proc.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"streamlit did not start; see {log}")
                time.sleep(0.5)
            yield url
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


@pytest.fixture(scope="module")
def browser():
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield b
        b.close()


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport={"width": 1400, "height": 2400})
    pg = context.new_page()
    pg.dialogs = []
    pg.on("dialog", lambda d: (pg.dialogs.append(d.message), d.dismiss()))
    yield pg
    context.close()


def _open(page: Page, url: str) -> None:
    page.goto(url)
    page.wait_for_selector('[data-testid="stApp"]')
    expect(page.get_by_role("heading", level=1).first).to_be_visible(timeout=WAIT_MS)


def _ask(page: Page, question: str) -> None:
    box = page.get_by_test_id("stChatInputTextArea")
    box.fill(question)
    box.press("Enter")
    page.wait_for_selector(".wb-answer, .wb-abstention", timeout=WAIT_MS)
    expect(page.get_by_test_id("stStatusWidget")).to_have_count(0, timeout=WAIT_MS)


def _shot(page: Page, name: str) -> None:
    page.wait_for_timeout(1500)  # data grids and charts draw after the element appears
    page.screenshot(path=str(OUT / name), full_page=True)


def test_answer_markers_are_coloured_by_verdict(app_url, page):
    _open(page, app_url)
    _ask(page, "What's the default lifetime of an API token?")
    supported = page.locator(".wb-answer .wb-marker.wb-supported")
    expect(supported.first).to_be_visible()
    assert supported.first.evaluate("e => getComputedStyle(e).color") == EMERALD_RGB
    assert page.locator(".wb-answer .wb-marker.wb-unsupported, .wb-answer .wb-marker.wb-fabricated").count() == 0
    expect(page.locator(".wb-source.wb-uncited").first).to_have_css("opacity", "0.45")
    expect(page.get_by_text("generator: extractive", exact=False).first).to_be_visible()
    _shot(page, "ask-answer-supported-markers.png")
    page.get_by_role("tab", name="Retrieval").click()
    expect(page.locator(".js-plotly-plot").first).to_be_visible(timeout=WAIT_MS)
    _shot(page, "ask-trace-retrieval-table-and-contributions.png")
    page.get_by_role("tab", name="Gate").click()
    expect(page.locator(".wb-gate")).to_be_visible()
    _shot(page, "ask-trace-gate-gauge.png")


def test_out_of_scope_question_abstains(app_url, page):
    _open(page, f"{app_url}/tour")
    page.get_by_role("button", name="Run this scenario").nth(1).click()
    abstention = page.locator(".wb-abstention")
    expect(abstention).to_be_visible(timeout=WAIT_MS)
    expect(abstention).to_contain_text("I don't know: the available sources do not answer this question.")
    expect(page.get_by_text("What you just saw: Nothing in the corpus is close", exact=False)).to_be_visible()
    expect(page.get_by_text("did not behave as described", exact=False)).to_have_count(0)
    _shot(page, "tour-out-of-scope-abstains.png")


def test_the_whole_tour_behaves_as_described(app_url, browser):
    context = browser.new_context(viewport={"width": 1400, "height": 9000})
    page = context.new_page()
    try:
        _open(page, f"{app_url}/tour")
        page.get_by_role("button", name="Run all seven").click()
        expect(page.get_by_text("What you just saw:", exact=False)).to_have_count(7, timeout=WAIT_MS)
        expect(page.get_by_text("did not behave as described", exact=False)).to_have_count(0)
        expect(page.locator(".wb-superseded").first).to_be_visible(timeout=WAIT_MS)
        expect(page.get_by_text("fallback from litellm", exact=False)).to_be_visible()
        assert page.locator(".wb-abstention").count() == 2
        _shot(page, "tour-all-seven-scenarios.png")
    finally:
        context.close()


def test_injected_script_and_onerror_never_run(app_url, page):
    _open(page, f"{app_url}/corpus")
    page.get_by_role("tab", name="Upload").click()
    upload = page.get_by_test_id("stFileUploader").filter(has_text="Documents (Markdown")
    upload.locator('input[type="file"]').set_input_files(
        {"name": "zorblat-widget-notes.md", "mimeType": "text/markdown", "buffer": HOSTILE.encode()})
    page.get_by_role("button", name="Ingest").click()
    expect(page.get_by_text("1 added", exact=False)).to_be_visible(timeout=WAIT_MS)

    _open(page, app_url)
    _ask(page, "what does the zorblat status widget render?")
    answer = page.locator(".wb-answer")
    expect(answer).to_contain_text("<script>window.__pwned=1</script>")
    page.locator('[data-testid="stExpander"] summary').filter(has_text="[1]").first.click()
    expect(page.get_by_text('onerror="window.__pwned=1"', exact=False).first).to_be_visible()
    page.wait_for_timeout(1500)  # give any injected handler (an <img onerror>) time to fire
    assert page.evaluate("typeof window.__pwned") == "undefined"
    assert page.locator(".wb-answer script, .wb-answer img").count() == 0
    assert page.dialogs == []
    _shot(page, "injected-script-shown-as-text.png")
