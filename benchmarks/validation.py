"""Validation cost: citations.run for a 1-claim vs a 10-claim answer with the real all-MiniLM-L6-v2.

``python -m benchmarks.validation`` builds six numbered sources from real demo-corpus chunks (the default
``generate.max_sources``), two answers over them — one claim citing one source, and ten claims citing all six
(two with two markers) — and times :func:`pipeline.validation.citations.run` on each: warm-up runs first (model load,
allocator), then ``--runs`` timed runs alternating between the cases so drift hits all of them equally. It
reports p50 / p95 per answer, the 10-claim / 1-claim ratio of the medians, texts per encoder call, and, for
reference, what one encoder call per claim and cited chunk would cost (the unbatched design the one-call
rule replaces) and the 10-claim answer with ``validate.encode_batch_size=64`` (one padded batch), which is
why the default is small. The validator is given no store here, so every answer's cited passages are encoded
in its one call (the path of a store without passage rows); the stored-passage path is measured by
:mod:`benchmarks.perf`. Writes ``benchmarks/results/validation.json``; :func:`render` turns it into the
BENCHMARKS.md section (``make report``).
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys
import time

from benchmarks.results_io import ROOT, Depends, load_average, load_results, meta_line, run_meta, write_results
from pipeline.config import PipelineConfig
from pipeline.context import StageContext
from pipeline.ingestion.chunking import chunk_document
from pipeline.ingestion.documents import load_file
from pipeline.models.registry import Models
from pipeline.trace import Candidate, GenerationTrace, Source
from pipeline.validation import citations

NAME = "validation"
DEPENDS = Depends(("benchmarks/validation.py", "pipeline/validation", "pipeline/text", "pipeline/models",
                    "pipeline/trace.py"), ("validate", "embedding"))
SECTION = "## Validation cost"
MODEL = "all-MiniLM-L6-v2 (packaged, offline); NLI workbench/nli-check (int8 ONNX)"
SOURCE_FILES = ("errors/err-timeout-502.md", "faq/faq-delivery-retries.md")

ONE_CLAIM = "ERR_TIMEOUT_502 is recorded when the endpoint does not respond within delivery.timeout_ms [1]."
TEN_CLAIMS = (
    "ERR_TIMEOUT_502 is recorded when the subscriber endpoint does not respond within delivery.timeout_ms [1]. "
    "In Harbor Relay 3.1 the default is 15000 ms per attempt [1][5]. "
    "Publishers calling the ingest API never receive this code [1]. "
    "The 502 status is synthetic: Harbor Relay assigns it because no answer arrived [2]. "
    "Common causes are slow handlers, overloaded receivers and packet loss [3]. "
    "The connect timeout of 5000 ms counts toward delivery.timeout_ms; it does not extend it [3]. "
    "A delivery succeeds when the endpoint answers with any 2xx status within the timeout [5]. "
    "Timeouts, refused connections and DNS failures count as failed attempts [5]. "
    "delivery.max_retries defaults to 8, so a delivery is attempted at most 9 times [6]. "
    "After the last failed retry the delivery moves to the dead-letter queue [6, 4]."
)


def sources_from_corpus(cfg: PipelineConfig) -> tuple[tuple[Candidate, ...], tuple[Source, ...]]:
    """The first six prose chunks of two demo documents, as ranked candidates and numbered sources."""
    chunks = []
    for name in SOURCE_FILES:
        docs, _ = load_file(ROOT / "golden" / "corpus" / name)
        chunks += [(docs[0], c) for c in chunk_document(docs[0], cfg.chunking)][:3]
    cands = tuple(Candidate(chunk_id=c.chunk_id, doc_id=d.doc_id, title=d.title, text=c.text) for d, c in chunks)
    return cands, tuple(Source(number=i, chunk_id=c.chunk_id, doc_id=c.doc_id, title=c.title)
                        for i, c in enumerate(cands, start=1))


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    k = (len(ordered) - 1) * q
    lo, hi = int(k), min(int(k) + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


PADDED = "10-claim, one padded batch"
STORED = "10-claim, passages stored"
STORED_NO_NLI = "10-claim, passages stored, NLI off"


class StoredLookup:
    """What a store with passage rows gives the validator: each chunk's windows and vectors, made once here
    with the same embedder exactly as ingestion makes them (``Store.passage_vectors``)."""

    def __init__(self, cands, embedder) -> None:
        from pipeline.storage.catalogue import StoredPassages

        self.rows = {}
        for c in cands:
            windows = tuple(citations.chunk_passages(c.text)[1:])
            vectors = embedder.encode([" > ".join(c.heading_path) + "\n" + c.text, *windows])
            self.rows[c.chunk_id] = StoredPassages(c.chunk_id, embedder.name,
                                                   citations.passage_key(c.heading_path, c.text), windows, vectors)

    def passage_vectors(self, chunk_ids):
        return {cid: self.rows[cid] for cid in chunk_ids if cid in self.rows}


def measure(runs: int, warmup: int) -> dict:
    cfg = PipelineConfig()
    embedder = Models().embedder(cfg.embedding)
    cands, sources = sources_from_corpus(cfg)
    texts = {c.chunk_id: c.text for c in cands}
    padded = dataclasses.replace(cfg.validate, encode_batch_size=64)
    no_nli = dataclasses.replace(cfg.validate, nli="off")
    lookup = StoredLookup(cands, embedder)
    cases = {"1-claim": (ONE_CLAIM, cfg.validate, None), "10-claim": (TEN_CLAIMS, cfg.validate, None),
             PADDED: (TEN_CLAIMS, padded, None), STORED: (TEN_CLAIMS, cfg.validate, lookup),
             STORED_NO_NLI: (TEN_CLAIMS, no_nli, lookup)}
    gens = {k: (GenerationTrace(status="answered", sources=sources, answer=a), v, store)
            for k, (a, v, store) in cases.items()}
    models = Models(embedder=embedder)
    for _ in range(warmup):
        for gen, vcfg, store in gens.values():
            citations.run(gen, cands, vcfg, StageContext(models, store=store))
    times: dict[str, list[float]] = {k: [] for k in gens}
    nli_ms: dict[str, list[float]] = {k: [] for k in gens}
    last = {}
    for _ in range(runs):
        for key, (gen, vcfg, store) in gens.items():
            calls = embedder.calls
            t0 = time.perf_counter()
            last[key] = citations.run(gen, cands, vcfg, StageContext(models, store=store))
            times[key].append((time.perf_counter() - t0) * 1000)
            nli_ms[key].append(last[key].nli_ms)
            assert embedder.calls - calls == 1, "validation must make exactly one encoder call"
    unbatched = []
    for _ in range(max(5, runs // 5)):
        t0 = time.perf_counter()
        for claim in last["10-claim"].claims:
            for score in claim.similarities:  # one call per claim: the claim and its chunks' passages
                embedder.encode([claim.text, *citations.chunk_passages(texts[score.chunk_id])])
        unbatched.append((time.perf_counter() - t0) * 1000)
    rows = [{"answer": k, "p50_ms": percentile(v, 0.5), "p95_ms": percentile(v, 0.95), "claims": len(last[k].claims),
             "texts": len(last[k].claims) + sum(len(citations.chunk_passages(texts[cid])) for cid in
                                                {s.chunk_id for c in last[k].claims for s in c.similarities}),
             "batch": gens[k][1].encode_batch_size, "supported": last[k].supported,
             "unsupported": last[k].unsupported, "stored": gens[k][2] is not None, "nli": last[k].nli_status,
             "nli_pairs": last[k].nli_pairs, "nli_p50_ms": percentile(nli_ms[k], 0.5),
             "nli_p95_ms": percentile(nli_ms[k], 0.95), "times_ms": [round(t, 2) for t in v]}
            for k, v in times.items()]
    return {"runs": runs, "warmup": warmup, "sources": len(sources), "rows": rows, "nli_model": cfg.validate.nli_model,
            "unbatched_p50_ms": statistics.median(unbatched), "unbatched_runs": len(unbatched)}


def render(results: dict) -> str:
    r = results
    rows = {row["answer"]: row for row in r["rows"]}
    one, ten, pad = rows["1-claim"], rows["10-claim"], rows[PADDED]
    lines = [SECTION, "",
             meta_line(r["meta"]) + f" CPU only, {r['threads']} torch thread(s). Reproduce: "
             f"`.venv/bin/python -m benchmarks.validation --threads {r['threads']}`, then `make report`.", "",
             f"`citations.run` over {r['sources']} real demo-corpus chunks as numbered sources. Without stored passage "
             "vectors the one encoder call holds the claims and every cited chunk's passages (a store without "
             "passage rows); with them (the default path: ingestion stores each chunk's window vectors) it holds the "
             f"claims only. The NLI check ({r.get('nli_model', 'not measured')}) then reads each cited claim against "
             "its closest window in one batched call; its own time is in the NLI column. "
             f"{r['warmup']} warm-up runs, then {r['runs']} timed runs per answer, alternating. The machine is "
             "shared, so read the ratios rather than the milliseconds.", "",
             "| answer | claims | texts in the one encoder call | mini-batch | NLI (pairs; p50 / p95 ms) | p50 ms | "
             "p95 ms | verdicts |",
             "|---|---:|---:|---:|---|---:|---:|---|"]
    for row in r["rows"]:
        nli = (f"{row['nli']} ({row['nli_pairs']}; {row['nli_p50_ms']:.1f} / {row['nli_p95_ms']:.1f})"
               if "nli" in row else "not measured")
        texts = row["claims"] if row.get("stored") else row["texts"]
        lines.append(f"| {row['answer']} | {row['claims']} | {texts} | {row['batch']} | {nli} | {row['p50_ms']:.1f} | "
                     f"{row['p95_ms']:.1f} | {row['supported']} supported, {row['unsupported']} unsupported |")
    ratio = ten["p50_ms"] / one["p50_ms"]
    stored, bare = rows.get(STORED), rows.get(STORED_NO_NLI)
    if stored and bare:
        lines += ["", f"**With passages stored, a 10-claim answer: p95 {stored['p95_ms']:.1f} ms with the NLI check, "
                  f"{bare['p95_ms']:.1f} ms without** (p50 {stored['p50_ms']:.1f} / {bare['p50_ms']:.1f}); the NLI "
                  f"check's {stored['nli_pairs']} pairs took p50 {stored['nli_p50_ms']:.1f} ms."]
    lines += ["", f"**10-claim / 1-claim (p50): {ratio:.2f}×** for {ten['claims'] / one['claims']:.0f}× the claims: "
              "one batched encoder call, so cost grows with the text in the batch, not with a call per claim. "
              f"One call per claim and cited chunk instead took {r['unbatched_p50_ms']:.1f} ms (p50 of "
              f"{r['unbatched_runs']} runs, {r['unbatched_p50_ms'] / ten['p50_ms']:.2f}× the batched 10-claim call) "
              "before any similarity is computed. The padded row is why `validate.encode_batch_size` defaults to "
              f"{ten['batch']}: in one batch of {pad['batch']} every text is padded to the longest passage "
              f"({pad['p50_ms'] / ten['p50_ms']:.2f}× the time for the same answer)."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.validation", description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--threads", type=int, default=0,
                        help="torch intra-op threads (0: torch's default); 1 is steadier on a busy machine")
    args = parser.parse_args(argv)
    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    meta = run_meta(model=MODEL, depends=DEPENDS)
    results = {"meta": meta, "threads": torch.get_num_threads(), **measure(args.runs, args.warmup)}
    meta["load_average_end"] = load_average()
    path = write_results(NAME, results)
    print(render(load_results(NAME)))
    print(f"wrote {path}; run `make report` to update BENCHMARKS.md", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
