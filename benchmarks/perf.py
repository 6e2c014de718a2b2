"""``make bench``: per-stage latency at 1k / 10k / 100k chunks, validation, sweep and ingestion throughput.

What is measured (p50 / p95 after warm-up; every query runs once per pass, ``--passes`` passes):

- **Synthetic corpus** (:mod:`benchmarks.synthetic`) at each size, ingested through the real
  :func:`pipeline.ingestion.ingest.ingest_documents` (chunker, tokenizer, BM25 weights, batched writes, passage rows).
  The *dense index* holds deterministic random unit vectors (:class:`RandomEmbedder`, hash-seeded per
  text): embedding 100k chunks with MiniLM on a few CPU cores takes hours, and search cost does not depend
  on what the vectors mean. Queries *are* embedded by the real MiniLM, and the keyword leg is real BM25 over the
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

Writes ``benchmarks/results/perf.json`` (stores under ``bench-output/``); :func:`render` turns it into the
BENCHMARKS.md section (``make report``), including the goals table: each goal's target (``GOALS``) is copied
into the results file and compared with what was measured, at the size it was measured.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import shutil
import statistics
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np

from benchmarks.results_io import (
    ANSWER_CONFIG,
    ANSWER_PATH,
    ROOT,
    Depends,
    load_average,
    load_results,
    meta_line,
    run_meta,
    write_results,
)
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

DEPENDS = Depends(("benchmarks/perf.py", "benchmarks/synthetic.py", "pipeline/storage", *ANSWER_PATH,
                   "workbench/sweep.py"), ANSWER_CONFIG)
NAME = "perf"
MODEL = "sentence-transformers/all-MiniLM-L6-v2"
SECTION = "## Performance: per-stage latency"
# The performance goals (targets, not measurements); copied into the results file for the goals table.
GOALS = {"path_p95_ms": 250, "path_at_chunks": 100_000, "keyword_speedup": 20, "validation_ratio": 1.5,
         "validation_10_claim_p50_ms": 30, "sweep_ms": 1000, "ingest_share_of_raw": 0.70}


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
    load_start = load_average()
    docs, chunks = build_corpus(n_chunks)
    home = out / f"perf-{n_chunks}"
    if not reuse:
        shutil.rmtree(home, ignore_errors=True)
    with Store.open(home) as store:
        t0 = time.perf_counter()
        store_built = store.chunk_count() != len(chunks)
        if store_built:
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
        return {"chunks": store.chunk_count(), "documents": len(docs), "queries": len(queries), "passes": passes,
                "mean_chunk_words": round(statistics.fmean(len(c.text.split()) for c in chunks), 1),
                "ingest_random_vectors_s": round(ingest_s, 1) if store_built else None,
                "stages_ms": {k: stats(v) for k, v in rows.items()}, "keyword_vs_rank_bm25": bm25,
                "load_average_start": load_start, "load_average_end": load_average()}


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
            "ratio_p50": percentile(theirs, 0.5) / percentile(ours, 0.5), "top10_identical": same,
            "queries": len(queries)}


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
        out[mode]["ratio_p50"] = percentile(times["10-claim"], 0.5) / percentile(times["1-claim"], 0.5)
        out[mode]["supported"] = {k: citations.run(gens[k], cands, cfg.validate, ctx).supported for k in cases}
        out[mode]["runs"] = runs
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
    return {"vectorised_ms": stats(times), "extract_ms": round(extract_ms, 2),
            "gate_decide_loop_ms": round(decide_ms, 1), "decide_calls": len(inputs) * 400, "pairs": 400,
            "traces": len(inputs)}


RAW_BATCH_SIZES = (16, 32, 64, 128)


def bench_ingestion(real: Models, n_chunks: int, out: Path) -> dict:
    cfg = PipelineConfig()
    docs, chunks = build_corpus(n_chunks, seed=3)
    embedder = real.embedder(cfg.embedding)
    texts = [c.indexed_text for c in chunks]
    embedder.encode(texts[:32])
    result = {"chunks": len(chunks), "threads": _threads(), "batch_size": cfg.embedding.batch_size,
              "mean_chunk_words": round(statistics.fmean(len(c.text.split()) for c in chunks), 1),
              "raw_batch_sizes": list(RAW_BATCH_SIZES)}
    for bs in RAW_BATCH_SIZES:
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


# -- report (pure: everything from the results file) -------------------------------------------------------

STAGES = ("embed_query", "dense", "keyword", "fusion", "gate", "validate")


def _pair(st: dict, digits: int = 1) -> str:
    return f"{st['p50']:.{digits}f} / {st['p95']:.{digits}f}"


def _ratio(x: float) -> str:
    return f"{x:.1f}×" if x >= 0.95 else f"{x:.2f}×"


def goals(r: dict) -> list[tuple[str, str, str]]:
    """(goal, what was measured, verdict) per goal, from the results file alone."""
    g, out = r["goals"], []
    sizes = sorted(r.get("sizes", {}).values(), key=lambda s: s["chunks"])
    if sizes:
        top = sizes[-1]
        path = top["stages_ms"]["path"]
        at = f"at {top['chunks']:,} chunks"
        reached = top["chunks"] >= g["path_at_chunks"] * 0.99
        ok = path["p95"] <= g["path_p95_ms"]
        out.append((f"retrieve + gate + validate p95 ≤ {g['path_p95_ms']} ms at {g['path_at_chunks']:,} chunks",
                    f"**{path['p95']:.1f} ms** p95 ({path['p50']:.1f} ms p50) {at}",
                    ("met" if ok else "**not met**") if reached else
                    f"not measured at {g['path_at_chunks']:,} ({'within' if ok else 'over'} the budget {at})"))
        kw = top["keyword_vs_rank_bm25"]
        ok = kw["ratio_p50"] >= g["keyword_speedup"] and kw["top10_identical"] == kw["queries"]
        out.append((f"keyword leg ≥ {g['keyword_speedup']}× rank-bm25 at {g['path_at_chunks']:,} chunks, "
                    "top-10 identical", f"**{_ratio(kw['ratio_p50'])}** (p50) {at}, top-10 identical "
                    f"{kw['top10_identical']}/{kw['queries']}",
                    ("met" if ok else "**not met**") if reached else
                    f"not measured at {g['path_at_chunks']:,} (the ratio grows with the corpus)"))
    if "validation" in r:
        v = r["validation"]["stored passages"]
        out.append((f"10-claim validation ≤ {g['validation_ratio']:g}× a 1-claim one (passages stored)",
                    f"**{v['ratio_p50']:.2f}×** ({v['1-claim']['p50']:.1f} → {v['10-claim']['p50']:.1f} ms p50)",
                    "met" if v["ratio_p50"] <= g["validation_ratio"] else "**not met**"))
        out.append((f"10-claim validation p50 ≤ {g['validation_10_claim_p50_ms']} ms (passages stored)",
                    f"{v['10-claim']['p50']:.1f} ms",
                    "met" if v["10-claim"]["p50"] <= g["validation_10_claim_p50_ms"] else "**not met**"))
    if "sweep" in r:
        sw = r["sweep"]
        out.append((f"sweep {sw['traces']} traces × {sw['pairs']} threshold pairs ≤ {g['sweep_ms']:,} ms",
                    f"**{sw['vectorised_ms']['p50']:.2f} ms** p50 (vectorised)",
                    "met" if sw["vectorised_ms"]["p95"] <= g["sweep_ms"] else "**not met**"))
    if "ingestion" in r:
        ing = r["ingestion"]
        raw = ing[f"raw_chunks_per_s_batch{ing['batch_size']}"]
        shares = {k: ing[f"ingest_chunks_per_s_passages_{k}"] / raw for k in ("off", "on")}
        verdicts = [f"passage vectors {k}: {'met' if v >= g['ingest_share_of_raw'] else '**not met**'}"
                    for k, v in shares.items()]
        out.append((f"ingestion ≥ {g['ingest_share_of_raw']:.0%} of the raw embedder's throughput",
                    f"{shares['off']:.0%} with passage vectors off, {shares['on']:.0%} on (raw at batch "
                    f"{ing['batch_size']})", "; ".join(verdicts)))
    return out


def render(results: dict) -> str:
    r, a = results, results["args"]
    lines = [SECTION, "",
             meta_line(r["meta"]) + f" CPU only, {r['threads']} torch threads. Reproduce: `make bench` (= "
             f"`.venv/bin/python -m benchmarks.perf {a}`), then `make report`. The cores are shared with other "
             "work, so compare the ratios measured within this run rather than the milliseconds.", ""]
    sizes = sorted(r.get("sizes", {}).values(), key=lambda s: s["chunks"])
    if sizes:
        s0 = sizes[0]
        lines += ["Corpus: the deterministic synthetic support-docs corpus of `benchmarks/synthetic.py` (Zipf "
                  "vocabulary with a long tail, error codes, config keys, versions; chunks from the real chunker), "
                  "ingested through `ingest_documents`. **The dense index holds random unit vectors** (hash-seeded "
                  "per text: search cost does not depend on what vectors mean); queries are embedded by the real "
                  "all-MiniLM-L6-v2 and the keyword leg is real BM25 over the synthetic text. Validation encodes "
                  "the extractive answer's claims with the real MiniLM against the stored passage rows. "
                  f"{s0['queries']} queries × {s0['passes']} passes per size after warm-up; reranking disabled (the "
                  "path without the cross-encoder). Sizes measured: "
                  + ", ".join(f"{s['chunks']:,} chunks (mean {s['mean_chunk_words']:.0f} words, 1-min load "
                              f"{s['load_average_start'][0]:.1f} → {s['load_average_end'][0]:.1f})" for s in sizes)
                  + ".", "",
                  "| chunks | query embed | dense leg | keyword leg | fusion | gate | validate | "
                  "**retrieve + gate + validate** |", "|---:|---:|---:|---:|---:|---:|---:|---:|"]
        for s in sizes:
            st = s["stages_ms"]
            cells = [_pair(st[k], 2 if k == "gate" else 1) for k in STAGES]
            lines.append(f"| {s['chunks']:,} | " + " | ".join(cells) + f" | {_pair(st['path'])} |")
        lines += ["", "(ms, p50 / p95.)", "",
                  "**Keyword leg vs rank-bm25** (same chunks' stored tokens, same query tokens, `BM25Okapi` with the "
                  "engine's IDF as in `tests/pipeline/test_keyword_parity.py`; ours = `Store.keyword_search` top-100 "
                  "with payloads and sparse vectors; rank-bm25 = `get_scores` + top-100 sort):", "",
                  "| chunks | keyword leg p50 / p95 ms | rank-bm25 p50 / p95 ms | rank-bm25 / ours (p50) | "
                  "top-10 identical |", "|---:|---:|---:|---:|---:|"]
        for s in sizes:
            kw = s["keyword_vs_rank_bm25"]
            lines.append(f"| {s['chunks']:,} | {_pair(kw['leg_ms'])} | {_pair(kw['rank_bm25_ms'])} | "
                         f"{_ratio(kw['ratio_p50'])} | {kw['top10_identical']}/{kw['queries']} |")
        lines += ["", "rank-bm25 scans every document per query term (linear in the corpus); the inverted index "
                  "touches only the postings of the query's terms, so the ratio grows with the corpus."]
    if "validation" in r:
        v = r["validation"]
        lines += ["", f"**Validation** (`citations.run`, real MiniLM, six real demo chunks as sources, warm-up + "
                  f"{v['stored passages']['runs']} timed runs each):", "",
                  "| passages of the cited chunks | 1-claim p50 / p95 ms | 10-claim p50 / p95 ms | 10 / 1 (p50) |",
                  "|---|---:|---:|---:|"]
        for mode, label in (("stored passages", "stored at ingestion (`ingest.passage_vectors`, default)"),
                            ("passages encoded per answer", "encoded per answer (store without rows)")):
            m = v[mode]
            lines.append(f"| {label} | {_pair(m['1-claim'])} | {_pair(m['10-claim'])} | {m['ratio_p50']:.2f}× |")
        per, stored = v["passages encoded per answer"]["10-claim"]["p50"], v["stored passages"]["10-claim"]["p50"]
        lines += ["", f"Stored passages make the 10-claim answer {per / stored:.1f}× faster (p50, same run): the one "
                  "encoder call holds only the claims. What is left grows with the claims' own text, so a 10-claim "
                  "answer still costs more than a 1-claim one."]
    if "sweep" in r:
        sw = r["sweep"]
        lines += ["", f"**Threshold sweep**, {sw['traces']} stored traces × {sw['pairs']} (rerank, fused) threshold "
                  f"pairs: `workbench.sweep.evaluate_grid` (vectorised replay) {_pair(sw['vectorised_ms'], 2)} ms "
                  f"p50 / p95 (+ {sw['extract_ms']:.1f} ms to extract the gate inputs once); "
                  f"`pipeline.gate.stage.decide` called {sw['decide_calls']:,} times for reference: "
                  f"{sw['gate_decide_loop_ms']:.0f} ms ({sw['gate_decide_loop_ms'] / sw['vectorised_ms']['p50']:,.0f}× "
                  "the vectorised p50)."]
    lines += ["", "### Goals", "", "| goal | measured | |", "|---|---|---|"]
    lines += [f"| {goal} | {measured} | {verdict} |" for goal, measured, verdict in goals(r)]
    lines.append("")
    lines.append("The rerank latency goal is in *Rerank trade-off* below.")
    if "ingestion" in r:
        ing = r["ingestion"]
        raws = [(bs, ing[f"raw_chunks_per_s_batch{bs}"]) for bs in ing["raw_batch_sizes"]]
        on, off = ing["ingest_chunks_per_s_passages_on"], ing["ingest_chunks_per_s_passages_off"]
        fastest = max(raws, key=lambda x: x[1])
        lines += ["", f"**Ingestion throughput** ({ing['chunks']} synthetic chunks, mean {ing['mean_chunk_words']:.0f} "
                  f"words, real MiniLM, {ing['threads']} torch threads):", "", "| what | chunks/s |", "|---|---:|",
                  "| raw `embedder.encode`, batch " + " / ".join(str(bs) for bs, _ in raws) + " | "
                  + " / ".join(f"{x:.1f}" for _, x in raws) + " |",
                  f"| `ingest_documents`, `ingest.passage_vectors=false`, embedding batch {ing['batch_size']} (the "
                  f"default) | {off:.1f} |",
                  f"| `ingest_documents`, `ingest.passage_vectors=true` (the default) | {on:.1f} |", "",
                  f"The fastest raw batch size here is {fastest[0]}. Storing the validator's passage vectors (each "
                  f"chunk's sentence windows) makes ingestion {off / on:.1f}× slower on these chunks and saves every "
                  "answer the per-answer passage encoding (validation table above)."]
    lines += ["", "### Embedded (Qdrant Edge) vs client (qdrant-client local mode)", "",
              "`tests/pipeline/test_backends_agree.py` ingests the demo corpus into both backends and asserts, per "
              "query, the same top-10 of each leg (BM25 scores equal within float tolerance) and after fusion."]
    return "\n".join(lines) + "\n"


def _threads() -> int:
    import torch

    return int(torch.get_num_threads())


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="per-stage latency benchmarks (see the module docstring)")
    parser.add_argument("--sizes", type=int, nargs="*", default=[1_000, 10_000, 100_000])
    parser.add_argument("--queries", type=int, default=40)
    parser.add_argument("--passes", type=int, default=2)
    parser.add_argument("--validation-runs", type=int, default=30)
    parser.add_argument("--ingest-chunks", type=int, default=256)
    parser.add_argument("--skip", nargs="*", default=[], help="any of: sizes validation sweep ingestion")
    parser.add_argument("--out", type=Path, default=ROOT / "bench-output", help="where the stores go")
    parser.add_argument("--reuse", action="store_true", help="keep a store already built for a size")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    real = Models()
    flags = [f"--sizes {' '.join(map(str, args.sizes))}", f"--queries {args.queries}", f"--passes {args.passes}",
             f"--validation-runs {args.validation_runs}", f"--ingest-chunks {args.ingest_chunks}"]
    if args.skip:
        flags.append(f"--skip {' '.join(args.skip)}")
    report = {"meta": run_meta(depends=DEPENDS, model=f"{MODEL} (packaged, offline) for queries, claims and ingestion "
                                                      "throughput; random unit vectors in the dense index; no rerank"),
              "threads": _threads(), "args": " ".join(flags), "goals": GOALS}

    def save():
        report["meta"]["load_average_end"] = load_average()
        write_results(NAME, report)

    if "validation" not in args.skip:
        report["validation"] = bench_validation(real, args.validation_runs)
        save()
    if "sweep" not in args.skip:
        report["sweep"] = bench_sweep()
        save()
    if "sizes" not in args.skip:
        report["sizes"] = {}
        for n in args.sizes:
            report["sizes"][str(n)] = bench_size(n, args.out, args.queries, args.passes, real, args.reuse)
            save()
            print(f"size {n}: done", file=sys.stderr, flush=True)
    if "ingestion" not in args.skip:
        report["ingestion"] = bench_ingestion(real, args.ingest_chunks, args.out)
        save()
    print(render(load_results(NAME)))


if __name__ == "__main__":
    main()
