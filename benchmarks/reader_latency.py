"""The reader's cost on the answer path: today's stack against the reader's, in one run, on the same queries.

``python -m benchmarks.reader_latency`` (``make bench-reader``) times, per query, the whole non-LLM path

    retrieve -> rerank -> gate -> extractive answer -> validate

two ways, alternating query by query so both see the same machine load:

- **without the reader** (``rerank.enabled=false``: the learned gate on the similarity signals, the term-coverage
  extractive answer) — the stack before the reader;
- **with the reader** (the shipped default: the fused top ``rerank.candidates`` scored sentence by sentence by the
  int8 reader, the learned gate with the reader's score, the reader's quotes).

On two corpora: the synthetic support corpus of :mod:`benchmarks.perf` at ``--chunks`` (default 100,000; its dense
index holds random unit vectors, queries are embedded by the real MiniLM, the keyword leg is real BM25 — see
``benchmarks/perf.py``; the store is built once under ``bench-output/`` and reused with ``--reuse``), and the demo
corpus with the golden set's questions (real text, real vectors). Reported: p50 / p95 per stack and stage, the pairs
the reader read per query, and the ratio of the p95s. The reader does not take part in ingestion (it reads at query
time only), so ingestion speed is not re-measured here.

Writes ``benchmarks/results/reader_latency.json``; :func:`render` is the BENCHMARKS.md section.
"""

from __future__ import annotations

import argparse
import dataclasses
import time
from pathlib import Path

import numpy as np

from benchmarks.perf import RandomEmbedder
from benchmarks.results_io import (
    ANSWER_CONFIG,
    ANSWER_PATH,
    ROOT,
    Depends,
    load_average,
    meta_line,
    run_meta,
    write_results,
)
from benchmarks.synthetic import build_corpus, make_queries
from pipeline.config import PipelineConfig
from pipeline.context import StageContext
from pipeline.engine import rerank_stop_at
from pipeline.gate import stage as gate
from pipeline.generation import generate
from pipeline.ingestion.ingest import ingest_documents, ingest_paths
from pipeline.models.encoders import set_torch_threads
from pipeline.models.registry import Models
from pipeline.retrieval import rerank, retrieve
from pipeline.storage.store import Store
from pipeline.validation import citations
from workbench.golden import load_golden

DEPENDS = Depends(("benchmarks/reader_latency.py", "benchmarks/synthetic.py", "pipeline/storage", *ANSWER_PATH,
                   "golden/corpus"), ANSWER_CONFIG)
NAME = "reader_latency"
GOAL_P95_MS = 400
STAGES = ("retrieve", "rerank", "gate", "generate", "validate")


def one_path(query: str, cfg: PipelineConfig, models: Models, store: Store) -> tuple[dict[str, float], int]:
    """Milliseconds per stage of one query's answer path, and the pairs the reader read."""
    ctx = StageContext(models, store, cfg.embedding)
    t = [time.perf_counter()]
    ret = retrieve.run(query, cfg.retrieve, ctx)
    t.append(time.perf_counter())
    rr = rerank.run(query, ret, cfg.rerank, models, rerank_stop_at(cfg.gate))
    t.append(time.perf_counter())
    g = gate.run(ret, rr, cfg.gate)
    t.append(time.perf_counter())
    by_id = {c.chunk_id: c for c in ret.candidates}
    ranked = tuple(by_id[r.chunk_id] for r in rr.candidates) if rr.status == "ran" else ret.candidates
    gen = generate.run(query, query, ranked, cfg.generate, ctx, rr.unit_scores())
    t.append(time.perf_counter())
    if g.decision == "answer" and not gen.is_abstention:
        citations.run(gen, ranked, cfg.validate, ctx)
    t.append(time.perf_counter())
    return {s: (t[i + 1] - t[i]) * 1000 for i, s in enumerate(STAGES)}, rr.pairs_scored


def _stats(values: list[float]) -> dict:
    return {"p50": round(float(np.percentile(values, 50)), 1), "p95": round(float(np.percentile(values, 95)), 1),
            "n": len(values)}


def compare(queries: list[str], store: Store, models: Models, passes: int) -> dict:
    """Both stacks, alternating per query; the first five queries of each are warm-up."""
    base = PipelineConfig()
    stacks = {"without_reader": dataclasses.replace(base, rerank=dataclasses.replace(base.rerank, enabled=False)),
              "with_reader": base}
    for q in queries[:5]:
        for cfg in stacks.values():
            one_path(q, cfg, models, store)
    rows: dict[str, dict[str, list[float]]] = {k: {s: [] for s in (*STAGES, "path")} for k in stacks}
    pairs: list[int] = []
    for _ in range(passes):
        for q in queries:
            for name, cfg in stacks.items():
                ms, n = one_path(q, cfg, models, store)
                for s in STAGES:
                    rows[name][s].append(ms[s])
                rows[name]["path"].append(sum(ms.values()))
                if name == "with_reader":
                    pairs.append(n)
    out = {name: {s: _stats(v) for s, v in r.items()} for name, r in rows.items()}
    out["pairs_per_query"] = _stats([float(p) for p in pairs])
    out["p95_ratio"] = round(out["with_reader"]["path"]["p95"] / out["without_reader"]["path"]["p95"], 2)
    return out


def synthetic_store(chunks: int, out: Path, reuse: bool) -> tuple[Store, list[str]]:
    docs, made = build_corpus(chunks)
    store = Store.open(out / f"perf-{chunks}")
    if not (reuse and store.chunk_count() == len(made)):
        ingest_documents(store, docs, PipelineConfig(), Models(embedder=RandomEmbedder()), progress=False)
    return store, make_queries(made, 40)


def demo_store(out: Path, models: Models) -> tuple[Store, list[str]]:
    store = Store.open(out / "reader-demo")
    ingest_paths(store, [ROOT / "golden" / "corpus"], PipelineConfig(), models, progress=False)
    return store, [c.question for c in load_golden(ROOT / "golden" / "golden.jsonl").cases][:80]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--chunks", type=int, default=100_000)
    parser.add_argument("--passes", type=int, default=2)
    parser.add_argument("--threads", type=int, default=2, help="torch / ONNX Runtime threads (default 2)")
    parser.add_argument("--out", type=Path, default=ROOT / "bench-output")
    parser.add_argument("--reuse", action="store_true", help="keep a synthetic store already built")
    args = parser.parse_args(argv)
    set_torch_threads(args.threads)
    meta = run_meta(depends=DEPENDS, model="reader: workbench/answerability-reader (int8 ONNX); embedder "
                    "all-MiniLM-L6-v2 (packaged); "
                    "extractive generator", threads=args.threads)
    models = Models()
    results: dict = {"meta": meta, "goal_p95_ms": GOAL_P95_MS, "corpora": {}}
    store, queries = synthetic_store(args.chunks, args.out, args.reuse)
    with store:
        results["corpora"]["synthetic"] = {"chunks": store.chunk_count(), **compare(queries, store, models,
                                                                                    args.passes)}
    store, queries = demo_store(args.out, models)
    with store:
        results["corpora"]["demo"] = {"chunks": store.chunk_count(), **compare(queries, store, models, 1)}
    meta["load_average_end"] = load_average()
    print(write_results(NAME, results))
    return 0


def render(results: dict) -> str:
    lines = ["## Reader latency: the answer path with and without the reader", "",
             meta_line(results["meta"]) + f" {results['meta'].get('threads', '?')} threads. Written by "
             "`make bench-reader` (`python -m benchmarks.reader_latency`).", "",
             "retrieve + rerank + gate + extractive answer + validate per query, in ms; both stacks in the same run, "
             "alternating query by query. Without the reader: `rerank.enabled=false` (the learned gate on the "
             "similarity signals, term-coverage quotes). With the reader: the shipped default (the fused top "
             "candidates' sentences scored by the int8 reader).", "",
             "| corpus | chunks | stack | path p50 | path p95 | rerank p95 | pairs read (p50 / p95) | goal p95 |",
             "|---|---:|---|---:|---:|---:|---:|---:|"]
    for name, c in results["corpora"].items():
        for stack in ("without_reader", "with_reader"):
            s = c[stack]
            pairs = (f"{c['pairs_per_query']['p50']:.0f} / {c['pairs_per_query']['p95']:.0f}"
                     if stack == "with_reader" else "—")
            met = "" if name != "synthetic" or stack != "with_reader" else (
                f"≤ {results['goal_p95_ms']} ({'met' if s['path']['p95'] <= results['goal_p95_ms'] else 'missed'})")
            lines.append(f"| {name} | {c['chunks']:,} | {stack.replace('_', ' ')} | {s['path']['p50']:.0f} | "
                         f"{s['path']['p95']:.0f} | {s['rerank']['p95']:.0f} | {pairs} | {met} |")
    lines += ["", "Ratio of the p95s (with / without the reader): " + ", ".join(
        f"{name} {c['p95_ratio']:.2f}x" for name, c in results["corpora"].items()) + ".", ""]
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
