"""Retrieval quality on BEIR SciFact (Wadden et al., EMNLP 2020; BEIR: Thakur et al., NeurIPS 2021).

``python -m benchmarks.scifact`` (or ``make bench-quality``) measures nDCG@10 and recall@100 on the SciFact
test claims for the keyword leg (BM25 with the project's tokenizer), the dense leg (all-MiniLM-L6-v2), the
fused list under the shipped config, the fused list under the setting tuned on the *train* claims, and fused +
cross-encoder rerank of the fused top-100 when a cross-encoder resolves.

1. Tuning, train claims only (:mod:`benchmarks.scifact_tune`): BM25 k1, b and the title (heading) weight, then
   RRF (k, leg weights) and convex fusion (alpha, minmax / theoretical-min-max normalisation) for the best BM25
   settings, all in NumPy over vectors encoded once and cached in ``build/scifact-vectors.npz``.
2. Measuring, test claims: the shipped config and the chosen setting (as config overrides) each through
   :func:`pipeline.retrieval.retrieve.run` over a store ingested by the real ingest path (one chunk per
   abstract: the chunk budget is set above the longest abstract; the indexed text is title + abstract; no
   passage vectors, since nothing is validated here). Ingestion reads the corpus vectors from the cache; the
   claims are encoded by the model at query time, as the answerer does.
3. The NumPy re-implementation is also run on test for both settings, so the results file shows that the sweep
   ranks settings as the pipeline does.

4. The same legs and fused lists on the **shipped** chunking (the default ``chunking`` config: a long abstract is
   several chunks), retrieval only; a document is ranked at its best chunk (the max over its chunks,
   :func:`workbench.metrics.document_ranking`), and each setting is compared with its one-chunk-per-abstract run,
   paired over the same claims.

Scoring follows trec_eval with ``-c``: every judged test claim counts, and a claim missing from a run (or whose
run holds none of its documents) scores 0. nDCG@10 uses linear gains (``rel / log2(rank + 1)``), as trec_eval and
BEIR do; recall@100 is the share of a claim's relevant documents in its top 100; both from
:mod:`workbench.metrics`. Every nDCG@10 carries a 95 % percentile bootstrap interval over claims; a comparison of
two runs on the same claims is :func:`workbench.metrics.paired_difference` (bootstrap interval of the mean
difference, Wilcoxon signed-rank test).

The stores under ``build/`` are reused between runs (ingestion is incremental by content hash); ``--fresh``
rebuilds them. The run writes ``benchmarks/results/scifact.json``; :func:`render` turns that file into the
BENCHMARKS.md section (``make report``).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shutil
import statistics
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from benchmarks.results_io import ROOT, Depends, load_results, meta_line, run_meta, write_results
from pipeline.config import PipelineConfig
from pipeline.context import StageContext
from pipeline.engine import rerank_stop_at
from pipeline.ingestion.documents import Document
from pipeline.ingestion.ingest import ingest_documents
from pipeline.models.registry import Models
from pipeline.models.resolve import ModelUnavailable
from pipeline.retrieval import rerank, retrieve
from pipeline.storage.store import Store
from workbench.metrics import document_ranking, ndcg_at_k, paired_difference, ratio_bootstrap, recall_at_k

NAME = "scifact"
SECTION = "## Retrieval quality: BEIR SciFact"
EMBEDDER = "all-MiniLM-L6-v2 (packaged, offline)"
# Published nDCG@10 on SciFact test, for comparison (not measured here; copied into the results file so the
# report cites them from there): BEIR (Thakur et al. 2021) and the Anserini BM25 baselines; the model card.
PUBLISHED = {"keyword": {"label": "BM25", "low": 0.665, "high": 0.679,
                         "source": "Anserini flat / multifield, k1 = 0.9, b = 0.4"},
             "dense": {"label": "all-MiniLM-L6-v2", "low": 0.645, "high": 0.645,
                       "source": "BEIR, Thakur et al. 2021, and the sentence-transformers model card"}}


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


# -- metrics (pure; the formulas are workbench.metrics's) --------------------------------------------------

def per_query(run: dict[str, list[str]], qrels: dict[str, dict[str, int]], metric: str) -> list[float]:
    """``ndcg10`` or ``recall100`` of every judged query, in sorted query order. A judged query missing from the run
    (or with nothing relevant) scores 0: trec_eval's ``-c`` averaging over all judged queries."""
    out = []
    for q in sorted(qrels):
        ranked = run.get(q, [])
        if metric == "ndcg10":
            value = ndcg_at_k(ranked, qrels[q], 10)
        else:
            value = recall_at_k(ranked, [d for d, r in qrels[q].items() if r > 0], 100)
        out.append(value or 0.0)
    return out


def evaluate(run: dict[str, list[str]], qrels: dict[str, dict[str, int]]) -> tuple[float, float]:
    """Mean nDCG@10 and recall@100 over every judged query (missing from the run: 0, :func:`per_query`)."""
    return statistics.fmean(per_query(run, qrels, "ndcg10")), statistics.fmean(per_query(run, qrels, "recall100"))


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
        dense[qid] = document_ranking(c.doc_id for c in by_dense)
        keyword[qid] = document_ranking(c.doc_id for c in by_keyword)
        fused[qid] = document_ranking(c.doc_id for c in trace.candidates)
    return LegRuns(dense, keyword, fused, latency)


def rerank_run(queries: dict[str, str], qids: Iterable[str], cfg: PipelineConfig, store: Store,
               models: Models, candidates: int) -> tuple[dict[str, list[str]] | None, str]:
    """The fused list with its top ``candidates`` reranked by the configured cross-encoder (offline: the project's
    reader, sentence granularity, blend order), or (None, why) when it does not resolve or does not run."""
    rcfg = dataclasses.replace(cfg.rerank, candidates=candidates, top_k=candidates)
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
        head = document_ranking(doc_of[s.chunk_id] for s in rr.candidates)
        reordered = set(head)
        out[qid] = head + [d for d in document_ranking(c.doc_id for c in ret.candidates) if d not in reordered]
    return out, ""


def paired(before: dict[str, list[str]], after: dict[str, list[str]], qrels: dict[str, dict[str, int]]) -> dict:
    """Per-query nDCG@10 of ``after`` minus ``before`` over every judged query (a query missing from a run scores
    0, as trec_eval does): :func:`workbench.metrics.paired_difference` (mean difference, 95 % bootstrap interval,
    queries better / worse / tied, Wilcoxon signed-rank p)."""
    out = paired_difference(per_query(before, qrels, "ndcg10"), per_query(after, qrels, "ndcg10"))
    return {"queries": out.pop("cases"), **out}


def ndcg_interval(run: dict[str, list[str]], qrels: dict[str, dict[str, int]]) -> list[float]:
    """The 95 % percentile bootstrap interval of mean nDCG@10, resampling the judged claims."""
    values = per_query(run, qrels, "ndcg10")
    return [round(v, 4) for v in ratio_bootstrap(values, [1.0] * len(values))]


# -- report (pure: everything from the results file) -------------------------------------------------------

def _published(p: dict | None) -> str:
    if not p:
        return ""
    value = f"{p['low']:.3f}" if p["low"] == p["high"] else f"{p['low']:.3f}–{p['high']:.3f}"
    return f"{p['label']} {value}"


def _metric(value: float | None) -> str:
    return "not available offline" if value is None else f"{value:.3f}"


def _settings(overrides: dict) -> str:
    return ", ".join(f"`{k}={v:g}`" if isinstance(v, float) else f"`{k}={v}`" for k, v in overrides.items())


def render(results: dict) -> str:
    r = results
    cfg, ingest, pub, tuned, tuning = r["config"], r["ingest"], r["published"], r["tuned"], r["tuning"]
    lines = [SECTION, "",
             meta_line(r["meta"]) + " Reproduce: `make bench-quality` (= `.venv/bin/python -m benchmarks.scifact`; "
             "`--fresh` rebuilds the stores), then `make report`.", ""]
    if r.get("scoring") == SCORING:
        lines += [f"Scoring: trec_eval semantics (`-c`): all {r['test_queries']} judged test claims count, a claim "
                  "missing from a run scores 0; nDCG@10 with linear gains, recall@100 of the judged documents.", ""]
    lines += [f"Corpus: {r['documents']:,} abstracts → {r['chunks']:,} chunks (one per abstract: "
              f"`chunking.max_tokens={cfg['chunking_max_tokens']}`, title + abstract indexed). The corpus and "
              f"claim vectors are encoded once and cached under `build/` ({ingest['encoded_this_run']:,} texts "
              f"encoded by this run); both stores are then ingested through the real ingest path. "
              f"{r['test_queries']} test claims, {r['test_qrels']} judgements. Retrieval with the tuned settings "
              f"(both legs, query encoding included, + fusion) p50 {r['latency_ms']['p50']:.1f} ms, mean "
              f"{r['latency_ms']['mean']:.1f} ms per query (cores shared with other work: indicative only).", "",
              f"**Test split**, every row measured through `retrieve.run` over an ingested store. Default: the "
              f"shipped config (BM25 k1 = {cfg['bm25_k1']:g}, b = {cfg['bm25_b']:g}, title and abstract as one "
              f"field, RRF k = {r['default_fusion']['k']}). Tuned: {_settings(tuned['overrides'])}, chosen on "
              f"the {r['train_queries']} train claims only:", "",
              f"| system | nDCG@10{_ci_header(r['rows'])} | recall@100 | published nDCG@10 |", "|---|---:|---:|---|"]
    for row in r["rows"]:
        recall = "—" if row["recall100"] is None else f"{row['recall100']:.3f}"
        lines.append(f"| {row['label']} | {_metric(row['ndcg10'])}{_ci(row)} | {recall} | "
                     f"{_published(pub.get(row['key']))} |")
    lines += ["", "Published anchors: " + "; ".join(f"{_published(p)} ({p['source']})" for p in pub.values())
              + ". Ours use the project's own tokenizer (identifier-preserving, plural stemming only)."]
    if r.get("rerank_reason"):
        lines += ["", f"Fused + rerank: not available offline — {r['rerank_reason']}"]
    lines += _rerank_lines(r)
    lines += shipped_lines(r)
    bm25, fusion = tuning["bm25"], tuning["fusion"]
    base = tuning["bm25_default"]
    lines += ["", f"**Tuning on the {r['train_queries']} train claims** (NumPy over the cached vectors and the "
              f"project's own BM25 weights, `benchmarks/scifact_tune.py`; the test split was not used to choose). "
              f"BM25: {tuning['bm25_settings']} settings of k1 × b × heading (title) weight, ranked by the keyword "
              f"leg's own train nDCG@10 (default {base['ndcg10']:.3f}); best {r['rows_shown']}:", "",
              "| k1 | b | title weight | train nDCG@10 | train recall@100 |", "|---:|---:|---:|---:|---:|"]
    for row in bm25[:r["rows_shown"]]:
        lines.append(f"| {row['k1']:g} | {row['b']:g} | {row['heading_weight']:g} | {row['ndcg10']:.3f} | "
                     f"{row['recall100']:.3f} |")
    lines += ["", f"Fusion: {tuning['fusion_settings']} settings (RRF k × leg weights; convex alpha × "
              f"normalisation, Bruch et al. 2023) for each of the {tuning['shortlist']} best BM25 settings "
              f"(dense leg alone on train: {tuning['dense']['ndcg10']:.3f}); best {r['rows_shown']}:", "",
              "| k1 | b | title weight | fusion | train nDCG@10 | train recall@100 |", "|---:|---:|---:|---|---:|---:|"]
    for row in fusion[:r["rows_shown"]]:
        lines.append(f"| {row['k1']:g} | {row['b']:g} | {row['heading_weight']:g} | {row['fusion']} | "
                     f"{row['ndcg10']:.3f} | {row['recall100']:.3f} |")
    check, t, d = r["numpy_check"], r["tuned_test"], r["default_test"]
    lines += ["", f"The chosen setting on **test** through the pipeline: nDCG@10 {t['ndcg10']:.3f}, recall@100 "
              f"{t['recall100']:.3f} (default config: {d['ndcg10']:.3f}, {d['recall100']:.3f}); the NumPy "
              f"re-implementation gives {check['tuned_ndcg10']:.3f} and {check['default_ndcg10']:.3f} on the same "
              f"split, so the sweep ranks settings as the pipeline would.", "", verdict(r)]
    return "\n".join(lines) + "\n"


def _ci_header(rows: list[dict]) -> str:
    return " [95 % bootstrap interval over claims]" if any(row.get("ndcg10_ci95") for row in rows) else ""


def _ci(row: dict) -> str:
    ci = row.get("ndcg10_ci95")
    return f" [{ci[0]:.3f}–{ci[1]:.3f}]" if ci else ""


def _paired_row(name: str, p: dict) -> str:
    lo, hi = p["interval"]
    return (f"| {name} | {p['mean_difference']:+.4f} | [{lo:+.4f}, {hi:+.4f}] | {p['better']} / {p['worse']} / "
            f"{p['tied']} | {p['wilcoxon_p']:.3g} |")


def shipped_lines(r: dict) -> list[str]:
    """The shipped chunking's rows and their paired comparison with one chunk per abstract."""
    sc = r.get("shipped_chunking")
    if not sc:
        return []
    out = ["", f"**The shipped chunking** (`chunking.max_tokens={sc['max_tokens']}`, "
           f"`overlap_tokens={sc['overlap_tokens']}`: {r['documents']:,} abstracts → {sc['chunks']:,} chunks; "
           "retrieval only, a document ranked at its best chunk, so the top 100 chunks can hold fewer than 100 "
           "documents). Test split, same claims and scoring:", "",
           "| system | nDCG@10 [95 % bootstrap interval over claims] | recall@100 |", "|---|---:|---:|"]
    out += [f"| {row['label']} | {_metric(row['ndcg10'])}{_ci(row)} | {row['recall100']:.3f} |" for row in sc["rows"]]
    first = next(iter(sc["paired"].values()))
    out += ["", f"Shipped chunking minus one chunk per abstract, paired over the same {first['queries']} claims "
            f"(per-claim nDCG@10 difference; 95 % bootstrap interval of the mean, {first['resamples']:,} resamples; "
            "Wilcoxon signed-rank, two-sided, tied claims dropped):", "",
            "| fused list | mean difference | 95 % interval | better / worse / tied | Wilcoxon p |",
            "|---|---:|---|---|---:|"]
    out += [_paired_row(name, p) for name, p in sc["paired"].items()]
    return out


def _rerank_lines(r: dict) -> list[str]:
    """The rerank rows against the lists they reorder: a paired comparison over the same test claims."""
    rr = r.get("rerank") or {}
    if not rr.get("paired"):
        return []
    first = next(iter(rr["paired"].values()))
    out = ["", f"Rerank vs no rerank, paired over the same {first['queries']} test "
           f"claims (per-claim nDCG@10 difference; 95 % bootstrap interval of the mean, "
           f"{first['resamples']:,} resamples; Wilcoxon signed-rank, two-sided, tied "
           f"claims dropped). The reader was trained to say whether a sentence answers a *question*; SciFact's "
           f"queries are claims, so this measures how it travels, not what it was trained for:", "",
           "| fused list | mean difference | 95 % interval | better / worse / tied | Wilcoxon p |",
           "|---|---:|---|---|---:|"]
    out += [_paired_row(name, p) for name, p in rr["paired"].items()]
    by_key = {row["key"]: row for row in r["rows"]}
    best = max((by_key[k] for k in ("rerank", "rerank_tuned") if k in by_key and by_key[k]["ndcg10"] is not None),
               key=lambda row: row["ndcg10"], default=None)
    if best is not None:
        target = r["target"]["ndcg10"]
        out += ["", f"Target with the offline rerank (nDCG@10 ≥ {target:g}): best reranked row {best['ndcg10']:.3f}, "
                + ("**met**." if best["ndcg10"] >= target else "**not met**.")]
    return out


def verdict(r: dict) -> str:
    by_key = {row["key"]: row for row in r["rows"]}
    target = r["target"]
    tuned, default = by_key["fused_tuned"], by_key["fused"]
    best_leg = max(("keyword", "dense"), key=lambda k: by_key[k]["ndcg10"])
    met = tuned["ndcg10"] >= target["ndcg10"] and tuned["recall100"] >= target["recall100"]
    return (f"Tuned fusion moves test nDCG@10 {100 * (tuned['ndcg10'] - default['ndcg10']):+.1f} points over the "
            f"default ({default['ndcg10']:.3f} → {tuned['ndcg10']:.3f}; the better single leg, {best_leg}, "
            f"{by_key[best_leg]['ndcg10']:.3f}) and recall@100 {100 * (tuned['recall100'] - default['recall100']):+.1f}"
            f" points. Target (nDCG@10 ≥ {target['ndcg10']:g}, recall@100 ≥ {target['recall100']:g}): "
            + ("**met**." if met else "**not met** with the packaged MiniLM embedder."))


# -- measuring ----------------------------------------------------------------------------------------------

def _scores(run: dict[str, list[str]], qrels: dict[str, dict[str, int]]) -> dict:
    ndcg, recall = evaluate(run, qrels)
    return {"ndcg10": ndcg, "recall100": recall, "ndcg10_ci95": ndcg_interval(run, qrels)}


def leg_rows(runs: LegRuns, tuned: LegRuns, tuned_label: str, default_label: str, prefix: str = "",
             qrels: dict | None = None) -> list[dict]:
    """One row per leg and fused list (the keyword leg under both BM25 settings), scored on ``qrels``."""
    return [{"key": prefix + key, "label": label, **_scores(run, qrels)}
            for key, label, run in (("keyword", "keyword leg (BM25)", runs.keyword),
                                    ("keyword_tuned", "keyword leg (BM25, tuned)", tuned.keyword),
                                    ("dense", "dense leg (MiniLM)", runs.dense),
                                    ("fused", default_label, runs.fused),
                                    ("fused_tuned", tuned_label, tuned.fused))]


TARGET = {"ndcg10": 0.74, "recall100": 0.95}
SCORING = "trec_eval -c"   # every judged claim counts; one missing from a run scores 0
SHIPPED_OVERRIDES = {"ingest.passage_vectors": False}   # the shipped chunking: only passage vectors are left off
DEPENDS = Depends(("benchmarks/scifact.py", "benchmarks/scifact_tune.py", "pipeline/retrieval", "pipeline/ingestion",
                   "pipeline/text", "pipeline/models", "pipeline/storage", "pipeline/engine.py", "pipeline/trace.py",
                   "workbench/metrics.py"),
                  ("chunking", "embedding", "keyword", "ingest", "retrieve", "rerank", "gate"))
VECTOR_CACHE = ROOT / "build" / "scifact-vectors.npz"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.scifact", description=__doc__.splitlines()[0])
    parser.add_argument("--store", type=Path, default=ROOT / "build" / "scifact-store")
    parser.add_argument("--fresh", action="store_true", help="rebuild the stores (the vector cache is kept)")
    parser.add_argument("--shortlist", type=int, default=4, help="BM25 settings whose fusion is swept")
    parser.add_argument("--rerank-candidates", type=int, default=None, metavar="N",
                        help="fused candidates the cross-encoder reorders (default: the shipped rerank.candidates)")
    args = parser.parse_args(argv)

    from benchmarks import scifact_tune as tune
    from pipeline.models.encoders import set_torch_threads

    set_torch_threads(2)
    meta = run_meta(model=f"{EMBEDDER}; cross-encoder: not resolved", depends=DEPENDS)
    data = locate_data()
    corpus, queries = load_corpus(data), load_queries(data)
    qrels_test, qrels_train = load_qrels(data, "test"), load_qrels(data, "train")
    cfg, models = bench_config(), Models()
    cached = tune.CachedEmbedder(VECTOR_CACHE, lambda: models.embedder(cfg.embedding))
    ingest_models = Models(embedder=cached)

    # 1. choose on train (NumPy over cached vectors)
    train_ids, test_ids = sorted(qrels_train, key=int), sorted(qrels_test, key=int)
    table = tune.build_corpus(corpus, cfg, cached)
    train_vectors = cached.encode([queries[q] for q in train_ids])
    tuning = tune.sweep(table, train_ids, [queries[q] for q in train_ids], train_vectors, qrels_train, evaluate,
                        shortlist=args.shortlist)
    best = tuning["fusion"][0]
    overrides = tune.overrides_for(best)
    tuned_cfg = cfg.with_overrides(overrides)

    # 2. measure on test through the pipeline: the default config and the chosen one
    same_index = tuned_cfg.keyword == cfg.keyword
    stores = {"default": args.store, "tuned": args.store if same_index else args.store.with_name(
        args.store.name + "-tuned")}
    candidates = args.rerank_candidates or cfg.rerank.candidates
    runs, chunks, ingest_s, reranked, rerank_reasons = {}, 0, {}, {}, {}
    for name, config in (("default", cfg), ("tuned", tuned_cfg)):
        store, ingest_s[name] = open_store(stores[name], args.fresh and not (name == "tuned" and same_index),
                                           corpus, config, ingest_models)
        try:
            runs[name] = collect_runs(queries, test_ids, config, store, models)
            chunks = store.chunk_count()
            reranked[name], rerank_reasons[name] = rerank_run(queries, test_ids, config, store, models, candidates)
        finally:
            store.close()

    # 3. the NumPy re-implementation on test, as a check that the sweep ranks settings as the pipeline does
    test_vectors = cached.encode([queries[q] for q in test_ids])
    dense_test = tune.dense_runs(table.vectors, test_vectors, cfg.retrieve.dense_top_k)
    numpy_check = {}
    for name, config, setting in (("default", cfg, {"method": "rrf", "k": cfg.retrieve.rrf_k, "weights": (
            cfg.retrieve.dense_weight, cfg.retrieve.keyword_weight)}), ("tuned", tuned_cfg, best["setting"])):
        kw = config.keyword
        matrix, vocab = tune.keyword_matrix(table, kw.k1, kw.b, kw.heading_weight)
        legs = tune.keyword_runs(matrix, vocab, [queries[q] for q in test_ids], config.retrieve.keyword_top_k)
        numpy_check[f"{name}_ndcg10"] = _scores(tune.fused_doc_runs(table, test_ids, dense_test, legs, setting),
                                                qrels_test)["ndcg10"]

    rc = cfg.retrieve
    tuned_label = f"fused, tuned ({best['fusion']}; BM25 k1 = {best['k1']:g}, b = {best['b']:g}, title weight " \
                  f"{best['heading_weight']:g})"
    default_label = f"fused, default (RRF k = {rc.rrf_k})"
    rows = leg_rows(runs["default"], runs["tuned"], tuned_label, default_label, qrels=qrels_test)

    # 4. the shipped chunking (a long abstract is several chunks; a document ranks at its best chunk)
    shipped, shipped_chunks = {}, 0
    base = PipelineConfig().with_overrides(SHIPPED_OVERRIDES)
    shipped_same = base.with_overrides(overrides).keyword == base.keyword
    for name, config in (("default", base), ("tuned", base.with_overrides(overrides))):
        home = args.store.with_name(args.store.name + ("-shipped" if name == "default" or shipped_same
                                                      else "-shipped-tuned"))
        store, ingest_s[f"shipped_{name}"] = open_store(home, args.fresh and not (name == "tuned" and shipped_same),
                                                        corpus, config, ingest_models)
        try:
            shipped[name] = collect_runs(queries, test_ids, config, store, models)
            shipped_chunks = store.chunk_count()
        finally:
            store.close()
    shipped_rows = leg_rows(shipped["default"], shipped["tuned"], tuned_label, default_label, "shipped_", qrels_test)
    chunking_paired = {label: paired(one[name].fused, shipped[name].fused, qrels_test)
                       for label, name, one in (("fused, default", "default", runs),
                                                ("fused, tuned", "tuned", runs))}
    rerank_label = f"rerank ({cfg.rerank.model}, {cfg.rerank.granularity} granularity, {cfg.rerank.order} order, " \
                   f"top {candidates})"
    paired_tests = {}
    for name, key, fused_key in (("default", "rerank", "fused"), ("tuned", "rerank_tuned", "fused_tuned")):
        base_label = next(row["label"] for row in rows if row["key"] == fused_key)
        if reranked[name] is None:
            rows.append({"key": key, "label": f"{base_label} + rerank", "ndcg10": None, "recall100": None})
            continue
        rows.append({"key": key, "label": f"{base_label} + {rerank_label}", **_scores(reranked[name], qrels_test)})
        fused_run = runs[name].fused
        paired_tests[name] = paired(fused_run, reranked[name], qrels_test)
    rerank_reason = rerank_reasons["default"] or rerank_reasons["tuned"]
    if not rerank_reason:
        meta["model"] = f"{EMBEDDER}; cross-encoder {cfg.rerank.model} (int8 ONNX, trained here)"
    bm25_default = next(row for row in tuning["bm25"] if (row["k1"], row["b"], row["heading_weight"]) == (
        cfg.keyword.k1, cfg.keyword.b, cfg.keyword.heading_weight))
    latency = runs["tuned"].latency_ms
    results = {
        "meta": meta,
        "config": {"overrides": BENCH_OVERRIDES, "chunking_max_tokens": cfg.chunking.max_tokens,
                   "bm25_k1": cfg.keyword.k1, "bm25_b": cfg.keyword.b, "embedding_batch_size": cfg.embedding.batch_size,
                   "dense_top_k": rc.dense_top_k, "keyword_top_k": rc.keyword_top_k},
        "documents": len(corpus), "chunks": chunks, "scoring": SCORING,
        "shipped_chunking": {"max_tokens": base.chunking.max_tokens, "overlap_tokens": base.chunking.overlap_tokens,
                             "chunks": shipped_chunks, "rows": shipped_rows, "paired": chunking_paired},
        "ingest": {"encoded_this_run": cached.encoded, "vector_cache": str(VECTOR_CACHE.relative_to(ROOT)),
                   "ingest_seconds": ingest_s},
        "test_queries": len(test_ids), "test_qrels": sum(len(v) for v in qrels_test.values()),
        "train_queries": len(train_ids),
        "latency_ms": {"mean": statistics.fmean(latency), "p50": statistics.median(latency), "n": len(latency)},
        "rows": rows, "rerank_reason": rerank_reason, "published": PUBLISHED, "target": TARGET,
        "rerank": {"candidates": candidates, "model": cfg.rerank.model, "granularity": cfg.rerank.granularity,
                   "order": cfg.rerank.order, "paired": paired_tests},
        "tuned": {"overrides": overrides, "fusion": best["fusion"], "train": {"ndcg10": best["ndcg10"],
                                                                               "recall100": best["recall100"]}},
        "tuning": {"bm25": tuning["bm25"], "bm25_default": bm25_default, "bm25_settings": len(tuning["bm25"]),
                   "dense": tuning["dense"], "shortlist": args.shortlist,
                   "fusion_settings": len(tune.fusion_settings()),
                   "fusion": [{k: v for k, v in row.items() if k != "setting"} for row in tuning["fusion"]]},
        "rows_shown": 8,
        "default_fusion": {"k": rc.rrf_k, "dense_weight": rc.dense_weight, "keyword_weight": rc.keyword_weight},
        "default_test": _scores(runs["default"].fused, qrels_test),
        "tuned_test": _scores(runs["tuned"].fused, qrels_test),
        "numpy_check": numpy_check}
    path = write_results(NAME, results)
    print(render(load_results(NAME)))
    print(f"wrote {path}; run `make report` to update BENCHMARKS.md", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
