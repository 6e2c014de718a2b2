"""Retrieval hit@k and passage recall@k on the demo golden set: does a setting tuned elsewhere hurt the demo corpus?

``python -m benchmarks.golden_retrieval`` ingests ``golden/corpus`` with the real all-MiniLM-L6-v2 embedder
(default chunking; no passage vectors, nothing is validated here) and runs the answerable golden questions
through :func:`pipeline.retrieval.retrieve.run`, under the shipped config and under the setting
``benchmarks/results/scifact.json`` chose on SciFact train (or ``--set key=value`` overrides). A question hits at
k when one of its expected documents is among the first k documents of the fused list. Questions with a history
are asked as written (no rewrite), so they are the hard part of this number.

Passage level: a question's relevant chunks are those of its expected documents that state its expected answer
(:mod:`workbench.relevance`); passage recall@k is the share of them among the first k chunks of the fused list,
nDCG@10 that list's nDCG against them (binary gains, :func:`workbench.metrics.ndcg_at_k`). Intervals: Wilson for
hit@k (a rate over questions), a percentile bootstrap over questions for the means. The two settings are compared on
the same questions: McNemar's exact test on hit@10 (SciPy ``binomtest`` on the discordant questions) and, for
passage recall@10 and nDCG@10, :func:`workbench.metrics.paired_difference` (paired bootstrap interval of the mean
difference, Wilcoxon signed-rank). Writes ``benchmarks/results/golden_retrieval.json``; :func:`render` is its
BENCHMARKS.md section.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from benchmarks.results_io import ROOT, Depends, load_results, meta_line, rate_ci, run_meta, write_results
from pipeline.config import ConfigError, PipelineConfig
from pipeline.context import StageContext
from pipeline.ingestion.ingest import ingest_paths
from pipeline.models.encoders import set_torch_threads
from pipeline.models.registry import Models
from pipeline.retrieval import retrieve
from pipeline.storage.store import Store
from workbench.metrics import ndcg_at_k, paired_difference, ratio_bootstrap, recall_at_k
from workbench.relevance import relevant_chunks, store_passages

NAME = "golden_retrieval"
SECTION = "## Retrieval hit@k on the demo golden set"
DEPENDS = Depends(("benchmarks/golden_retrieval.py", "golden/corpus", "golden/golden.jsonl", "pipeline/retrieval",
                   "pipeline/ingestion", "pipeline/text", "pipeline/models", "pipeline/storage", "workbench/metrics.py",
                   "workbench/relevance.py", "workbench/correctness.py"),
                  ("chunking", "embedding", "keyword", "ingest", "retrieve"))
KS = (1, 3, 5, 10, 20)
OVERRIDES = {"ingest.passage_vectors": False}


def hits_at(doc_order: list[str], expected: tuple[str, ...]) -> dict[int, bool]:
    """Per k: whether one of ``expected`` is among the first k documents."""
    return {k: bool(set(doc_order[:k]) & set(expected)) for k in KS}


def doc_order(trace) -> list[str]:
    return list(dict.fromkeys(c.doc_id for c in trace.candidates))


def passage_scores(chunk_order: list[str], relevant: tuple[str, ...]) -> dict:
    """Passage recall at every k and nDCG@10 of one question's chunk ranking against its relevant chunks."""
    return {"passage_recall": [recall_at_k(chunk_order, relevant, k) for k in KS],
            "ndcg10": ndcg_at_k(chunk_order, relevant, 10)}


def mean_ci(values: list[float]) -> dict:
    """The mean of per-question values with its 95 % percentile bootstrap interval over questions."""
    ci = ratio_bootstrap(values, [1.0] * len(values))
    return {"mean": sum(values) / len(values), "ci95": [round(v, 4) for v in ci]}


def summarise(per_case: dict) -> dict:
    """Hit rates, passage recall at every k and nDCG@10 over the questions of ``per_case``."""
    n = len(per_case)
    cases = list(per_case.values())
    return {"hit_at": {str(k): sum(c["hit"][i] for c in cases) / n for i, k in enumerate(KS)},
            "passage_recall_at": {str(k): mean_ci([c["passage_recall"][i] for c in cases]) for i, k in enumerate(KS)},
            "ndcg10": mean_ci([c["ndcg10"] for c in cases]), "questions": n}


def measure(cfg: PipelineConfig, store_dir: Path, cases, models: Models) -> dict:
    with Store.open(store_dir) as store:
        ingest_paths(store, [ROOT / "golden" / "corpus"], cfg, models, progress=False)
        ctx = StageContext(models, store, cfg.embedding)
        per_case, misses, relevant_counts = {}, [], {}
        for case in cases:
            trace = retrieve.run(case.question, cfg.retrieve, ctx)
            relevant = relevant_chunks(case.expected_doc_ids, case.expected_answer, case.question,
                                       store_passages(store, case.expected_doc_ids))
            hits = hits_at(doc_order(trace), case.expected_doc_ids)
            per_case[case.id] = {"hit": [hits[k] for k in KS],
                                 **passage_scores([c.chunk_id for c in trace.candidates], relevant)}
            relevant_counts[case.id] = len(relevant)
            if not hits[max(KS)]:
                misses.append(case.id)
        chunks = store.chunk_count()
    return {**summarise(per_case), "missed_at_max_k": misses, "relevant_chunks": relevant_counts,
            "chunks": chunks, "per_case": per_case}


def mcnemar(first: list[bool], second: list[bool]) -> dict:
    """McNemar's exact test on paired outcomes: SciPy's two-sided ``binomtest`` on the discordant questions."""
    from scipy.stats import binomtest

    only_first = sum(a and not b for a, b in zip(first, second, strict=True))
    only_second = sum(b and not a for a, b in zip(first, second, strict=True))
    n = only_first + only_second
    return {"only_first": only_first, "only_second": only_second,
            "p": float(binomtest(only_first, n).pvalue) if n else 1.0}


def compare(base: dict, other: dict) -> dict:
    """``other`` against ``base`` on the same questions: McNemar on hit@10, paired differences of passage
    recall@10 and nDCG@10."""
    ids = sorted(base["per_case"])
    at10 = KS.index(10)
    a, b = (base["per_case"][i] for i in ids), (other["per_case"][i] for i in ids)
    a, b = list(a), list(b)
    return {"hit_at_10": mcnemar([c["hit"][at10] for c in a], [c["hit"][at10] for c in b]),
            "passage_recall_at_10": paired_difference([c["passage_recall"][at10] for c in a],
                                                      [c["passage_recall"][at10] for c in b]),
            "ndcg10": paired_difference([c["ndcg10"] for c in a], [c["ndcg10"] for c in b])}


def _mean(m: dict) -> str:
    return f"{m['mean']:.3f} [{m['ci95'][0]:.3f}–{m['ci95'][1]:.3f}]"


def _hits(case) -> list[bool]:
    return case["hit"] if isinstance(case, dict) else case   # results measured before the passage level: a list


def render(results: dict) -> str:
    r = results
    n = r["questions"]
    lines = [SECTION, "", meta_line(r["meta"]) + " Reproduce: `.venv/bin/python -m benchmarks.golden_retrieval`.", "",
             f"{n} answerable golden questions (asked as written, no rewrite), demo corpus ingested "
             "with the default chunking. Settings: " + "; ".join(f"**{s['label']}** "
                                                                 f"({s['description']})" for s in r["settings"]) + ".",
             "", "hit@k: an expected document among the documents of the first k chunks of the fused list "
             "(95 % Wilson interval over questions):", "",
             "| setting | " + " | ".join(f"hit@{k}" for k in KS) + " |", "|---|" + "---:|" * len(KS)]
    for s in r["settings"]:
        lines.append(f"| {s['label']} | " + " | ".join(rate_ci(s["hit_at"][str(k)], n) for k in KS) + " |")
    base, other = r["settings"][0], r["settings"][-1]
    if "passage_recall_at" in base:
        lines += ["", "Passage level: the chunks of the expected documents that state the expected answer "
                  "(`workbench/relevance.py`: every key fact and at least half the answer's tokens; a document with "
                  "no such chunk contributes its closest) against the first k chunks; 95 % bootstrap interval over "
                  "questions:", "",
                  "| setting | " + " | ".join(f"passage recall@{k}" for k in KS) + " | passage nDCG@10 |",
                  "|---|" + "---:|" * (len(KS) + 1)]
        for s in r["settings"]:
            lines.append(f"| {s['label']} | " + " | ".join(_mean(s["passage_recall_at"][str(k)]) for k in KS)
                         + f" | {_mean(s['ndcg10'])} |")
    c = r.get("comparison")
    if c:
        h = c["hit_at_10"]
        lines += ["", f"**{other['label']}** against **{base['label']}**, paired over the same {n} questions: hit@10 "
                  f"gained on {h['only_second']} and lost on {h['only_first']} (McNemar exact p = {h['p']:.3g}); "
                  "per-question differences (bootstrap interval of the mean, Wilcoxon signed-rank, tied questions "
                  "dropped):", "", "| metric | mean difference | 95 % interval | better / worse / tied | Wilcoxon p |",
                  "|---|---:|---|---|---:|"]
        for name, key in (("passage recall@10", "passage_recall_at_10"), ("passage nDCG@10", "ndcg10")):
            p = c[key]
            lines.append(f"| {name} | {p['mean_difference']:+.4f} | [{p['interval'][0]:+.4f}, "
                         f"{p['interval'][1]:+.4f}] | {p['better']} / {p['worse']} / {p['tied']} | "
                         f"{p['wilcoxon_p']:.3g} |")
    changed = sorted(cid for cid in base["per_case"]
                     if _hits(base["per_case"][cid]) != _hits(other["per_case"].get(cid, [])))
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
    meta = run_meta(model="all-MiniLM-L6-v2 (packaged, offline)", depends=DEPENDS)
    settings = []
    for label, cfg, desc, sub in (("default", default_cfg, "the shipped config", "default"),
                                  ("tuned on SciFact", tuned_cfg, ", ".join(f"{k}={v}" for k, v in tuned.items()),
                                   "tuned")):
        settings.append({"label": label, "description": desc, "overrides": tuned if sub == "tuned" else {},
                         **measure(cfg, args.store / sub, cases, models)})
    results = {"meta": meta, "questions": len(cases), "ks": list(KS), "settings": settings,
               "comparison": compare(settings[0], settings[-1])}
    path = write_results(NAME, results)
    print(render(load_results(NAME)))
    print(f"wrote {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
