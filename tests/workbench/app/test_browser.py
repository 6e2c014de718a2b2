"""The app in a real browser: `streamlit run` on 127.0.0.1 against the demo corpus (real MiniLM, as `make app`
serves it), driven by headless Debian Chromium through Playwright. Screenshots go to test-output/.

Checks: an answer's markers are coloured by verdict; the out-of-scope tour scenario abstains; a document
whose text carries ``<script>`` and ``<img onerror>`` is ingested through the Corpus page, retrieved and
shown, and no script of it ever runs (``window.__pwned`` stays undefined, no dialog opens; ingestion drops the
``<script>`` element itself, the ``<img onerror>`` stays as text). Issue 17's
items 1-4, 6, 7 and 8 as a user meets them (``test_issue17_*``, screenshots ``issue17-*.png``).
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from conftest import ROOT

from pipeline.config import PipelineConfig

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
    box.fill(question, timeout=WAIT_MS)   # the first visit loads the models before the chat input shows
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
    expect(page.get_by_role("tab", name="Retrieval")).to_have_count(0)   # the trace is closed by default
    page.get_by_text("Show the trace").last.click()
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


@pytest.mark.long  # ~50 s; the tour's behaviour is checked on the default path by tests/workbench/app/test_tour.py
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
    # Ingestion drops <script> elements from Markdown; the <img onerror> survives as text in the passage.
    expect(answer).to_contain_text("zorblat status widget renders")
    page.locator('[data-testid="stExpander"] summary').filter(has_text="[1]").first.click()
    expect(page.get_by_text('onerror="window.__pwned=1"', exact=False).first).to_be_visible()
    page.wait_for_timeout(1500)  # give any injected handler (an <img onerror>) time to fire
    assert page.evaluate("typeof window.__pwned") == "undefined"
    assert page.locator(".wb-answer script, .wb-answer img").count() == 0
    assert page.dialogs == []
    _shot(page, "injected-script-shown-as-text.png")


# -- issue 17: a demo that survives live questions, a gallery a researcher can act on --------------------------
# Screenshots: test-output/issue17-*.png. Item numbers are the issue's.

def _ask_turn(page: Page, question: str, turn: int, trace: bool = True) -> None:
    """Ask ``question`` as the ``turn``-th question of the chat and wait for its answer; with ``trace``, open
    the newest answer's trace (closed by default) and wait for it."""
    box = page.get_by_test_id("stChatInputTextArea")
    box.fill(question, timeout=WAIT_MS)   # the input comes back when the previous run ends: slow on a busy machine
    box.press("Enter")
    expect(page.get_by_test_id("stChatMessage")).to_have_count(2 * turn, timeout=WAIT_MS)
    expect(page.get_by_test_id("stStatusWidget")).to_have_count(0, timeout=WAIT_MS)
    # Until the rerun ends the previous turn's trace is still drawn beside the new one (Streamlit keeps stale
    # elements), and the status widget may not have appeared yet: wait for the answer in the newest message
    # and for one trace, the newest turn's.
    newest = page.get_by_test_id("stChatMessage").nth(2 * turn - 1)
    expect(newest.locator(".wb-answer, .wb-abstention")).to_have_count(1, timeout=WAIT_MS)
    if trace:
        newest.get_by_text("Show the trace").click()
        expect(page.get_by_role("tab", name="Rewrite")).to_have_count(1, timeout=WAIT_MS)


@pytest.mark.long
def test_issue17_conversation_mode_and_a_tidy_chat(app_url, page):
    """Items 1 and 8: an unrelated question carries no earlier terms; earlier turns collapse; one line per
    cited document; no literal Markdown asterisks; example questions in the empty chat."""
    _open(page, app_url)
    expect(page.get_by_role("button", name="An error code")).to_be_visible(timeout=WAIT_MS)
    _shot(page, "issue17-ask-empty-state-examples.png")
    page.get_by_role("button", name="An error code").click()
    expect(page.get_by_test_id("stChatMessage")).to_have_count(2, timeout=WAIT_MS)
    expect(page.get_by_test_id("stStatusWidget")).to_have_count(0, timeout=WAIT_MS)
    answer = page.locator(".wb-answer").first
    expect(answer).to_be_visible()
    assert "*" not in answer.inner_text(), "emphasis is rendered, not shown as asterisks"
    documents = [line.get_attribute("data-sources") for line in page.locator(".wb-source").all()]
    titles = [line.inner_text().split("(")[-1] for line in page.locator(".wb-source").all()]
    assert len(titles) == len(set(titles)) and documents, "one line per document"

    _ask_turn(page, "what's the default max_retries in 3.1?", 2)
    _ask_turn(page, "What is the capital of France?", 3)
    expect(page.get_by_text("Read as a new question", exact=False).first).to_be_visible()
    expect(page.get_by_role("tab", name="Retrieval")).to_have_count(1)
    page.get_by_role("tab", name="Rewrite").click()
    rewrite = page.locator(".wb-rewrite")
    expect(rewrite).to_have_count(1)
    assert "max_retries" not in rewrite.inner_text(), "the first turn's terms are not added"
    expect(page.get_by_text("Conversation: Read as a new question", exact=False)).to_be_visible()
    _shot(page, "issue17-ask-unrelated-question-no-history.png")

    _ask_turn(page, "and in 3.2?", 4)
    expect(page.get_by_text("Read as a follow-up", exact=False).first).to_be_visible()
    page.get_by_role("tab", name="Rewrite").click()
    query = page.locator(".wb-rewrite").inner_text()
    assert "capital" in query.split("query used")[-1] and "max_retries" not in query, \
        "a follow-up carries its own thread (the question before it), not the first topic"
    _shot(page, "issue17-ask-follow-up-and-collapsed-turns.png")


def test_issue17_abstention_reads_reason_first(app_url, page):
    """Item 2: the reason in words first, closest documents with a readable score, details collapsed; the reader
    resolves offline (the committed int8 cross-encoder), so no model-availability banner."""
    _open(page, app_url)
    page.get_by_role("button", name="Off topic").click()
    reason = page.locator(".wb-abstention .wb-abstention-reason")
    expect(reason).to_be_visible(timeout=WAIT_MS)
    box = page.locator(".wb-abstention").inner_text()
    for noise in ("HF_HUB_OFFLINE", "huggingface", "pip install"):
        assert noise not in box
    main = page.get_by_role("main")
    expect(main.locator("strong", has_text="Closest documents").first).to_be_visible(timeout=WAIT_MS)
    expect(page.get_by_text("Technical details of the gate")).to_be_visible()
    expect(page.get_by_text("could not be loaded here", exact=False)).to_have_count(0)
    _shot(page, "issue17-abstention-reason-first.png")


def test_issue17_threshold_widgets_keep_their_precision(app_url, page):
    """Item 3: the fused threshold shows five decimals and one + moves it by 0.0001."""
    _open(page, app_url)
    fused = page.get_by_test_id("stNumberInput").filter(has_text="Fused (RRF) threshold")
    field = fused.locator("input")
    gate = PipelineConfig().gate
    expect(field).to_have_value(f"{gate.confidence_threshold_fused:.5f}", timeout=WAIT_MS)
    fused.get_by_test_id("stNumberInputStepUp").click()
    expect(field).to_have_value(f"{gate.confidence_threshold_fused + 0.0001:.5f}", timeout=WAIT_MS)
    dense = page.get_by_test_id("stNumberInput").filter(has_text="Dense cosine threshold").locator("input")
    expect(dense).to_have_value(f"{gate.confidence_threshold_dense:.3f}")
    page.get_by_test_id("stSidebar").screenshot(path=str(OUT / "issue17-sidebar-thresholds.png"))


@pytest.mark.long  # ~35 s; the Compare page's rules are checked on the default path by test_compare_page.py
def test_issue17_compare_is_honest_offline_and_clears_after_an_error(app_url, page):
    """Item 4: presets from what is installed, one line for an unchanged ranking, no raw backticks, and an
    error clears the previous results."""
    _open(page, f"{app_url}/compare")
    page.get_by_label("Question").fill("What does ERR_TIMEOUT_502 mean?")
    page.get_by_test_id("stSelectbox").filter(has_text="B changes").click()
    options = page.get_by_role("option")
    expect(options.first).to_be_visible()
    labels = options.all_inner_texts()
    assert not any(o.startswith("reranker") for o in labels), labels
    page.get_by_role("option", name="stricter", exact=False).first.click()
    page.get_by_role("button", name="Run both").click()
    expect(page.get_by_role("heading", name="What changed")).to_be_visible(timeout=WAIT_MS)
    expect(page.get_by_text("Rank movements: none", exact=False)).to_be_visible()
    answer_line = page.locator(".wb-diff[data-diff='answer']").inner_text()
    assert "`" not in answer_line, answer_line
    _shot(page, "issue17-compare-stricter-offline.png")
    page.get_by_label("More changes for B", exact=False).fill("gate.nope=1")
    page.get_by_role("button", name="Run both").click()
    expect(page.get_by_text("unknown config key gate.nope", exact=False)).to_be_visible(timeout=WAIT_MS)
    expect(page.get_by_role("heading", name="What changed")).to_have_count(0)
    _shot(page, "issue17-compare-error-clears-results.png")


@pytest.mark.long
def test_issue17_failure_gallery_and_tune_tab(app_url, browser):
    """Items 6 and 7: the gallery shows the expectation and opens a case in Ask; the Tune tab at 1400 and 1024 px."""
    context = browser.new_context(viewport={"width": 1400, "height": 3000})
    page = context.new_page()
    try:
        _open(page, f"{app_url}/evaluate")
        limit = page.get_by_label("Only the first N cases", exact=False)
        limit.fill("24")
        limit.press("Enter")
        page.get_by_role("button", name="Run the golden set").click()
        expect(page.get_by_role("tab", name="Failure gallery")).to_be_visible(timeout=WAIT_MS)
        page.get_by_role("tab", name="Tune the gate").click()
        expect(page.get_by_text("Replay check:", exact=False)).to_be_visible(timeout=WAIT_MS)
        _shot(page, "issue17-tune-tab-1400.png")
        page.set_viewport_size({"width": 1024, "height": 3000})
        _shot(page, "issue17-tune-tab-1024.png")
        page.set_viewport_size({"width": 1400, "height": 3000})
        page.get_by_role("tab", name="Failure gallery").click()
        kinds = page.get_by_role("tab").filter(has_text=re.compile(r"\((?!0\))\d+\)$"))
        if kinds.count():
            kinds.first.click()
        opener = page.get_by_role("button", name="Open this case in Ask", exact=False)
        if opener.count():
            # exact: the gallery table's hidden accessible grid has an "expected answer" column header too
            expect(page.get_by_text("Expected answer", exact=True).first).to_be_visible()
            _shot(page, "issue17-failure-gallery.png")
            opener.first.click()
            expect(page.get_by_role("heading", name="Ask", level=1)).to_be_visible(timeout=WAIT_MS)
            expect(page.get_by_test_id("stChatMessage").first).to_be_visible(timeout=WAIT_MS)
            expect(page.get_by_test_id("stStatusWidget")).to_have_count(0, timeout=WAIT_MS)
            _shot(page, "issue17-gallery-case-opened-in-ask.png")
        else:
            _shot(page, "issue17-failure-gallery.png")
    finally:
        context.close()


def test_opening_a_source_records_a_citation_click(app_url, page, real_demo_home):
    """Issue 18: opening a cited document's sources under Citations lands one citation_clicks row (run id, source
    number, document, chunk, time) in runs.sqlite, and the Monitor page counts it."""
    import sqlite3

    _open(page, app_url)
    _ask(page, "What's the default lifetime of an API token?")
    runs_db = Path(real_demo_home) / "runs.sqlite"
    with sqlite3.connect(runs_db) as db:
        run_id = db.execute("SELECT run_id FROM query_runs WHERE question LIKE 'What''s the default lifetime%' "
                            "ORDER BY created_at DESC, rowid DESC LIMIT 1").fetchone()[0]
        before = db.execute("SELECT COUNT(*) FROM citation_clicks WHERE run_id=?", (run_id,)).fetchone()[0]
    expander = page.get_by_test_id("stExpander").filter(has_text="citing it").first
    expander.locator("summary").click()
    expect(expander.get_by_text("chunk ", exact=False).first).to_be_visible(timeout=WAIT_MS)
    rows = []
    for _ in range(60):  # the callback runs on the server's next script run
        with sqlite3.connect(runs_db) as db:
            rows = db.execute("SELECT source_number, doc_id, chunk_id, clicked_at FROM citation_clicks WHERE run_id=?",
                              (run_id,)).fetchall()
        if len(rows) > before:
            break
        page.wait_for_timeout(500)
    assert len(rows) == before + 1
    number, doc_id, chunk_id, clicked_at = rows[-1]
    assert number >= 1 and doc_id and chunk_id.startswith(doc_id) and clicked_at.endswith("Z")
    _shot(page, "issue18-source-opened.png")
    _open(page, f"{app_url}/monitor")
    # The sections by their headings: the per-day table's hidden accessible grid also holds a
    # "citation click-through" column header, which get_by_text could find first.
    expect(page.get_by_role("heading", name="Citation click-through")).to_be_visible(timeout=WAIT_MS)
    expect(page.get_by_role("heading", name="Drift alarm")).to_be_visible()
    _shot(page, "issue18-monitor-page.png")


# -- issue 30: a conversation whose follow-ups keep their topic, with the newest answer in view ---------------------

ROTATE_DOC = "guide-rotate-signing-secrets"


def _latest_run_docs(home: Path, question: str) -> list[str]:
    """The documents of the first 10 candidates (final order) of the newest logged run of ``question``."""
    from pipeline.storage.runs import RunLog

    log = RunLog(Path(home) / "runs.sqlite")
    run = next(r for r in log.list(limit=50) if r.question == question)
    trace = log.get(run.run_id)
    return list(dict.fromkeys(c.doc_id for c in trace.ranked_candidates()))[:10]


@pytest.mark.parametrize("width,height", [(1280, 900), pytest.param(1024, 768, marks=pytest.mark.long)])
def test_issue30_one_chat_keeps_its_topic_and_the_newest_answer_in_view(app_url, browser, real_demo_home, width,
                                                                        height):
    """An answerable question, two follow-ups that depend on it (each retrieves the rotation guide in its first
    10 documents, read from the run log), an unrelated question that carries none of the earlier terms; after
    each, the newest answer is in the viewport (the trace is closed by default and the page scrolls to it)."""
    context = browser.new_context(viewport={"width": width, "height": height})
    page = context.new_page()
    try:
        _open(page, app_url)
        turns = [("How do I rotate a webhook signing secret?", ROTATE_DOC),
                 ("and how long does that take?", ROTATE_DOC),
                 ("and what happens to the old secret meanwhile?", ROTATE_DOC),
                 ("What is the capital of France?", None)]
        for turn, (question, document) in enumerate(turns, start=1):
            _ask_turn(page, question, turn, trace=False)
            newest = page.get_by_test_id("stChatMessage").nth(2 * turn - 1)
            expect(newest.locator(".wb-answer, .wb-abstention")).to_be_in_viewport(timeout=WAIT_MS)
            _shot(page, f"issue30-chat-{width}x{height}-turn{turn}.png")
            if document:
                assert document in _latest_run_docs(real_demo_home, question), question
        asked = page.get_by_test_id("stChatMessage").nth(2 * len(turns) - 2)
        assert "Read as a new question" in asked.inner_text(), "the unrelated question goes without the history"
        assert "Read as a follow-up" in page.get_by_test_id("stChatMessage").nth(2).inner_text()
        newest.get_by_text("Show the trace").click()
        page.get_by_role("tab", name="Rewrite").click()
        assert "rotat" not in page.locator(".wb-rewrite").inner_text().split("query used")[-1].lower()
    finally:
        context.close()
