"""Retrieval hit@k on the demo golden set: does a retrieval setting tuned elsewhere hurt the demo corpus?

``python -m benchmarks.golden_retrieval`` ingests ``golden/corpus`` with the real all-MiniLM-L6-v2 embedder
(default chunking; no passage vectors, nothing is validated here) and runs the answerable golden questions
through :func:`pipeline.retrieval.retrieve.run`, under the shipped config and under the setting
``benchmarks/results/scifact.json`` chose on SciFact train (or ``--set key=value`` overrides). A question hits at
k when one of its expected documents is among the first k documents of the fused list. Questions with a history
are asked as written (no rewrite), so they are the hard part of this number. Writes
``benchmarks/results/golden_retrieval.json``; :func:`render` is its BENCHMARKS.md section.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from benchmarks.results_io import ROOT, load_results, meta_line, run_meta, write_results
from pipeline.config import ConfigError, PipelineConfig
from pipeline.context import StageContext
from pipeline.ingestion.ingest import ingest_paths
from pipeline.models.encoders import set_torch_threads
from pipeline.models.registry import Models
from pipeline.retrieval import retrieve
from pipeline.storage.store import Store

NAME = "golden_retrieval"
SECTION = "## Retrieval hit@k on the demo golden set"
KS = (1, 3, 5, 10, 20)
OVERRIDES = {"ingest.passage_vectors": False}


def hits_at(doc_order: list[str], expected: tuple[str, ...]) -> dict[int, bool]:
    """Per k: whether one of ``expected`` is among the first k documents."""
    return {k: bool(set(doc_order[:k]) & set(expected)) for k in KS}


def doc_order(trace) -> list[str]:
    return list(dict.fromkeys(c.doc_id for c in trace.candidates))


def measure(cfg: PipelineConfig, store_dir: Path, cases, models: Models) -> dict:
    with Store.open(store_dir) as store:
        ingest_paths(store, [ROOT / "golden" / "corpus"], cfg, models, progress=False)
        ctx = StageContext(models, store, cfg.embedding)
        per_case, misses = {}, []
        for case in cases:
            order = doc_order(retrieve.run(case.question, cfg.retrieve, ctx))
            per_case[case.id] = hits_at(order, case.expected_doc_ids)
            if not per_case[case.id][max(KS)]:
                misses.append(case.id)
    n = len(per_case)
    return {"hit_at": {str(k): sum(h[k] for h in per_case.values()) / n for k in KS}, "questions": n,
            "missed_at_max_k": misses, "per_case": {cid: [h[k] for k in KS] for cid, h in per_case.items()}}


def render(results: dict) -> str:
    r = results
    lines = [SECTION, "", meta_line(r["meta"]) + " Reproduce: `.venv/bin/python -m benchmarks.golden_retrieval`.", "",
             f"{r['questions']} answerable golden questions (asked as written, no rewrite), demo corpus ingested "
             "with the default chunking. Settings: " + "; ".join(f"**{s['label']}** "
                                                                 f"({s['description']})" for s in r["settings"]) + ".",
             "", "| setting | " + " | ".join(f"hit@{k}" for k in KS) + " |", "|---|" + "---:|" * len(KS)]
    for s in r["settings"]:
        lines.append(f"| {s['label']} | " + " | ".join(f"{s['hit_at'][str(k)]:.3f}" for k in KS) + " |")
    base, other = r["settings"][0], r["settings"][-1]
    changed = sorted(cid for cid in base["per_case"] if base["per_case"][cid] != other["per_case"].get(cid))
    lines += ["", f"Questions whose hits changed between the two: {', '.join(changed) if changed else 'none'}."]
    return "\n".join(lines) + "\n"


def _overrides(pairs: list[str]) -> dict:
    out = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep:
            raise ConfigError(f"--set takes key=value; got {pair!r}")
        out[key.strip()] = value.strip()
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.golden_retrieval", description=__doc__.splitlines()[0])
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="the setting to compare with the default (default: the one scifact.json chose)")
    parser.add_argument("--store", type=Path, default=ROOT / "build" / "golden-retrieval")
    args = parser.parse_args(argv)
    from workbench.golden import load_golden

    set_torch_threads(2)
    try:
        tuned = _overrides(args.set) if args.set else load_results("scifact")["tuned"]["overrides"]
        default_cfg = PipelineConfig().with_overrides(OVERRIDES)
        tuned_cfg = default_cfg.with_overrides(tuned)
    except (ConfigError, FileNotFoundError, KeyError) as exc:
        print(f"golden_retrieval: {exc}", file=sys.stderr)
        return 2
    cases = [c for c in load_golden(ROOT / "golden" / "golden.jsonl").cases if c.answerable and c.expected_doc_ids]
    models = Models()
    meta = run_meta(model="all-MiniLM-L6-v2 (packaged, offline)")
    settings = []
    for label, cfg, desc, sub in (("default", default_cfg, "the shipped config", "default"),
                                  ("tuned on SciFact", tuned_cfg, ", ".join(f"{k}={v}" for k, v in tuned.items()),
                                   "tuned")):
        settings.append({"label": label, "description": desc, "overrides": tuned if sub == "tuned" else {},
                         **measure(cfg, args.store / sub, cases, models)})
    results = {"meta": meta, "questions": len(cases), "ks": list(KS), "settings": settings}
    path = write_results(NAME, results)
    print(render(load_results(NAME)))
    print(f"wrote {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
