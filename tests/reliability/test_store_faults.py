"""Store faults (issue 10, part 3): a process killed in the middle of ``workbench ingest``, the embedded store
opened by a second process while another holds it, and a damaged or missing index. Issue 14: the side stores
never cost an answer (a damaged or locked ``cache.sqlite`` is bypassed, a locked or damaged ``runs.sqlite``
spools the run), a damaged or lost ``store.sqlite`` is one line naming the file, and an answer resting on an
injected source is never cached as clean.

``tests/pipeline/test_store.py`` covers an interrupted write by monkeypatch, a missing shard repaired in
process, and a second ``Store.open``. Here real processes are killed with SIGKILL at several points of a real
``workbench ingest`` (the packaged MiniLM, a corpus of 240 documents in write batches of 8), real CLI commands
meet a held store, and the shard is damaged on disk and then opened through the CLI.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from pipeline.config import PipelineConfig
from pipeline.engine import Pipeline
from pipeline.ingestion.chunking import chunk_document
from pipeline.ingestion.documents import load_paths
from pipeline.ingestion.ingest import ingest_paths, needs_repair
from pipeline.retrieval.bm25 import query_weights, to_sparse
from pipeline.storage.cache import AnswerCache
from pipeline.storage.runs import RunLog
from pipeline.storage.store import Store
from pipeline.testing import fake_models
from pipeline.text.tokenize import tokenize
from tests.reliability.injection_corpus import load_manifest
from tests.reliability.rel_support import BENIGN, CLI_ENV, FAKE_GATE, QUESTION, ROOT, one_line_error, workbench

N_DOCS = 240
FAST_INGEST = ["--set", "ingest.passage_vectors=false", "--set", "ingest.batch_chunks=8"]


# == killed in the middle of ingest =======================================================================

def _note(i: int, version: str) -> str:
    word = {"old": "alphaversion", "new": "betaversion"}[version]
    paragraphs = [f"Section {k} of operations note {i} ({word}): relay node {i} keeps queue {k} warm for "
                  f"{i * 7 + k + (0 if version == 'old' else 1000)} seconds, and the key ring {k} rotates every "
                  f"{i % 30 + 1} days ({word})." for k in range(4)]
    return f"---\nid: note-{i:04d}\ntitle: Operations note {i}\n---\n# Note {i}\n\n" + "\n\n".join(paragraphs) + "\n"


def _expected(folder: Path) -> dict[str, tuple[str, tuple[str, ...]]]:
    docs, problems = load_paths([folder])
    assert not problems
    cfg = PipelineConfig()
    return {d.doc_id: (d.content_hash, tuple(c.text for c in chunk_document(d, cfg.chunking))) for d in docs}


@pytest.fixture(scope="module")
def two_versions(tmp_path_factory):
    root = tmp_path_factory.mktemp("kill")
    for version in ("old", "new"):
        (root / version).mkdir()
        for i in range(N_DOCS):
            (root / version / f"note-{i:04d}.md").write_text(_note(i, version), encoding="utf-8")
    with Store.open(root / "store") as store:
        ingest_paths(store, [root / "old"], PipelineConfig(), fake_models(), progress=False)
    return root, _expected(root / "old"), _expected(root / "new")


def _catalogue(home: Path) -> tuple[str, set[str]]:
    """(pending marker, content hashes) read from the catalogue without taking any lock the writer needs."""
    con = sqlite3.connect(f"file:{home / 'store.sqlite'}?mode=ro", uri=True, timeout=5)
    try:
        pending = con.execute("SELECT value FROM meta WHERE key='pending'").fetchone()
        hashes = {r[0] for r in con.execute("SELECT content_hash FROM documents")}
    finally:
        con.close()
    return (pending[0] if pending else ""), hashes


def _keyword_doc_ids(store: Store, term: str) -> set[str]:
    indices, values = to_sparse(query_weights(tokenize(term)))
    return {h.doc_id for h in store.keyword_search(indices, values, 1000)}


def assert_every_document_old_or_new(home: Path, old: dict, new: dict) -> dict[str, int]:
    """No document lost, none a mix: its chunk texts and hash are entirely one version's. Returns the counts."""
    counts = {"old": 0, "new": 0}
    with Store.open(home) as store:  # opened without repair: the state the kill left
        stored = {d.doc_id: d.content_hash for d in store.documents()}
        assert set(stored) == set(old), "a document was lost or invented"
        state = {}
        for doc_id in old:
            texts = tuple(c.text for c in store.chunks(doc_id))
            for version, expected in (("old", old), ("new", new)):
                if texts == expected[doc_id][1] and stored[doc_id] == expected[doc_id][0]:
                    state[doc_id] = version
            assert doc_id in state, f"{doc_id} is a mix of versions: {texts[:1]}"
            counts[state[doc_id]] += 1
        if not store.damage:
            assert store.missing_points() == [], "the catalogue names a point the index does not have"
        # Search serves the live version only, whatever the index still holds.
        assert _keyword_doc_ids(store, "betaversion") <= {d for d, v in state.items() if v == "new"}
        assert _keyword_doc_ids(store, "alphaversion") <= {d for d, v in state.items() if v == "old"}
    return counts


def _start_ingest(root: Path, log: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "workbench.cli", "ingest", str(root / "new"), "--store",
                             str(root / "store"), "--json", *FAST_INGEST], cwd=ROOT, env=CLI_ENV,
                            stdout=log.open("w"), stderr=subprocess.STDOUT)


def _kill_when(proc: subprocess.Popen, home: Path, trigger, guard_s: float = 240) -> str:
    """SIGKILL ``proc`` as soon as ``trigger(seconds, pending, hashes)`` holds; "killed" or "finished first"."""
    started = time.monotonic()
    while proc.poll() is None:
        elapsed = time.monotonic() - started
        assert elapsed < guard_s, "ingest hung"
        try:
            pending, hashes = _catalogue(home)
        except sqlite3.Error:
            pending, hashes = "", set()
        if trigger(elapsed, pending, hashes):
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
            return "killed"
        time.sleep(0.01)
    return "finished first"


@pytest.mark.long
@pytest.mark.slow
def test_ingest_killed_at_five_points_leaves_each_document_old_or_new_and_a_rerun_completes(two_versions, tmp_path):
    root, old, new = two_versions
    home = root / "store"
    new_hashes = {h for h, _ in new.values()}
    at_start = len(new_hashes & _catalogue(home)[1])

    def switched(hashes) -> int:
        return len(new_hashes & hashes)

    points = [
        ("1.5 s after start (loading the model)", lambda t, p, h: t >= 1.5),
        ("the pending marker appears (before the first write)", lambda t, p, h: p == "1"),
        ("the first write batch switched", lambda t, p, h: switched(h) > at_start),
        ("half the documents switched", lambda t, p, h: switched(h) >= N_DOCS // 2),
        ("every document switched, pending not yet cleared", lambda t, p, h: switched(h) == N_DOCS and p == "1"),
    ]
    outcomes = []
    for i, (name, trigger) in enumerate(points):
        proc = _start_ingest(root, tmp_path / f"run-{i}.log")
        outcome = _kill_when(proc, home, trigger)
        counts = assert_every_document_old_or_new(home, old, new)
        outcomes.append((name, outcome, counts))
    assert sum(o == "killed" for _, o, _ in outcomes) >= 4, outcomes
    assert any(0 < c["new"] < N_DOCS for _, o, c in outcomes if o == "killed"), \
        f"a kill between write batches was exercised: {outcomes}"

    final = workbench("ingest", str(root / "new"), "--store", str(home), "--json", *FAST_INGEST, timeout=600)
    assert final.returncode == 0 and "Traceback" not in final.stderr, final.stderr
    assert assert_every_document_old_or_new(home, old, new) == {"old": 0, "new": N_DOCS}
    with Store.open(home) as store:
        assert not needs_repair(store) and store.meta("pending") == ""
        assert store.orphan_points() == [] and store.index.count() == store.chunk_count()
    print("kill points:", json.dumps(outcomes))


def test_a_repair_that_dies_half_way_loses_no_document(small_store, monkeypatch):
    from pipeline.ingestion import ingest

    home = small_store
    shutil.rmtree(home / "shard")  # every point missing: repair rebuilds all three documents

    def dies(*args, **kwargs):
        raise KeyboardInterrupt("killed while re-embedding")

    with Store.open(home) as store:
        monkeypatch.setattr(ingest, "ingest_documents", dies)
        with pytest.raises(KeyboardInterrupt):
            ingest.repair(store, PipelineConfig(), fake_models())
        assert {d.doc_id for d in store.documents()} == {"mg-timeout", "mg-retries", "mg-keys"}
    monkeypatch.undo()
    with Store.open(home) as store:  # the next repair completes it from the kept text
        ingest.repair(store, PipelineConfig(), fake_models())
        assert store.missing_points() == [] and store.index.count() == store.chunk_count() > 0


# == a second process while the store is held ==================================================================

HOLDER = textwrap.dedent("""
    import json, sys
    from pipeline.config import PipelineConfig
    from pipeline.engine import Pipeline
    from pipeline.ingestion.ingest import ingest_paths
    from pipeline.storage.store import Store
    from pipeline.testing import fake_models
    store = Store.open(sys.argv[1])
    print("ready", flush=True)
    for line in sys.stdin:
        command, _, arg = line.strip().partition(" ")
        if command == "search":
            trace = Pipeline(store, fake_models(), log_runs=False).search(arg)
            print(json.dumps([c.doc_id for c in trace.retrieval.candidates]), flush=True)
        elif command == "ingest":
            report = ingest_paths(store, [arg], PipelineConfig(), fake_models(), progress=False)
            print(json.dumps(report.to_dict()), flush=True)
        else:
            break
    store.close()
    print("closed", flush=True)
""")


@pytest.mark.slow
def test_a_second_process_is_served_by_the_holder_reads_and_writes_and_the_shard_stays_whole(benign_home, tmp_path):
    home = benign_home / "store"
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(home)], cwd=ROOT, env=CLI_ENV, text=True,
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert holder.stdout.readline().strip() == "ready"
        extra = tmp_path / "extra.md"
        extra.write_text("---\nid: mg-extra\n---\nMarlin Gateway listens on port 8080 by default.\n", encoding="utf-8")
        added = workbench("ingest", str(extra), "--store", str(home), "--json", timeout=120)  # the guard against a hang
        assert added.returncode == 0 and json.loads(added.stdout)["added"] == ["mg-extra"], added.stderr
        holder.stdin.write("search Which port does Marlin Gateway listen on?\n")
        holder.stdin.flush()
        assert "mg-extra" in json.loads(holder.stdout.readline()), "the holder sees what the other process wrote"
        asked = workbench("ask", QUESTION, "--store", str(home), "--json", timeout=120)
        assert asked.returncode == 0 and "Traceback" not in asked.stderr, asked.stderr
        found = workbench("search", QUESTION, "--store", str(home), "--json", timeout=120)
        assert found.returncode == 0, found.stderr
        assert "mg-timeout" in {c["doc_id"] for c in json.loads(found.stdout)["retrieval"]["candidates"]}
        deleted = workbench("delete", "mg-extra", "--store", str(home), timeout=120)
        assert deleted.returncode == 0, deleted.stderr
        # The holder is unharmed: it searches and writes.
        holder.stdin.write(f"search {QUESTION}\n")
        holder.stdin.flush()
        assert "mg-timeout" in json.loads(holder.stdout.readline())
        holder.stdin.write(f"ingest {extra}\n")
        holder.stdin.flush()
        assert json.loads(holder.stdout.readline())["added"] == ["mg-extra"]
        holder.stdin.write("quit\n")
        holder.stdin.flush()
        assert holder.stdout.readline().strip() == "closed"
        assert holder.wait(timeout=60) == 0, holder.stderr.read()
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait(timeout=30)
    with Store.open(home) as store:
        assert store.damage == "" and not needs_repair(store), "the shard is not corrupted"
        assert {d.doc_id for d in store.documents()} == {"mg-timeout", "mg-retries", "mg-keys", "mg-extra"}
        assert store.index.count() == store.chunk_count()
        store.delete_document("mg-extra")  # leave the module's store as it was


# == a damaged or missing index ================================================================================

def _first_segment(home: Path) -> Path:
    return sorted((home / "shard" / "segments").iterdir())[0]


def _truncate_all(folder: Path) -> None:
    for path in folder.rglob("*"):
        if path.is_file():
            path.write_bytes(b"")


def _garbage(paths) -> None:
    for path in paths:
        path.write_bytes(os.urandom(4096))


def _halve(folder: Path) -> None:
    for path in folder.rglob("*"):
        if path.is_file():
            with path.open("r+b") as f:
                f.truncate(path.stat().st_size // 2)


# make test keeps three kinds of damage (a missing shard, every file cut, a page of garbage); make test-all runs all
DAMAGE = [
    pytest.param(lambda h: shutil.rmtree(h / "shard"), id="index-shard-deleted"),
    pytest.param(lambda h: (shutil.rmtree(h / "shard" / "segments"), shutil.rmtree(h / "shard" / "wal")),
                 id="index-segments-and-wal-deleted", marks=pytest.mark.long),
    pytest.param(lambda h: shutil.rmtree(h / "shard" / "segments"), id="index-segments-deleted", marks=pytest.mark.long),
    pytest.param(lambda h: _truncate_all(h / "shard" / "segments"), id="index-segment-files-emptied", marks=pytest.mark.long),
    pytest.param(lambda h: _garbage((h / "shard" / "wal").iterdir()), id="index-wal-overwritten", marks=pytest.mark.long),
    pytest.param(lambda h: _halve(h / "shard"), id="index-every-file-cut-in-half"),
    pytest.param(lambda h: (_first_segment(h) / "mutable_id_tracker.mappings").unlink(), id="index-id-tracker-deleted", marks=pytest.mark.long),
    pytest.param(lambda h: (_first_segment(h) / "vector_storage-dense" / "vectors" / "chunk_0.mmap").write_bytes(b""),
                 id="index-dense-vectors-emptied", marks=pytest.mark.long),
    pytest.param(lambda h: _garbage([_first_segment(h) / "payload_storage" / "page_0.dat"]),
                 id="index-payload-page-overwritten"),
]


@pytest.fixture
def small_store(tmp_path) -> Path:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for name, text in BENIGN.items():
        (corpus / name).write_text(text, encoding="utf-8")
    home = tmp_path / "store"
    with Store.open(home) as store:
        ingest_paths(store, [corpus], PipelineConfig(), fake_models(), progress=False)
    return home


@pytest.mark.slow
@pytest.mark.parametrize("damage", DAMAGE)
def test_a_damaged_index_is_detected_and_rebuilt_from_the_stored_documents_through_the_cli(small_store, damage):
    damage(small_store)
    first = workbench("search", QUESTION, "--store", str(small_store), "--json", timeout=300)
    assert first.returncode == 0 and "Traceback" not in first.stderr, first.stderr
    assert all(line.startswith("note: ") for line in first.stderr.splitlines() if line.strip()), first.stderr
    trace = json.loads(first.stdout)
    assert trace["retrieval"]["dense_status"] == "ran" and trace["retrieval"]["keyword_status"] == "ran"
    candidates = trace["retrieval"]["candidates"]
    assert {c["doc_id"] for c in candidates} == {"mg-timeout", "mg-retries", "mg-keys"}, "every stored document is back"
    assert next(c["doc_id"] for c in candidates if c["keyword_rank"] == 1) == "mg-timeout"
    with Store.open(small_store) as store:  # healthy after one repair: the next open has nothing to do
        assert not needs_repair(store) and store.missing_points() == [] and store.orphan_points() == []
        assert store.index.count() == store.chunk_count() == 3


def test_a_catalogue_that_is_not_a_database_is_one_line_no_traceback(small_store):
    (small_store / "store.sqlite").write_bytes(os.urandom(2048))
    for suffix in ("-wal", "-shm"):
        (small_store / f"store.sqlite{suffix}").unlink(missing_ok=True)
    for command in (["search", QUESTION], ["ask", QUESTION], ["docs"], ["ingest", str(small_store.parent / "corpus")]):
        result = workbench(*command, "--store", str(small_store), timeout=120)
        line = one_line_error(result)
        assert result.returncode == 2, (command, line)
        assert str(small_store / "store.sqlite") in line and "workbench ingest" in line, line


def test_a_zero_byte_catalogue_over_a_full_index_is_named_not_called_empty(small_store):
    (small_store / "store.sqlite").write_bytes(b"")
    for suffix in ("-wal", "-shm"):
        (small_store / f"store.sqlite{suffix}").unlink(missing_ok=True)
    for command in (["search", QUESTION], ["ask", QUESTION], ["docs"]):
        result = workbench(*command, "--store", str(small_store), "--json", timeout=120)
        line = one_line_error(result)
        assert result.returncode == 2, (command, line)
        assert str(small_store / "store.sqlite") in line and "points" in line and "workbench ingest" in line, line
        assert "is empty;" not in line


# == the side stores never cost an answer (issue 14) ===========================================================

ASK = "What does ERR_TIMEOUT_502 mean?"
SHORT_WAIT_ENV = {**CLI_ENV, "WORKBENCH_LOCK_WAIT_S": "1"}

# Holds a SQLite file from another process: BEGIN EXCLUSIVE (writers wait), with locking_mode=EXCLUSIVE also
# readers; until a line arrives on stdin.
HOLD = textwrap.dedent("""
    import sqlite3, sys
    db = sqlite3.connect(sys.argv[1], isolation_level=None)
    if sys.argv[2] == "readers-too":
        db.execute("PRAGMA locking_mode=EXCLUSIVE")
    db.execute("BEGIN EXCLUSIVE")
    print("holding", flush=True)
    sys.stdin.readline()
    db.execute("ROLLBACK")
    db.close()
""")


class Held:
    """``with Held(path, mode):`` another process holds ``path`` locked for the block."""

    def __init__(self, path: Path, mode: str = "writers") -> None:
        self.args = [sys.executable, "-c", HOLD, str(path), mode]

    def __enter__(self) -> Held:
        self.proc = subprocess.Popen(self.args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout.readline().strip() == "holding"
        return self

    def __exit__(self, *exc) -> None:
        self.proc.communicate("release\n", timeout=60)


@pytest.fixture
def cli_copy(cli_store, tmp_path) -> Path:
    """A private copy of the CLI-built store (real MiniLM): each test damages its own side files."""
    target = tmp_path / "store"
    shutil.copytree(cli_store, target)
    return target


def _ask_json(home: Path, env: dict | None = None) -> dict:
    result = workbench("ask", ASK, "--store", str(home), "--json", timeout=300, env=env)
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr
    trace = json.loads(result.stdout)
    assert trace["gate"]["decision"] == "answer" and "ERR_TIMEOUT_502" in trace["answer"], "the answer is given"
    return trace


def _lines(trace: dict, name: str) -> list[str]:
    return [d for d in trace["degradations"] if name in d]


def _runs(home: Path) -> list[dict]:
    result = workbench("runs", "--store", str(home), "--json", timeout=120)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


@pytest.mark.slow
@pytest.mark.long
def test_a_damaged_cache_never_blocks_a_cli_ask_and_a_new_one_is_started(cli_copy):
    (cli_copy / "cache.sqlite").write_bytes(os.urandom(4096))
    first = _ask_json(cli_copy)
    assert len(_lines(first, "cache.sqlite")) == 1 and "moved it to cache.sqlite.corrupt-" in _lines(
        first, "cache.sqlite")[0]
    assert len(list(cli_copy.glob("cache.sqlite.corrupt-*"))) == 1, "kept for inspection, never deleted"
    assert _lines(_ask_json(cli_copy), "cache.sqlite") == [], "the next ask has an empty, working cache"


@pytest.mark.slow
def test_a_cache_another_process_holds_is_bypassed_by_a_cli_ask(cli_copy):
    existing = AnswerCache(cli_copy / "cache.sqlite")   # an existing cache file, as after any ask
    existing.prune(0)
    existing.close()
    with Held(cli_copy / "cache.sqlite", "readers-too"):
        trace = _ask_json(cli_copy, env=SHORT_WAIT_ENV)
    assert len(_lines(trace, "cache.sqlite")) == 1 and "locked by another process" in _lines(trace, "cache.sqlite")[0]
    assert not list(cli_copy.glob("cache.sqlite.corrupt-*")), "a busy cache is left alone"


@pytest.mark.slow
def test_a_locked_run_log_loses_no_cli_run(cli_copy):
    existing = RunLog(cli_copy / "runs.sqlite")   # the log exists, as after any ask
    assert existing.count() == 0
    existing.close()
    with Held(cli_copy / "runs.sqlite"):
        trace = _ask_json(cli_copy, env=SHORT_WAIT_ENV)
        assert len(_lines(trace, "runs.sqlite")) == 1 and "runs.spool.jsonl" in _lines(trace, "runs.sqlite")[0]
        assert (cli_copy / "runs.spool.jsonl").stat().st_size > 0
    listed = _runs(cli_copy)   # the next command that opens the log writes the spooled run in, once
    assert [r["run_id"] for r in listed] == [trace["run_id"]]
    assert _runs(cli_copy) == listed and (cli_copy / "runs.spool.jsonl").stat().st_size == 0


@pytest.mark.slow
def test_a_damaged_run_log_is_named_by_workbench_runs_and_ask_still_answers(cli_copy):
    (cli_copy / "runs.sqlite").write_bytes(os.urandom(4096))
    result = workbench("runs", "--store", str(cli_copy), timeout=120)
    line = one_line_error(result)
    assert result.returncode == 2 and str(cli_copy / "runs.sqlite") in line and "move it aside" in line, line

    trace = _ask_json(cli_copy)
    assert len(_lines(trace, "runs.sqlite")) == 1 and "runs.spool.jsonl" in _lines(trace, "runs.sqlite")[0]

    (cli_copy / "runs.sqlite").rename(cli_copy / "runs.sqlite.damaged")   # the remedy the line names
    assert [r["run_id"] for r in _runs(cli_copy)] == [trace["run_id"]]


# == an answer resting on an injected source is never cached as clean (issue 14) ================================

FLAGGED = [pytest.param(inj, id=inj.doc_id) for inj in load_manifest() if inj.flagged]


@pytest.mark.parametrize("inj", FLAGGED)
def test_an_answer_with_a_flagged_source_is_asked_afresh_every_time(injection_store, tmp_path, inj):
    cache = AnswerCache(tmp_path / "cache.sqlite")
    pipeline = Pipeline(injection_store, fake_models(), PipelineConfig().with_overrides(FAKE_GATE), cache=cache,
                        log_runs=False)
    first = pipeline.ask(inj.question)
    assert first.generation.flagged_sources, "the injected source is offered and flagged"
    second = pipeline.ask(inj.question)
    assert not second.cache_hit, "a flagged answer was served from the cache as if it were clean"
    assert second.generation.flagged_sources == first.generation.flagged_sources
    assert [d for d in second.degradations if "addressed to a model" in d]
    assert len(cache) == 0
    cache.close()
