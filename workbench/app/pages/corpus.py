"""Corpus: documents and their chunks, upload and delete, and which chunks newer ones supersede in part."""

import pandas as pd
import streamlit as st

from pipeline.ingestion.ingest import delete_document, ingest_paths, needs_repair, repair
from workbench.app import page, resources
from workbench.app.corpus_view import (
    UPLOAD_TYPES,
    chunk_rows,
    document_rows,
    ingest_progress,
    report_lines,
    save_uploads,
    sharing_note,
    supersession_rows,
)
from workbench.app.render import md

FLASH = "corpus.flash"

cfg, pipe = page.setup("Corpus", "What the answerer can cite. Uploads and deletions change the corpus version, "
                       "so no cached answer from before is served.")
store = pipe.store

for kind, line in st.session_state.pop(FLASH, []):
    getattr(st, kind)(md(line))

if needs_repair(store) and not store.is_empty():
    st.warning("The index and the catalogue disagree (an interrupted write or a damaged index).")
    if st.button("Repair the index from the stored documents", key="corpus.repair"):
        actions = page.attempt(lambda: repair(store, cfg, resources.models()))
        st.session_state[FLASH] = [("success", a) for a in actions or ["nothing to repair"]]
        st.rerun()

docs = document_rows(store)
a, b, c, d = st.columns(4)
a.metric("documents", len(docs))
b.metric("chunks", store.chunk_count())
c.metric("corpus version", store.corpus_version)
superseded = supersession_rows(store)
d.metric("chunks superseded in part", len(superseded))
st.caption(md(sharing_note(store)))

tab_docs, tab_upload, tab_delete, tab_supersede = st.tabs(["Documents", "Upload", "Delete", "Supersession"])
with tab_docs:
    if not docs:
        st.info("The store is empty: upload documents, or run `make ingest` for the demo corpus.")
    else:
        st.dataframe(pd.DataFrame(docs), hide_index=True, key="corpus.documents")
        titles = {row["document"]: row["title"] for row in docs}
        doc_id = st.selectbox("Browse the chunks of", list(titles), key="corpus.doc",
                              format_func=lambda i: f"{i} — {titles[i]}")
        st.dataframe(pd.DataFrame(chunk_rows(store, doc_id)), hide_index=True, key="corpus.chunks",
                     column_config={"text": st.column_config.TextColumn(width="large")})
        for chunk in store.chunks(doc_id):
            label = f"#{chunk.ordinal} {' › '.join(chunk.heading_path) or chunk.chunk_id}"
            with st.expander(md(label, limit=100) + (" · superseded in part" if chunk.superseded_by else "")):
                if chunk.superseded_by:
                    st.caption(md(f"superseded in part by {', '.join(chunk.superseded_by)}: {chunk.superseded_reason}"))
                st.text(chunk.text)

with tab_upload:
    files = st.file_uploader("Documents (Markdown, text, HTML or JSONL; optional YAML front matter)",
                             type=UPLOAD_TYPES, accept_multiple_files=True, key="corpus.upload")
    if st.button("Ingest", type="primary", key="corpus.ingest", disabled=not files):
        paths = save_uploads(files, store.home)
        bar = st.progress(0.0, text=f"Reading and chunking {len(paths)} file(s) ...")
        report = page.attempt(lambda: ingest_paths(store, paths, cfg, resources.models(),
                                                   progress=ingest_progress(bar)))
        if report is not None:
            summary, problems, notes = report_lines(report)
            flash = [("error", p) for p in problems] + [("info", n) for n in notes]
            if report.documents or report.retracted:
                flash.insert(0, ("success", summary))
            st.session_state[FLASH] = flash
            st.rerun()

with tab_delete:
    ids = [row["document"] for row in docs]
    target = st.selectbox("Document to delete", ids, index=None, placeholder="choose a document",
                          key="corpus.delete_doc")
    confirm = st.checkbox("Yes, remove it from both indexes (past runs in the audit log are kept)",
                          key="corpus.delete_confirm")
    if st.button("Delete", key="corpus.delete", disabled=target is None or not confirm):
        removed = delete_document(store, target)
        st.session_state[FLASH] = [("success", f"deleted {target}: {removed} chunks removed; corpus version "
                                    f"{store.corpus_version}")]
        st.rerun()

with tab_supersede:
    st.caption("A chunk is superseded in part when a newer document about the same product states different "
               "numbers or identifiers for the same thing. Answers that cite it show an amber badge.")
    if superseded:
        st.dataframe(pd.DataFrame(superseded), hide_index=True, key="corpus.supersession")
    else:
        st.info("No chunk is superseded.")
