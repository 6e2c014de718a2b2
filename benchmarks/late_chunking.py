"""Passage vectors by late chunking vs separate encoding: ingestion speed and validator agreement.

``python -m benchmarks.late_chunking`` ingests the first ``--documents`` demo documents (``golden/corpus``, by
id) with the real all-MiniLM-L6-v2 embedder three times into fresh stores under ``build/late-chunking/``, at the
configured embedding batch size, and reports chunks per second of each whole ingest:

- ``raw``: ``ingest.passage_vectors=false`` (chunk vectors only: what the raw embedder costs),
- ``separate``: every sentence window encoded on its own (the shipped ``ingest.passage_vectors_mode``),
- ``late``: the windows pooled from the chunk's own forward pass (``ingest.passage_vectors_mode=late``).

Agreement: every validated answer of a golden evaluation (``traces.jsonl`` written by ``workbench eval
golden/golden.jsonl --out DIR``) is validated again twice with the same claims and sources, once with the
cited chunks' windows encoded separately and once late-chunked (both through the ingest's own code), and the
verdicts are compared claim by claim; every disagreement is listed. Writes
``benchmarks/results/late_chunking.json``; :func:`render` is its section.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from pathlib import Path

import numpy as np

from benchmarks.results_io import ROOT, Depends, load_results, meta_line, rate_ci, run_meta, write_results
from pipeline.config import PipelineConfig
from pipeline.context import StageContext
from pipeline.ingestion.documents import load_paths
from pipeline.ingestion.ingest import ingest_documents
from pipeline.models.encoders import set_torch_threads
from pipeline.models.registry import Models
from pipeline.storage.store import Store
from pipeline.validation import citations

DEPENDS = Depends(("benchmarks/late_chunking.py", "pipeline/ingestion", "pipeline/models", "pipeline/validation",
                   "golden/corpus"), ("embedding", "chunking", "ingest", "validate"))
NAME = "late_chunking"
SECTION = "## Passage vectors: late chunking vs separate encoding"
MODES = {"raw": {"ingest.passage_vectors": False},
         "separate": {"ingest.passage_vectors": True, "ingest.passage_vectors_mode": "separate"},
         "late": {"ingest.passage_vectors": True, "ingest.passage_vectors_mode": "late"}}
AGREEMENT_FOR_DEFAULT = 0.98
SPEED_TARGET = 0.80


def ingest_speed(mode: str, home: Path, documents, models: Models) -> dict:
    if home.exists():
        shutil.rmtree(home)
    cfg = PipelineConfig().with_overrides(MODES[mode])
    with Store.open(home) as store:
        t0 = time.perf_counter()
        report = ingest_documents(store, documents, cfg, models, progress=False)
        seconds = time.perf_counter() - t0
    return {"chunks": report.chunks, "seconds": seconds, "chunks_per_s": report.chunks / seconds,
            "batch_size": cfg.embedding.batch_size}


class _Vectors:
    """A stand-in store that answers ``passage_vectors`` from vectors computed here."""

    def __init__(self, entries: dict) -> None:
        self.entries = entries

    def passage_vectors(self, chunk_ids: list[str]) -> dict:
        return {cid: self.entries[cid] for cid in chunk_ids if cid in self.entries}


def token_coverage(documents, models: Models) -> dict:
    """Tokens in the documents' chunks (as ingestion chunks and indexes them) and how many of them the raw
    embedder reads: it truncates each chunk to its token window, late chunking reads every token."""
    from pipeline.ingestion.chunking import chunk_document

    cfg = PipelineConfig()
    embedder = models.embedder(cfg.embedding)
    lengths = [embedder.token_count(c.indexed_text) for d in documents for c in chunk_document(d, cfg.chunking)]
    window = embedder.max_tokens
    return {"window": window, "chunks": len(lengths), "tokens": sum(lengths),
            "raw_reads": sum(min(n, window) for n in lengths), "chunks_over_window": sum(n > window for n in lengths)}


def chunk_vectors(candidates, embedder, mode: str) -> dict:
    """What ingestion would store for these chunks under ``mode`` (the ingest's own code path)."""
    from pipeline.ingestion.documents import Chunk
    from pipeline.ingestion.ingest import _late_vectors
    from pipeline.storage.catalogue import StoredPassages
    from pipeline.validation.passages import chunk_passages, passage_key

    chunks = [Chunk(c.chunk_id, c.doc_id, 0, c.text, tuple(c.heading_path), c.kind) for c in candidates]
    windows = [tuple(chunk_passages(c.text)[1:]) for c in chunks]
    if mode == "late":
        dense, rest = _late_vectors(chunks, windows, embedder)
    else:
        vectors = np.asarray(embedder.encode([c.indexed_text for c in chunks] + [w for ws in windows for w in ws]))
        dense, rest = vectors[:len(chunks)], vectors[len(chunks):]
    out, offset = {}, 0
    for i, (c, ws) in enumerate(zip(chunks, windows, strict=True)):
        out[c.chunk_id] = StoredPassages(c.chunk_id, embedder.name, passage_key(c.heading_path, c.text), ws,
                                         np.vstack([dense[i][None, :], rest[offset:offset + len(ws)]]))
        offset += len(ws)
    return out


def agreement(traces: dict, models: Models) -> dict:
    """Re-validate every validated golden answer with the same claims and sources, once with separately encoded
    window vectors and once with late-chunked ones; compare the verdicts claim by claim."""
    cfg = PipelineConfig()
    embedder = models.embedder(cfg.embedding)
    claims, same, disagreements, answers = 0, 0, [], 0
    for case_id, trace in sorted(traces.items()):
        if trace.validation.status != "ran" or not trace.validation.claims:
            continue
        answers += 1
        ranked = trace.ranked_candidates()
        offered = {s.chunk_id for s in trace.generation.sources}
        cited = [c for c in ranked if c.chunk_id in offered]
        runs = {}
        for mode in ("separate", "late"):
            ctx = StageContext(models, _Vectors(chunk_vectors(cited, embedder, mode)), cfg.embedding)
            runs[mode] = citations.run(trace.generation, ranked, cfg.validate, ctx)
        for sep, late in zip(runs["separate"].claims, runs["late"].claims, strict=True):
            claims += 1
            same += sep.verdict == late.verdict
            if sep.verdict != late.verdict:
                disagreements.append({"case": case_id, "claim": sep.text, "separate": sep.verdict,
                                      "late": late.verdict, "separate_best": sep.best_similarity,
                                      "late_best": late.best_similarity})
    return {"cases": len(traces), "answers_validated": answers, "claims": claims,
            "agreement": same / claims if claims else None, "disagreements": disagreements,
            "threshold": cfg.validate.claim_threshold}


def render(results: dict) -> str:
    r, speed, agree = results, results["speed"], results["agreement"]
    raw = speed["raw"]["chunks_per_s"]
    lines = [SECTION, "", meta_line(r["meta"]) + " Reproduce: `.venv/bin/python -m benchmarks.late_chunking`.", "",
             f"The first {r['documents']} demo-corpus documents, {speed['raw']['chunks']} chunks, embedding batch size "
             f"{speed['raw']['batch_size']}, one ingest per mode into a fresh store (cores shared with other work: "
             "indicative only).", "",
             "| passage vectors | ingest seconds | chunks/s | share of raw chunks/s |", "|---|---:|---:|---:|"]
    for mode in ("raw", "separate", "late"):
        s = speed[mode]
        lines.append(f"| {mode} | {s['seconds']:.1f} | {s['chunks_per_s']:.1f} | {s['chunks_per_s'] / raw:.0%} |")
    share = speed["late"]["chunks_per_s"] / raw
    lines += ["", f"Late chunking ingests at {share:.0%} of the raw embedder's chunks/s (target "
              f"{SPEED_TARGET:.0%}: {'met' if share >= SPEED_TARGET else 'not met'}).", ""]
    cover = r.get("tokens")
    if cover:
        lines += [f"The raw embedder reads the first {cover['window']} tokens of a chunk; "
                  f"{cover['chunks_over_window']} of the {cover['chunks']} chunks the chunker makes of these "
                  f"documents are longer, so it reads {cover['raw_reads']:,} of their {cover['tokens']:,} tokens "
                  f"({cover['raw_reads'] / cover['tokens']:.0%}). Late chunking reads every token (the rest in "
                  "continuation passes), because the validator needs a vector for every window: the raw figure "
                  "is for less text.", ""]
    if agree["claims"]:
        lines += [f"Validator agreement: {agree['answers_validated']} validated answers of a golden evaluation "
                  f"({agree['cases']} traces, `{r['traces']}`), {agree['claims']} claims, each re-validated with the "
                  f"same claims and sources against separately encoded and late-chunked window vectors (threshold "
                  f"{agree['threshold']:g}); late vs separate: **{rate_ci(agree['agreement'], agree['claims'])}** "
                  f"({len(agree['disagreements'])} claims differ; making late the default needs "
                  f"{AGREEMENT_FOR_DEFAULT:.0%}: {'met' if agree['agreement'] >= AGREEMENT_FOR_DEFAULT else 'not met'}"
                  ").", ""]
        if agree["disagreements"]:
            lines += ["| case | claim | separate (best cosine) | late (best cosine) |", "|---|---|---|---|"]
            for d in agree["disagreements"]:
                claim = d["claim"].replace("|", "\\|").replace("\n", " ")
                lines.append(f"| {d['case']} | {claim[:90]} | {d['separate']} ({_num(d['separate_best'])}) | "
                             f"{d['late']} ({_num(d['late_best'])}) |")
    else:
        lines.append("Validator agreement: no answer was validated (no claims to compare).")
    return "\n".join(lines) + "\n"


def _num(value: float | None) -> str:
    return "—" if value is None else f"{value:.3f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.late_chunking", description=__doc__.splitlines()[0])
    parser.add_argument("--home", type=Path, default=ROOT / "build" / "late-chunking")
    parser.add_argument("--documents", type=int, default=12, help="demo documents ingested per mode")
    parser.add_argument("--traces", type=Path, default=ROOT / "build" / "correctness-eval" / "traces.jsonl",
                        help="traces.jsonl of a golden evaluation (workbench eval golden/golden.jsonl --out DIR)")
    args = parser.parse_args(argv)
    from workbench.evaluate import read_traces

    if not args.traces.is_file():
        print(f"late_chunking: {args.traces} not found; run `workbench eval golden/golden.jsonl --out "
              f"{args.traces.parent}` first", file=sys.stderr)
        return 2
    set_torch_threads(2)
    documents, _ = load_paths([ROOT / "golden" / "corpus"])
    documents = sorted(documents, key=lambda d: d.doc_id)[:args.documents]
    models = Models()
    models.embedder(PipelineConfig().embedding)  # loaded before any timing
    meta = run_meta(depends=DEPENDS, model="all-MiniLM-L6-v2 (packaged, offline)")
    speed = {mode: ingest_speed(mode, args.home / mode, documents, models) for mode in MODES}
    agree = agreement(read_traces(args.traces), models)
    results = {"meta": meta, "documents": len(documents), "traces": str(args.traces.relative_to(ROOT)),
               "speed": speed, "tokens": token_coverage(documents, models), "agreement": agree}
    path = write_results(NAME, results)
    print(render(load_results(NAME)))
    print(f"wrote {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
