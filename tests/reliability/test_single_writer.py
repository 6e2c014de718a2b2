"""One writer, many readers, nothing lost; and a corpus version that moves with every committed change.

(a) A large ingest runs in a subprocess while reader processes open the store and search, the ``workbench
search`` CLI runs, and a second ingest is attempted: the ingest completes, every document is in the catalogue
and both legs exactly once, the version moved, every reader got results (the ingest's process serves the
shard to them), and the second ingest waited for the first or was refused in one "in use" line.
(b) An ingest killed at a commit step (``os._exit`` right after the step, as a SIGKILL would leave it): the
documents are the same after a re-run, the corpus version changed, and no stale cached answer is served.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from pipeline.config import PipelineConfig
from pipeline.engine import Pipeline
from pipeline.ingestion.ingest import ingest_paths, needs_repair, repair
from pipeline.retrieval.bm25 import to_sparse
from pipeline.storage.store import Store
from pipeline.testing import fake_models
from tests.reliability.rel_support import CLI_ENV, ROOT, workbench

CFG = PipelineConfig().with_overrides({"ingest.passage_vectors": False})
N_DOCS = 1500

INGEST = textwrap.dedent("""
    import json, sys
    from pipeline.config import PipelineConfig
    from pipeline.ingestion.ingest import ingest_paths
    from pipeline.storage.store import Store, StoreError
    from pipeline.testing import fake_models
    cfg = PipelineConfig().with_overrides({"ingest.passage_vectors": False})
    try:
        with Store.open(sys.argv[1], lock_wait_s=float(sys.argv[3])) as store:
            report = ingest_paths(store, [sys.argv[2]], cfg, fake_models(), progress=False)
    except StoreError as exc:
        print(json.dumps({"refused": str(exc)}))
    else:
        print(json.dumps(report.to_dict()))
""")

READER = textwrap.dedent("""
    import json, sys, time
    from pathlib import Path
    from pipeline.storage.store import Store, StoreError
    from pipeline.testing import FakeEmbedder
    home, stop = sys.argv[1], Path(sys.argv[2])
    query = FakeEmbedder().encode(["gateway filler words"])[0].tolist()
    outcomes, deadline = [], time.monotonic() + 120
    while not stop.exists() and time.monotonic() < deadline:
        try:
            with Store.open(home, lock_wait_s=5) as store:
                found = store.dense_search(query, 5)
                outcomes.append(("served" if store.served_by else "results") if found else "empty")
        except StoreError as exc:
            outcomes.append("busy" if "in use by another process" in str(exc) else "unclear: " + str(exc))
        time.sleep(0.02)
    print(json.dumps(outcomes))
""")


def _write_docs(folder: Path, ids: range, word: str = "uniq") -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for i in ids:
        (folder / f"d{i:05d}.md").write_text(
            f"---\nid: doc-{i:05d}\ntitle: Doc {i}\n---\n# Doc {i}\n\nThe token {word}{i}x appears here, with "
            f"filler words about gateway {i % 17}.\n", encoding="utf-8")


def _python(script: str, *args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", script, *args], cwd=ROOT, env=CLI_ENV, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _pending(home: Path) -> str:
    import sqlite3

    try:
        db = sqlite3.connect(f"file:{home / 'store.sqlite'}?mode=ro", uri=True, timeout=1)
        try:
            row = db.execute("SELECT value FROM meta WHERE key='pending'").fetchone()
        finally:
            db.close()
    except sqlite3.Error:
        return ""
    return row[0] if row else ""


def assert_each_document_once_in_both_legs(store: Store, doc_ids: set[str]) -> None:
    assert {d.doc_id for d in store.documents()} == doc_ids
    assert store.index.count() == store.chunk_count() == sum(d.chunk_count for d in store.documents())
    assert store.orphan_points() == [] and store.missing_points() == []
    chunks = store.chunks()
    vectors = store.index.dense_vectors([c.point_id for c in chunks])
    for c in chunks:
        assert c.doc_id in {h.doc_id for h in store.dense_search(vectors[c.point_id], 3)}, c.doc_id
        if not c.doc_id.startswith("doc-"):
            continue
        indices, values = to_sparse({f"uniq{int(c.doc_id[4:])}x": 1.0})
        hits = store.keyword_search(indices, values, 3)
        assert hits and hits[0].doc_id == c.doc_id, c.doc_id


@pytest.mark.slow
def test_an_ingest_with_readers_a_cli_search_and_a_second_ingest_loses_nothing(tmp_path):
    home, corpus, extra, stop = tmp_path / "store", tmp_path / "corpus", tmp_path / "extra", tmp_path / "stop"
    _write_docs(tmp_path / "seed", range(N_DOCS, N_DOCS + 5))
    _write_docs(corpus, range(N_DOCS))
    _write_docs(extra, range(N_DOCS + 5, N_DOCS + 8))
    with Store.open(home) as store:
        before = ingest_paths(store, [tmp_path / "seed"], CFG, fake_models(), progress=False).corpus_version

    ingest = _python(INGEST, str(home), str(corpus), "5")
    deadline = time.monotonic() + 120
    while _pending(home) != "1" and ingest.poll() is None:  # the writer holds the store and is writing
        assert time.monotonic() < deadline, "the ingest never started writing"
        time.sleep(0.01)
    readers = [_python(READER, str(home), str(stop)) for _ in range(3)]
    second = _python(INGEST, str(home), str(extra), "1")
    cli = workbench("search", "gateway filler words", "--store", str(home), "--json", timeout=300)

    out, err = ingest.communicate(timeout=300)
    assert ingest.returncode == 0 and "Traceback" not in err, err
    report = json.loads(out)
    assert report["documents"] == N_DOCS and report["embedded"] == N_DOCS, report
    stop.touch()
    outcomes = []
    for reader in readers:
        r_out, r_err = reader.communicate(timeout=120)
        assert reader.returncode == 0 and "Traceback" not in r_err, r_err
        outcomes += json.loads(r_out)
    assert "served" in outcomes, "no reader was served by the process holding the shard"
    assert all(o in ("results", "served") for o in outcomes), [o for o in outcomes if o not in ("results", "served")][:5]
    s_out, s_err = second.communicate(timeout=120)
    assert second.returncode == 0 and "Traceback" not in s_err, s_err
    second_report = json.loads(s_out)
    assert "in use by another process" in second_report.get("refused", "in use by another process")
    assert "Traceback" not in cli.stderr, cli.stderr
    if cli.returncode:  # refused: one line naming the store and what to do, exit 2
        assert cli.returncode == 2 and len(cli.stderr.strip().splitlines()) == 1, cli.stderr
        assert str(home) in cli.stderr and "in use by another process" in cli.stderr, cli.stderr
    else:
        assert json.loads(cli.stdout)["retrieval"]["candidates"], cli.stdout

    expected = {f"doc-{i:05d}" for i in range(N_DOCS + 5)}
    if "added" in second_report:
        expected |= set(second_report["added"])
    with Store.open(home) as store:
        assert not needs_repair(store) and store.damage == ""
        assert store.corpus_version > before
        assert_each_document_once_in_both_legs(store, expected)


# == killed at a commit step ===================================================================================

# Runs an ingest that dies (os._exit, no cleanup, as SIGKILL) right after the named step.
KILLED_INGEST = textwrap.dedent("""
    import os, sys
    from pipeline.config import PipelineConfig
    from pipeline.ingestion import ingest
    from pipeline.storage import store as store_module
    from pipeline.testing import fake_models
    home, corpus, step = sys.argv[1], sys.argv[2], sys.argv[3]

    def after(owner, name):
        original = getattr(owner, name)
        def dying(*args, **kwargs):
            result = original(*args, **kwargs)
            os._exit(9)
        setattr(owner, name, dying)

    if step == "catalogue switched":            # the transaction committed; old points not yet deleted
        original_delete = store_module.EdgeIndex.delete
        def delete(self, point_ids):
            os._exit(9)
        store_module.EdgeIndex.delete = delete
    elif step == "batch written":               # the whole batch switched, nothing after it
        after(store_module.Store, "replace_documents")
    elif step == "supersession recorded":       # everything but the run's last bookkeeping
        after(ingest, "update_supersession")
    cfg = PipelineConfig().with_overrides({"ingest.passage_vectors": False})
    with store_module.Store.open(home) as store:
        ingest.ingest_paths(store, [corpus], cfg, fake_models(), progress=False)
    sys.exit(3)  # the step was never reached
""")

QUESTION = "What is the default delivery timeout of the relay?"


def _timeout_doc(seconds: int) -> str:
    return (f"---\nid: relay-timeout\ntitle: Relay timeout\n---\n# Relay timeout\n\nThe default delivery "
            f"timeout of the relay is {seconds} seconds.\n")


@pytest.mark.slow
@pytest.mark.parametrize("step", ["catalogue switched", "batch written", "supersession recorded"])
def test_an_ingest_killed_at_a_commit_step_changes_the_version_and_serves_no_stale_answer(tmp_path, step):
    home, corpus = tmp_path / "store", tmp_path / "corpus"
    _write_docs(corpus, range(3))
    (corpus / "timeout.md").write_text(_timeout_doc(30), encoding="utf-8")
    with Store.open(home) as store:
        ingest_paths(store, [corpus], CFG, fake_models(), progress=False)
        old_version = store.corpus_version
        first = Pipeline(store, fake_models(), cfg=CFG, log_runs=False).ask(QUESTION)
        assert "30 seconds" in first.answer and not first.cache_hit
        assert Pipeline(store, fake_models(), cfg=CFG, log_runs=False).ask(QUESTION).cache_hit
        documents = {d.doc_id for d in store.documents()}

    (corpus / "timeout.md").write_text(_timeout_doc(45), encoding="utf-8")
    killed = subprocess.run([sys.executable, "-c", KILLED_INGEST, str(home), str(corpus), step], cwd=ROOT,
                            env=CLI_ENV, capture_output=True, text=True, timeout=300)
    assert killed.returncode == 9, killed.stderr

    with Store.open(home) as store:
        assert "45 seconds" in store.document_text("relay-timeout"), "killed after the change was committed"
        assert store.corpus_version != old_version
        if needs_repair(store):
            repair(store, CFG, fake_models())
        answer = Pipeline(store, fake_models(), cfg=CFG, log_runs=False).ask(QUESTION)
        assert not answer.cache_hit and "45 seconds" in answer.answer and "30 seconds" not in answer.answer
        assert_each_document_once_in_both_legs(store, documents)

    rerun = workbench("docs", "--store", str(home), "--json")  # the CLI opens it cleanly afterwards
    assert rerun.returncode == 0, rerun.stderr
    with Store.open(home) as store:
        version = store.corpus_version
        again = ingest_paths(store, [corpus], CFG, fake_models(), progress=False)
        assert again.unchanged == len(documents) and store.corpus_version == version
        answer = Pipeline(store, fake_models(), cfg=CFG, log_runs=False).ask(QUESTION)
        assert "45 seconds" in answer.answer and "30 seconds" not in answer.answer
        assert_each_document_once_in_both_legs(store, documents)
