"""Abstention on SQuAD 2.0 (Rajpurkar, Jia & Liang, ACL 2018): can the gate's signals tell answerable from
unanswerable questions on real data nobody here labelled?

``python -m benchmarks.squad2`` (or ``make bench-squad``) reads ``../shared/evaldata/squad2_dev_cs224n``
(relative to the repository root; ``WORKBENCH_EVALDATA`` may point at the folder that holds
``squad2_dev_cs224n/`` instead) and never copies it into the repository:

- **corpus**: the 646 dev paragraphs (16 Wikipedia articles) plus the 570 unlabelled paragraphs of
  ``test-v2.0.json`` as distractors (20 other articles), one document per paragraph titled by its article,
  ingested with the default pipeline config (chunking included) and the real all-MiniLM-L6-v2 into a store
  under ``bench-output/`` (gitignored; reused — ingestion is incremental — unless ``--fresh``);
- **questions**: every dev question (6,078; 3,168 ``is_impossible``), or ``--sample N`` drawn with
  ``--seed`` (default 0), each run through ``Pipeline.search`` (rewrite, retrieve, rerank, gate: the gate
  decides before generation, so generation is not needed) with the answer cache and run log off;
- **signals** read from each trace by :func:`pipeline.gate.stage.gate_inputs`: the top rerank score (when a
  cross-encoder resolves — offline it does not), the top fused RRF score, the best dense cosine;
- **reported**: each signal's ROC-AUC at separating answerable (positive) from unanswerable questions,
  answer / false-answer rates at the default thresholds (and the gate's own ``auto`` decision), the same at
  the best threshold within 5 % false answers on this set (in-sample: an upper bound), and retrieval
  hit@10 of the question's own paragraph for the answerable questions.

SQuAD 2.0's unanswerable questions were written against a specific paragraph, on its topic and with its
entities, and that paragraph is in the corpus: retrieval finds it, so a retrieval-score gate is expected to
separate them poorly. That is the point of running it.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from pipeline.config import PipelineConfig
from pipeline.engine import Pipeline
from pipeline.gate.stage import gate_inputs
from pipeline.ingestion.documents import Document
from pipeline.ingestion.ingest import ingest_documents
from pipeline.models.registry import Models
from pipeline.storage.store import Store
from workbench.metrics import roc_auc
from workbench.sweep import Scores, best_setting, rates

ROOT = Path(__file__).resolve().parent.parent
FOLDER = "squad2_dev_cs224n"
SECTION = "## Abstention on SQuAD 2.0"
# 0.6749 is what `workbench tune golden/golden.jsonl` recommends for the dense signal (<= 5 % false answers on
# the golden set): applying it here shows whether a threshold tuned on the demo corpus transfers.
DENSE_POINTS = (0.5, 0.6, 0.6749, 0.7, 0.75)
GOLDEN_NOTE = "0.6749 is the golden-set tune recommendation"


@dataclass(frozen=True)
class Question:
    qid: str
    text: str
    answerable: bool
    doc_id: str


def locate_data() -> Path:
    """``../shared/evaldata/squad2_dev_cs224n`` beside the repository, else under ``$WORKBENCH_EVALDATA``."""
    bases = [ROOT.parent / "shared" / "evaldata"]
    if os.environ.get("WORKBENCH_EVALDATA"):
        bases.insert(0, Path(os.environ["WORKBENCH_EVALDATA"]).expanduser())
    for base in bases:
        if (base / FOLDER / "dev-v2.0.json").is_file():
            return base / FOLDER
    raise SystemExit(f"SQuAD 2.0 not found: expected ../shared/evaldata/{FOLDER}/dev-v2.0.json next to the "
                     f"repository, or set WORKBENCH_EVALDATA to the folder that contains {FOLDER}/")


def load(data: Path) -> tuple[list[Document], list[Question]]:
    documents, questions = [], []
    for split in ("dev", "test"):
        articles = json.loads((data / f"{split}-v2.0.json").read_text(encoding="utf-8"))["data"]
        for a, article in enumerate(articles):
            for p, paragraph in enumerate(article["paragraphs"]):
                doc_id = f"{split}-{a:02d}-{p:03d}"
                documents.append(Document(doc_id=doc_id, title=article["title"].replace("_", " "),
                                          text=paragraph["context"], source=f"squad2:{split}:{a}:{p}",
                                          format="txt"))
                if split == "dev":
                    questions += [Question(q["id"], q["question"], not q.get("is_impossible", False), doc_id)
                                  for q in paragraph["qas"]]
    return documents, questions


def sample(questions: list[Question], n: int | None, seed: int) -> list[Question]:
    if n is None or n >= len(questions):
        return questions
    return sorted(random.Random(seed).sample(questions, n), key=lambda q: q.qid)


def run_questions(pipeline: Pipeline, questions: list[Question], progress: bool) -> list[dict]:
    """Per question: the three top scores, the gate's decision and whether its paragraph is in the top 10."""
    from tqdm import tqdm

    rows = []
    for q in tqdm(questions, desc="squad2", unit="q", file=sys.stderr, disable=not progress, mininterval=5):
        trace = pipeline.search(q.text)
        inputs = gate_inputs(trace.retrieval, trace.rerank)
        top_docs = list(dict.fromkeys(c.doc_id for c in trace.ranked_candidates()[:10]))
        rows.append({"qid": q.qid, "answerable": q.answerable, "gate": trace.gate.decision,
                     "gate_scale": trace.gate.scale,
                     "rerank": inputs.best_rerank[1] if inputs.best_rerank else None,
                     "fused": inputs.best_fused[1] if inputs.best_fused else None,
                     "dense": inputs.best_dense[1] if inputs.best_dense else None,
                     "own_paragraph_in_top10": q.doc_id in top_docs,
                     "retrieve_ms": trace.timings_ms.get("retrieve", 0.0)})
    return rows


def to_scores(rows: list[dict]) -> Scores:
    def col(key):
        return np.array([np.nan if r[key] is None else r[key] for r in rows], dtype=np.float64)

    return Scores(ids=tuple(r["qid"] for r in rows), answerable=np.array([r["answerable"] for r in rows]),
                  rerank=col("rerank"), fused=col("fused"), dense=col("dense"), inputs=())


def analyse(rows: list[dict], cfg: PipelineConfig, dense_points: tuple[float, ...] = ()) -> dict:
    s = to_scores(rows)
    g = cfg.gate
    defaults = {"t_rerank": g.confidence_threshold_rerank, "t_fused": g.confidence_threshold_fused,
                "t_dense": g.confidence_threshold_dense}
    out = {"signals": {}}
    for name in ("rerank", "fused", "dense"):
        values = s.signal(name)
        if not np.isfinite(values).any():
            out["signals"][name] = None
            continue
        rule = "auto" if name == "rerank" else name
        ar, far = rates(s.answers(rule, **defaults), s.answerable)
        best = best_setting(s, name, g, 0.05)
        out["signals"][name] = {"roc_auc": roc_auc(np.where(np.isfinite(values), values, -np.inf), s.answerable),
                                "default_threshold": defaults[f"t_{name}"], "answer_rate_answerable": float(ar),
                                "false_answer_rate_unanswerable": float(far), "best_within_5pct": best}
    gate_answered = np.array([r["gate"] == "answer" for r in rows])
    ar, far = rates(gate_answered, s.answerable)
    out["gate"] = {"scales": sorted({r["gate_scale"] for r in rows}), "answer_rate_answerable": float(ar),
                   "false_answer_rate_unanswerable": float(far)}
    best = best_setting(s, "fused_and_dense", g, 0.05)
    out["fused_and_dense_best_within_5pct"] = best
    out["dense_at"] = []
    for t in dense_points:
        ar, far = rates(s.answers("dense", **{**defaults, "t_dense": t}), s.answerable)
        out["dense_at"].append({"t_dense": t, "answer_rate_answerable": float(ar),
                                "false_answer_rate_unanswerable": float(far)})
    answerable = [r for r in rows if r["answerable"]]
    out["own_paragraph_hit_at_10"] = sum(r["own_paragraph_in_top10"] for r in answerable) / max(len(answerable), 1)
    out["retrieve_ms_mean"] = float(np.mean([r["retrieve_ms"] for r in rows])) if rows else 0.0
    return out


def _pct(x) -> str:
    return "—" if x is None else f"{100 * x:.1f} %"


def render(r: dict) -> str:
    a = r["analysis"]
    lines = [SECTION, "",
             f"Measured {r['date']} on {r['machine']}. Reproduce: `make bench-squad` (= `.venv/bin/python -m "
             f"benchmarks.squad2{r['args']}`; the store is reused, `--fresh` rebuilds it).", "",
             f"Corpus: {r['dev_paragraphs']} SQuAD 2.0 dev paragraphs + {r['test_paragraphs']} test-file paragraphs "
             f"as distractors = {r['documents']:,} documents → {r['chunks']:,} chunks (default chunking), "
             f"all-MiniLM-L6-v2 (packaged, offline). Questions: {r['questions']:,} of {r['all_questions']:,} dev "
             f"questions ({r['sample_note']}); {r['answerable']:,} answerable, {r['unanswerable']:,} unanswerable. "
             f"Each ran through `Pipeline.search` (mean retrieval {a['retrieve_ms_mean']:.0f} ms). Run time "
             f"{r['run_s']:.0f} s. The answerable questions' own paragraph is in the top 10 for "
             f"{_pct(a['own_paragraph_hit_at_10'])}.", "",
             "| signal | ROC-AUC | default threshold | answered (answerable) | false answers (unanswerable) | "
             "best ≤ 5 % false answers (in-sample) |", "|---|---:|---:|---:|---:|---|"]
    for name, x in a["signals"].items():
        if x is None:
            lines.append(f"| {name} | not available offline | — | — | — | — |")
            continue
        b = x["best_within_5pct"]
        best = f"≥ {b[f't_{name}']:.4f}: {_pct(b['answer_rate_answerable'])} answered" if b else "none"
        lines.append(f"| {name} | {x['roc_auc']:.3f} | {x['default_threshold']:g} | "
                     f"{_pct(x['answer_rate_answerable'])} | {_pct(x['false_answer_rate_unanswerable'])} | {best} |")
    g, c = a["gate"], a["fused_and_dense_best_within_5pct"]
    lines += ["", f"The gate as configured (`gate.signal=auto`; scale used: {', '.join(g['scales'])}) answers "
              f"{_pct(g['answer_rate_answerable'])} of answerable and {_pct(g['false_answer_rate_unanswerable'])} of "
              "unanswerable questions." + (f" Fused AND dense at its best within 5 % false answers (fused ≥ "
                                           f"{c['t_fused']:.4f}, dense ≥ {c['t_dense']:.4f}) answers "
                                           f"{_pct(c['answer_rate_answerable'])}." if c else ""), ""]
    if a.get("dense_at"):
        lines += ["Dense cosine gate (`gate.signal=dense`) at other thresholds "
                  f"({GOLDEN_NOTE}):", "", "| dense threshold | answered (answerable) | false answers (unanswerable) |",
                  "|---:|---:|---:|"]
        lines += [f"| {p['t_dense']:g} | {_pct(p['answer_rate_answerable'])} | "
                  f"{_pct(p['false_answer_rate_unanswerable'])} |" for p in a["dense_at"]]
        lines.append("")
    if r.get("rerank_reason"):
        lines += [f"Rerank: {r['rerank_reason']}", ""]
    lines.append(r["verdict"])
    return "\n".join(lines) + "\n"


def verdict(a: dict) -> str:
    aucs = {n: x["roc_auc"] for n, x in a["signals"].items() if x}
    best = max(aucs, key=aucs.get)
    strength = ("barely better than chance" if aucs[best] < 0.6 else "weak" if aucs[best] < 0.7
                else "moderate" if aucs[best] < 0.8 else "useful")
    return (f"The best signal here is {best} (ROC-AUC {aucs[best]:.3f}; 0.5 is chance): {strength}. SQuAD 2.0's "
            "unanswerable questions sit on the topic of a paragraph that is in the corpus, so the scores of their "
            "closest passage resemble those of answerable questions; a retrieval-score gate mostly catches "
            "questions whose topic is missing, and telling these apart needs a reader that checks whether the "
            "passage states the answer (a cross-encoder, NLI or QA model), not a retrieval threshold.")


def write_section(path: Path, section: str) -> None:
    """Replace (or append) this benchmark's section; every other section is left as it is."""
    text = path.read_text(encoding="utf-8") if path.exists() else "# Benchmarks\n"
    start = text.find(SECTION)
    if start < 0:
        text = text.rstrip("\n") + "\n\n" + section
    else:
        end = text.find("\n## ", start + len(SECTION))
        text = text[:start] + section + ("\n" + text[end + 1:] if end >= 0 else "")
    path.write_text(text, encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.squad2", description=__doc__.splitlines()[0])
    parser.add_argument("--store", type=Path, default=ROOT / "bench-output" / "squad2-store")
    parser.add_argument("--fresh", action="store_true", help="rebuild the store (re-embeds the corpus)")
    parser.add_argument("--sample", type=int, default=None, help="questions to draw (default: all 6,078)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    parser.add_argument("--out", type=Path, default=ROOT / "BENCHMARKS.md")
    parser.add_argument("--no-write", action="store_true", help="print the section instead of writing it")
    parser.add_argument("--dense-thresholds", default=",".join(map(str, DENSE_POINTS)),
                        help="dense thresholds to report answer / false-answer rates at (comma-separated)")
    args = parser.parse_args(argv)
    try:
        dense_points = tuple(float(t) for t in args.dense_thresholds.split(",") if t.strip())
    except ValueError:
        parser.error(f"--dense-thresholds must be comma-separated numbers, got {args.dense_thresholds!r}")
    if args.threads > 0:
        import torch

        torch.set_num_threads(args.threads)

    data = locate_data()
    documents, questions = load(data)
    chosen = sample(questions, args.sample, args.seed)
    cfg, models = PipelineConfig().with_overrides({"cache.enabled": False}), Models()
    if args.fresh and args.store.exists():
        shutil.rmtree(args.store)
    store = Store.open(args.store)
    try:
        t0 = time.perf_counter()
        report = ingest_documents(store, documents, cfg, models, progress=sys.stderr.isatty())
        print(f"ingest: {report.documents} documents, {report.chunks} chunks, {report.embedded} embedded in "
              f"{time.perf_counter() - t0:.1f} s", file=sys.stderr)
        pipeline = Pipeline(store, models, cfg, log_runs=False)
        t0 = time.perf_counter()
        rows = run_questions(pipeline, chosen, progress=sys.stderr.isatty())
        run_s = time.perf_counter() - t0
        chunks = store.chunk_count()
    finally:
        store.close()
    try:
        models.reranker(cfg.rerank)
        rerank_reason = ""
    except Exception as exc:  # offline: ModelUnavailable; reported, never substituted
        rerank_reason = f"not available offline — {exc}"
    analysis = analyse(rows, cfg, dense_points)
    extra = (f" --sample {args.sample} --seed {args.seed}" if args.sample else "")
    results = {"date": time.strftime("%Y-%m-%d"), "machine": f"{os.cpu_count()} CPU cores ({platform.machine()}, "
               f"{platform.system()}), {args.threads} torch thread(s), no GPU", "args": extra,
               "dev_paragraphs": sum(d.doc_id.startswith("dev-") for d in documents),
               "test_paragraphs": sum(d.doc_id.startswith("test-") for d in documents),
               "documents": len(documents), "chunks": chunks, "questions": len(rows), "all_questions": len(questions),
               "sample_note": "all of them" if len(rows) == len(questions) else f"random sample, seed {args.seed}",
               "answerable": sum(r["answerable"] for r in rows), "unanswerable": sum(not r["answerable"] for r in rows),
               "run_s": run_s, "rerank_reason": rerank_reason, "analysis": analysis, "verdict": verdict(analysis)}
    out_dir = ROOT / "bench-output"
    out_dir.mkdir(exist_ok=True)
    (out_dir / "squad2.json").write_text(json.dumps(results, indent=2), encoding="utf-8")
    with (out_dir / "squad2_rows.jsonl").open("w", encoding="utf-8") as fh:
        fh.writelines(json.dumps(r) + "\n" for r in rows)
    section = render(results)
    print(section)
    if not args.no_write:
        write_section(args.out, section)
        print(f"wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
