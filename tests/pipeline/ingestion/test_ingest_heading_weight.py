"""keyword.heading_weight: a word in a chunk's heading path (a document's title) counts more in BM25; the
default (1) indexes exactly as before the parameter, and changing it re-indexes the store."""

import json

import pytest

from pipeline.config import PipelineConfig
from pipeline.context import StageContext
from pipeline.ingestion.documents import Document
from pipeline.ingestion.ingest import build_signature, heading_token_count, ingest_documents
from pipeline.retrieval import retrieve
from pipeline.retrieval.bm25 import bm25_doc_weights
from pipeline.storage.store import Store
from pipeline.testing import fake_models
from pipeline.text.tokenize import tokenize


def test_heading_occurrences_add_the_weight_to_the_term_frequency():
    tokens = ["quagga", "extinct", "quagga", "plains"]  # the first token is the heading
    plain = bm25_doc_weights(tokens, avgdl=4.0, k1=1.2, b=0.75)
    assert bm25_doc_weights(tokens, 4.0, 1.2, 0.75, heading_tokens=1, heading_weight=1.0) == plain
    boosted = bm25_doc_weights(tokens, 4.0, 1.2, 0.75, heading_tokens=1, heading_weight=3.0)
    norm = 1.2 * (1 - 0.75 + 0.75 * 4 / 4.0)  # the length stays the plain token count
    assert boosted["quagga"] == pytest.approx(4 * 2.2 / (4 + norm))  # tf 2 -> 1 * 3 + 1
    assert boosted["extinct"] == pytest.approx(plain["extinct"])  # body-only terms are untouched


def test_heading_tokens_are_the_prefix_of_the_indexed_tokens():
    heading = ("Harbor Relay", "ERR_TIMEOUT_502 retries")
    text = "Set delivery.timeout_ms to 5000."
    indexed = " > ".join(heading) + "\n" + text
    n = heading_token_count(heading)
    assert tokenize(indexed)[:n] == tokenize(" > ".join(heading))
    assert tokenize(indexed)[n:] == tokenize(text)


def test_the_default_signature_is_the_one_stores_were_built_with():
    sig = json.loads(build_signature(PipelineConfig(), 384))
    assert sig["bm25"] == [1.2, 0.75]  # no re-index of existing stores for the new parameter at its default
    boosted = PipelineConfig().with_overrides({"keyword.heading_weight": 2.0})
    assert json.loads(build_signature(boosted, 384))["bm25"] == [1.2, 0.75, 2.0]


def _docs():
    filler = " ".join(f"word{i}" for i in range(30))
    return [Document(doc_id="title-hit", title="Quagga", text=f"An extinct animal. {filler}", source="a",
                     format="jsonl"),
            Document(doc_id="body-hit", title="Notes", text=f"The quagga and the quagga again. {filler}",
                     source="b", format="jsonl")]


def _keyword_order(store, cfg, models):
    trace = retrieve.run("quagga", cfg.retrieve, StageContext(models, store, cfg.embedding))
    return [c.doc_id for c in sorted((c for c in trace.candidates if c.keyword_rank), key=lambda c: c.keyword_rank)]


def test_a_title_match_outranks_a_body_match_when_titles_weigh_more_and_reingest_rebuilds(tmp_path):
    models = fake_models()
    default = PipelineConfig()
    with Store.open(tmp_path / "store") as store:
        ingest_documents(store, _docs(), default, models, progress=False)
        assert _keyword_order(store, default, models) == ["body-hit", "title-hit"]  # tf 2 in the body beats 1
        boosted = default.with_overrides({"keyword.heading_weight": 3.0})
        report = ingest_documents(store, _docs(), boosted, models, progress=False)
        assert any("rebuilding every document" in note for note in report.notes)
        assert _keyword_order(store, boosted, models) == ["title-hit", "body-hit"]
        # back to the default: the store re-indexes and ranks as it did before
        ingest_documents(store, _docs(), default, models, progress=False)
        assert _keyword_order(store, default, models) == ["body-hit", "title-hit"]
