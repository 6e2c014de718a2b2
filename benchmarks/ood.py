"""Out-of-domain checks: the shipped defaults on every public evaluation set that has answer or unanswerable
labels, in one table (BENCHMARKS.md, "Out-of-domain abstention").

The gate defaults were fitted on the demo golden set's tune part (golden/README.md); these sets were never
used to choose anything, so every figure here is out of sample. Each question is asked once through the
evaluation pipeline (:func:`workbench.evaluate.eval_pipeline`: the shipped defaults, answer cache off, nothing
logged), so the gate, the extractive generator and the validator all run:

- **SQuAD 2.0 dev** (Rajpurkar, Jia & Liang, ACL 2018; answerable and unanswerable questions): measured by
  :mod:`benchmarks.squad2` (``make bench-squad``), which writes ``benchmarks/results/squad2.json``; its row
  here is read from that file (:func:`squad_row`), so SQuAD is asked once for both sections.
- **Samsung Galaxy S10 manual** (Nandy et al., EMNLP 2021 Findings, "Question answering over electronic devices"):
  451 manual sections, 50 questions with an answer and a gold section (the sections whose URL equals the
  question's link, scheme and anchor dropped).
- **Samsung Smart TV / Remote manual** (same source): 261 sections, 684 question-answer pairs; the 420 that
  name a gold section by title are scored for retrieval too.

Every question of these two sets is answerable from its manual, so there is no false-answer rate. Per set:
the answer rate on answerable questions, the false-answer rate on unanswerable ones, retrieval hit@10 (a gold
document among the documents of the top-10 chunks), and answer correctness of the answered answerable
questions (:mod:`workbench.correctness` against the gold answer; with several gold answers, the best verdict).
The manuals' gold answers are whole paragraphs, so a correct short answer often scores ``partly``.

Data are read from ``../shared/evaldata/`` beside the repository (or ``$WORKBENCH_EVALDATA``) and never copied;
stores are built under ``build/`` (git-ignored) and reused: ingestion is incremental.
"""

from __future__ import annotations

import argparse
import ast
import csv
import json
import os
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

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

DEPENDS = Depends(("benchmarks/ood.py", "workbench/correctness.py", "workbench/evaluate.py", *ANSWER_PATH),
                  ANSWER_CONFIG)
NAME = "ood"
EMANUAL = "emanual_samsung"
TOP_K = 10
VERDICT_ORDER = ("correct", "partly", "wrong")
MODEL = ("extractive generator; embedder all-MiniLM-L6-v2 (packaged); reader workbench/answerability-reader (int8 "
         "ONNX, committed; rerank granularity sentence); correctness by token recall, key facts and the embedder "
         "(NLI off)")


@dataclass(frozen=True)
class Question:
    qid: str
    text: str
    answerable: bool
    answers: tuple[str, ...] = ()        # gold answers (any one is right)
    gold_doc_ids: tuple[str, ...] = ()   # documents that hold the answer (empty: not labelled)


def evaldata(folder: str, probe: str) -> Path:
    """``../shared/evaldata/FOLDER`` beside the repository, else under ``$WORKBENCH_EVALDATA``."""
    bases = [ROOT.parent / "shared" / "evaldata"]
    if os.environ.get("WORKBENCH_EVALDATA"):
        bases.insert(0, Path(os.environ["WORKBENCH_EVALDATA"]).expanduser())
    for base in bases:
        if (base / folder / probe).is_file():
            return base / folder
    raise SystemExit(f"{folder} not found: expected ../shared/evaldata/{folder}/{probe} next to the repository, "
                     f"or set WORKBENCH_EVALDATA to the folder that contains {folder}/")


# -- the two manuals ------------------------------------------------------------------------------------------

def _lines(text) -> list[str]:
    """A section's text: a list of strings, or the Python repr of one."""
    items = text if isinstance(text, list) else ast.literal_eval(text)
    return [str(s).strip() for s in items if str(s).strip()]


def _url(url: str) -> str:
    return url.split("://", 1)[-1].split("#", 1)[0]


def _documents(corpus: dict, prefix: str, source: str):
    from pipeline.ingestion.documents import Document

    return [Document(doc_id=f"{prefix}-{key}", title=section["title"], text="\n".join(_lines(section["text"])),
                     source=f"{source}:{key}", format="txt") for key, section in corpus.items()]


def load_s10(data: Path):
    """The S10 manual's sections and its 50 questions (gold sections by URL)."""
    corpus = json.loads((data / "s10_manual_corpus.json").read_text(encoding="utf-8"))
    by_url: dict[str, list[str]] = {}
    for key, section in corpus.items():
        by_url.setdefault(_url(section["section_url"]), []).append(f"s10-{key}")
    with (data / "s10_50_questions.csv").open(encoding="utf-8", newline="") as fh:
        questions = [Question(qid=f"s10-{r['question_id']}", text=r["question"], answerable=True,
                              answers=(r["answer"],), gold_doc_ids=tuple(by_url.get(_url(r["section_link"]), ())))
                     for r in csv.DictReader(fh)]
    return _documents(corpus, "s10", "emanual:s10"), questions


def load_tv(data: Path):
    """The Smart TV / Remote manual's sections and its question-answer pairs (gold sections by title, when given)."""
    corpus = json.loads((data / "smart_tv_remote_manual_corpus.json").read_text(encoding="utf-8"))
    questions = []
    with (data / "smart_tv_remote_qa.jsonl").open(encoding="utf-8") as fh:
        for n, line in enumerate(fh):
            if line.strip():
                r = json.loads(line)
                gold = tuple(f"tv-{s}" for s in r.get("gold_section_ids_by_title", []))
                questions.append(Question(qid=f"tv-{n:04d}", text=r["question"], answerable=True,
                                          answers=(r["answer"],), gold_doc_ids=gold))
    return _documents(corpus, "tv", "emanual:tv"), questions


# -- asking and scoring ---------------------------------------------------------------------------------------

def best_verdict(question: Question, answer: str, embedder) -> str:
    """The best correctness verdict of ``answer`` over the gold answers (:mod:`workbench.correctness`)."""
    from workbench.correctness import score, semantic_match

    verdicts = [score(gold, answer, question=question.text, semantic=semantic_match(gold, answer, embedder)).verdict
                for gold in dict.fromkeys(a for a in question.answers if a.strip())]
    return min(verdicts, key=VERDICT_ORDER.index) if verdicts else ""


def ask_questions(pipeline, questions: Sequence[Question], *, progress: bool = False, desc: str = "ask",
                  search_only: bool = False) -> list[dict]:
    """Ask each question once; per question the gate's scores, evidence signals, learned probability and
    decision, whether it was answered, retrieval hit@10 (when gold documents are known) and the correctness
    verdict of an answered answerable question. ``search_only``: retrieve, rerank and gate only (no generation,
    so no correctness verdict; an answer is the gate's decision to answer)."""
    from tqdm import tqdm

    from pipeline.gate import signals as gate_signals
    from pipeline.gate.stage import gate_inputs, learned_scores
    from workbench.evaluate import abstained_by
    from workbench.metrics import document_ranking

    embedder = pipeline.models.memo
    rows = []
    for q in tqdm(questions, desc=desc, unit="q", file=sys.stderr, disable=not progress, mininterval=5):
        trace = pipeline.search(q.text) if search_only else pipeline.ask(q.text)
        inputs = gate_inputs(trace.retrieval, trace.rerank)
        answered = trace.gate.decision == "answer" if search_only else not abstained_by(trace)
        docs = document_ranking(c.doc_id for c in trace.ranked_candidates()[:TOP_K])
        verdict = None
        if answered and not search_only:
            verdict = (best_verdict(q, trace.answer, embedder) or None) if q.answerable else "wrong"
        rows.append({"qid": q.qid, "answerable": q.answerable, "answered": answered, "gate": trace.gate.decision,
                     "gate_scale": trace.gate.scale,
                     "rerank": inputs.best_rerank[1] if inputs.best_rerank else None,
                     "fused": inputs.best_fused[1] if inputs.best_fused else None,
                     "dense": inputs.best_dense[1] if inputs.best_dense else None,
                     "learned": float(learned_scores([inputs], pipeline.cfg.gate)[0]) if inputs.best_fused else None,
                     "signals": {n: gate_signals.value(inputs.signals, n) for n in gate_signals.NAMES},
                     "case": trace.gate.case,
                     "hit_at_10": any(d in q.gold_doc_ids for d in docs) if q.gold_doc_ids else None,
                     "verdict": verdict, "retrieve_ms": trace.timings_ms.get("retrieve", 0.0)})
    return rows


def _rate(n: int, d: int) -> float | None:
    return round(n / d, 4) if d else None


def figures(rows: Sequence[dict]) -> dict:
    """One row of the table: rates over the asked questions (``None`` where a set has no such question)."""
    answerable = [r for r in rows if r["answerable"]]
    unanswerable = [r for r in rows if not r["answerable"]]
    answered = [r for r in answerable if r["answered"]]
    judged = [r["verdict"] for r in answered if r["verdict"]]
    labelled = [r for r in answerable if r["hit_at_10"] is not None]
    return {"questions": len(rows), "answerable": len(answerable), "unanswerable": len(unanswerable),
            "answer_rate_answerable": _rate(len(answered), len(answerable)),
            "false_answer_rate_unanswerable": _rate(sum(r["answered"] for r in unanswerable), len(unanswerable)),
            "hit_at_10": _rate(sum(bool(r["hit_at_10"]) for r in labelled), len(labelled)),
            "hit_at_10_questions": len(labelled),
            "judged": len(judged), **{f"{v}_rate": _rate(judged.count(v), len(judged)) for v in VERDICT_ORDER},
            "answered_correctly": _rate(judged.count("correct"), len(answerable))}


def gate_settings(cfg) -> dict:
    from pipeline.gate.learned import reader_fitted

    g = cfg.gate
    return {"signal": g.signal, "t_rerank": g.confidence_threshold_rerank, "t_fused": g.confidence_threshold_fused,
            "t_dense": g.confidence_threshold_dense, "t_learned": g.confidence_threshold_learned,
            "reader_set_fitted": reader_fitted(g), "reader_min_score": cfg.generate.reader_min_score}


# -- the section (pure) ---------------------------------------------------------------------------------------

def squad_row(squad: dict) -> dict:
    """SQuAD 2.0's row, from ``benchmarks/results/squad2.json`` (:mod:`benchmarks.squad2`)."""
    return {"set": "SQuAD 2.0 dev", "source": "SQuAD 2.0 (Rajpurkar, Jia & Liang, ACL 2018) as mirrored in "
            "chrischute/squad (data/dev-v2.0.json; the paragraphs of data/test-v2.0.json as distractors), "
            "CC BY-SA 4.0", "corpus": f"{squad['documents']:,} paragraphs",
            "sample": squad["sample_note"], "measured": squad["meta"]["date"], "gate": squad["gate_settings"],
            **squad["ood"]}


def render(results: dict) -> str:
    """The BENCHMARKS.md section, from ``benchmarks/results/ood.json`` alone (each rate with its 95 % Wilson interval
    over the questions it counts)."""
    meta, g = results["meta"], results["gate"]
    lines = [
        "## Out-of-domain abstention", "",
        meta_line(meta) + f" Reproduce: `{results['reproduce']}`.", "",
        (f"The shipped defaults (`gate.signal={g['signal']}`; the learned rule, probability "
         f"≥ {g['t_learned']:g}, fitted on the demo golden set's tune part) on public sets nobody here "
         if "t_learned" in g else
         f"The shipped defaults (`gate.signal={g['signal']}`; without a rerank score fused ≥ {g['t_fused']:g} AND "
         f"dense ≥ {g['t_dense']:g}, fitted on the demo golden set's tune part) on public sets nobody here ")
        +
        "labelled and nothing was tuned on: every figure is out of sample. Each question is asked once with the "
        f"offline default stack ({meta['model']}; answer cache off). Correctness is "
        "`workbench/correctness.py` against the set's gold answer, over the answered answerable questions.", "",
        "| set | questions | answered (answerable) | false answers (unanswerable) | retrieval hit@10 | "
        "correct / partly / wrong (of answered answerable) | answered correctly (of answerable) |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for row in results["rows"]:
        hit = (f"{rate_ci(row['hit_at_10'], row['hit_at_10_questions'])} (of {row['hit_at_10_questions']:,})"
               if row["hit_at_10"] is not None else "—")
        asked = f"{row['questions']:,} ({row['answerable']:,} / {row['unanswerable']:,})"
        judged = row.get("judged") or 0
        lines.append(f"| {row['set']} | {asked} | {rate_ci(row['answer_rate_answerable'], row['answerable'])} | "
                     f"{rate_ci(row['false_answer_rate_unanswerable'], row['unanswerable'])} | {hit} | "
                     f"{rate_ci(row['correct_rate'], judged)} / {rate_ci(row['partly_rate'], judged)} / "
                     f"{rate_ci(row['wrong_rate'], judged)} | "
                     f"{rate_ci(row['answered_correctly'] if judged else None, row['answerable'])} |")  # none judged
    lines += ["", "The questions column counts all questions asked (answerable / unanswerable). Where the rows come "
              "from:", ""]
    for row in results["rows"]:
        lines.append(f"- **{row['set']}**: {row['source']}; corpus {row['corpus']}; questions: {row['sample']}"
                     + (f"; measured {row['measured']} (`make bench-squad`)" if row.get("measured") else "") + ".")
    lines += ["", results["note"], ""]
    return "\n".join(lines)


# -- measuring ------------------------------------------------------------------------------------------------

def run_set(name: str, documents, questions: Sequence[Question], cfg, models, store_dir: Path,
            progress: bool) -> tuple[list[dict], dict]:
    from pipeline.ingestion.ingest import ingest_documents
    from pipeline.storage.store import Store
    from workbench.evaluate import eval_pipeline

    with Store.open(store_dir) as store:
        t0 = time.perf_counter()
        report = ingest_documents(store, list(documents), cfg, models, progress=progress)
        ingest_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        rows = ask_questions(eval_pipeline(store, models, cfg), questions, progress=progress, desc=name)
        return rows, {"documents": report.documents, "chunks": store.chunk_count(), "ingest_s": round(ingest_s, 1),
                      "ask_s": round(time.perf_counter() - t0, 1)}


NOTE = ("Read the rows against each other, not against the golden set: SQuAD's unanswerable questions were "
        "written against a paragraph that is in the corpus, so a retrieval-score gate sees them as on-topic; the "
        "manuals' questions are all answerable and their gold answers are whole paragraphs, so the extractive "
        "answer often scores partly. Thresholds fitted on one corpus do not transfer to another's score scale.")


def main(argv: list[str] | None = None) -> int:
    from pipeline.config import PipelineConfig
    from pipeline.models.registry import Models

    parser = argparse.ArgumentParser(prog="python -m benchmarks.ood", description=__doc__.splitlines()[0])
    parser.add_argument("--stores", type=Path, default=ROOT / "build", help="parent of the reused stores")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    parser.add_argument("--print", action="store_true", help="only print the section from the results file")
    args = parser.parse_args(argv)
    if not args.print:
        from pipeline.models.encoders import set_torch_threads

        set_torch_threads(args.threads)
        cfg, models = PipelineConfig(), Models()
        try:
            squad = load_results("squad2")
        except FileNotFoundError as exc:
            raise SystemExit(f"{exc} (make bench-squad)") from None
        if squad.get("gate_settings") != gate_settings(cfg):
            raise SystemExit("benchmarks/results/squad2.json was measured with other gate settings than the shipped "
                             "defaults: run make bench-squad first")
        meta = run_meta(depends=DEPENDS, model=MODEL + "; rewrite.backend=terms")
        data = evaldata(EMANUAL, "s10_50_questions.csv")
        rows = [squad_row(squad)]
        runs = {}
        for name, label, loader, source, sample in (
                ("s10", "Samsung Galaxy S10 manual", load_s10,
                 "abhi1nandy2/EMNLP-2021-Findings (data/s10_*), Apache-2.0, manual text Samsung's",
                 "all 50, each with a gold answer and gold section"),
                ("tv", "Samsung Smart TV / Remote manual", load_tv,
                 "abhi1nandy2/EMNLP-2021-Findings (data/smart_tv_remote_*), Apache-2.0, manual text Samsung's",
                 "all question-answer pairs; gold sections where given by title")):
            documents, questions = loader(data)
            set_rows, run = run_set(name, documents, questions, cfg, models, args.stores / f"ood-{name}-store",
                                    sys.stderr.isatty())
            runs[name] = run
            rows.append({"set": label, "source": source, "corpus": f"{len(documents):,} sections, "
                         f"{run['chunks']:,} chunks", "sample": sample, **figures(set_rows)})
            print(f"{name}: {len(questions)} questions in {run['ask_s']:.0f} s", file=sys.stderr)
        meta["load_average_end"] = load_average()
        results = {"meta": meta, "gate": gate_settings(cfg), "rows": rows, "runs": runs, "note": NOTE,
                   "reproduce": "make bench-ood"}
        write_results(NAME, results)
        print(f"wrote {results_path(NAME)}", file=sys.stderr)
    print(render(load_results(NAME)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
