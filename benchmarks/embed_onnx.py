"""The bi-encoder in int8 (ONNX Runtime, :mod:`pipeline.models.embed_onnx`) against fp32 (PyTorch): speed and quality.

``python -m benchmarks.embed_onnx`` (``make bench-embed``) measures, with fp32 and int8 interleaved in the same run
so the ratios are comparable on shared cores (A, B, B, A order; the same torch/ONNX Runtime thread count):

1. **Raw encoding**: chunks/s for every demo-corpus chunk (``golden/corpus``, indexed text) at the configured
   ``embedding.batch_size``, encoded in two halves per precision.
2. **Ingestion with passage vectors** (the shipped ``ingest.passage_vectors=true``, separate windows): chunks/s of
   a whole ``ingest_documents`` of the first ``--documents`` demo documents into a fresh store, twice per precision.
   The issue's target is int8 ingestion at >= 1.5x today's fp32 ingestion.
3. **Query latency**: every golden question encoded alone (as the answerer does), p50 and p95 per precision.
4. **Agreement on the demo corpus**: per golden question, the dense top-10 chunks under int8 against fp32 (overlap,
   same top-1), the dense leg's document hit@10 on the answerable questions, and the cosine between the two
   precisions' vectors of the same chunk.
5. **SciFact** (BEIR, test claims; :mod:`benchmarks.scifact`): nDCG@10 and recall@100 of the dense leg and of the
   shipped fusion (BM25 + dense, RRF) per precision, in NumPy over cached vectors (:mod:`benchmarks.scifact_tune`):
   the 5,183 abstracts are encoded once per precision (fp32 shares ``build/scifact-vectors.npz`` with
   ``benchmarks.scifact``; int8 goes to ``build/scifact-vectors-int8.npz``, with the seconds it took beside it);
   claims are encoded one at a time. The issue makes int8 the default only if nDCG@10 drops by < 0.5 point.

The int8 graph is exported into a fresh ``--onnx-cache`` folder so the one-off export and quantisation time is
measured too. Writes ``benchmarks/results/embed_onnx.json``; :func:`render` is its BENCHMARKS.md section.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from benchmarks.results_io import ROOT, Depends, load_results, meta_line, run_meta, write_results
from pipeline.config import PipelineConfig
from pipeline.ingestion.chunking import chunk_document
from pipeline.ingestion.documents import load_paths
from pipeline.ingestion.ingest import ingest_documents
from pipeline.models.encoders import set_torch_threads
from pipeline.models.registry import Models
from pipeline.storage.store import Store

DEPENDS = Depends(("benchmarks/embed_onnx.py", "pipeline/models", "pipeline/ingestion", "golden/corpus",
                   "golden/golden.jsonl"), ("embedding", "chunking", "ingest"))
NAME = "embed_onnx"
SECTION = "## Embedder precision: int8 ONNX vs fp32"
MODEL = "sentence-transformers/all-MiniLM-L6-v2"
PRECISIONS = ("fp32", "int8")
INGEST_TARGET = 1.5          # int8 ingestion (passage vectors on) over fp32's, from the issue
DEFAULT_IF_DROP_BELOW = 0.5  # nDCG@10 points on SciFact test, from the issue
INT8_CACHE = ROOT / "build" / "scifact-vectors-int8.npz"


def configs(batch_size: int | None = None) -> dict[str, PipelineConfig]:
    base = PipelineConfig()
    extra = {"embedding.batch_size": batch_size} if batch_size else {}
    return {p: base.with_overrides({**extra, "embedding.precision": p}) for p in PRECISIONS}


def _abba(fn, order=PRECISIONS):
    """Run ``fn(precision, rep)`` as A, B, B, A and return {precision: [result, result]}."""
    a, b = order
    out: dict[str, list] = {a: [], b: []}
    for rep, precision in enumerate((a, b, b, a)):
        out[precision].append(fn(precision, rep))
    return out


# -- 1. raw encoding ------------------------------------------------------------------------------------------

def demo_chunks() -> tuple[list, list[str]]:
    documents, _ = load_paths([ROOT / "golden" / "corpus"])
    chunks = [c for d in documents if not d.retracted for c in chunk_document(d, PipelineConfig().chunking)]
    return chunks, [c.indexed_text for c in chunks]


def raw_encoding(embedders: dict, texts: list[str]) -> tuple[dict, dict[str, np.ndarray]]:
    halves = [texts[:len(texts) // 2], texts[len(texts) // 2:]]
    vectors: dict[str, list] = {p: [None, None] for p in PRECISIONS}

    def run(precision: str, rep: int) -> float:
        half = 0 if rep < 2 else 1   # A, B, B, A: each precision encodes the first half, then the second
        t0 = time.perf_counter()
        vectors[precision][half] = embedders[precision].encode(halves[half])
        return time.perf_counter() - t0

    seconds = _abba(run)
    out = {p: {"chunks": len(texts), "seconds": round(sum(seconds[p]), 2),
               "chunks_per_s": round(len(texts) / sum(seconds[p]), 2)} for p in PRECISIONS}
    return out, {p: np.vstack(vectors[p]) for p in PRECISIONS}


# -- 2. ingestion with passage vectors -------------------------------------------------------------------------

def ingestion(models: Models, cfgs: dict, documents, home: Path) -> dict:
    def run(precision: str, rep: int) -> dict:
        store_home = home / f"{precision}-{rep}"
        shutil.rmtree(store_home, ignore_errors=True)
        with Store.open(store_home) as store:
            t0 = time.perf_counter()
            report = ingest_documents(store, documents, cfgs[precision], models, progress=False)
            seconds = time.perf_counter() - t0
        shutil.rmtree(store_home, ignore_errors=True)
        return {"chunks": report.chunks, "seconds": seconds}

    runs = _abba(run)
    out = {}
    for p in PRECISIONS:
        chunks, seconds = runs[p][0]["chunks"], sum(r["seconds"] for r in runs[p])
        out[p] = {"chunks": chunks, "runs": len(runs[p]), "seconds": round(seconds, 2),
                  "chunks_per_s": round(chunks * len(runs[p]) / seconds, 2)}
    return out


# -- 3. query latency ------------------------------------------------------------------------------------------

def query_latency(embedders: dict, questions: list[str]) -> tuple[dict, dict[str, np.ndarray]]:
    times: dict[str, list[float]] = {p: [] for p in PRECISIONS}
    vectors: dict[str, list] = {p: [] for p in PRECISIONS}
    for i, q in enumerate(questions):
        for p in (PRECISIONS if i % 2 == 0 else PRECISIONS[::-1]):
            t0 = time.perf_counter()
            vectors[p].append(embedders[p].encode([q])[0])
            times[p].append((time.perf_counter() - t0) * 1000)
    out = {p: {"queries": len(questions), "p50_ms": round(statistics.median(t), 2),
               "p95_ms": round(float(np.percentile(t, 95)), 2), "mean_ms": round(statistics.fmean(t), 2)}
           for p, t in times.items()}
    return out, {p: np.vstack(v) for p, v in vectors.items()}


# -- 4. agreement on the demo corpus ---------------------------------------------------------------------------

def agreement(chunks, chunk_vectors: dict, query_vectors: dict, cases) -> dict:
    tops = {p: np.argsort(-(query_vectors[p] @ chunk_vectors[p].T), axis=1, kind="stable")[:, :10]
            for p in PRECISIONS}
    overlap = [len(set(a) & set(b)) for a, b in zip(tops["fp32"], tops["int8"], strict=True)]
    same_top1 = [int(a[0] == b[0]) for a, b in zip(tops["fp32"], tops["int8"], strict=True)]
    cos = np.sum(chunk_vectors["fp32"] * chunk_vectors["int8"], axis=1)
    hit = {}
    answerable = [i for i, c in enumerate(cases) if c["answerable"] and c["expected_doc_ids"]]
    for p in PRECISIONS:
        hits = [bool({chunks[j].doc_id for j in tops[p][i]} & set(cases[i]["expected_doc_ids"])) for i in answerable]
        hit[p] = round(sum(hits) / len(hits), 4)
    norms = np.linalg.norm(chunk_vectors["int8"], axis=1)
    return {"queries": len(overlap), "mean_overlap_at_10": round(statistics.fmean(overlap), 3),
            "share_overlap_at_least_8": round(sum(o >= 8 for o in overlap) / len(overlap), 4),
            "share_same_top1": round(sum(same_top1) / len(same_top1), 4), "answerable": len(answerable),
            "doc_hit_at_10": hit, "chunk_cosine_mean": round(float(cos.mean()), 4),
            "chunk_cosine_min": round(float(cos.min()), 4),
            "int8_norm_max_error": round(float(np.abs(norms - 1).max()), 7)}


# -- 5. SciFact ------------------------------------------------------------------------------------------------

def scifact(embedders: dict, batch_size: int) -> dict:
    from benchmarks import scifact as sf
    from benchmarks import scifact_tune as tune

    data = sf.locate_data()
    corpus, queries, qrels = sf.load_corpus(data), sf.load_queries(data), sf.load_qrels(data, "test")
    cfg = sf.bench_config()
    test_ids = sorted(qrels, key=int)
    out: dict = {"documents": len(corpus), "test_queries": len(test_ids)}
    rc, kw = cfg.retrieve, cfg.keyword
    fusion = {"method": "rrf", "k": rc.rrf_k, "weights": (rc.dense_weight, rc.keyword_weight)}
    keyword_legs = None
    for p, path in (("fp32", sf.VECTOR_CACHE), ("int8", INT8_CACHE)):
        cached = tune.CachedEmbedder(path, lambda p=p: embedders[p])
        t0 = time.perf_counter()
        table = tune.build_corpus(corpus, cfg, cached)
        seconds = time.perf_counter() - t0
        timing = _encode_timing(path, cached.encoded, seconds)
        query_vectors = np.vstack([embedders[p].encode([queries[q]]) for q in test_ids])  # one at a time
        if keyword_legs is None:
            matrix, vocab = tune.keyword_matrix(table, kw.k1, kw.b, kw.heading_weight)
            keyword_legs = tune.keyword_runs(matrix, vocab, [queries[q] for q in test_ids], rc.keyword_top_k)
        dense = tune.dense_runs(table.vectors, query_vectors, rc.dense_top_k)
        dense_ndcg, dense_recall = sf.evaluate(tune.leg_doc_runs(table, test_ids, dense), qrels)
        fused_ndcg, fused_recall = sf.evaluate(tune.fused_doc_runs(table, test_ids, dense, keyword_legs, fusion),
                                               qrels)
        out[p] = {"dense": {"ndcg10": round(dense_ndcg, 4), "recall100": round(dense_recall, 4)},
                  "fused": {"ndcg10": round(fused_ndcg, 4), "recall100": round(fused_recall, 4)},
                  "corpus_encoding": timing, "vector_cache": str(path.relative_to(ROOT))}
    out["fusion"] = f"RRF k = {rc.rrf_k}, BM25 k1 = {kw.k1:g}, b = {kw.b:g}"
    out["batch_size"] = batch_size
    return out


def _encode_timing(cache: Path, encoded: int, seconds: float) -> dict | None:
    """Seconds the corpus took to encode, kept beside the vector cache when this run encoded it (so a later run
    that reads the cache still reports it); None when it was never timed."""
    sidecar = cache.with_suffix(".timing.json")
    if encoded:
        timing = {"texts": encoded, "seconds": round(seconds, 1), "date": time.strftime("%Y-%m-%d"),
                  "texts_per_s": round(encoded / seconds, 2)}
        sidecar.write_text(json.dumps(timing) + "\n", encoding="utf-8")
        return timing
    try:
        return json.loads(sidecar.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


# -- report (pure: everything from the results file) ----------------------------------------------------------

def verdict(r: dict) -> dict:
    ingest = r["ingestion"]
    ratio = ingest["int8"]["chunks_per_s"] / ingest["fp32"]["chunks_per_s"]
    sf = r.get("scifact")
    drop = None if not sf else 100 * (sf["fp32"]["fused"]["ndcg10"] - sf["int8"]["fused"]["ndcg10"])
    return {"ingest_ratio": ratio, "ingest_met": ratio >= INGEST_TARGET, "ndcg_drop_points": drop,
            "default_allowed": drop is not None and drop < DEFAULT_IF_DROP_BELOW}


def render(results: dict) -> str:
    r = results
    raw, ingest, lat, agree = r["raw"], r["ingestion"], r["latency"], r["agreement"]
    v, hit = verdict(r), agree["doc_hit_at_10"]
    lines = [SECTION, "", meta_line(r["meta"]) + " Reproduce: `make bench-embed` (= `.venv/bin/python -m "
             "benchmarks.embed_onnx`), then `make report`.", "",
             f"`embedding.precision=int8` runs {r['model']} through ONNX Runtime with int8 weights (dynamic "
             f"quantisation, per-channel scales, recipe `{r['recipe']}`; export and quantisation took "
             f"{r['export_seconds']:.1f} s once, then cached). fp32 is the PyTorch model. Both at batch size "
             f"{r['batch_size']} with {r['threads']} threads, measured interleaved (A, B, B, A) in one run, so the "
             "ratios hold while absolute speeds depend on the shared cores.", "",
             "| | fp32 | int8 | int8 / fp32 |", "|---|---:|---:|---:|"]

    def row(label: str, a: float, b: float, unit: str = "", digits: int = 1) -> str:
        ratio = b / a if a else float("nan")
        return f"| {label} | {a:.{digits}f}{unit} | {b:.{digits}f}{unit} | {ratio:.2f}× |"

    lines += [row(f"raw encoding, {raw['fp32']['chunks']} demo chunks (chunks/s)", raw["fp32"]["chunks_per_s"],
                  raw["int8"]["chunks_per_s"]),
              row(f"ingestion with passage vectors, {r['documents']} documents / {ingest['fp32']['chunks']} chunks "
                  "(chunks/s)", ingest["fp32"]["chunks_per_s"], ingest["int8"]["chunks_per_s"]),
              row(f"query encoding p50 ({lat['fp32']['queries']} golden questions, one at a time)",
                  lat["fp32"]["p50_ms"], lat["int8"]["p50_ms"], " ms"),
              row("query encoding p95", lat["fp32"]["p95_ms"], lat["int8"]["p95_ms"], " ms")]
    lines += ["", f"Ingestion target (int8 ≥ {INGEST_TARGET:g}× fp32 ingestion with passage vectors): "
              f"{v['ingest_ratio']:.2f}× — **{'met' if v['ingest_met'] else 'not met'}**.", "",
              f"**Agreement on the demo corpus** ({agree['queries']} golden questions, dense leg only, all "
              f"{raw['fp32']['chunks']} chunks): the int8 top-10 shares {agree['mean_overlap_at_10']:.2f} of 10 chunks "
              f"with fp32 on average, at least 8 of 10 for {agree['share_overlap_at_least_8']:.0%} of questions, the "
              f"same top chunk for {agree['share_same_top1']:.0%}; document hit@10 on the {agree['answerable']} "
              f"answerable questions {hit['fp32']:.1%} (fp32) and {hit['int8']:.1%} (int8). Cosine between a "
              f"chunk's fp32 and int8 vectors: mean {agree['chunk_cosine_mean']:.4f}, "
              f"min {agree['chunk_cosine_min']:.4f}.", ""]
    sf = r.get("scifact")
    if sf:
        lines += [f"**SciFact test** ({sf['test_queries']} claims, {sf['documents']:,} abstracts; shipped fusion: "
                  f"{sf['fusion']}; NumPy over the cached vectors, claims encoded one at a time):", "",
                  "| | fp32 nDCG@10 | int8 nDCG@10 | change (points) | fp32 recall@100 | int8 recall@100 |",
                  "|---|---:|---:|---:|---:|---:|"]
        for leg, label in (("dense", "dense leg"), ("fused", "fused (BM25 + dense)")):
            a, b = sf["fp32"][leg], sf["int8"][leg]
            change = 100 * (b["ndcg10"] - a["ndcg10"])
            lines.append(f"| {label} | {a['ndcg10']:.3f} | {b['ndcg10']:.3f} | {change:+.1f} | {a['recall100']:.3f} | "
                         f"{b['recall100']:.3f} |")
        timing = sf["int8"].get("corpus_encoding")
        if timing:
            lines += ["", f"Encoding the {timing['texts']:,} abstracts in int8 took {timing['seconds']:.0f} s "
                      f"({timing['texts_per_s']:.1f} texts/s, measured {timing['date']})."]
        drop = v["ndcg_drop_points"]
        lines += ["", f"Default rule (int8 only if SciFact nDCG@10 of the fused list drops by < "
                  f"{DEFAULT_IF_DROP_BELOW:g} point): it drops {drop:.2f} points — int8 "
                  + ("**could become the default**; the default stays fp32 until that decision is taken."
                     if v["default_allowed"] else "**stays opt-in**; the default stays fp32.")]
    else:
        lines += ["SciFact: not measured in this run (`--skip-scifact`, or the data was not found); the default "
                  "stays fp32."]
    lines += ["", "Late chunking (`ingest.passage_vectors_mode=late`) works in int8 too: the graph returns token "
              "embeddings, pooled per sentence window from the same forward pass."]
    return "\n".join(lines) + "\n"


# -- main ------------------------------------------------------------------------------------------------------

def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.embed_onnx", description=__doc__.splitlines()[0])
    parser.add_argument("--documents", type=int, default=20, help="demo documents ingested per run")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--home", type=Path, default=ROOT / "build" / "embed-onnx")
    parser.add_argument("--onnx-cache", type=Path, default=None, help="default: a fresh temporary folder")
    parser.add_argument("--skip-scifact", action="store_true")
    args = parser.parse_args(argv)

    from pipeline.models.embed_onnx import RECIPE
    from workbench.golden import load_golden

    set_torch_threads(args.threads)
    cache = args.onnx_cache or Path(tempfile.mkdtemp(prefix="embed-onnx-"))
    os.environ["WORKBENCH_ONNX_CACHE"] = str(cache)
    cfgs = configs()
    models = Models()
    meta = run_meta(depends=DEPENDS, model=f"{MODEL} (packaged, offline): PyTorch fp32 and ONNX Runtime int8")
    embedders = {"fp32": models.embedder(cfgs["fp32"].embedding)}
    t0 = time.perf_counter()
    embedders["int8"] = models.embedder(cfgs["int8"].embedding)
    export_seconds = time.perf_counter() - t0
    for e in embedders.values():
        e.encode(["warm-up"])

    chunks, texts = demo_chunks()
    cases = [{"question": c.question, "answerable": c.answerable, "expected_doc_ids": list(c.expected_doc_ids)}
             for c in load_golden(ROOT / "golden" / "golden.jsonl").cases]
    documents, _ = load_paths([ROOT / "golden" / "corpus"])
    documents = sorted((d for d in documents if not d.retracted), key=lambda d: d.doc_id)[:args.documents]

    print("raw encoding ...", file=sys.stderr, flush=True)
    raw, chunk_vectors = raw_encoding(embedders, texts)
    print("ingestion ...", file=sys.stderr, flush=True)
    ingest = ingestion(models, cfgs, documents, args.home)
    print("query latency ...", file=sys.stderr, flush=True)
    latency, query_vectors = query_latency(embedders, [c["question"] for c in cases])
    agree = agreement(chunks, chunk_vectors, query_vectors, cases)
    results = {"meta": meta, "model": MODEL, "recipe": RECIPE, "threads": args.threads,
               "batch_size": cfgs["fp32"].embedding.batch_size, "export_seconds": round(export_seconds, 1),
               "documents": len(documents), "raw": raw, "ingestion": ingest, "latency": latency, "agreement": agree}
    write_results(NAME, results)
    if not args.skip_scifact:
        print("SciFact ...", file=sys.stderr, flush=True)
        try:
            results["scifact"] = scifact(embedders, cfgs["fp32"].embedding.batch_size)
        except SystemExit as exc:  # the data is not there: say so, keep the rest
            print(f"SciFact skipped: {exc}", file=sys.stderr)
    results["verdict"] = verdict(results)
    path = write_results(NAME, results)
    print(render(load_results(NAME)))
    print(f"wrote {path}; run `make report` to update BENCHMARKS.md", file=sys.stderr)
    if args.onnx_cache is None:
        shutil.rmtree(cache, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
