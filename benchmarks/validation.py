"""Validation cost: citations.run for a 1-claim vs a 10-claim answer with the real all-MiniLM-L6-v2.

``python -m benchmarks.validation`` builds six numbered sources from real demo-corpus chunks (the default
``generate.max_sources``), two answers over them — one claim citing one source, and ten claims citing all six
(two with two markers) — and times :func:`pipeline.validation.citations.run` on each: warm-up runs first (model load,
allocator), then ``--runs`` timed runs alternating between the cases so drift hits all of them equally. It
reports p50 / p95 per answer, the 10-claim / 1-claim ratio of the medians, texts per encoder call, and, for
reference, what one encoder call per claim and cited chunk would cost (the unbatched design the one-call
rule replaces) and the 10-claim answer with ``validate.encode_batch_size=64`` (one padded batch), which is
why the default is 8. Nothing is written inside the repository except the BENCHMARKS.md section.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import platform
import statistics
import time
from pathlib import Path

from pipeline.config import PipelineConfig
from pipeline.context import StageContext
from pipeline.ingestion.chunking import chunk_document
from pipeline.ingestion.documents import load_file
from pipeline.models.registry import Models
from pipeline.trace import Candidate, GenerationTrace, Source
from pipeline.validation import citations

ROOT = Path(__file__).resolve().parent.parent
SECTION = "## Validation cost"
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


def measure(runs: int, warmup: int) -> dict:
    load_before = os.getloadavg()[0]
    cfg = PipelineConfig()
    embedder = Models().embedder(cfg.embedding)
    cands, sources = sources_from_corpus(cfg)
    texts = {c.chunk_id: c.text for c in cands}
    padded = dataclasses.replace(cfg.validate, encode_batch_size=64)
    cases = {"1-claim": (ONE_CLAIM, cfg.validate), "10-claim": (TEN_CLAIMS, cfg.validate),
             PADDED: (TEN_CLAIMS, padded)}
    gens = {k: (GenerationTrace(status="answered", sources=sources, answer=a), v) for k, (a, v) in cases.items()}
    for _ in range(warmup):
        for gen, vcfg in gens.values():
            citations.run(gen, cands, vcfg, StageContext(Models(embedder=embedder)))
    times: dict[str, list[float]] = {k: [] for k in gens}
    last = {}
    for _ in range(runs):
        for key, (gen, vcfg) in gens.items():
            calls = embedder.calls
            t0 = time.perf_counter()
            last[key] = citations.run(gen, cands, vcfg, StageContext(Models(embedder=embedder)))
            times[key].append((time.perf_counter() - t0) * 1000)
            assert embedder.calls - calls == 1, "validation must make exactly one encoder call"
    unbatched = []
    for _ in range(max(5, runs // 5)):
        t0 = time.perf_counter()
        for claim in last["10-claim"].claims:
            for score in claim.similarities:  # one call per claim: the claim and its chunks' passages
                embedder.encode([claim.text, *citations.chunk_passages(texts[score.chunk_id])])
        unbatched.append((time.perf_counter() - t0) * 1000)
    rows = {k: {"p50": percentile(v, 0.5), "p95": percentile(v, 0.95), "claims": len(last[k].claims),
                "texts": len(last[k].claims) + sum(len(citations.chunk_passages(texts[cid])) for cid in
                                                   {s.chunk_id for c in last[k].claims for s in c.similarities}),
                "batch": gens[k][1].encode_batch_size,
                "supported": last[k].supported, "unsupported": last[k].unsupported} for k, v in times.items()}
    return {"rows": rows, "ratio": rows["10-claim"]["p50"] / rows["1-claim"]["p50"], "runs": runs,
            "warmup": warmup, "unbatched_p50": statistics.median(unbatched),
            "load": (load_before, os.getloadavg()[0]),
            "machine": f"{platform.machine()}, {os.cpu_count()} logical CPUs, {platform.python_version()}",
            "date": time.strftime("%Y-%m-%d")}


def render(r: dict) -> str:
    lines = [SECTION, "",
             f"Measured {r['date']} on {r['machine']}, CPU only, {r['threads']} torch thread(s) (1-min load "
             f"average {r['load'][0]:.1f} at the start, {r['load'][1]:.1f} at the end: a shared machine, so read "
             "the ratio rather than the milliseconds). Reproduce: `.venv/bin/python -m benchmarks.validation"
             + (f" --threads {r['threads']}" if r.get("threads_flag") else "") + "`.", "",
             "`citations.run` with the real all-MiniLM-L6-v2 (packaged, offline) over six real demo-corpus chunks; "
             f"{r['warmup']} warm-up runs, then {r['runs']} timed runs per answer, alternating.", "",
             "| answer | claims | texts in the one encoder call | mini-batch | p50 ms | p95 ms | verdicts |",
             "|---|---:|---:|---:|---:|---:|---|"]
    for key, row in r["rows"].items():
        lines.append(f"| {key} | {row['claims']} | {row['texts']} | {row['batch']} | {row['p50']:.1f} | "
                     f"{row['p95']:.1f} | {row['supported']} supported, {row['unsupported']} unsupported |")
    lines += ["", f"**10-claim / 1-claim ratio (p50): {r['ratio']:.2f}×** for 10× the claims — one batched "
              "encoder call, so cost grows with the text in the batch, not with a call per claim. One call per "
              f"claim and cited chunk instead would take {r['unbatched_p50']:.1f} ms (p50) before any "
              "similarity is computed. The padded row is why `validate.encode_batch_size` defaults to 8: in one "
              f"batch of 64 every claim is padded to the longest chunk ({r['rows'][PADDED]['p50']:.0f} ms vs "
              f"{r['rows']['10-claim']['p50']:.0f} ms for the same answer).", ""]
    return "\n".join(lines)


def write_section(path: Path, section: str) -> None:
    """Replace (or append) this benchmark's section, leaving every other section of the file alone."""
    text = path.read_text(encoding="utf-8") if path.exists() else "# Benchmarks\n"
    start = text.find(SECTION)
    if start < 0:
        text = text.rstrip("\n") + "\n\n" + section
    else:
        end = text.find("\n## ", start + len(SECTION))
        text = text[:start] + section + ("\n" + text[end + 1:] if end >= 0 else "")
    path.write_text(text, encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.validation", description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--out", type=Path, default=ROOT / "BENCHMARKS.md")
    parser.add_argument("--threads", type=int, default=0,
                        help="torch intra-op threads (0: torch's default); 1 is steadier on a busy machine")
    parser.add_argument("--no-write", action="store_true", help="print the section instead of writing it")
    args = parser.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    results = measure(args.runs, args.warmup)
    results["threads"], results["threads_flag"] = torch.get_num_threads(), bool(args.threads)
    section = render(results)
    print(section)
    if not args.no_write:
        write_section(args.out, section)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
