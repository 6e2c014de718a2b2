"""``make bench``: per-stage latency at 1k / 10k / 100k chunks, validation, sweep and ingestion throughput.

What is measured (p50 / p95 after warm-up; every query runs once per pass, ``--passes`` passes):

- **Synthetic corpus** (:mod:`benchmarks.synthetic`) at each size, ingested through the real
  :func:`pipeline.ingestion.ingest.ingest_documents` (chunker, tokenizer, BM25 weights, batched writes, passage rows).
  The *dense index* holds deterministic random unit vectors (:class:`RandomEmbedder`, hash-seeded per
  text): embedding 100k chunks with MiniLM on 2 cores takes ~3 h, and search cost does not depend on what
  the vectors mean. Queries *are* embedded by the real MiniLM, and the keyword leg is real BM25 over the
  synthetic text. Embedding throughput is measured separately, on a sample, with the real model.
- **Per query**: query embedding, dense leg, keyword leg, fusion (from the retrieval trace), gate, and
  validation of the extractive answer over the gate's sources (claims encoded by the real MiniLM; the
  cited chunks' passage vectors read from the store — random at these sizes, real in ``--validation``),
  and the whole non-LLM path without the cross-encoder (retrieve + gate + validate).
- **Keyword leg vs rank-bm25**: the same chunks' stored tokens into ``BM25Okapi`` with the engine's IDF
  (as tests/pipeline/test_keyword_parity.py does), same query tokens; time per query and top-10 identity.
- **Validation** of a 1-claim and a 10-claim answer over six real demo chunks with real passage vectors
  (what ingestion stores), against the same answers with the passages encoded per answer.
- **Sweep**: ``workbench.sweep.evaluate_grid`` (the tuner's vectorised gate replay) over 300 stored
  traces x 400 threshold pairs (20 x 20), and :func:`pipeline.gate.stage.decide` over the same for reference.
- **Ingestion**: chunks/s of ``ingest_documents`` with the real MiniLM (passage vectors on and off) against
  the raw embedder's chunks/s on the same chunk texts.

Writes ``bench-output/perf.json`` and prints Markdown tables for BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import os
import platform
import shutil
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np

from benchmarks.synthetic import build_corpus, make_queries
from benchmarks.validation import ONE_CLAIM, TEN_CLAIMS, percentile, sources_from_corpus
from pipeline.config import PipelineConfig
from pipeline.context import StageContext
from pipeline.engine import rerank_stop_at
from pipeline.gate import stage as gate
from pipeline.generation import generate
from pipeline.ingestion.ingest import ingest_documents
from pipeline.models.registry import Models
from pipeline.retrieval import rerank, retrieve
from pipeline.retrieval.bm25 import idf as engine_idf
from pipeline.storage.catalogue import StoredPassages
from pipeline.storage.store import Store
from pipeline.text.tokenize import tokenize
from pipeline.trace import GenerationTrace
from pipeline.validation import citations

ROOT = Path(__file__).resolve().parent.parent
MODEL = "sentence-transformers/all-MiniLM-L6-v2"


class RandomEmbedder:
    """Deterministic random unit vectors (seeded by the text's hash); claims the real model's name so the
    validator reads the stored passage rows exactly as it would in production."""

    def __init__(self, dim: int = 384, name: str = MODEL) -> None:
        self.dim, self.name, self.calls = dim, name, 0

    def encode(self, texts: list[str], batch_size: int | None = None) -> np.ndarray:
        self.calls += 1
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        for i, text in enumerate(texts):
            seed = int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "little")
            v = np.random.default_rng(seed).standard_normal(self.dim)
            out[i] = v / np.linalg.norm(v)
        return out


def stats(values: list[float]) -> dict:
    return {"p50": round(percentile(values, 0.5), 2), "p95": round(percentile(values, 0.95), 2), "n": len(values)}


def _extractive(query: str, ranked, cfg: PipelineConfig, models: Models) -> GenerationTrace:
    return generate.run(query, query, ranked, cfg.generate, models)


def bench_size(n_chunks: int, out: Path, n_queries: int, passes: int, real: Models, reuse: bool = False) -> dict:
    cfg = PipelineConfig()
    cfg = dataclasses.replace(cfg, rerank=dataclasses.replace(cfg.rerank, enabled=False))
    docs, chunks = build_corpus(n_chunks)
    home = out / f"perf-{n_chunks}"
    if not reuse:
        shutil.rmtree(home, ignore_errors=True)
    with Store.open(home) as store:
        t0 = time.perf_counter()
        if store.chunk_count() != len(chunks):
            ingest_documents(store, docs, cfg, Models(embedder=RandomEmbedder()), progress=False)
        ingest_s = time.perf_counter() - t0
        queries = make_queries(chunks, n_queries)
        embedder = real.embedder(cfg.embedding)
        models = Models(embedder=embedder)
        for q in queries[:5]:  # warm-up: model, page cache, allocator
            retrieve.run(q, cfg.retrieve, StageContext(models, store, cfg.embedding))
        rows: dict[str, list[float]] = {k: [] for k in ("embed_query", "dense", "keyword", "fusion", "retrieve",
                                                        "gate", "validate", "path")}
        for _ in range(passes):
            for q in queries:
                t0 = time.perf_counter()
                ret = retrieve.run(q, cfg.retrieve, StageContext(models, store, cfg.embedding))
                t1 = time.perf_counter()
                rr = rerank.run(q, ret, cfg.rerank, models, rerank_stop_at(cfg.gate))
                gate.run(ret, rr, cfg.gate)
                t2 = time.perf_counter()
                ranked = ret.candidates[:cfg.rerank.top_k]
                gen = _extractive(q, ranked, cfg, models)  # the generator is not part of the timed path
                t3 = time.perf_counter()
                citations.run(gen, ranked, cfg.validate, StageContext(Models(embedder=embedder), store))
                t4 = time.perf_counter()
                for k in ("embed_query", "dense", "keyword", "fusion"):
                    rows[k].append(ret.timings_ms[k])
                rows["retrieve"].append((t1 - t0) * 1000)
                rows["gate"].append((t2 - t1) * 1000)
                rows["validate"].append((t4 - t3) * 1000)
                rows["path"].append((t2 - t0 + t4 - t3) * 1000)
        bm25 = keyword_vs_rank_bm25(store, queries, cfg)
        return {"chunks": store.chunk_count(), "documents": len(docs), "ingest_random_vectors_s": round(ingest_s, 1),
                "stages_ms": {k: stats(v) for k, v in rows.items()}, "keyword_vs_rank_bm25": bm25}


def keyword_vs_rank_bm25(store: Store, queries: list[str], cfg: PipelineConfig) -> dict:
    from rank_bm25 import BM25Okapi

    class EngineIdfBM25(BM25Okapi):
        def _calc_idf(self, nd):
            for word, freq in nd.items():
                self.idf[word] = engine_idf(self.corpus_size, freq)

    terms = store.chunk_terms()
    chunk_of = {c.point_id: c.chunk_id for c in store.chunks()}
    point_ids = sorted(terms)
    ref = EngineIdfBM25([terms[p] for p in point_ids], k1=cfg.keyword.k1, b=cfg.keyword.b)
    ours, theirs, same = [], [], 0
    from pipeline.retrieval.bm25 import query_weights, to_sparse
    for q in queries:
        tokens = tokenize(q)
        indices, values = to_sparse(query_weights(tokens))
        t0 = time.perf_counter()
        hits = store.keyword_search(indices, values, cfg.retrieve.keyword_top_k)
        ours.append((time.perf_counter() - t0) * 1000)
        t0 = time.perf_counter()
        scores = ref.get_scores(tokens)
        top = np.argpartition(-scores, 100)[:100] if len(scores) > 100 else np.arange(len(scores))
        order = sorted(top, key=lambda i: (-scores[i], point_ids[i]))
        theirs.append((time.perf_counter() - t0) * 1000)
        ref_top = [chunk_of[point_ids[i]] for i in order[:10] if scores[i] > 0]
        same += [h.chunk_id for h in hits[:10]] == ref_top
    return {"leg_ms": stats(ours), "rank_bm25_ms": stats(theirs),
            "ratio_p50": round(percentile(theirs, 0.5) / percentile(ours, 0.5), 1),
            "top10_identical": f"{same}/{len(queries)}"}


def bench_validation(real: Models, runs: int) -> dict:
    cfg = PipelineConfig()
    embedder = real.embedder(cfg.embedding)
    cands, sources = sources_from_corpus(cfg)
    stored = {}
    for c in cands:  # what ingestion stores: the dense vector of the indexed text, then the windows
        windows = citations.chunk_passages(c.text)[1:]
        vecs = embedder.encode([" > ".join(c.heading_path) + "\n" + c.text] + windows)
        stored[c.chunk_id] = StoredPassages(c.chunk_id, embedder.name, citations.passage_key(c.heading_path, c.text),
                                            tuple(windows), vecs)
    lookup = lambda ids: {i: stored[i] for i in ids if i in stored}
    cases = {"1-claim": ONE_CLAIM, "10-claim": TEN_CLAIMS}
    out = {}
    for mode, passages in (("stored passages", lookup), ("passages encoded per answer", None)):
        times = {k: [] for k in cases}
        gens = {k: GenerationTrace(status="answered", sources=sources, answer=a) for k, a in cases.items()}
        ctx = StageContext(Models(embedder=embedder), SimpleNamespace(passage_vectors=passages))
        for _ in range(5):
            for k in cases:
                citations.run(gens[k], cands, cfg.validate, ctx)
        for _ in range(runs):
            for k in cases:
                t0 = time.perf_counter()
                val = citations.run(gens[k], cands, cfg.validate, ctx)
                times[k].append((time.perf_counter() - t0) * 1000)
                assert val.encoder_calls == 1
        out[mode] = {k: stats(v) for k, v in times.items()}
        out[mode]["ratio_p50"] = round(out[mode]["10-claim"]["p50"] / out[mode]["1-claim"]["p50"], 2)
        out[mode]["verdicts"] = {k: citations.run(gens[k], cands, cfg.validate, ctx).supported
                                 for k in cases}
    return out


def bench_sweep() -> dict:
    from tests.support.traces import answered_trace
    from workbench import sweep

    traces = [answered_trace() for _ in range(300)]
    rng = np.random.default_rng(0)
    t0 = time.perf_counter()
    scores = sweep.extract([str(i) for i in range(300)], rng.random(300) < 0.66, traces)
    extract_ms = (time.perf_counter() - t0) * 1000
    scores = dataclasses.replace(scores, rerank=rng.random(300), fused=rng.random(300) * 0.033)
    axes = {"t_rerank": np.linspace(0, 1, 20), "t_fused": np.linspace(0, 0.033, 20)}
    cfg = PipelineConfig().gate
    times = []
    for _ in range(20):
        t0 = time.perf_counter()
        sweep.evaluate_grid(scores, "auto", axes, cfg)
        times.append((time.perf_counter() - t0) * 1000)
    inputs = scores.inputs
    t0 = time.perf_counter()
    for tr in axes["t_rerank"]:
        for tf in axes["t_fused"]:
            g = dataclasses.replace(cfg, confidence_threshold_rerank=float(tr), confidence_threshold_fused=float(tf))
            for i in inputs:
                gate.decide(i, g)
    decide_ms = (time.perf_counter() - t0) * 1000
    return {"vectorised_ms": stats(times), "extract_ms": round(extract_ms, 1),
            "gate_decide_loop_ms": round(decide_ms, 1), "pairs": 400, "traces": 300}


def bench_ingestion(real: Models, n_chunks: int, out: Path) -> dict:
    cfg = PipelineConfig()
    docs, chunks = build_corpus(n_chunks, seed=3)
    embedder = real.embedder(cfg.embedding)
    texts = [c.indexed_text for c in chunks]
    embedder.encode(texts[:32])
    result = {"chunks": len(chunks), "threads": _threads()}
    for bs in (16, 32, 64, 128):
        t0 = time.perf_counter()
        embedder.encode(texts, batch_size=bs)
        result[f"raw_chunks_per_s_batch{bs}"] = round(len(texts) / (time.perf_counter() - t0), 2)
    for on in (False, True):
        c = dataclasses.replace(cfg, ingest=dataclasses.replace(cfg.ingest, passage_vectors=on))
        home = out / f"ingest-{on}"
        shutil.rmtree(home, ignore_errors=True)
        with Store.open(home) as store:
            t0 = time.perf_counter()
            ingest_documents(store, docs, c, real, progress=False)
            result[f"ingest_chunks_per_s_passages_{'on' if on else 'off'}"] = round(
                len(chunks) / (time.perf_counter() - t0), 2)
    return result


def _threads() -> int:
    import torch

    return int(torch.get_num_threads())


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="per-stage latency benchmarks (see the module docstring)")
    parser.add_argument("--sizes", type=int, nargs="*", default=[1_000, 10_000, 100_000])
    parser.add_argument("--queries", type=int, default=40)
    parser.add_argument("--passes", type=int, default=2)
    parser.add_argument("--ingest-chunks", type=int, default=256)
    parser.add_argument("--skip", nargs="*", default=[], help="any of: sizes validation sweep ingestion")
    parser.add_argument("--out", type=Path, default=ROOT / "bench-output")
    parser.add_argument("--reuse", action="store_true", help="keep a store already built for a size")
    args = parser.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    args.out.mkdir(parents=True, exist_ok=True)
    real = Models()
    report = {"date": time.strftime("%Y-%m-%d"), "machine": f"{platform.machine()}, {os.cpu_count()} logical CPUs, "
              f"{_threads()} torch threads", "load_start": os.getloadavg()[0]}
    path = args.out / ("perf.json" if not args.skip else f"perf-{'-'.join(sorted(args.skip))}.json")

    def save():
        report["load_now"] = os.getloadavg()[0]
        path.write_text(json.dumps(report, indent=2))

    if "validation" not in args.skip:
        report["validation"] = bench_validation(real, 30)
        save()
    if "sweep" not in args.skip:
        report["sweep"] = bench_sweep()
        save()
    if "sizes" not in args.skip:
        report["sizes"] = {}
        for n in args.sizes:
            report["sizes"][str(n)] = bench_size(n, args.out, args.queries, args.passes, real, args.reuse)
            save()
    if "ingestion" not in args.skip:
        report["ingestion"] = bench_ingestion(real, args.ingest_chunks, args.out)
        save()
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
