"""embedding.precision=int8: the packaged all-MiniLM-L6-v2 run by ONNX Runtime with int8 weights keeps fp32's
neighbours, returns unit vectors, is never mixed with fp32 vectors in one store, pools late-chunking windows from
its own pass, and fails in one line that names the fp32 fallback.

Floors, measured on the demo corpus (see ``benchmarks/results/embed_onnx.json`` for the full numbers): a chunk's
int8 vector has cosine >= 0.97 with its fp32 vector (per-channel weight scales); over the golden questions the
int8 dense top-10 shares on average at least :data:`MIN_MEAN_OVERLAP` of fp32's 10 chunks, and at least
:data:`MIN_SHARE_OVERLAP_8` of the questions keep 8 or more of them.
"""

import json
import os
import sys

import numpy as np
import pytest

from pipeline.config import PipelineConfig
from pipeline.ingestion.chunking import chunk_document
from pipeline.ingestion.documents import load_paths
from pipeline.ingestion.ingest import build_signature, ingest_paths
from pipeline.models import embed_onnx
from pipeline.models.registry import Models
from pipeline.models.resolve import ModelUnavailable, resolve_model
from pipeline.storage.store import Store
from pipeline.testing import FakeEmbedder
from tests.conftest import DEMO_CORPUS, ROOT

MODEL = "sentence-transformers/all-MiniLM-L6-v2"
INT8 = {"embedding.precision": "int8"}
MIN_COSINE = 0.97
MIN_MEAN_OVERLAP = 8.0
MIN_SHARE_OVERLAP_8 = 0.75


@pytest.fixture(scope="module")
def onnx_cache(tmp_path_factory):
    before = os.environ.get("WORKBENCH_ONNX_CACHE")
    os.environ["WORKBENCH_ONNX_CACHE"] = str(tmp_path_factory.mktemp("onnx-cache"))
    yield os.environ["WORKBENCH_ONNX_CACHE"]
    if before is None:
        os.environ.pop("WORKBENCH_ONNX_CACHE", None)
    else:
        os.environ["WORKBENCH_ONNX_CACHE"] = before


@pytest.fixture(scope="module")
def int8(onnx_cache):
    return Models().embedder(PipelineConfig().with_overrides(INT8).embedding)


@pytest.fixture(scope="module")
def demo_texts():
    documents, _ = load_paths([DEMO_CORPUS])
    return [c.indexed_text for d in documents if not d.retracted for c in chunk_document(d, PipelineConfig().chunking)]


@pytest.mark.slow  # exports and quantises the model once per module (10-40 s on 2 shared cores)
def test_int8_vectors_are_unit_length_and_close_to_fp32(int8, real_models, demo_texts):
    texts = demo_texts[::25] + ["how do I rotate the webhook signing secret", "ERR_TIMEOUT_502", ""]
    q8 = int8.encode(texts)
    fp32 = real_models.embedder(PipelineConfig().embedding).encode(texts)
    assert q8.shape == fp32.shape == (len(texts), 384) and q8.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(q8, axis=1), 1.0, atol=1e-5)
    cosines = np.sum(q8 * fp32, axis=1)
    assert cosines.min() >= MIN_COSINE, cosines.min()
    assert int8.encode([]).shape == (0, 384)


@pytest.mark.slow  # exports and quantises the model once per module (10-40 s on 2 shared cores)
def test_precision_int8_routes_through_onnx_and_names_itself_apart(int8, real_models):
    fp32 = real_models.embedder(PipelineConfig().embedding)
    assert int8.source.startswith("onnx-int8:") and int8.dim == fp32.dim
    # the validator only reuses stored window vectors made by an embedder of the same name
    assert int8.name == f"{MODEL}@int8" != fp32.name
    assert int8.encode(["retries"]).tolist() == int8.encode(["retries"]).tolist()


@pytest.mark.slow  # exports and quantises the model once per module (10-40 s on 2 shared cores)
def test_the_int8_graph_is_exported_once_and_cached_outside_the_repository(int8, onnx_cache):
    model_dir, path = embed_onnx.int8_embedder_path(MODEL)
    stamp = path.stat().st_mtime_ns
    _, again = embed_onnx.int8_embedder_path(MODEL)
    assert again == path and again.stat().st_mtime_ns == stamp
    assert str(path).startswith(onnx_cache) and ROOT not in path.parents
    # int8 MatMul weights; the word-embedding table (a lookup, not a product) stays fp32
    assert path.stat().st_size < 0.7 * (model_dir / "model.safetensors").stat().st_size
    assert [p.name for p in path.parent.iterdir() if "fp32" in p.name] == []   # the fp32 export is not left behind


@pytest.mark.slow  # exports and quantises the model once per module (10-40 s on 2 shared cores)
def test_late_chunking_pools_windows_from_the_int8_pass(int8):
    text = ("Relay retries a failed delivery five times. The backoff doubles after each attempt. "
            "After the last attempt the event goes to the dead-letter queue.")
    spans = [(0, 43), (44, 83), (84, len(text))]
    pooled, windows = int8.encode_late([text], [spans])
    np.testing.assert_array_equal(pooled, int8.encode([text]))   # the text's vector is the same pass's
    vectors = np.vstack(windows[0])
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    separate = int8.encode([text[s:e] for s, e in spans])
    cosines = np.sum(vectors * separate, axis=1)
    assert (cosines > 0.3).all() and not np.allclose(cosines, 1.0)   # same meaning, contextual vectors
    _, past = int8.encode_late(["short text"], [[(500, 510)]])
    assert past == [[None]]                                         # past the text: the caller encodes it alone


def test_the_build_signature_keeps_fp32_stores_and_separates_int8():
    fp32 = json.loads(build_signature(PipelineConfig(), 384))
    assert "precision" not in fp32                      # stores built before the setting are not rebuilt
    assert json.loads(build_signature(PipelineConfig().with_overrides(INT8), 384))["precision"] == "int8"


def test_changing_precision_re_embeds_every_document_instead_of_mixing(tmp_path):
    models = Models(embedder=FakeEmbedder())
    with Store.open(tmp_path / "store") as store:
        first = ingest_paths(store, [DEMO_CORPUS], PipelineConfig(), models, progress=False)
        again = ingest_paths(store, [DEMO_CORPUS], PipelineConfig(), models, progress=False)
        switched = ingest_paths(store, [DEMO_CORPUS], PipelineConfig().with_overrides(INT8), models, progress=False)
    assert again.embedded == 0
    assert switched.embedded == first.embedded and any("rebuilding every document" in n for n in switched.notes)


def test_without_onnxruntime_the_error_is_one_line_naming_the_fallback(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "onnxruntime", None)
    with pytest.raises(ModelUnavailable) as err:
        embed_onnx.OnnxEmbedder(MODEL, resolve_model(MODEL).path, tmp_path / "model.onnx")
    message = str(err.value)
    assert "onnxruntime" in message and "embedding.precision=fp32" in message and "\n" not in message


def test_a_failed_export_is_one_cli_line_and_leaves_nothing_behind(tmp_path, monkeypatch, capsys):
    from workbench.cli import main

    def broken(model_dir, out):
        raise RuntimeError("exporter does not support this operator")

    monkeypatch.setenv("WORKBENCH_ONNX_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(embed_onnx, "export_token_embeddings", broken)
    code = main(["ingest", str(DEMO_CORPUS), "--store", str(tmp_path / "store"), "--set", "embedding.precision=int8",
                 "--set", "embedding.batch_size=7"])   # a batch size no other test loads, so nothing is cached
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and "Traceback" not in err
    assert "could not export" in err and "does not support this operator" in err and "precision=fp32" in err
    assert not any((tmp_path / "cache").rglob("*.onnx"))


@pytest.mark.long
@pytest.mark.slow
def test_int8_top10_agrees_with_fp32_on_the_demo_corpus(int8, real_models, demo_texts):
    from workbench.golden import load_golden

    questions = [c.question for c in load_golden(ROOT / "golden" / "golden.jsonl").cases][:150]
    fp32 = real_models.embedder(PipelineConfig().embedding)
    tops = {}
    for name, embedder in (("fp32", fp32), ("int8", int8)):
        chunks = embedder.encode(demo_texts)
        queries = np.vstack([embedder.encode([q]) for q in questions])   # one at a time, as the answerer does
        np.testing.assert_allclose(np.linalg.norm(chunks, axis=1), 1.0, atol=1e-5)
        tops[name] = np.argsort(-(queries @ chunks.T), axis=1, kind="stable")[:, :10]
    overlap = np.array([len(set(a) & set(b)) for a, b in zip(tops["fp32"], tops["int8"], strict=True)])
    assert overlap.mean() >= MIN_MEAN_OVERLAP and (overlap >= 8).mean() >= MIN_SHARE_OVERLAP_8, \
        (overlap.mean(), (overlap >= 8).mean())
