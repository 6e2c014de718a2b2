"""Corpus page: browse documents and chunks, upload, delete, supersession."""

from __future__ import annotations

from conftest import errors_of, markdown_of, open_app, texts_of, unmark

NOTE = b"""---
id: zorblat-runbook
title: Zorblat runbook
product: harbor-relay
---
# Zorblat

The zorblat relay check runs every 90 seconds and pages the on-call engineer after three misses.
"""


def _upload(at, *files):
    at.file_uploader(key="corpus.upload").set_value(list(files))
    at.run()
    at.button(key="corpus.ingest").click().run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def _documents(at):
    return next(df.value for df in at.dataframe if "ingested at" in df.value.columns)


def test_documents_chunks_and_supersession_are_listed(app_env):
    at = open_app("corpus")
    docs = _documents(at)
    assert len(docs) >= 90 and "err-timeout-502" in set(docs["document"])
    assert "advisory-2-5-data-loss" not in set(docs["document"]), "the retracted advisory is not indexed"
    metrics = {m.label: m.value for m in at.metric}
    assert int(metrics["documents"]) == len(docs)
    at.selectbox(key="corpus.doc").set_value("faq-limits-2-4").run()
    chunks = next(df.value for df in at.dataframe if "heading path" in df.value.columns)
    assert set(chunks["chunk"]) and all(c.startswith("faq-limits-2-4#") for c in chunks["chunk"])
    supersession = next(df.value for df in at.dataframe if "older chunk" in df.value.columns)
    assert len(supersession) == int(metrics["chunks superseded in part"]) > 0
    assert any(label.endswith("· superseded in part") for label in markdown_of(at))


def test_upload_ingests_and_a_bad_file_is_one_error_line(scratch_env):
    at = open_app("corpus")
    before = int({m.label: m.value for m in at.metric}["corpus version"])
    at = _upload(at, ("zorblat.md", NOTE, "text/markdown"), ("broken.md", b"\x00\x01binary", "text/markdown"))
    assert any("1 added" in unmark(s.value) for s in at.success)
    errors = errors_of(at)
    assert len(errors) == 1 and errors[0].startswith("broken.md: binary file")
    assert "zorblat-runbook" in set(_documents(at)["document"])
    assert int({m.label: m.value for m in at.metric}["corpus version"]) == before + 1
    assert (scratch_env / "uploads" / "zorblat.md").is_file()


def test_delete_removes_the_document_from_the_store(scratch_env):
    at = open_app("corpus")
    at.selectbox(key="corpus.delete_doc").set_value("faq-limits-2-4")
    at.checkbox(key="corpus.delete_confirm").check().run()
    at.button(key="corpus.delete").click().run()
    assert any("deleted faq-limits-2-4" in unmark(s.value) for s in at.success)
    assert "faq-limits-2-4" not in set(_documents(at)["document"])
    at.switch_page("workbench/app/pages/ask.py").run()
    at.chat_input(key="ask.query").set_value("What was the 2.4 rate limit per endpoint?").run()
    assert "faq-limits-2-4" not in texts_of(at), "neither leg returns a chunk of the deleted document"


def test_an_empty_store_says_how_to_fill_it(tmp_path, monkeypatch):
    monkeypatch.setenv("WORKBENCH_HOME", str(tmp_path / "empty"))
    monkeypatch.setenv("WORKBENCH_APP_MODELS", "fake")
    at = open_app()
    assert len(at.error) == 1 and "is empty" in errors_of(at)[0] and "Corpus page" in errors_of(at)[0]
    at.switch_page("workbench/app/pages/corpus.py").run()
    assert any("The store is empty" in i.value for i in at.info)


def test_the_upload_progress_bar_shows_the_share_and_the_ingest_line():
    from pipeline.ingestion.progress import Progress
    from workbench.app.corpus_view import ingest_progress

    class Bar:
        def __init__(self):
            self.drawn = []

        def progress(self, value, text=""):
            self.drawn.append((value, text))

    bar = Bar()
    update = ingest_progress(bar)
    update(Progress(0, 120, 0.5, counting=True))
    update(Progress(60, 120, 4.0))
    update(Progress(120, 120, 8.0))
    assert bar.drawn == [(0.0, "Embedding: 0/120+ chunks"), (0.5, "Embedding: 60/120 chunks · 15.0 chunks/s · ETA 0:04"),
                         (1.0, "Embedding: 120/120 chunks · 15.0 chunks/s · ETA 0:00")]


def test_the_page_says_the_app_holds_the_index_and_serves_other_processes(app_env):
    at = open_app("corpus")
    captions = [c.value for c in at.caption]
    assert any("this app holds the index and serves it to the CLI, notebooks" in unmark(c) for c in captions), captions


def test_a_store_served_by_another_process_names_it(tmp_path):
    from pipeline.storage.store import Store
    from workbench.app.corpus_view import sharing_note

    with Store.open(tmp_path / "store") as holder, Store.open(tmp_path / "store", lock_wait_s=2) as served:
        assert "this app holds the index" in sharing_note(holder)
        note = sharing_note(served)
        assert "held by another process (pid" in note and str(tmp_path / "store") in note
