"""'Superseded in part': computed at ingestion, on the demo corpus and on hand-made chunks."""

import numpy as np
import pytest

from pipeline.ingestion.supersede import SupersedeInput, changed_statements, compute_supersession, stated_facts


def item(chunk_id, version, text, date=""):
    return SupersedeInput(chunk_id, chunk_id.split("#")[0], f"Doc {version}", "harbor-relay", version, date, text)


def test_a_newer_chunk_that_changes_a_limit_supersedes_the_older_one():
    old = item("cfg-2-4#0", "2.4", "`rate_limit.requests_per_minute` defaults to 100 per endpoint.")
    new = item("cfg-3-1#0", "3.1", "`rate_limit.requests_per_minute` defaults to 250 per endpoint.")
    same = item("faq-3-1#0", "3.1", "`rate_limit.requests_per_minute` defaults to 100 per endpoint.")
    vectors = np.ones((3, 4), dtype=np.float32) / 2.0  # identical direction: similarity 1.0
    found = compute_supersession([old, new, same], vectors, threshold=0.8)
    assert set(found) == {"cfg-2-4#0"}  # the newer chunks are never superseded by the older one
    by, reason = found["cfg-2-4#0"]
    assert by == ("cfg-3-1#0",)  # the 3.1 restatement of 100 does not contradict it
    assert "requests_per_minute: 250 (this chunk: 100)" in reason and "v3.1" in reason


def test_dissimilar_chunks_or_undated_documents_are_never_compared():
    old = item("a#0", "2.4", "`delivery.max_retries` is 5.")
    new = item("b#0", "3.0", "`delivery.max_retries` is 8.")
    undated = SupersedeInput("c#0", "c", "C", "harbor-relay", "", "", "`delivery.max_retries` is 9.")
    orthogonal = np.array([[1, 0], [0, 1], [0, 1]], dtype=np.float32)
    assert compute_supersession([old, new, undated], orthogonal, threshold=0.8) == {}
    parallel = np.ones((3, 2), dtype=np.float32) / np.sqrt(2)
    assert set(compute_supersession([old, new, undated], parallel, threshold=0.8)) == {"a#0"}


def test_dates_versions_and_list_markers_are_not_stated_quantities():
    facts = stated_facts("1. Released 2025-11-03 in v3.1.\n2. See 3.1 notes.", frozenset({"3.1"}))
    assert facts == frozenset()
    rows = stated_facts("| `delivery.max_retries` | integer | `5` | retries |\n| Maximum event payload size | 256 KB |")
    assert {(s.key, s.value) for s in rows} == {("max_retries", "5"), ("payload size", "256 kb")}


def test_the_same_number_written_with_a_unit_is_not_a_change():
    assert changed_statements(stated_facts("`security.replay_window_s` is 300."),
                              stated_facts("`security.replay_window_s` is 300 s.")) == []


@pytest.mark.slow
def test_supersession_on_the_demo_corpus(demo_store_real):
    chunks = {c.chunk_id: c for c in demo_store_real.chunks()}
    superseded = {cid: c for cid, c in chunks.items() if c.superseded_by}
    docs = {d.doc_id: d for d in demo_store_real.documents()}

    def doc_of(chunk_id):
        return docs[chunk_id.rsplit("#", 1)[0]]

    # the 2.4 references are contradicted by their 3.1 counterparts, with the changed values named
    rate = [c for cid, c in superseded.items() if cid.startswith("config-rate-limit-2-4#")]
    assert any("config-rate-limit-3-1" in " ".join(c.superseded_by) and "requests_per_minute: 250" in
               c.superseded_reason and "(this chunk: 100)" in c.superseded_reason for c in rate)
    limits = [c for cid, c in superseded.items() if cid.startswith("faq-limits-2-4#")]
    assert any("retention_days: 14 (this chunk: 7)" in c.superseded_reason for c in limits)
    assert any(cid.startswith("config-delivery-2-4#") and "config-delivery-3-1" in " ".join(c.superseded_by)
               for cid, c in superseded.items())
    # supersession only ever points from older to newer documents, and is stored in the index payload too
    for cid, c in superseded.items():
        older = doc_of(cid)
        for newer_id in c.superseded_by:
            newer = doc_of(newer_id)
            assert (newer.version, newer.effective_date) != (older.version, older.effective_date)
    assert not any(cid.startswith(("config-rate-limit-3-1#", "faq-limits-3-1#")) for cid in superseded)


@pytest.mark.slow
def test_supersession_travels_with_the_chunk_into_search_results(demo_store_real):
    from pipeline.retrieval.bm25 import query_weights, to_sparse
    from pipeline.text.tokenize import tokenize

    indices, values = to_sparse(query_weights(tokenize("rate_limit.requests_per_minute default 100")))
    hits = demo_store_real.keyword_search(indices, values, 50)
    old = [h for h in hits if h.chunk_id.startswith("config-rate-limit-2-4#") and h.payload["superseded_by"]]
    assert old and all(h.payload["superseded_reason"] for h in old)
