"""The side stores never cost an answer (issue 14): the answer cache is disposable, the run log durable.

- A damaged ``cache.sqlite`` (garbage, truncated, a directory in its place) or one another connection keeps
  locked is bypassed: the answer is given, the run records a degradation naming the file, a damaged file is
  moved aside and the next ask starts an empty cache. A 0-byte file is simply an empty cache.
- A locked or damaged ``runs.sqlite`` never loses the run: the answer is returned, the run is spooled beside
  the log and written into it, exactly once, as soon as the log can be written.
- What is cached: only a clean answer — never one with a flagged source or a degradation — and an entry that
  breaks that rule (an older release wrote it) is not served.

Everything here runs the real ``Pipeline.ask`` over a small store with the fake models (and the gate they were
written against, ``pipeline.testing.FAKE_WORLD``); the same faults
through the CLI are in ``tests/reliability/test_store_faults.py``.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import sqlite3
from pathlib import Path

import pytest

from pipeline.config import PipelineConfig
from pipeline.engine import Pipeline
from pipeline.ingestion.ingest import ingest_paths
from pipeline.storage.cache import AnswerCache, cache_key, why_not_cacheable
from pipeline.storage.runs import RunLog
from pipeline.storage.store import Store, StoreError
from pipeline.testing import FAKE_WORLD, fake_models
from tests.support.stores import ingest_texts
from tests.support.traces import answered_trace

QUESTION = "What is the default request timeout of Marlin Gateway?"
OTHER = "How many times does Marlin Gateway retry a failed upstream call?"
CORPUS = {
    "timeout.md": "---\nid: mg-timeout\ntitle: Request timeout\n---\n# Request timeout\n\n"
                  "The default request timeout of Marlin Gateway is 30 seconds (`gateway.request_timeout_s`).\n",
    "retries.md": "---\nid: mg-retries\ntitle: Upstream retries\n---\n# Retries\n\n"
                  "Marlin Gateway retries a failed upstream call up to 5 times with exponential backoff.\n",
}


@pytest.fixture(scope="module")
def small_home(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("side-stores")
    ingest_texts(root, CORPUS)
    return root / "store"


@pytest.fixture
def home(small_home, tmp_path) -> Path:
    """A private copy of the small store, so each test damages its own side files."""
    target = tmp_path / "store"
    shutil.copytree(small_home, target)
    return target


@pytest.fixture(autouse=True)
def short_waits(monkeypatch):
    monkeypatch.setenv("WORKBENCH_LOCK_WAIT_S", "0.5")


def ask(home: Path, question: str = QUESTION):
    """One ask through a fresh Pipeline on ``home`` with its own cache.sqlite and runs.sqlite (as the CLI does)."""
    with Store.open(home) as store:
        pipeline = Pipeline(store, fake_models(), PipelineConfig().with_overrides(FAKE_WORLD))
        try:
            return pipeline.ask(question)
        finally:
            pipeline.cache.close()
            pipeline.runs.close()


def garbage(path: Path) -> None:
    path.write_bytes(os.urandom(4096))


def truncated(path: Path) -> None:
    with path.open("r+b") as f:
        f.truncate(path.stat().st_size // 2)


def directory(path: Path) -> None:
    path.unlink()
    (path / "not-a-database").mkdir(parents=True)


def fill_cache(home: Path) -> None:
    """A real cache file with several pages, so that cutting it in half damages it."""
    assert not ask(home).cache_hit
    cache = AnswerCache(home / "cache.sqlite")
    for i in range(60):
        trace = answered_trace(f"filler question {i} " + "x" * 2000)
        cache.put(cache_key(trace.question, trace.corpus_version, trace.config_hash), trace)
    cache.close()
    for suffix in ("-wal", "-shm"):
        assert not (home / f"cache.sqlite{suffix}").exists()


def cache_lines(trace) -> list[str]:
    return [d for d in trace.degradations if "cache.sqlite" in d]


# == the answer cache: disposable =============================================================================

@pytest.mark.parametrize("damage", [garbage, truncated, directory], ids=["garbage", "truncated", "directory"])
def test_a_damaged_cache_is_bypassed_set_aside_and_started_again(home, damage):
    fill_cache(home)
    damage(home / "cache.sqlite")

    first = ask(home)
    assert first.gate.decision == "answer" and "30 seconds" in first.answer and not first.cache_hit
    assert len(cache_lines(first)) == 1, first.degradations
    assert "moved it to cache.sqlite.corrupt-" in cache_lines(first)[0]
    assert "\n" not in cache_lines(first)[0]
    aside = sorted(home.glob("cache.sqlite.corrupt-*"))
    assert aside, "the damaged file is kept for inspection, never deleted"

    second = ask(home)   # an empty cache now: nothing to serve, nothing degraded, and the answer is cached
    assert not second.cache_hit and second.degradations == ()
    third = ask(home)
    assert third.cache_hit and third.answer == first.answer


def test_a_zero_byte_cache_is_an_empty_cache(home):
    (home / "cache.sqlite").write_bytes(b"")
    first = ask(home)
    assert first.degradations == () and not first.cache_hit
    assert ask(home).cache_hit


def test_a_cache_another_connection_keeps_locked_is_bypassed_and_kept(home):
    fill_cache(home)
    holder = sqlite3.connect(home / "cache.sqlite", isolation_level=None)
    holder.execute("PRAGMA locking_mode=EXCLUSIVE")   # holds the file against readers too, until closed
    holder.execute("BEGIN EXCLUSIVE")
    try:
        trace = ask(home)
        assert "30 seconds" in trace.answer and not trace.cache_hit
        assert len(cache_lines(trace)) == 1 and "locked by another process" in cache_lines(trace)[0]
        assert not list(home.glob("cache.sqlite.corrupt-*")), "a busy cache is never taken for a damaged one"
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert ask(home).cache_hit, "the cache is used again once it is free"


def test_a_cache_locked_only_against_writers_still_serves_and_the_new_answer_is_not_lost(home):
    holder = sqlite3.connect(home / "cache.sqlite", isolation_level=None)
    holder.execute("PRAGMA journal_mode=WAL")
    holder.execute("CREATE TABLE IF NOT EXISTS held (x)")
    holder.execute("BEGIN EXCLUSIVE")
    try:
        trace = ask(home, OTHER)   # the put waits a short, bounded time, then gives up
        assert "5 times" in trace.answer
        assert any("locked by another process" in d for d in cache_lines(trace))
    finally:
        holder.execute("ROLLBACK")
        holder.close()


def test_the_cache_api_names_the_file_when_it_cannot_be_used(tmp_path):
    from pipeline.storage.cache import CacheUnavailable

    path = tmp_path / "cache.sqlite"
    garbage(path)
    cache = AnswerCache(path)   # cheap: opens nothing
    with pytest.raises(CacheUnavailable) as info:
        cache.get("k")
    assert str(path) in str(info.value) and info.value.kind == "damaged"
    assert cache.invalidate_documents(["d"]) == 0 and cache.prune(3) == 0   # maintenance never raises
    assert len(cache) == 0   # and the next use has started an empty one


# == the run log: durable ====================================================================================

def run_ids(path: Path) -> list[str]:
    db = sqlite3.connect(path)
    try:
        return [r[0] for r in db.execute("SELECT run_id FROM query_runs")]
    finally:
        db.close()


def spool_lines(home: Path) -> list[dict]:
    spool = home / "runs.spool.jsonl"
    if not spool.exists():
        return []
    return [json.loads(line) for line in spool.read_text(encoding="utf-8").split("\n") if line.strip()]


def test_a_locked_run_log_spools_the_run_and_writes_it_exactly_once_later(home):
    assert ask(home, OTHER).run_id in run_ids(home / "runs.sqlite")
    holder = sqlite3.connect(home / "runs.sqlite", isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")   # another writer holds the log past the busy timeout
    try:
        trace = ask(home)
        assert "30 seconds" in trace.answer
        lines = [d for d in trace.degradations if "runs.sqlite" in d]
        assert len(lines) == 1 and "locked by another process" in lines[0] and "runs.spool.jsonl" in lines[0]
        spooled = spool_lines(home)
        assert [s["run_id"] for s in spooled] == [trace.run_id] and spooled[0]["degradations"] == list(
            trace.degradations)
    finally:
        holder.execute("ROLLBACK")
        holder.close()

    later = ask(home, OTHER)   # the next run that can write brings the spooled one in
    ids = run_ids(home / "runs.sqlite")
    assert sorted(ids) == sorted(set(ids)) and trace.run_id in ids and later.run_id in ids and len(ids) == 3
    assert spool_lines(home) == []
    log = RunLog(home / "runs.sqlite")
    assert log.get(trace.run_id).degradations == trace.degradations, "the kept run says it was spooled"
    assert log.drain_spool() == 0 and log.count() == 3
    log.close()


def test_a_drain_killed_after_its_commit_does_not_write_a_run_twice(home, monkeypatch):
    log = RunLog(home / "runs.sqlite")
    log.count()
    spooled = [answered_trace(f"question {i}", run_id=f"spooled-{i}") for i in range(3)]
    with (home / "runs.spool.jsonl").open("w", encoding="utf-8") as f:
        f.writelines(t.to_json() + "\n" for t in spooled)
    real_ftruncate = os.ftruncate

    def killed(fd, length):
        raise KeyboardInterrupt("killed between the commit and emptying the spool")

    monkeypatch.setattr(os, "ftruncate", killed)
    with pytest.raises(KeyboardInterrupt):
        log.drain_spool()
    monkeypatch.setattr(os, "ftruncate", real_ftruncate)
    assert len(spool_lines(home)) == 3 and log.count() == 3
    assert log.drain_spool() == 0 and log.count() == 3 and spool_lines(home) == []
    assert sorted(run_ids(home / "runs.sqlite")) == ["spooled-0", "spooled-1", "spooled-2"]
    log.close()


def test_a_cut_spool_line_is_kept_apart_not_dropped(home):
    good = answered_trace("kept question", run_id="good-1")
    (home / "runs.spool.jsonl").write_text(good.to_json() + "\n" + good.to_json()[:40], encoding="utf-8")
    log = RunLog(home / "runs.sqlite")
    assert log.count() == 1 and log.get("good-1") == good   # opening the log drains the spool
    assert (home / "runs.spool.unreadable.jsonl").read_text(encoding="utf-8").strip() == good.to_json()[:40]
    log.close()


@pytest.mark.parametrize("damage", [garbage, truncated, directory], ids=["garbage", "truncated", "directory"])
def test_a_damaged_run_log_keeps_the_run_and_names_the_file_for_workbench_runs(home, damage):
    log = RunLog(home / "runs.sqlite")
    for i in range(40):
        log.record(answered_trace(f"earlier question {i} " + "y" * 2000))
    log.close()
    damage(home / "runs.sqlite")

    trace = ask(home)
    assert "30 seconds" in trace.answer
    lines = [d for d in trace.degradations if "runs.sqlite" in d]
    assert len(lines) == 1 and "runs.spool.jsonl" in lines[0] and "aside" in lines[0]
    assert [s["run_id"] for s in spool_lines(home)] == [trace.run_id]

    with pytest.raises(StoreError) as info:   # what `workbench runs` prints: one line, the file, what to do
        RunLog(home / "runs.sqlite").list()
    message = str(info.value)
    assert "\n" not in message
    assert str(home / "runs.sqlite") in message and "move it aside" in message

    (home / "runs.sqlite").rename(home / "runs.sqlite.damaged")   # what the message says to do
    fresh = RunLog(home / "runs.sqlite")
    assert [r.run_id for r in fresh.list()] == [trace.run_id] and spool_lines(home) == []
    fresh.close()


# == what is cached ===========================================================================================

def flagged(trace):
    return dataclasses.replace(trace, generation=dataclasses.replace(trace.generation, flagged_sources=(1,)))


@pytest.mark.parametrize("dirty, reason", [
    (flagged, "flagged source [1]"),
    (lambda t: dataclasses.replace(t, degradations=("generation fell back to extractive: timeout",)), "degraded"),
    (lambda t: dataclasses.replace(t, trust=dataclasses.replace(t.trust, rules_fired=("cites_injected_source",))),
     "cites_injected_source"),
    (lambda t: dataclasses.replace(t, trust=dataclasses.replace(t.trust, rules_fired=(
        "answer_reads_as_instruction",))), "answer_reads_as_instruction"),
    (lambda t: dataclasses.replace(t, limitations=("Source [2] contains text addressed to AI models.",)),
     "addressed to models"),
])
def test_a_flagged_or_degraded_answer_is_never_cached(tmp_path, dirty, reason):
    trace = dirty(answered_trace())
    assert reason in why_not_cacheable(trace)
    cache = AnswerCache(tmp_path / "cache.sqlite")
    key = cache_key(trace.question, trace.corpus_version, trace.config_hash)
    assert cache.put(key, trace) is False and cache.get(key) is None
    cache.close()


def test_a_missing_reranker_alone_does_not_stop_caching(tmp_path):
    """Offline the cross-encoder is usually absent: every run records it, and answers must still be cached."""
    trace = dataclasses.replace(answered_trace(), degradations=("rerank skipped: model missing",))
    assert why_not_cacheable(trace) == ""
    cache = AnswerCache(tmp_path / "cache.sqlite")
    key = cache_key(trace.question, trace.corpus_version, trace.config_hash)
    assert cache.put(key, trace) is True and cache.get(key) is not None
    cache.close()


def test_a_flagged_answer_an_older_release_cached_is_not_served(home):
    first = ask(home)
    assert not first.cache_hit
    with Store.open(home) as store:
        key = cache_key(first.rewrite.query or first.question, store.corpus_version, first.config_hash,
                        store.catalogue_id)
    db = sqlite3.connect(home / "cache.sqlite")
    assert db.execute("UPDATE answers SET trace_json=? WHERE key=?",
                      (flagged(answered_trace(QUESTION)).to_json(), key)).rowcount == 1
    db.commit()
    db.close()
    again = ask(home)
    assert not again.cache_hit, "an entry the current rule refuses is never served as clean"
    assert again.answer == first.answer and again.generation.flagged_sources == ()
    cache = AnswerCache(home / "cache.sqlite")
    assert why_not_cacheable(cache.get(key)) == "", "replaced by the fresh, clean answer"
    cache.close()


def test_a_store_rebuilt_from_scratch_never_serves_the_old_stores_answers(small_home, tmp_path):
    """Same corpus version, same config, same question: only the catalogue id tells the two apart."""
    old = tmp_path / "old"
    shutil.copytree(small_home, old)
    assert not ask(old).cache_hit and ask(old).cache_hit
    rebuilt = tmp_path / "rebuilt"
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for name, text in CORPUS.items():
        (corpus / name).write_text(text.replace("30 seconds", "45 seconds"), encoding="utf-8")
    with Store.open(rebuilt) as store:
        ingest_paths(store, [corpus], PipelineConfig(), fake_models(), progress=False)
        with Store.open(old) as before:
            assert store.corpus_version == before.corpus_version and store.catalogue_id != before.catalogue_id
    shutil.copy(old / "cache.sqlite", rebuilt / "cache.sqlite")
    trace = ask(rebuilt)
    assert not trace.cache_hit and "45 seconds" in trace.answer
