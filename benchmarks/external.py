"""External benchmark: the Samsung manuals as golden sets nobody here wrote (BENCHMARKS.md, "External benchmark").

The demo golden set was written together with its corpus, so its questions share the corpus's wording. This
benchmark builds golden-style sets from public data instead (Nandy et al., EMNLP 2021 Findings, "Question
answering over electronic devices"; read from ``../shared/evaldata/emanual_samsung`` or ``$WORKBENCH_EVALDATA``,
never copied into the repository), one per manual, and runs them through ``workbench.evaluate.evaluate`` — the
same evaluation as ``workbench eval``, so every golden metric (answer and false-answer rates, per-tag rates,
hit@10 and MRR, citation support, correctness, NLI support) is reported. Per manual (:func:`build`):

- **answerable**: the manual's questions that name gold sections, asked of the manual;
- **answer removed** (unanswerable, same topic): one gold-section set in :data:`REMOVE_ONE_IN` (the sections a
  question names; chosen by a hash of their ids) is left out of the corpus; a question all of whose gold sections
  are left out has no answer in the corpus any more, though its topic is all around it. A question with some of
  its gold sections left out (by another question's set) and some kept is dropped (counted), since whether it can
  still be answered is not known;
- **off-topic** (unanswerable): :data:`OFF_TOPIC` questions of the other manual (a TV question asked of the phone
  manual and the other way round), chosen by a hash of their id.

Each case is tagged with its kind, so the per-tag rates give the two unanswerable kinds separately. The cases are
split in two by a hash of the case id: ``tune`` (for any future fitting on this corpus) and ``test`` (reported
here; nothing was ever fitted on it — the shipped defaults were fitted on the demo golden set's tune part).
Every rate carries its 95 % Wilson interval. ``bounds`` in the results file are derived from the evaluation
summary's intervals (:func:`workbench.floors.interval_bounds`: the lower end for rates where higher is better, the
upper end for false-answer rates): ``tests/benchmarks/
test_external.py`` re-runs the S10 manual's test part and fails when the shipped default falls outside them.

``make bench-external`` (``python -m benchmarks.external``) measures and writes ``benchmarks/results/external.json``;
``make report`` renders it. Stores are built under ``build/`` (git-ignored) and reused.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from benchmarks.ood import EMANUAL, Question, evaldata, load_s10, load_tv
from benchmarks.results_io import (
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

NAME = "external"
# the answer path and the evaluation: a change to any of them can move these numbers
DEPENDS = Depends(("benchmarks/external.py", "benchmarks/ood.py", "pipeline", "workbench/evaluate.py",
                   "workbench/walk.py", "workbench/summary.py", "workbench/correctness.py", "workbench/nli.py",
                   "workbench/golden.py", "workbench/metrics.py", "workbench/relevance.py"),
                  ("chunking", "embedding", "keyword", "ingest", "retrieve", "rerank", "gate", "rewrite", "generate",
                   "validate"))
SEED = "external-1"
REMOVE_ONE_IN = 2          # one question's gold-section set in two is left out of the corpus (answer removed)
OFF_TOPIC = 50             # the other manual's questions asked of this one
MANUALS = {"s10": ("Samsung Galaxy S10 manual", load_s10, "tv"),
           "tv": ("Samsung Smart TV / Remote manual", load_tv, "s10")}
KINDS = ("answerable", "answer-removed", "off-topic")
MODEL = ("extractive generator; embedder all-MiniLM-L6-v2 (packaged); reader workbench/answerability-reader and NLI "
         "workbench/nli-check (int8 ONNX, committed); shipped defaults")
# what the CI test bounds on the S10 test part: the interval end of each (workbench.floors.interval_bounds)
BOUNDED = {"floors": ("answer_rate_answerable", "recall_at_10"),
           "ceilings": ("per_tag.answer-removed.false_answer_rate_unanswerable",
                        "per_tag.off-topic.false_answer_rate_unanswerable")}


def _hash(text: str) -> int:
    return int(hashlib.sha1(f"{SEED}\x00{text}".encode()).hexdigest()[:12], 16)


@dataclass(frozen=True)
class ExternalSet:
    manual: str
    documents: tuple            # the manual's sections, the removed ones left out (pipeline Documents)
    removed: tuple[str, ...]    # doc ids of the sections left out
    golden: object              # workbench.golden.GoldenSet
    split: object               # workbench.golden.GoldenSplit
    dropped: int                # questions with some gold sections removed and some kept


def build(manual: str, data: Path) -> ExternalSet:
    """The golden-style set of one manual (module docstring): pure given the data files."""
    from workbench.golden import GoldenCase, GoldenSet, GoldenSplit

    title, loader, other = MANUALS[manual]
    documents, questions = loader(data)
    _, foreign = MANUALS[other][1](data)
    labelled = [q for q in questions if q.gold_doc_ids]
    units = {tuple(sorted(q.gold_doc_ids)) for q in labelled}
    removed = {d for unit in units if _hash("\n".join(unit)) % REMOVE_ONE_IN == 0 for d in unit}
    cases, dropped = [], 0
    for q in labelled:
        gone = [d in removed for d in q.gold_doc_ids]
        if not any(gone):
            cases.append(_case(GoldenCase, q, "answerable", answerable=True))
        elif all(gone):
            cases.append(_case(GoldenCase, q, "answer-removed", answerable=False))
        else:
            dropped += 1
    for q in sorted(foreign, key=lambda q: _hash(q.qid))[:OFF_TOPIC]:
        cases.append(_case(GoldenCase, q, "off-topic", answerable=False))
    test = tuple(c.id for c in cases if _hash(c.id) % 2 == 0)
    tune = tuple(c.id for c in cases if _hash(c.id) % 2 == 1)
    path = f"external:{manual}"
    return ExternalSet(manual=manual, documents=tuple(d for d in documents if d.doc_id not in removed),
                       removed=tuple(sorted(removed)), golden=GoldenSet(path=path, cases=tuple(cases)),
                       split=GoldenSplit(path=path, seed=0, test_fraction=0.5, parts={"tune": tune, "test": test}),
                       dropped=dropped)


def _case(GoldenCase, q: Question, kind: str, *, answerable: bool):
    return GoldenCase(id=f"{kind}:{q.qid}", question=q.text, answerable=answerable,
                      expected_doc_ids=q.gold_doc_ids if answerable else (),
                      expected_answer=(q.answers[0] if q.answers else None) if answerable else None, tags=(kind,))


def counts(ext: ExternalSet, part: str = "test") -> dict[str, int]:
    """Cases of each kind in one part."""
    wanted = set(ext.split.parts[part])
    return {k: sum(c.id in wanted and k in c.tags for c in ext.golden.cases) for k in KINDS}


# -- measuring ------------------------------------------------------------------------------------------------

def _store_dir(stores: Path, ext: ExternalSet) -> Path:
    key = hashlib.sha1("\n".join(d.doc_id for d in ext.documents).encode()).hexdigest()[:10]
    return stores / f"external-{ext.manual}-{key}"


def evaluate_part(ext: ExternalSet, stores: Path, part: str = "test", progress: bool = False):
    """Ingest the manual (its removed sections left out; the store is reused) and evaluate one part of its set
    with the shipped defaults → (workbench.evaluate.Evaluation, store figures)."""
    from pipeline.config import PipelineConfig
    from pipeline.ingestion.ingest import ingest_documents
    from pipeline.models.registry import Models
    from pipeline.storage.store import Store
    from workbench.evaluate import evaluate
    from workbench.golden import select

    cfg, models = PipelineConfig(), Models()
    with Store.open(_store_dir(stores, ext)) as store:
        t0 = time.perf_counter()
        ingest_documents(store, list(ext.documents), cfg, models, progress=progress)
        ingest_s = time.perf_counter() - t0
        evaluation = evaluate(select(ext.golden, ext.split, part), store, models, cfg, split=ext.split, part=part,
                              progress=progress)
        return evaluation, {"chunks": store.chunk_count(), "ingest_s": round(ingest_s, 1)}


KEYS = ("cases", "answerable", "unanswerable", "answer_rate_answerable", "false_answer_rate_unanswerable",
        "recall_at_10", "mrr", "citation_support_rate", "answers_fully_supported", "correct_answer_rate",
        "partly_answer_rate", "wrong_answer_rate", "supported_but_wrong_rate")


def figures(summary: dict) -> dict:
    """The reported figures of one run: the summary's rates, the per-kind false-answer rates, and the bounds the CI
    test holds (:data:`BOUNDED`), each the end of the metric's 95 % interval from the summary."""
    from workbench.floors import interval_bounds
    from workbench.summary import lookup

    out = {k: summary.get(k) for k in KEYS}
    out["nli_support_rate"] = (summary.get("nli") or {}).get("support_rate")
    for kind in ("answer-removed", "off-topic"):
        out[f"false_answer_rate_{kind}"] = lookup(summary, f"per_tag.{kind}.false_answer_rate_unanswerable")
    out["bounds"] = interval_bounds(summary, BOUNDED)
    return out


def measure(stores: Path, progress: bool = False) -> dict:
    data = evaldata(EMANUAL, "s10_50_questions.csv")
    manuals = {}
    for manual, (title, _, _) in MANUALS.items():
        ext = build(manual, data)
        n = counts(ext)
        t0 = time.perf_counter()
        evaluation, store = evaluate_part(ext, stores, "test", progress)
        manuals[manual] = {"title": title, "sections": len(ext.documents) + len(ext.removed),
                           "removed_sections": len(ext.removed), "dropped_questions": ext.dropped,
                           "tune": counts(ext, "tune"),
                           "test": n, "store": store, "seconds": round(time.perf_counter() - t0, 1),
                           **figures(evaluation.summary)}
        print(f"{manual}: {sum(n.values())} test cases in {manuals[manual]['seconds']:.0f} s", file=sys.stderr)
    return {"manuals": manuals, "remove_one_in": REMOVE_ONE_IN, "off_topic": OFF_TOPIC, "seed": SEED,
            "reproduce": "make bench-external"}


# -- the section (pure) ---------------------------------------------------------------------------------------

def render(results: dict) -> str:
    lines = [
        "## External benchmark: Samsung manuals", "",
        meta_line(results["meta"]) + f" Reproduce: `{results['reproduce']}`.", "",
        "Golden-style sets built from public data nobody here wrote (Nandy et al., EMNLP 2021 Findings; "
        "abhi1nandy2/EMNLP-2021-Findings, Apache-2.0, manual text Samsung's; read from `../shared/evaldata`, never "
        "copied). Per manual: its questions with gold sections (**answerable**); **answer removed** — one "
        f"question's gold sections in {results['remove_one_in']} (by a hash of their ids) are left out of the "
        "corpus, and a question all of whose gold sections are gone is asked anyway (same topic, no answer); "
        "**off-topic** — "
        f"{results['off_topic']} questions of the other manual. Cases are split in two by a hash of their id; these "
        "figures are the **test** part, on which nothing was ever fitted (the shipped defaults were fitted on the "
        "demo golden set's tune part). Each rate with its 95 % Wilson interval and count.", "",
        "| | " + " | ".join(m["title"] for m in results["manuals"].values()) + " |",
        "|---|" + "---:|" * len(results["manuals"]),
    ]
    ms = list(results["manuals"].values())

    def row(label: str, cell) -> None:
        lines.append(f"| {label} | " + " | ".join(cell(m) for m in ms) + " |")

    row("test cases (answerable / answer removed / off-topic)",
        lambda m: f"{m['cases']} (" + " / ".join(str(m["test"][k]) for k in KINDS) + ")")
    row("corpus", lambda m: f"{m['sections'] - m['removed_sections']} of {m['sections']} sections, "
                            f"{m['store']['chunks']} chunks")
    row("answered (answerable)", lambda m: rate_ci(m["answer_rate_answerable"], m["test"]["answerable"], True))
    row("false answers: answer removed",
        lambda m: rate_ci(m["false_answer_rate_answer-removed"], m["test"]["answer-removed"], True))
    row("false answers: off-topic", lambda m: rate_ci(m["false_answer_rate_off-topic"], m["test"]["off-topic"], True))
    row("retrieval hit@10 (answerable)", lambda m: rate_ci(m["recall_at_10"], m["test"]["answerable"], True))
    row("MRR (answerable)", lambda m: "—" if m["mrr"] is None else f"{m['mrr']:.3f}")
    row("correct (of answered answerable)", lambda m: rate_ci(m["correct_answer_rate"], _answered(m), True))
    row("partly (of answered answerable)", lambda m: rate_ci(m["partly_answer_rate"], _answered(m), True))
    row("wrong (of answered answerable)", lambda m: rate_ci(m["wrong_answer_rate"], _answered(m), True))
    row("claims supported by their citation", lambda m: "—" if m["citation_support_rate"] is None
        else f"{100 * m['citation_support_rate']:.1f} %")
    row("seconds (ingest + evaluate)", lambda m: f"{m['seconds']:.0f}")
    lines += ["", "Floors the CI test holds the S10 manual's test part to (`tests/benchmarks/test_external.py`; the "
              "lower end of each rate's 95 % interval, or the upper end for a false-answer rate): "
              + "; ".join(f"`{k}` ≥ {v:.3f}" for k, v in ms[0]["bounds"]["floors"].items()) + "; "
              + "; ".join(f"`{k}` ≤ {v:.3f}" for k, v in ms[0]["bounds"]["ceilings"].items()) + ".", "",
              "The manuals' gold answers are whole paragraphs, so a correct short answer often scores partly; "
              "questions with only some of their gold sections removed are dropped ("
              + ", ".join(f"{m['title']}: {m['dropped_questions']}" for m in ms) + ").", ""]
    return "\n".join(lines)


def _answered(m: dict) -> int:
    return int(round((m["answer_rate_answerable"] or 0) * m["test"]["answerable"]))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.external", description=__doc__.splitlines()[0])
    parser.add_argument("--stores", type=Path, default=ROOT / "build", help="parent of the reused stores")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    parser.add_argument("--print", action="store_true", help="only print the section from the results file")
    args = parser.parse_args(argv)
    if not args.print:
        if args.threads:
            from pipeline.models.encoders import set_torch_threads

            set_torch_threads(args.threads)
        meta = run_meta(model=MODEL, depends=DEPENDS)
        results = {"meta": meta, **measure(args.stores, sys.stderr.isatty())}
        meta["load_average_end"] = load_average()
        write_results(NAME, results)
        print(f"wrote {results_path(NAME)}; run `make report` to update BENCHMARKS.md", file=sys.stderr)
    print(render(load_results(NAME)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
