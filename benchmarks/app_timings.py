"""The "App timings" section of BENCHMARKS.md: the Streamlit app as a user meets it, timed in a real browser.

``python -m benchmarks.app_timings`` measures and writes ``benchmarks/results/app_timings.json``:

1. ingests ``golden/corpus`` into ``build/app-timings-store`` with the CLI (incremental: a store that is
   current is reused) and drops its answer cache, so no question below is served from an earlier run;
2. starts ``streamlit run streamlit_app.py`` on 127.0.0.1 (a free port, headless, ``WORKBENCH_HOME`` at that
   store, the packaged models) and drives it with Playwright and Debian Chromium (headless), as
   ``tests/app/test_browser.py`` does. A page counts as loaded when its title is shown and Streamlit's
   "running" indicator is gone. Measured: server start to the health check answering and to the first page
   being interactive (the first page load of a server loads the models); the first and the second question
   on the Ask page (two unrelated questions, Enter to the answer drawn); each page's load (p50 over
   ``--loads`` fresh loads); the golden evaluation in the app (Evaluate & tune, every case: the click to the
   result tabs drawn) and its re-run with the configuration unchanged (the reuse of the first result);
3. stops the server (also on an error) and times the CLI's :func:`workbench.evaluate.run_eval` over the same
   cases and store in this process, as ``workbench eval golden/golden.jsonl --no-nli --json`` runs it (the
   app's settings: defaults, NLI off; the CLI's one torch thread) with its models loaded first, as the app's
   are, so the app / CLI ratio comes from one run on one machine. The app's headline figures are read off the
   page and compared with the CLI's summary.

:func:`render` turns the results file into the section; every number in it comes from the file.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from benchmarks.results_io import (
    ANSWER_CONFIG,
    ANSWER_PATH,
    ROOT,
    Depends,
    load_average,
    load_results,
    meta_line,
    results_path,
    run_meta,
    write_results,
)

DEPENDS = Depends(("benchmarks/app_timings.py", "workbench/app", "workbench/evaluate.py", *ANSWER_PATH,
                   "golden/golden.jsonl", "golden/corpus"), ANSWER_CONFIG)
NAME = "app_timings"
SECTION = "## App timings"
STORE = ROOT / "build" / "app-timings-store"
CORPUS = ROOT / "golden" / "corpus"
GOLDEN = ROOT / "golden" / "golden.jsonl"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--no-first-run"]
PAGES = (("Ask", ""), ("Compare", "compare"), ("Gate lab", "gate-lab"), ("Evaluate & tune", "evaluate"),
         ("Corpus", "corpus"), ("Runs", "runs"), ("Demo tour", "tour"))
QUESTIONS = ("What does ERR_TIMEOUT_502 mean?", "What's the default lifetime of an API token?")
PAGE_WAIT_MS = 300_000
EVAL_WAIT_MS = 1_800_000


# -- the section (pure) ---------------------------------------------------------------------------------------

def _s(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1f} s"


def render(results: dict) -> str:
    """The BENCHMARKS.md section, from ``benchmarks/results/app_timings.json`` alone."""
    r, ev = results, results["evaluation"]
    start, ask = r["server"], r["ask"]
    lines = [SECTION, "",
             meta_line(r["meta"]) + f" Reproduce: `{r['reproduce']}`, then `make report`. Headless Chromium "
             f"through Playwright against `streamlit run streamlit_app.py` on 127.0.0.1, the demo corpus "
             f"({r['store']['documents']} documents, {r['store']['chunks']} chunks) and the packaged models. A page "
             "counts as loaded when its title is drawn and Streamlit's running indicator is gone. The cores are shared "
             "with other work: read the ratios measured within this run rather than the seconds.", "",
             "| what | time |", "|---|---:|",
             f"| server start → health check answers | {_s(start['health_s'])} |",
             f"| server start → first page interactive (loads the models) | {_s(start['first_page_interactive_s'])} |",
             f"| first question on a fresh server (Enter → answer drawn) | {_s(ask['first_s'])} |",
             f"| server start → first answer drawn | {_s(ask['first_answer_since_start_s'])} |",
             f"| second question | {_s(ask['second_s'])} |", "",
             f"**Page loads** (a fresh browser session each, p50 of {r['loads']} loads; models already loaded):", "",
             "| page | p50 | slowest |", "|---|---:|---:|"]
    for name, p in r["pages"].items():
        lines.append(f"| {name} | {_s(p['p50_s'])} | {_s(max(p['samples_s']))} |")
    match = ev["headline_match"]
    lines += ["", f"**Golden evaluation, {ev['cases']} cases** (every case asked with the sidebar's defaults, answer "
              "cache off, NLI off):", "",
              "| where | time |", "|---|---:|",
              f"| app: Evaluate & tune, click → first results shown (the Summary tab) | {_s(ev['app_shown_s'])} |",
              f"| app: click → every tab drawn | {_s(ev['app_s'])} |",
              f"| app: asking the cases, as the page reports it | {_s(ev['app_reported_s'])} |",
              f"| CLI: `run_eval`, the whole call (models loaded beforehand) | {_s(ev['cli_s'])} |",
              f"| CLI: asking the cases, as `run_eval` reports it | {_s(ev['cli_eval_s'])} |",
              f"| app: the same run again, configuration unchanged (result reused) | {_s(ev['rerun_s'])} |", "",
              f"**App / CLI: {ev['app_shown_s'] / ev['cli_s']:.2f}×** to the first results "
              f"({ev['app_s'] / ev['cli_s']:.2f}× to every tab drawn"
              + (f"; {ev['app_reported_s'] / ev['cli_eval_s']:.2f}× for asking the cases"
                 if ev.get("app_reported_s") else "") + "). "
              + ("The app's headline figures equal the CLI's summary ("
                 + ", ".join(f"{k} {v}" for k, v in match["app"].items()) + ")." if match["equal"] else
                 "**The app's headline figures differ from the CLI's**: app "
                 + ", ".join(f"{k} {v}" for k, v in match["app"].items()) + "; CLI "
                 + ", ".join(f"{k} {v}" for k, v in match["cli"].items()) + ".")]
    return "\n".join(lines) + "\n"


# -- measuring --------------------------------------------------------------------------------------------------

def _bin(name: str) -> str:
    return shutil.which(name, path=str(Path(sys.executable).parent)) or name


def _env(home: Path) -> dict:
    return {**os.environ, "WORKBENCH_HOME": str(home), "WORKBENCH_APP_MODELS": "default", "HF_HUB_OFFLINE": "1",
            "TOKENIZERS_PARALLELISM": "false", "LITELLM_LOCAL_MODEL_COST_MAP": "True"}


def prepare_store(store: Path) -> dict:
    """Ingest the demo corpus (incremental), drop the answer cache; the ingest's JSON."""
    done = subprocess.run([_bin("workbench"), "ingest", str(CORPUS), "--store", str(store), "--json"], cwd=ROOT,
                          env=_env(store), capture_output=True, text=True, check=True)
    for name in ("cache.sqlite", "cache.sqlite-wal", "cache.sqlite-shm"):
        (store / name).unlink(missing_ok=True)
    return json.loads(done.stdout)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class App:
    """``streamlit run`` in a subprocess; :meth:`stop` ends it (and only it)."""

    def __init__(self, home: Path, log: Path) -> None:
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        log.parent.mkdir(parents=True, exist_ok=True)
        self._log = log.open("w")
        self.started = time.perf_counter()
        self.proc = subprocess.Popen(
            [_bin("streamlit"), "run", "streamlit_app.py", "--server.address", "127.0.0.1", "--server.port",
             str(self.port), "--server.headless", "true", "--browser.gatherUsageStats", "false",
             "--server.fileWatcherType", "none"], cwd=ROOT, env=_env(home), stdout=self._log, stderr=subprocess.STDOUT)

    def since_start(self) -> float:
        return time.perf_counter() - self.started

    def wait_healthy(self, timeout_s: float = 120) -> float:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                if urllib.request.urlopen(f"{self.url}/_stcore/health", timeout=2).read() == b"ok":
                    return self.since_start()
            except OSError:
                pass
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"streamlit did not start (exit {self.proc.poll()}); see {self._log.name}")
            time.sleep(0.1)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()


def _ready(page, expect, title: str | None = None) -> None:
    """The page's title drawn and Streamlit's running indicator gone."""
    page.wait_for_selector('[data-testid="stApp"]', timeout=PAGE_WAIT_MS)
    heading = page.get_by_role("heading", level=1)
    expect(heading.filter(has_text=title).first if title else heading.first).to_be_visible(timeout=PAGE_WAIT_MS)
    expect(page.get_by_test_id("stStatusWidget")).to_have_count(0, timeout=PAGE_WAIT_MS)


def _ask(page, expect, question: str, turn: int) -> float:
    box = page.get_by_test_id("stChatInputTextArea")
    box.fill(question)
    started = time.perf_counter()
    box.press("Enter")
    expect(page.get_by_test_id("stChatMessage")).to_have_count(2 * turn, timeout=PAGE_WAIT_MS)
    expect(page.locator(".wb-answer, .wb-abstention")).to_have_count(turn, timeout=PAGE_WAIT_MS)
    expect(page.get_by_test_id("stStatusWidget")).to_have_count(0, timeout=PAGE_WAIT_MS)
    return time.perf_counter() - started


def _metrics(page) -> dict[str, str]:
    out = {}
    for metric in page.get_by_test_id("stMetric").all():
        label = metric.get_by_test_id("stMetricLabel").inner_text().strip()
        out[label] = metric.get_by_test_id("stMetricValue").inner_text().strip()
    return out


def _reported_seconds(page) -> float | None:
    """The evaluation's own time, from the summary caption ("... asked in 12.3 s ..."), when the page shows it."""
    import re

    text = page.get_by_test_id("stCaptionContainer").filter(has_text="cases of").first.inner_text()
    found = re.search(r"asked in ([\d.]+) s", text)
    return float(found.group(1)) if found else None


def measure_app(home: Path, loads: int, limit: int, log: Path) -> dict:
    from playwright.sync_api import expect, sync_playwright

    app = App(home, log)
    try:
        health = app.wait_healthy()
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            try:
                context = browser.new_context(viewport={"width": 1400, "height": 2400})
                page = context.new_page()
                page.goto(app.url)
                _ready(page, expect, "Ask")
                expect(page.get_by_test_id("stChatInputTextArea")).to_be_editable(timeout=PAGE_WAIT_MS)
                interactive = app.since_start()
                first = _ask(page, expect, QUESTIONS[0], 1)
                first_since_start = app.since_start()
                second = _ask(page, expect, QUESTIONS[1], 2)
                context.close()
                pages = {}
                for name, path in PAGES:
                    samples = []
                    for _ in range(loads):
                        context = browser.new_context(viewport={"width": 1400, "height": 2400})
                        page = context.new_page()
                        started = time.perf_counter()
                        page.goto(f"{app.url}/{path}")
                        _ready(page, expect, name)
                        samples.append(round(time.perf_counter() - started, 3))
                        context.close()
                    pages[name] = {"p50_s": statistics.median(samples), "samples_s": samples}
                context = browser.new_context(viewport={"width": 1400, "height": 3000})
                page = context.new_page()
                page.goto(f"{app.url}/evaluate")
                _ready(page, expect, "Evaluate")
                if limit:
                    box = page.get_by_label("Only the first N cases", exact=False)
                    box.fill(str(limit))
                    box.press("Enter")
                    expect(box).to_have_value(str(limit))
                    expect(page.get_by_test_id("stStatusWidget")).to_have_count(0, timeout=PAGE_WAIT_MS)
                started = time.perf_counter()
                page.get_by_role("button", name="Run the golden set").click()
                expect(page.get_by_role("tab", name="Failure gallery")).to_be_visible(timeout=EVAL_WAIT_MS)
                shown_s = time.perf_counter() - started
                expect(page.get_by_test_id("stStatusWidget")).to_have_count(0, timeout=EVAL_WAIT_MS)
                app_s = time.perf_counter() - started
                metrics, reported = _metrics(page), _reported_seconds(page)
                started = time.perf_counter()
                page.get_by_role("button", name="Run the golden set").click()
                expect(page.get_by_text("were reused", exact=False)).to_be_visible(timeout=EVAL_WAIT_MS)
                expect(page.get_by_test_id("stStatusWidget")).to_have_count(0, timeout=EVAL_WAIT_MS)
                rerun_s = time.perf_counter() - started
                context.close()
            finally:
                browser.close()
    finally:
        app.stop()
    return {"server": {"health_s": round(health, 2), "first_page_interactive_s": round(interactive, 2)},
            "ask": {"questions": list(QUESTIONS), "first_s": round(first, 2),
                    "first_answer_since_start_s": round(first_since_start, 2), "second_s": round(second, 2)},
            "pages": pages, "app_eval": {"app_shown_s": round(shown_s, 2), "app_s": round(app_s, 2),
                                         "app_reported_s": reported,
                                         "rerun_s": round(rerun_s, 2), "metrics": metrics}}


def measure_cli(home: Path, limit: int) -> dict:
    """:func:`workbench.evaluate.run_eval` over the same cases and store, as ``workbench eval --no-nli --json``
    runs it (one torch thread: the CLI's ``--threads`` default), timed around the call, its models loaded first."""
    import torch

    from pipeline.config import PipelineConfig
    from pipeline.models.registry import default_models
    from pipeline.storage.store import Store
    from workbench.evaluate import run_eval

    torch.set_num_threads(1)
    cfg, models = PipelineConfig(), default_models()
    models.embedder(cfg.embedding).encode(["warm-up"])
    with contextlib.suppress(Exception):  # as the app's warm-up: an unavailable reranker is skipped by the stage
        models.reranker(cfg.rerank).score("warm-up", ["warm-up"])
    printed = io.StringIO()
    started = time.perf_counter()
    with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(io.StringIO()):
        status = run_eval(GOLDEN, cfg, open_store=lambda: Store.open(home), models=models, limit=limit or None,
                          nli=False, json_output=True)
    seconds = time.perf_counter() - started
    if status not in (0, 1):
        raise RuntimeError(f"run_eval returned {status}")
    summary = json.loads(printed.getvalue())["summary"]
    return {"cli_s": round(seconds, 2), "cli_eval_s": summary["run"]["seconds"], "cases": summary["run"]["cases"],
            "summary": summary}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.app_timings", description=__doc__.splitlines()[0])
    parser.add_argument("--store", type=Path, default=STORE, help="the demo store (built or reused)")
    parser.add_argument("--loads", type=int, default=3, help="loads per page for the p50 (default 3)")
    parser.add_argument("--limit", type=int, default=0, help="only the first N golden cases (0 = all)")
    parser.add_argument("--no-write", action="store_true", help="print the section without writing the results")
    parser.add_argument("--print", action="store_true", help="only print the section from the results file")
    args = parser.parse_args(argv)
    if args.print:
        print(render(load_results(NAME)))
        return 0
    if not Path(CHROMIUM).exists():
        print(f"{CHROMIUM} is not installed (apt-get install chromium)", file=sys.stderr)
        return 2
    for name, value in (("HF_HUB_OFFLINE", "1"), ("TOKENIZERS_PARALLELISM", "false")):
        os.environ.setdefault(name, value)   # the in-process run_eval resolves the packaged models offline
    meta = run_meta(depends=DEPENDS, model="pending")
    started = time.perf_counter()
    store = args.store.resolve()
    ingest = prepare_store(store)
    print(f"store {store}: {ingest['documents']} documents, {ingest['chunks']} chunks", file=sys.stderr)
    app = measure_app(store, args.loads, args.limit, ROOT / "build" / "app-timings-streamlit.log")
    print(f"app measured; golden evaluation in the app {app['app_eval']['app_s']:.1f} s", file=sys.stderr)
    cli = measure_cli(store, args.limit)
    summary = cli.pop("summary")
    stack = summary.get("stack", {})
    meta["model"] = (f"embedder {summary['run']['embedder']}, "
                     + ("cross-encoder ran" if stack.get("rerank_ran") else "no cross-encoder (not resolvable offline)")
                     + ", generate.backend=extractive")
    from workbench.app.eval_view import HEADLINE, _pct  # the page's metrics, formatted as the page formats them

    cli_headline = {label: _pct(summary.get(key)) for key, label in HEADLINE}
    app_headline = {label: app["app_eval"]["metrics"].get(label) for _, label in HEADLINE}
    evaluation = {**{k: v for k, v in app.pop("app_eval").items() if k != "metrics"}, **cli,
                  "headline_match": {"equal": app_headline == cli_headline, "app": app_headline, "cli": cli_headline}}
    meta["seconds"] = round(time.perf_counter() - started, 1)
    meta["load_average_end"] = load_average()
    results = {"meta": meta, "reproduce": ".venv/bin/python -m benchmarks.app_timings"
               + (f" --limit {args.limit}" if args.limit else ""), "loads": args.loads,
               "store": {"documents": ingest["documents"], "chunks": ingest["chunks"]}, **app, "evaluation": evaluation}
    if args.no_write:
        print(render(results))
        return 0
    write_results(NAME, results)
    print(render(load_results(NAME)))
    print(f"wrote {results_path(NAME)}; run `make report` to update BENCHMARKS.md", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
