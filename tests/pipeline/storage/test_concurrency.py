"""Concurrent asks, as the Streamlit server runs them, plus a CLI process writing to the same runs.sqlite:
every run is in query_runs, none lost."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from pipeline.config import PipelineConfig
from pipeline.storage.cache import AnswerCache
from pipeline.storage.runs import RunLog
from tests.support.traces import answered_trace

ROOT = Path(__file__).resolve().parents[3]
QUESTIONS = [
    "What does ERR_TIMEOUT_502 mean?", "How many times is a delivery retried?", "What is the dead-letter queue?",
    "How do I verify a webhook signature?", "What causes ERR_QUEUE_FULL?", "How does clustering quorum work?",
    "What is the default delivery timeout?", "How do I replay events from the DLQ?",
]
CLI_ASKS = 3

# The CLI process: ingest its own store, say it is ready, wait for the go signal, then ask through the CLI's
# own entry point so its runs land in <store>/runs.sqlite — the file the threads write to.
CLI_SCRIPT = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from workbench.cli import main
    corpus, store, signals = sys.argv[1], sys.argv[2], Path(sys.argv[3])
    assert main(["ingest", corpus, "--store", store, "--json"]) == 0
    (signals / "ready").touch()
    deadline = time.monotonic() + 120
    while not (signals / "go").exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    for _ in range({asks}):
        assert main(["ask", "What does ERR_TIMEOUT_502 mean?", "--store", store, "--json"]) == 0
""").format(asks=CLI_ASKS)


def start_cli_process(tmp_path: Path) -> tuple[subprocess.Popen, Path, Path]:
    corpus = tmp_path / "cli-corpus"
    corpus.mkdir()
    for name in ("errors/err-timeout-502.md", "faq/faq-delivery-retries.md"):
        (corpus / Path(name).name).write_text((ROOT / "golden" / "corpus" / name).read_text(encoding="utf-8"),
                                              encoding="utf-8")
    store, signals = tmp_path / "cli-store", tmp_path / "signals"
    signals.mkdir()
    proc = subprocess.Popen([sys.executable, "-c", CLI_SCRIPT, str(corpus), str(store), str(signals)], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return proc, store, signals


def wait_for(path: Path, proc: subprocess.Popen, timeout_s: float = 180) -> None:
    deadline = time.monotonic() + timeout_s
    while not path.exists():
        if proc.poll() is not None:
            pytest.fail(f"the CLI process exited early: {proc.stderr.read()[-2000:]}")
        if time.monotonic() > deadline:
            proc.kill()
            pytest.fail("the CLI process did not get ready in time")
        time.sleep(0.05)


def run_threads(target, n: int) -> list[BaseException]:
    errors: list[BaseException] = []
    barrier = threading.Barrier(n)

    def worker(i: int) -> None:
        try:
            barrier.wait()
            target(i)
        except BaseException as exc:  # collected and asserted on below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    return errors


@pytest.mark.slow
def test_eight_threaded_asks_and_a_cli_process_lose_no_run(demo_store_fake, tmp_path):
    from pipeline.engine import Pipeline
    from pipeline.testing import fake_models

    proc, cli_store, signals = start_cli_process(tmp_path)
    wait_for(signals / "ready", proc)
    runs_path = cli_store / "runs.sqlite"     # the same file the CLI process writes to
    pipeline = Pipeline(demo_store_fake, models=fake_models(), cfg=PipelineConfig(), runs=RunLog(runs_path),
                        cache=AnswerCache(tmp_path / "cache.sqlite"))
    traces: dict[int, str] = {}

    def ask(i: int) -> None:
        traces[i] = pipeline.ask(QUESTIONS[i]).run_id

    (signals / "go").touch()
    errors = run_threads(ask, len(QUESTIONS))
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err[-2000:]
    assert errors == []

    log = RunLog(runs_path)
    stored = {r.run_id: r for r in log.list(limit=100)}
    assert len(stored) == len(QUESTIONS) + CLI_ASKS
    assert set(traces.values()) <= set(stored)
    assert sorted(r.question for r in stored.values() if r.run_id in traces.values()) == sorted(QUESTIONS)
    assert sum(r.question == "What does ERR_TIMEOUT_502 mean?" for r in stored.values()) == 1 + CLI_ASKS
    assert all(log.get(run_id) is not None for run_id in stored)


def test_eight_threads_and_a_second_process_recording_directly_lose_no_run(tmp_path):
    """The same guarantee at the RunLog level: contention on one file from threads and a process at once."""
    path = tmp_path / "runs.sqlite"
    per_thread, in_process = 25, 100
    script = textwrap.dedent(f"""
        import sys
        from pathlib import Path
        from pipeline.storage.runs import RunLog
        from tests.support.traces import answered_trace
        log = RunLog(Path(sys.argv[1]))
        Path(sys.argv[2]).touch()
        for i in range({in_process}):
            log.record(answered_trace(f"process question {{i}}", run_id=f"p{{i}}"))
    """)
    ready = tmp_path / "ready"
    proc = subprocess.Popen([sys.executable, "-c", script, str(path), str(ready)], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wait_for(ready, proc, timeout_s=60)
    log = RunLog(path)

    def record(i: int) -> None:
        for j in range(per_thread):
            log.record(answered_trace(f"thread {i} question {j}", run_id=f"t{i}-{j}"))

    errors = run_threads(record, 8)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err[-2000:]
    assert errors == []
    assert log.count() == 8 * per_thread + in_process
    assert log.get("p99").question == "process question 99"
    assert log.get("t7-24") == answered_trace("thread 7 question 24", run_id="t7-24")


def test_threads_sharing_one_cache_read_and_write_without_errors(tmp_path):
    cache = AnswerCache(tmp_path / "cache.sqlite")
    from pipeline.storage.cache import cache_key

    def work(i: int) -> None:
        for j in range(20):
            trace = answered_trace(f"question {j}", doc_ids=(f"doc-{j % 3}",))
            key = cache_key(trace.question, trace.corpus_version, trace.config_hash)
            cache.put(key, trace)
            got = cache.get(key)
            assert got is None or got.question == trace.question
            if j % 7 == i % 7:
                cache.invalidate_documents([f"doc-{j % 3}"])

    assert run_threads(work, 8) == []
    assert len(cache) <= 20
