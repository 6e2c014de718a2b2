"""What a search costs when another process holds the store (pipeline/storage/share.py): the holder's own dense
and keyword searches against the same searches served to a second process over the local socket, and ten
processes served at once.

``python -m benchmarks.store_sharing`` ingests ``golden/corpus`` with the deterministic fake embedder (the index
calls are what is measured; the embedder's cost is the same either way), then times :data:`QUERIES` searches of
each leg in the holder and in served processes, in one run. Latencies are per search (p50/p95 over searches);
the served/own ratio is the comparison to read, since the cores are shared. Writes
``benchmarks/results/store_sharing.json``; :func:`render` is its BENCHMARKS.md section.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np

from benchmarks.results_io import ROOT, Depends, load_average, load_results, meta_line, run_meta, write_results

NAME = "store_sharing"
SECTION = "## Store sharing: a served search against the holder's own"
DEPENDS = Depends(("benchmarks/store_sharing.py", "pipeline/storage", "golden/corpus"), ())
QUERIES = 200
PROCESSES = 10

# One process's searches: open the store (served when another holds it), run every query on both legs, print
# the per-search milliseconds and who served it.
SEARCHER = textwrap.dedent("""
    import json, sys, time
    from pipeline.retrieval.bm25 import query_weights, to_sparse
    from pipeline.storage.store import Store
    from pipeline.testing import FakeEmbedder
    from pipeline.text.tokenize import tokenize
    home, questions = sys.argv[1], json.loads(sys.argv[2])
    vectors = FakeEmbedder().encode(questions)
    sparse = [to_sparse(query_weights(tokenize(q))) for q in questions]
    with Store.open(home, lock_wait_s=30) as store:
        dense, keyword = [], []
        for v, (i, w) in zip(vectors, sparse):
            t = time.perf_counter(); store.dense_search(v.tolist(), 10); dense.append((time.perf_counter() - t) * 1000)
            t = time.perf_counter(); store.keyword_search(i, w, 10); keyword.append((time.perf_counter() - t) * 1000)
        print(json.dumps({"served_by": store.served_by, "dense_ms": dense, "keyword_ms": keyword}))
""")


def _stats(ms: list[float]) -> dict:
    return {"p50": float(np.percentile(ms, 50)), "p95": float(np.percentile(ms, 95)), "n": len(ms)}


def _search(home: Path, questions: list[str], processes: int) -> list[dict]:
    procs = [subprocess.Popen([sys.executable, "-c", SEARCHER, str(home), json.dumps(questions)], cwd=ROOT,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(processes)]
    out = []
    for proc in procs:
        stdout, stderr = proc.communicate(timeout=600)
        if proc.returncode:
            raise RuntimeError(f"a searching process failed: {stderr.strip()[-400:]}")
        out.append(json.loads(stdout))
    return out


def measure(home: Path) -> dict:
    from pipeline.config import PipelineConfig
    from pipeline.ingestion.ingest import ingest_paths
    from pipeline.storage.store import Store
    from pipeline.testing import fake_models
    from workbench.golden import load_golden

    shutil.rmtree(home, ignore_errors=True)
    cfg = PipelineConfig().with_overrides({"ingest.passage_vectors": False})
    with Store.open(home) as store:
        ingest_paths(store, [ROOT / "golden" / "corpus"], cfg, fake_models(), progress=False)
        chunks = store.chunk_count()
    questions = [c.question for c in load_golden(ROOT / "golden" / "golden.jsonl").cases][:QUERIES]
    own = _search(home, questions, 1)[0]                     # nobody else holds it: this process is the holder
    assert own["served_by"] == "", own["served_by"]
    with Store.open(home):                                   # now this process holds it and serves the others
        served = _search(home, questions, 1)[0]
        started = time.perf_counter()
        many = _search(home, questions, PROCESSES)
        many_s = time.perf_counter() - started
    assert served["served_by"] and all(m["served_by"] for m in many)
    return {"chunks": chunks, "queries": len(questions), "processes": PROCESSES,
            "own": {leg: _stats(own[f"{leg}_ms"]) for leg in ("dense", "keyword")},
            "served": {leg: _stats(served[f"{leg}_ms"]) for leg in ("dense", "keyword")},
            "many": {leg: _stats([x for m in many for x in m[f"{leg}_ms"]]) for leg in ("dense", "keyword")},
            "many_wall_s": many_s}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.store_sharing", description=__doc__.splitlines()[0])
    parser.add_argument("--store", type=Path, default=ROOT / "build" / "sharing-store")
    parser.add_argument("--print", action="store_true", help="only print the section from the results file")
    args = parser.parse_args(argv)
    if not args.print:
        meta = run_meta(model="fake embedder (deterministic hashing); the index calls are what is timed",
                        depends=DEPENDS)
        results = measure(args.store)
        meta["load_average_end"] = load_average()
        write_results(NAME, {"meta": meta, **results, "reproduce": ".venv/bin/python -m benchmarks.store_sharing"})
    print(render(load_results(NAME)))
    return 0


def render(results: dict) -> str:
    r = results
    rows = []
    for leg in ("dense", "keyword"):
        own, served, many = r["own"][leg], r["served"][leg], r["many"][leg]
        rows.append(f"| {leg} | {own['p50']:.2f} / {own['p95']:.2f} | {served['p50']:.2f} / {served['p95']:.2f} | "
                    f"**{served['p50'] / own['p50']:.1f}×** | {many['p50']:.2f} / {many['p95']:.2f} |")
    return "\n".join([
        SECTION, "", meta_line(r["meta"]) + " Reproduce: `.venv/bin/python -m benchmarks.store_sharing`.", "",
        f"The demo corpus ({r['chunks']} chunks) ingested with the fake embedder; {r['queries']} golden questions "
        "searched on each leg (top 10) by a process that holds the shard, then by one that another process serves "
        f"(`pipeline/storage/share.py`), then by {r['processes']} served processes at once. Milliseconds per search "
        "(p50 / p95); the ratio is measured in one run on the same questions.", "",
        f"| leg | holder's own | served to one process | served / own (p50) | {r['processes']} served at once |",
        "|---|---:|---:|---:|---:|", *rows, "",
        f"- The {r['processes']} processes finished their {r['processes'] * r['queries'] * 2:,} searches in "
        f"{r['many_wall_s']:.1f} s (process start and imports included).", ""]) + "\n"


if __name__ == "__main__":
    sys.exit(main())
