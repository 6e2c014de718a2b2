"""Retrieval quality on BEIR SciFact (Wadden et al., EMNLP 2020; BEIR: Thakur et al., NeurIPS 2021).

``python -m benchmarks.scifact`` (or ``make bench-quality``) ingests the 5,183 abstracts into a store under
``bench-output/`` with the real all-MiniLM-L6-v2 embedder (one chunk per abstract: chunking is set to 4,000
words, above the longest abstract; the indexed text is title + abstract), runs the 300 test claims through
:func:`pipeline.retrieval.retrieve.run`, and reports nDCG@10 and recall@100 for

- the keyword leg alone (BM25 with the project's tokenizer, k1 = 1.2, b = 0.75),
- the dense leg alone (cosine over MiniLM embeddings),
- the fused list (RRF, k = 60, equal weights: the stage's default output),
- fused + cross-encoder rerank of the fused top-100, when a cross-encoder resolves.

nDCG@10 uses linear gains (``rel / log2(rank + 1)``), as trec_eval and BEIR do; recall@100 is the share of a
query's relevant documents in its top 100. Fusion settings (k, leg weights) are swept on the *train* claims
and the best is then reported on test, so the test split is never used to choose a setting.

The store is reused between runs (ingestion is incremental by content hash: a second run embeds nothing);
``--fresh`` rebuilds it. Nothing is written inside the repository except the BENCHMARKS.md section.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import platform
import shutil
import sys
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

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

ROOT = Path(__file__).resolve().parent.parent
SECTION = "## Retrieval quality: BEIR SciFact"
ANCHORS = "BM25 0.665–0.679 (Anserini flat / multifield); all-MiniLM-L6-v2 dense ≈ 0.645"
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

def bench_config() -> PipelineConfig:
    return PipelineConfig().with_overrides({"chunking.max_tokens": 4000, "chunking.overlap_tokens": 0})


def open_store(home: Path, fresh: bool, corpus: list[Document], cfg: PipelineConfig, models: Models) -> Store:
    if fresh and home.exists():
        shutil.rmtree(home)
    store = Store.open(home)
    t0 = time.perf_counter()
    report = ingest_documents(store, corpus, cfg, models, progress=True)
    print(f"ingest: {report.documents} documents, {report.chunks} chunks, {report.embedded} embedded "
          f"in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    return store


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


# -- report -------------------------------------------------------------------------------------------------

def render(results: dict) -> str:
    r = results
    lines = [SECTION, "",
             f"Measured {r['date']} on {r['machine']}. Reproduce: `make bench-quality` "
             "(= `.venv/bin/python -m benchmarks.scifact`; add `--fresh` to rebuild the store).", "",
             f"Corpus: {r['documents']:,} abstracts → {r['chunks']:,} chunks (one per abstract: "
             "`chunking.max_tokens=4000`, title + abstract indexed), embedded with all-MiniLM-L6-v2 "
             f"(packaged, offline) in {r['ingest_s']:.0f} s. {r['test_queries']} test claims, "
             f"{r['test_qrels']} judgements. Retrieval (both legs + fusion) mean "
             f"{r['latency_mean_ms']:.1f} ms per query.", "",
             "| system | nDCG@10 | recall@100 | published nDCG@10 |", "|---|---:|---:|---|"]
    anchors = {"keyword": "BM25 0.665–0.679", "dense": "all-MiniLM-L6-v2 ≈ 0.645", "fused": "", "rerank": ""}
    for row in r["rows"]:
        ndcg = f"{row['ndcg10']:.3f}" if row["ndcg10"] is not None else "not available offline"
        recall = f"{row['recall100']:.3f}" if row["recall100"] is not None else "—"
        lines.append(f"| {row['label']} | {ndcg} | {recall} | {anchors[row['key']]} |")
    lines += ["", f"Published anchors: {ANCHORS} (BEIR, Thakur et al. 2021, and the sentence-transformers "
              "model card). Ours use the project's own tokenizer and BM25 parameters (k1 = 1.2, b = 0.75; "
              "Anserini uses k1 = 0.9, b = 0.4). Latency is measured on cores shared with other work, so it is "
              "indicative only; `make bench` measures latency properly."]
    if r.get("rerank_reason"):
        lines += ["", f"Fused + rerank: not available offline — {r['rerank_reason']}"]
    best = r["sweep"][0]
    lines += ["", f"Fusion sweep on the {r['train_queries']} *train* claims (k × (dense, keyword) weights; "
              "the test split was not used to choose):", "",
              "| k | dense w | keyword w | train nDCG@10 | train recall@100 |", "|---:|---:|---:|---:|---:|"]
    for row in r["sweep"][:8]:
        lines.append(f"| {row['k']} | {row['dense_weight']:g} | {row['keyword_weight']:g} | "
                     f"{row['ndcg10']:.3f} | {row['recall100']:.3f} |")
    lines += ["", f"Best on train (k = {best['k']}, weights {best['dense_weight']:g}/{best['keyword_weight']:g}) "
              f"on test: nDCG@10 {r['tuned_test'][0]:.3f}, recall@100 {r['tuned_test'][1]:.3f} "
              f"(default k = 60, 1/1: {r['fused_test'][0]:.3f}, {r['fused_test'][1]:.3f}).", ""]
    lines.append(r["verdict"])
    return "\n".join(lines) + "\n"


def verdict(rows: list[dict]) -> str:
    by_key = {row["key"]: row for row in rows}
    best_leg = max(("keyword", "dense"), key=lambda k: by_key[k]["ndcg10"])
    fused, leg = by_key["fused"]["ndcg10"], by_key[best_leg]["ndcg10"]
    if fused >= leg:
        return (f"Fused ({fused:.3f}) is not below the better single leg ({best_leg}, {leg:.3f}): "
                f"{100 * (fused - leg):+.1f} nDCG points.")
    return (f"Fused ({fused:.3f}) is below the better single leg ({best_leg}, {leg:.3f}) by "
            f"{100 * (leg - fused):.1f} nDCG points; the sweep above shows what k and weights recover.")


def write_section(path: Path, section: str) -> None:
    """Replace (or append) this benchmark's section, leaving every other section of the file alone."""
    text = path.read_text(encoding="utf-8") if path.exists() else "# Benchmarks\n"
    start = text.find(SECTION)
    if start < 0:
        text = text.rstrip("\n") + "\n\n" + section
    else:
        end = text.find("\n## ", start + len(SECTION))
        text = text[:start] + section + (text[end + 1:] if end >= 0 else "")
        text = text.replace(section + "## ", section + "\n## ")
    path.write_text(text, encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.scifact", description=__doc__.splitlines()[0])
    parser.add_argument("--store", type=Path, default=ROOT / "bench-output" / "scifact-store")
    parser.add_argument("--fresh", action="store_true", help="rebuild the store (re-embeds the corpus)")
    parser.add_argument("--out", type=Path, default=ROOT / "BENCHMARKS.md")
    parser.add_argument("--no-write", action="store_true", help="print the section instead of writing it")
    args = parser.parse_args(argv)

    data = locate_data()
    corpus, queries = load_corpus(data), load_queries(data)
    qrels_test, qrels_train = load_qrels(data, "test"), load_qrels(data, "train")
    cfg, models = bench_config(), Models()
    t0 = time.perf_counter()
    store = open_store(args.store, args.fresh, corpus, cfg, models)
    ingest_s = float(store.meta("bench_ingest_s", "0")) or (time.perf_counter() - t0)
    store.set_meta(bench_ingest_s=round(ingest_s, 1))
    try:
        test = collect_runs(queries, sorted(qrels_test, key=int), cfg, store, models)
        train = collect_runs(queries, sorted(qrels_train, key=int), cfg, store, models)
        reranked, rerank_reason = rerank_run(queries, sorted(qrels_test, key=int), cfg, store, models)
        chunks = store.chunk_count()
    finally:
        store.close()

    rows = []
    legs = (("keyword", "keyword leg (BM25)", test.keyword), ("dense", "dense leg (MiniLM)", test.dense),
            ("fused", "fused (RRF k = 60)", test.fused))
    for key, label, run in legs:
        ndcg, recall = evaluate(run, qrels_test)
        rows.append({"key": key, "label": label, "ndcg10": ndcg, "recall100": recall})
    if reranked is not None:
        ndcg, _ = evaluate(reranked, qrels_test)
        rows.append({"key": "rerank", "label": "fused + rerank", "ndcg10": ndcg, "recall100": rows[2]["recall100"]})
    else:
        rows.append({"key": "rerank", "label": "fused + rerank", "ndcg10": None, "recall100": None})
    sweep = sweep_fusion(train, qrels_train)
    best = sweep[0]
    results = {
        "date": time.strftime("%Y-%m-%d"), "machine": f"{os.cpu_count()} CPU cores ({platform.machine()}, "
        f"{platform.system()}), no GPU used", "documents": len(corpus), "chunks": chunks, "ingest_s": ingest_s,
        "test_queries": len(test.dense), "test_qrels": sum(len(v) for v in qrels_test.values()),
        "train_queries": len(train.dense), "latency_mean_ms": sum(test.latency_ms) / len(test.latency_ms),
        "rows": rows, "rerank_reason": rerank_reason, "sweep": sweep,
        "fused_test": evaluate(fuse(test, 60, (1.0, 1.0)), qrels_test),
        "tuned_test": evaluate(fuse(test, best["k"], (best["dense_weight"], best["keyword_weight"])), qrels_test),
        "verdict": verdict(rows)}
    section = render(results)
    (ROOT / "bench-output").mkdir(exist_ok=True)
    (ROOT / "bench-output" / "scifact.json").write_text(json.dumps(results, indent=2), encoding="utf-8")
    if args.no_write:
        print(section)
    else:
        write_section(args.out, section)
        print(section)
        print(f"wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
