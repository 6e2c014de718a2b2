"""Abstention on SQuAD 2.0 (Rajpurkar, Jia & Liang, ACL 2018): can the gate's signals tell answerable from
unanswerable questions on real data nobody here labelled?

``python -m benchmarks.squad2`` (or ``make bench-squad``) reads ``../shared/evaldata/squad2_dev_cs224n``
(relative to the repository root; ``WORKBENCH_EVALDATA`` may point at the folder that holds
``squad2_dev_cs224n/`` instead) and never copies it into the repository:

- **corpus**: the 646 dev paragraphs (16 Wikipedia articles) plus the 570 unlabelled paragraphs of
  ``test-v2.0.json`` as distractors (20 other articles), one document per paragraph titled by its article,
  ingested with the default pipeline config (chunking included) and the real all-MiniLM-L6-v2 into a store
  under ``build/`` (gitignored; reused — ingestion is incremental — unless ``--fresh``);
- **questions**: a random sample of ``--sample`` dev questions (``--seed``, default 0; ``--sample 0``: all 6,078),
  each asked once through the evaluation pipeline with the shipped defaults (:func:`benchmarks.ood.ask_questions`:
  gate, extractive generator, validator; answer cache and run log off), and each answered answerable
  question's answer scored against the gold answers (:mod:`workbench.correctness`, best verdict);
- **signals** read from each trace by :func:`pipeline.gate.stage.gate_inputs`: the top rerank score (when a
  cross-encoder resolves: offline, the project's reader, whose top score is its best sentence probability), the
  top fused RRF score, the best dense cosine, and every evidence signal (``reader`` among them);
- **reported**: each signal's ROC-AUC at separating answerable (positive) from unanswerable questions,
  answer / false-answer rates at the shipped thresholds (and the gate's own ``auto`` decision), the best
  threshold within 5 % false answers on these same questions (in-sample: an upper bound, not a setting), the
  dense gate at a few fixed thresholds, and retrieval hit@10 of the question's own paragraph. The
  out-of-domain row (:mod:`benchmarks.ood`) is computed here too, from the same answers.

Writes ``benchmarks/results/squad2.json``; :func:`render` is the BENCHMARKS.md section.

SQuAD 2.0's unanswerable questions were written against a specific paragraph, on its topic and with its
entities, and that paragraph is in the corpus: retrieval finds it, so a retrieval-score gate is expected to
separate them poorly. That is the point of running it.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
import time
from pathlib import Path

import numpy as np

from benchmarks.ood import MODEL, Question, ask_questions, evaldata, figures, gate_settings
from benchmarks.results_io import (
    ANSWER_CONFIG,
    ANSWER_PATH,
    ROOT,
    Depends,
    load_average,
    load_results,
    meta_line,
    rate_ci,
    results_path,
    run_meta,
    write_results,
)
from workbench.metrics import roc_auc, roc_auc_ci
from workbench.sweep import Scores, best_setting, rates

NAME = "squad2"
FOLDER = "squad2_dev_cs224n"
SECTION = "## Abstention on SQuAD 2.0"
DENSE_POINTS = (0.5, 0.6, 0.7, 0.75)
SAMPLE = 3000


def locate_data() -> Path:
    return evaldata(FOLDER, "dev-v2.0.json")


def load(data: Path):
    from pipeline.ingestion.documents import Document

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
                    questions += [Question(qid=q["id"], text=q["question"],
                                           answerable=not q.get("is_impossible", False),
                                           answers=tuple(dict.fromkeys(a["text"] for a in q.get("answers", []))),
                                           gold_doc_ids=(doc_id,)) for q in paragraph["qas"]]
    return documents, questions


def sample(questions: list[Question], n: int | None, seed: int) -> list[Question]:
    if n is None or n >= len(questions):
        return questions
    return sorted(random.Random(seed).sample(questions, n), key=lambda q: q.qid)


def to_scores(rows: list[dict]) -> Scores:
    def col(key):
        return np.array([np.nan if r[key] is None else r[key] for r in rows], dtype=np.float64)

    return Scores(ids=tuple(r["qid"] for r in rows), answerable=np.array([r["answerable"] for r in rows]),
                  rerank=col("rerank"), fused=col("fused"), dense=col("dense"), inputs=(),
                  learned=col("learned") if rows and "learned" in rows[0] else None)


def evidence(rows: list[dict], answerable: np.ndarray) -> dict:
    """ROC-AUC of each evidence signal alone (pipeline/gate/signals.py), answerable = positive."""
    out = {}
    for name in (rows[0].get("signals") or {}) if rows else ():
        values = np.array([np.nan if r["signals"][name] is None else r["signals"][name] for r in rows], dtype=float)
        finite = np.isfinite(values)
        out[name] = None if not finite.any() else {
            "cases_with_score": int(finite.sum()),
            "roc_auc": roc_auc(np.where(finite, values, -np.inf), answerable),
            "roc_auc_ci95": roc_auc_ci(np.where(finite, values, -np.inf), answerable)}
    return out


def analyse(rows: list[dict], cfg, dense_points: tuple[float, ...] = ()) -> dict:
    s = to_scores(rows)
    g = cfg.gate
    defaults = {"t_rerank": g.confidence_threshold_rerank, "t_fused": g.confidence_threshold_fused,
                "t_dense": g.confidence_threshold_dense, "t_learned": g.confidence_threshold_learned}
    out = {"signals": {}, "evidence": evidence(rows, s.answerable)}
    for name in ("rerank", "fused", "dense", "learned"):
        values = s.signal(name)
        if values is None or not np.isfinite(values).any():
            out["signals"][name] = None
            continue
        rule = name  # each score under its own rule; the shipped auto rule is the gate row
        ar, far = rates(s.answers(rule, **defaults), s.answerable)
        best = best_setting(s, name, g, 0.05)
        scored = np.where(np.isfinite(values), values, -np.inf)
        out["signals"][name] = {"roc_auc": roc_auc(scored, s.answerable),
                                "roc_auc_ci95": roc_auc_ci(scored, s.answerable),
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
    out["cases"] = _cases(rows)
    answerable = [r for r in rows if r["answerable"]]
    out["own_paragraph_hit_at_10"] = sum(bool(r["hit_at_10"]) for r in answerable) / max(len(answerable), 1)
    out["retrieve_ms_mean"] = float(np.mean([r["retrieve_ms"] for r in rows])) if rows else 0.0
    return out


def _cases(rows: list[dict]) -> dict:
    """How the gate's abstentions on unanswerable / answerable questions read (off-topic, on-topic, ...)."""
    out: dict[str, dict[str, int]] = {}
    for r in rows:
        if r.get("case"):
            kind = "unanswerable" if not r["answerable"] else "answerable"
            out.setdefault(kind, {}).setdefault(r["case"], 0)
            out[kind][r["case"]] += 1
    return out


# (workbench.evaluate only builds the pipeline here: eval_pipeline wires pipeline/engine.py, which ANSWER_PATH names)
DEPENDS = Depends(("benchmarks/squad2.py", "benchmarks/ood.py", *ANSWER_PATH, "workbench/correctness.py",
                   "workbench/sweep.py"), ANSWER_CONFIG)


def _pct(x) -> str:
    return "—" if x is None else f"{100 * x:.1f} %"


def _auc(x: dict) -> str:
    """``0.631 [0.597–0.665]``: a ROC-AUC with its bootstrap interval where the results file has one."""
    ci = x.get("roc_auc_ci95")
    return f"{x['roc_auc']:.3f}" + (f" [{ci[0]:.3f}–{ci[1]:.3f}]" if ci else "")


def render(r: dict) -> str:
    """The BENCHMARKS.md section, from ``benchmarks/results/squad2.json`` alone."""
    a, g = r["analysis"], r["gate_settings"]
    lines = [SECTION, "",
             meta_line(r["meta"]) + f" Reproduce: `make bench-squad` (= `{r['reproduce']}`; the store is reused, "
             "`--fresh` rebuilds it).",
             "",
             f"Corpus: {r['dev_paragraphs']} SQuAD 2.0 dev paragraphs + {r['test_paragraphs']} test-file paragraphs "
             f"as distractors = {r['documents']:,} documents → {r['chunks']:,} chunks (default chunking). Questions: "
             f"{r['questions']:,} of {r['all_questions']:,} dev questions ({r['sample_note']}); {r['answerable']:,} "
             f"answerable, {r['unanswerable']:,} unanswerable, each asked once with the shipped defaults "
             + (f"(`gate.signal={g['signal']}`: the learned rule, probability ≥ {g['t_learned']:g}"
                + ("" if g.get("reader_set_fitted", True) else " on the similarity signals, its reader coefficient "
                   "set not fitted") + "; then the reader's check before quoting, "
                f"`generate.reader_min_score` {g.get('reader_min_score', '—')}; " if "t_learned" in g else
                f"(`gate.signal={g['signal']}`, fused ≥ {g['t_fused']:g}, dense ≥ {g['t_dense']:g}: ")
             + "fitted on the demo golden set's tune part, never on SQuAD)"
             + (" through retrieval, rerank and the gate only (`--search-only`: no generation, so no answer "
                "correctness)" if r.get("search_only") else "")
             + f" in {r['run_s']:.0f} s (mean retrieval "
             f"{a['retrieve_ms_mean']:.0f} ms). The answerable questions' own paragraph is in the top 10 for "
             f"{rate_ci(a['own_paragraph_hit_at_10'], r['answerable'])}.", "",
             "| signal | ROC-AUC | shipped threshold | answered (answerable) | false answers (unanswerable) | "
             "best ≤ 5 % false answers (in-sample upper bound) |", "|---|---:|---:|---:|---:|---|"]
    for name, x in a["signals"].items():
        if x is None:
            lines.append(f"| {name} | not available offline | — | — | — | — |")
            continue
        b = x["best_within_5pct"]
        best = (f"≥ {b[f't_{name}']:.4f}: {rate_ci(b['answer_rate_answerable'], r['answerable'])} answered" if b
                else "none")
        lines.append(f"| {name} | {_auc(x)} | {x['default_threshold']:g} | "
                     f"{rate_ci(x['answer_rate_answerable'], r['answerable'])} | "
                     f"{rate_ci(x['false_answer_rate_unanswerable'], r['unanswerable'])} | {best} |")
    gate, c = a["gate"], a["fused_and_dense_best_within_5pct"]
    line = (f"The gate as shipped (`gate.signal={g['signal']}`; scale used: {', '.join(gate['scales'])}) answers "
            f"{rate_ci(gate['answer_rate_answerable'], r['answerable'])} of answerable and "
            f"{rate_ci(gate['false_answer_rate_unanswerable'], r['unanswerable'])} of unanswerable questions "
            "(95 % Wilson intervals in brackets).")
    if c:
        line += (f" Fused AND dense at its best within 5 % false answers on these same questions (fused ≥ "
                 f"{c['t_fused']:.4f}, dense ≥ {c['t_dense']:.4f}; in-sample) answers "
                 f"{rate_ci(c['answer_rate_answerable'], r['answerable'])}.")
    if not r.get("search_only"):
        o = r["ood"]
        line += (f" End to end — the gate, then the reader's check before quoting — the shipped default answers "
                 f"{rate_ci(o['answer_rate_answerable'], r['answerable'])} of answerable and "
                 f"{rate_ci(o['false_answer_rate_unanswerable'], r['unanswerable'])} of unanswerable questions.")
    lines += ["", line, ""]
    if a.get("dense_at"):
        lines += ["Dense cosine gate (`gate.signal=dense`) at fixed thresholds:", "",
                  "| dense threshold | answered (answerable) | false answers (unanswerable) |", "|---:|---:|---:|"]
        lines += [f"| {p['t_dense']:g} | {rate_ci(p['answer_rate_answerable'], r['answerable'])} | "
                  f"{rate_ci(p['false_answer_rate_unanswerable'], r['unanswerable'])} |" for p in a["dense_at"]]
        lines.append("")
    if a.get("evidence"):
        lines += ["Each evidence signal alone (`pipeline/gate/signals.py`), ROC-AUC: "
                  + ", ".join(f"{n} {_auc(x)}" for n, x in a["evidence"].items() if x)
                  + " (95 % bootstrap intervals, resampling each class).", ""]
    if a.get("cases"):
        lines += ["How the gate's abstentions read (`gate.case`): "
                  + "; ".join(f"{kind}: " + ", ".join(f"{n:,} {c}" for c, n in sorted(counts.items()))
                              for kind, counts in sorted(a["cases"].items())) + ".", ""]
    o = r["ood"]
    if r.get("search_only"):
        lines.append(verdict(a))
        return "\n".join(lines) + "\n"
    judged = round(o["answer_rate_answerable"] * r["answerable"])
    lines += [f"Answers: of the {judged} answered answerable questions, {rate_ci(o['correct_rate'], judged)} correct, "
              f"{rate_ci(o['partly_rate'], judged)} partly, {rate_ci(o['wrong_rate'], judged)} wrong against the gold "
              "answers "
              "(`workbench/correctness.py`, best verdict over the gold answers).", ""]
    if r.get("rerank_reason"):
        lines += [f"Rerank: {r['rerank_reason']}", ""]
    lines.append(verdict(a))
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
            "passage states the answer (a cross-encoder, NLI or QA model), not a retrieval threshold."
            + _reader_note(a))


def _reader_note(a: dict) -> str:
    reader = (a.get("evidence") or {}).get("reader") or {}
    if reader.get("roc_auc") is None:
        return ""
    return (f" The project's reader (`workbench train answerability`, trained on the answer-sentence selection "
            "pairs and the first ten SQuAD 2.0 train articles in ../shared/traindata, none of the dev set asked here) "
            f"scores ROC-AUC {reader['roc_auc']:.3f} alone here: it does "
            "not yet tell SQuAD's on-topic unanswerable questions from answerable ones (its learning curve: \"Reader "
            "training\").")


def main(argv: list[str] | None = None) -> int:
    from pipeline.config import PipelineConfig
    from pipeline.ingestion.ingest import ingest_documents
    from pipeline.models.registry import Models
    from pipeline.storage.store import Store
    from workbench.evaluate import eval_pipeline

    parser = argparse.ArgumentParser(prog="python -m benchmarks.squad2", description=__doc__.splitlines()[0])
    parser.add_argument("--store", type=Path, default=ROOT / "build" / "squad2-store")
    parser.add_argument("--fresh", action="store_true", help="rebuild the store (re-embeds the corpus)")
    parser.add_argument("--sample", type=int, default=SAMPLE, help=f"questions to draw (default {SAMPLE}; 0: all)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    parser.add_argument("--search-only", action="store_true", help="retrieve, rerank and gate only: the gate's "
                        "signals and decisions without generation (no answer correctness; much faster)")
    parser.add_argument("--print", action="store_true", help="only print the section from the results file")
    args = parser.parse_args(argv)
    if not args.print:
        from pipeline.models.encoders import set_torch_threads

        set_torch_threads(args.threads)
        meta = run_meta(model=MODEL, depends=DEPENDS)
        data = locate_data()
        documents, questions = load(data)
        chosen = sample(questions, args.sample or None, args.seed)
        cfg, models = PipelineConfig(), Models()
        if args.fresh and args.store.exists():
            shutil.rmtree(args.store)
        with Store.open(args.store) as store:
            t0 = time.perf_counter()
            report = ingest_documents(store, documents, cfg, models, progress=sys.stderr.isatty())
            ingest_s = time.perf_counter() - t0
            print(f"ingest: {report.documents} documents, {report.chunks} chunks, {report.embedded} embedded in "
                  f"{ingest_s:.1f} s", file=sys.stderr)
            t0 = time.perf_counter()
            rows = ask_questions(eval_pipeline(store, models, cfg), chosen, progress=sys.stderr.isatty(),
                                 desc="squad2", search_only=args.search_only)
            run_s = time.perf_counter() - t0
            chunks = store.chunk_count()
        try:
            models.reranker(cfg.rerank)
            rerank_reason = ""
        except Exception as exc:  # offline: ModelUnavailable; reported, never substituted
            rerank_reason = f"not available offline — {exc}"
        analysis = analyse(rows, cfg, DENSE_POINTS)
        sampled = len(rows) < len(questions)
        meta["load_average_end"] = load_average()
        results = {
            "meta": meta,
            "reproduce": (f".venv/bin/python -m benchmarks.squad2 --sample {args.sample} --seed {args.seed}"
                          if sampled else ".venv/bin/python -m benchmarks.squad2 --sample 0")
            + (" --search-only" if args.search_only else ""),
            "search_only": args.search_only,
            "gate_settings": gate_settings(cfg),
            "dev_paragraphs": sum(d.doc_id.startswith("dev-") for d in documents),
            "test_paragraphs": sum(d.doc_id.startswith("test-") for d in documents),
            "documents": len(documents), "chunks": chunks, "questions": len(rows), "all_questions": len(questions),
            "sample_note": (f"a random sample, seed {args.seed}: asking all of them does not fit the shared cores' "
                            "time budget" if sampled else "all of them"),
            "answerable": sum(r["answerable"] for r in rows), "unanswerable": sum(not r["answerable"] for r in rows),
            "ingest_s": round(ingest_s, 1), "run_s": round(run_s, 1), "rerank_reason": rerank_reason,
            "analysis": analysis, "ood": figures(rows)}
        write_results(NAME, results)
        print(f"wrote {results_path(NAME)}", file=sys.stderr)
    print(render(load_results(NAME)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
