"""Retrieval quality on BEIR SciFact (Wadden et al., EMNLP 2020; BEIR: Thakur et al., NeurIPS 2021).

``python -m benchmarks.scifact`` (or ``make bench-quality``) ingests the SciFact abstracts into a store under
``build/scifact-store`` with the real all-MiniLM-L6-v2 embedder (one chunk per abstract: the chunk budget is
set above the longest abstract; the indexed text is title + abstract; the validator's passage vectors are not
stored, since nothing is validated here), runs the test claims through :func:`pipeline.retrieval.retrieve.run`,
and measures nDCG@10 and recall@100 for

- the keyword leg alone (BM25 with the project's tokenizer and the configured k1, b),
- the dense leg alone (cosine over MiniLM embeddings),
- the fused list (reciprocal-rank fusion at the configured k and leg weights: the stage's default output),
- fused + cross-encoder rerank of the fused top-100, when a cross-encoder resolves.

nDCG@10 uses linear gains (``rel / log2(rank + 1)``), as trec_eval and BEIR do; recall@100 is the share of a
query's relevant documents in its top 100. Fusion settings (k, leg weights) are swept on the *train* claims
and the best is then reported on test, so the test split is never used to choose a setting.

The store is reused between runs (ingestion is incremental by content hash: a second run embeds nothing);
``--fresh`` rebuilds it. The run writes ``benchmarks/results/scifact.json``; :func:`render` turns that file into
the BENCHMARKS.md section (``make report``).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import shutil
import statistics
import sys
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from benchmarks.results_io import ROOT, load_results, meta_line, run_meta, write_results
from pipeline.config import PipelineConfig
from pipeline.context import StageContext
from pipeline.engine import rerank_stop_at
from pipeline.ingestion.documents import Document
from pipeline.ingestion.ingest import ingest_documents
from pipeline.models.registry import Models
from pipeline.models.resolve import ModelUnavailable
from pipeline.retrieval import rerank, retrieve
from pipeline.retrieval.retrieve import _reciprocal_rank_fusion
from pipeline.storage.store import Store

NAME = "scifact"
SECTION = "## Retrieval quality: BEIR SciFact"
EMBEDDER = "all-MiniLM-L6-v2 (packaged, offline)"
# Published nDCG@10 on SciFact test, for comparison (not measured here; copied into the results file so the
# report cites them from there): BEIR (Thakur et al. 2021) and the Anserini BM25 baselines; the model card.
PUBLISHED = {"keyword": {"label": "BM25", "low": 0.665, "high": 0.679,
                         "source": "Anserini flat / multifield, k1 = 0.9, b = 0.4"},
             "dense": {"label": "all-MiniLM-L6-v2", "low": 0.645, "high": 0.645,
                       "source": "BEIR, Thakur et al. 2021, and the sentence-transformers model card"}}
SWEEP_K = (10, 20, 40, 60, 100)
SWEEP_WEIGHTS = ((1.0, 1.0), (1.0, 1.5), (1.0, 2.0), (1.5, 1.0), (2.0, 1.0), (1.0, 3.0))


@dataclass(frozen=True)
class LegRuns:
    """Per query, each leg's ranked doc ids and the stage's fused order."""
    dense: dict[str, list[str]]
    keyword: dict[str, list[str]]
    fused: dict[str, list[str]]
    latency_ms: list[float]


# -- data ---------------------------------------------------------------------------------------------------

def locate_data() -> Path:
    """``../shared/evaldata/scifact_beir`` relative to the repository, else under ``$WORKBENCH_EVALDATA``."""
    candidates = [ROOT.parent / "shared" / "evaldata"]
    if os.environ.get("WORKBENCH_EVALDATA"):
        candidates.append(Path(os.environ["WORKBENCH_EVALDATA"]).expanduser())
    for base in candidates:
        if (base / "scifact_beir" / "corpus.jsonl").is_file():
            return base / "scifact_beir"
    raise SystemExit("SciFact not found: expected ../shared/evaldata/scifact_beir/corpus.jsonl next to the "
                     "repository, or set WORKBENCH_EVALDATA to the folder that contains scifact_beir/")


def _jsonl(path: Path) -> Iterable[dict]:
    with path.open(encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                yield json.loads(line)


def load_corpus(data: Path) -> list[Document]:
    return [Document(doc_id=str(row["_id"]), title=row.get("title", ""), text=row.get("text", ""),
                     source=f"scifact:{row['_id']}", format="jsonl") for row in _jsonl(data / "corpus.jsonl")]


def load_queries(data: Path) -> dict[str, str]:
    return {str(row["_id"]): row["text"] for row in _jsonl(data / "queries.jsonl")}


def load_qrels(data: Path, split: str) -> dict[str, dict[str, int]]:
    qrels: dict[str, dict[str, int]] = {}
    with (data / "qrels" / f"{split}.tsv").open(encoding="utf-8") as fh:
        next(fh)  # header
        for line in fh:
            qid, doc_id, score = line.rstrip("\n").split("\t")
            qrels.setdefault(qid, {})[doc_id] = int(score)
    return qrels


# -- metrics (pure) -----------------------------------------------------------------------------------------

def ndcg_at_k(ranked: Sequence[str], rels: dict[str, int], k: int = 10) -> float:
    dcg = sum(rels.get(d, 0) / math.log2(i + 2) for i, d in enumerate(ranked[:k]))
    ideal = sorted((r for r in rels.values() if r > 0), reverse=True)[:k]
    idcg = sum(r / math.log2(i + 2) for i, r in enumerate(ideal))
    return dcg / idcg if idcg > 0 else 0.0


def recall_at_k(ranked: Sequence[str], rels: dict[str, int], k: int = 100) -> float:
    relevant = {d for d, r in rels.items() if r > 0}
    return len(relevant & set(ranked[:k])) / len(relevant) if relevant else 0.0


def evaluate(run: dict[str, list[str]], qrels: dict[str, dict[str, int]]) -> tuple[float, float]:
    """Mean nDCG@10 and recall@100 over the queries that have judgements."""
    qids = [q for q in qrels if q in run]
    ndcg = sum(ndcg_at_k(run[q], qrels[q]) for q in qids) / len(qids)
    recall = sum(recall_at_k(run[q], qrels[q]) for q in qids) / len(qids)
    return ndcg, recall


def _doc_order(chunk_doc_ids: Iterable[str]) -> list[str]:
    """Chunk ranking → document ranking (a document ranks at its best chunk)."""
    seen: dict[str, None] = {}
    for doc_id in chunk_doc_ids:
        seen.setdefault(doc_id, None)
    return list(seen)


def fuse(runs: LegRuns, k: int, weights: tuple[float, float]) -> dict[str, list[str]]:
    return {q: [item.item_id for item in _reciprocal_rank_fusion([runs.dense[q], runs.keyword[q]], k, weights)]
            for q in runs.dense}


# -- runs ---------------------------------------------------------------------------------------------------

BENCH_OVERRIDES = {"chunking.max_tokens": 4000, "chunking.overlap_tokens": 0, "ingest.passage_vectors": False}


def bench_config() -> PipelineConfig:
    return PipelineConfig().with_overrides(BENCH_OVERRIDES)


def open_store(home: Path, fresh: bool, corpus: list[Document], cfg: PipelineConfig,
               models: Models) -> tuple[Store, dict]:
    """The store, ingested (incrementally), and what ingestion did: chunks embedded now and the seconds of the
    run that embedded the corpus (kept in the store's meta, so a reused store still reports it)."""
    if fresh and home.exists():
        shutil.rmtree(home)
    store = Store.open(home)
    t0 = time.perf_counter()
    report = ingest_documents(store, corpus, cfg, models, progress=True)
    seconds = time.perf_counter() - t0
    print(f"ingest: {report.documents} documents, {report.chunks} chunks, {report.embedded} embedded "
          f"in {seconds:.1f} s", file=sys.stderr)
    if report.embedded:
        store.set_meta(bench_ingest_s=round(seconds, 1), bench_ingest_embedded=report.embedded,
                       bench_ingest_date=time.strftime("%Y-%m-%d"))
    ingest = {"embedded_this_run": report.embedded, "seconds": float(store.meta("bench_ingest_s", "0")) or None,
              "embedded": int(store.meta("bench_ingest_embedded", "0")) or None,
              "date": store.meta("bench_ingest_date", "") or None}
    return store, ingest


def collect_runs(queries: dict[str, str], qids: Iterable[str], cfg: PipelineConfig, store: Store,
                 models: Models) -> LegRuns:
    dense, keyword, fused, latency = {}, {}, {}, []
    for qid in qids:
        t0 = time.perf_counter()
        trace = retrieve.run(queries[qid], cfg.retrieve, StageContext(models, store, cfg.embedding))
        latency.append(round((time.perf_counter() - t0) * 1000, 3))
        if trace.status != "ran":
            print(f"query {qid}: retrieval {trace.status}: {trace.reason}", file=sys.stderr)
        by_dense = sorted((c for c in trace.candidates if c.dense_rank), key=lambda c: c.dense_rank)
        by_keyword = sorted((c for c in trace.candidates if c.keyword_rank), key=lambda c: c.keyword_rank)
        dense[qid] = _doc_order(c.doc_id for c in by_dense)
        keyword[qid] = _doc_order(c.doc_id for c in by_keyword)
        fused[qid] = _doc_order(c.doc_id for c in trace.candidates)
    return LegRuns(dense, keyword, fused, latency)


def sweep_fusion(train: LegRuns, qrels: dict[str, dict[str, int]]) -> list[dict]:
    rows = []
    for k in SWEEP_K:
        for weights in SWEEP_WEIGHTS:
            ndcg, recall = evaluate(fuse(train, k, weights), qrels)
            rows.append({"k": k, "dense_weight": weights[0], "keyword_weight": weights[1], "ndcg10": ndcg,
                         "recall100": recall})
    return sorted(rows, key=lambda r: (-r["ndcg10"], r["k"], r["dense_weight"], r["keyword_weight"]))


def rerank_run(queries: dict[str, str], qids: Iterable[str], cfg: PipelineConfig, store: Store,
               models: Models) -> tuple[dict[str, list[str]] | None, str]:
    """Fused top-100 reranked, or (None, why) when no cross-encoder resolves."""
    rcfg = dataclasses.replace(cfg.rerank, candidates=100, top_k=100)
    try:
        models.reranker(rcfg)
    except (ModelUnavailable, ImportError) as exc:
        return None, str(exc)
    out = {}
    for qid in qids:
        ret = retrieve.run(queries[qid], cfg.retrieve, StageContext(models, store, cfg.embedding))
        rr = rerank.run(queries[qid], ret, rcfg, models, rerank_stop_at(cfg.gate))
        if rr.status != "ran":
            return None, rr.reason
        doc_of = {c.chunk_id: c.doc_id for c in ret.candidates}
        out[qid] = _doc_order(doc_of[s.chunk_id] for s in rr.candidates)
    return out, ""


# -- report (pure: everything from the results file) -------------------------------------------------------

def _published(p: dict | None) -> str:
    if not p:
        return ""
    value = f"{p['low']:.3f}" if p["low"] == p["high"] else f"{p['low']:.3f}–{p['high']:.3f}"
    return f"{p['label']} {value}"


def _metric(value: float | None) -> str:
    return "not available offline" if value is None else f"{value:.3f}"


def render(results: dict) -> str:
    r = results
    cfg, ingest, pub = r["config"], r["ingest"], r["published"]
    lines = [SECTION, "",
             meta_line(r["meta"]) + " Reproduce: `make bench-quality` (= `.venv/bin/python -m benchmarks.scifact`; "
             "`--fresh` rebuilds the store), then `make report`.", ""]
    embedded = (f", embedded in {ingest['seconds']:.0f} s of wall time on the shared cores ({ingest['date']}"
                + (", this run" if ingest["embedded_this_run"] else ", an earlier run on the same store") + ")"
                if ingest.get("seconds") else "")
    lines += [f"Corpus: {r['documents']:,} abstracts → {r['chunks']:,} chunks (one per abstract: "
              f"`chunking.max_tokens={cfg['chunking_max_tokens']}`, title + abstract indexed){embedded}. "
              f"{r['test_queries']} test claims, {r['test_qrels']} judgements. Retrieval (both legs + fusion) "
              f"p50 {r['latency_ms']['p50']:.1f} ms, mean {r['latency_ms']['mean']:.1f} ms per query (cores shared "
              "with other work: indicative only; *Performance* below compares speed properly).", "",
              "**Test split** (the fused row at the configured fusion):", "",
              "| system | nDCG@10 | recall@100 | published nDCG@10 |", "|---|---:|---:|---|"]
    for row in r["rows"]:
        recall = "—" if row["recall100"] is None else f"{row['recall100']:.3f}"
        lines.append(f"| {row['label']} | {_metric(row['ndcg10'])} | {recall} | {_published(pub.get(row['key']))} |")
    lines += ["", "Published anchors: " + "; ".join(f"{_published(p)} ({p['source']})" for p in pub.values())
              + f". Ours use the project's own tokenizer and BM25 parameters (k1 = {cfg['bm25_k1']:g}, "
              f"b = {cfg['bm25_b']:g})."]
    if r.get("rerank_reason"):
        lines += ["", f"Fused + rerank: not available offline — {r['rerank_reason']}"]
    sweep, best, default = r["sweep"], r["sweep"][0], r["default_fusion"]
    lines += ["", f"**Fusion sweep on the {r['train_queries']} train claims** (k × (dense, keyword) weights, "
              f"{len(sweep)} settings, best {r['sweep_rows_shown']} shown; the test split was not used to choose):",
              "", "| k | dense w | keyword w | train nDCG@10 | train recall@100 |", "|---:|---:|---:|---:|---:|"]
    for row in sweep[:r["sweep_rows_shown"]]:
        lines.append(f"| {row['k']} | {row['dense_weight']:g} | {row['keyword_weight']:g} | "
                     f"{row['ndcg10']:.3f} | {row['recall100']:.3f} |")
    tuned, fused = r["tuned_test"], r["default_test"]
    lines += ["", f"The best setting on train (k = {best['k']}, weights {best['dense_weight']:g}/"
              f"{best['keyword_weight']:g}), measured on **test**: nDCG@10 {tuned['ndcg10']:.3f}, recall@100 "
              f"{tuned['recall100']:.3f}; the configured fusion (k = {default['k']}, weights "
              f"{default['dense_weight']:g}/{default['keyword_weight']:g}) on test: {fused['ndcg10']:.3f}, "
              f"{fused['recall100']:.3f}.", "", verdict(r["rows"])]
    return "\n".join(lines) + "\n"


def verdict(rows: list[dict]) -> str:
    by_key = {row["key"]: row for row in rows}
    best_leg = max(("keyword", "dense"), key=lambda k: by_key[k]["ndcg10"])
    fused, leg = by_key["fused"]["ndcg10"], by_key[best_leg]["ndcg10"]
    if fused >= leg:
        return (f"On test, fused ({fused:.3f}) is not below the better single leg ({best_leg}, {leg:.3f}): "
                f"{100 * (fused - leg):+.1f} nDCG points.")
    return (f"On test, fused ({fused:.3f}) is below the better single leg ({best_leg}, {leg:.3f}) by "
            f"{100 * (leg - fused):.1f} nDCG points.")


# -- measuring ----------------------------------------------------------------------------------------------

def _scores(run: dict[str, list[str]], qrels: dict[str, dict[str, int]]) -> dict:
    ndcg, recall = evaluate(run, qrels)
    return {"ndcg10": ndcg, "recall100": recall}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.scifact", description=__doc__.splitlines()[0])
    parser.add_argument("--store", type=Path, default=ROOT / "build" / "scifact-store")
    parser.add_argument("--fresh", action="store_true", help="rebuild the store (re-embeds the corpus)")
    args = parser.parse_args(argv)

    meta = run_meta(model=f"{EMBEDDER}; cross-encoder: not resolved")
    data = locate_data()
    corpus, queries = load_corpus(data), load_queries(data)
    qrels_test, qrels_train = load_qrels(data, "test"), load_qrels(data, "train")
    cfg, models = bench_config(), Models()
    store, ingest = open_store(args.store, args.fresh, corpus, cfg, models)
    try:
        test = collect_runs(queries, sorted(qrels_test, key=int), cfg, store, models)
        train = collect_runs(queries, sorted(qrels_train, key=int), cfg, store, models)
        reranked, rerank_reason = rerank_run(queries, sorted(qrels_test, key=int), cfg, store, models)
        chunks = store.chunk_count()
    finally:
        store.close()

    rc = cfg.retrieve
    rows = [{"key": key, "label": label, **_scores(run, qrels_test)}
            for key, label, run in (("keyword", "keyword leg (BM25)", test.keyword),
                                    ("dense", "dense leg (MiniLM)", test.dense),
                                    ("fused", f"fused (RRF k = {rc.rrf_k})", test.fused))]
    if reranked is not None:
        meta["model"] = f"{EMBEDDER}; cross-encoder {cfg.rerank.model}"
        rows.append({"key": "rerank", "label": "fused + rerank (top-100)", "ndcg10": _scores(reranked, qrels_test)[
            "ndcg10"], "recall100": rows[2]["recall100"]})
    else:
        rows.append({"key": "rerank", "label": "fused + rerank", "ndcg10": None, "recall100": None})
    sweep = sweep_fusion(train, qrels_train)
    best = sweep[0]
    default = {"k": rc.rrf_k, "dense_weight": rc.dense_weight, "keyword_weight": rc.keyword_weight}
    results = {
        "meta": meta,
        "config": {"overrides": BENCH_OVERRIDES, "chunking_max_tokens": cfg.chunking.max_tokens,
                   "bm25_k1": cfg.keyword.k1, "bm25_b": cfg.keyword.b, "embedding_batch_size": cfg.embedding.batch_size,
                   "dense_top_k": rc.dense_top_k, "keyword_top_k": rc.keyword_top_k},
        "documents": len(corpus), "chunks": chunks, "ingest": ingest,
        "test_queries": len(test.dense), "test_qrels": sum(len(v) for v in qrels_test.values()),
        "train_queries": len(train.dense),
        "latency_ms": {"mean": statistics.fmean(test.latency_ms), "p50": statistics.median(test.latency_ms),
                       "n": len(test.latency_ms)},
        "rows": rows, "rerank_reason": rerank_reason, "published": PUBLISHED,
        "sweep": sweep, "sweep_rows_shown": 8, "default_fusion": default,
        "default_test": _scores(fuse(test, rc.rrf_k, (rc.dense_weight, rc.keyword_weight)), qrels_test),
        "tuned_test": _scores(fuse(test, best["k"], (best["dense_weight"], best["keyword_weight"])), qrels_test)}
    path = write_results(NAME, results)
    print(render(load_results(NAME)))
    print(f"wrote {path}; run `make report` to update BENCHMARKS.md", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
