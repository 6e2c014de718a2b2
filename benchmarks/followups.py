"""Follow-ups and unrelated questions in a conversation: which earlier turns the shipped rule sends, and whether
the expected document is then retrieved.

``python -m benchmarks.followups`` ingests ``golden/corpus`` (shipped config) and searches (rewrite, retrieve,
rerank; no generation) two sets of questions, each under the three conversation modes of
:data:`workbench.conversation.MODES`, with the history each mode sends (:func:`workbench.conversation.select_history`,
the rule of the Ask page and of ``workbench ask --history``):

- **follow-ups**: the golden cases that come with a conversation (their question needs it);
- **unrelated after a conversation**: every answerable golden question without a history, asked after the
  previous such question whose expected documents are different (a conversation about something else).

"always" is what the CLI did before it shared the page's rule (every turn of ``--history`` went with the
question) and what ``workbench eval`` does with a golden case's history; "never" asks the question alone. A
question hits when one of its expected documents is among the first 10 documents of the final candidate list
(rerank order where the reader ran)
(Wilson intervals over questions); each mode is compared with the rule on the same questions by McNemar's exact
test. Writes ``benchmarks/results/followups.json``; :func:`render` is its BENCHMARKS.md section.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from benchmarks.golden_retrieval import mcnemar
from benchmarks.results_io import (
    ROOT,
    SEARCH_CONFIG,
    SEARCH_PATH,
    Depends,
    configured_models,
    load_results,
    meta_line,
    rate_ci,
    run_meta,
    write_results,
)

NAME = "followups"
SECTION = "## Conversation: follow-ups and unrelated questions"
DEPENDS = Depends(("benchmarks/followups.py", "benchmarks/golden_retrieval.py", "workbench/conversation.py",
                   "pipeline/generation/rewrite.py", "golden/golden.jsonl", "golden/corpus", *SEARCH_PATH),
                  ("rewrite", *SEARCH_CONFIG))
MODES = ("never", "follow-ups", "always")
K = 10
SETS = {"follow_ups": "follow-ups (golden cases asked within a conversation)",
        "unrelated": "unrelated questions asked after a conversation about another document"}


def unrelated_conversations(cases) -> list[tuple]:
    """(case, history): each answerable question without a history, after the previous such question whose
    expected documents it does not share, with a stand-in answer."""
    from pipeline.trace import Message

    standalone = [c for c in cases if c.answerable and c.expected_doc_ids and not c.history]
    out = []
    for i, case in enumerate(standalone):
        expected = set(case.expected_doc_ids)
        earlier = next((p for p in reversed(standalone[:i]) if not set(p.expected_doc_ids) & expected), None)
        if earlier is not None:
            out.append((case, (Message("user", earlier.question),
                               Message("assistant", earlier.expected_answer or "(answered)"))))
    return out


def hit(trace, expected: tuple[str, ...]) -> bool:
    docs = list(dict.fromkeys(c.doc_id for c in trace.ranked_candidates()))
    return bool(set(docs[:K]) & set(expected))


def measure(pipe, pairs: list[tuple]) -> dict:
    """Per mode: the questions that hit, how many turns were sent, and the standalone query searched."""
    from workbench.conversation import select_history

    per_case = {}
    for case, history in pairs:
        row = {}
        for mode in MODES:
            choice = select_history(case.question, history, mode)
            trace = pipe.search(case.question, history=choice.history)
            row[mode] = {"hit": hit(trace, case.expected_doc_ids), "turns_sent": len(choice.history),
                         "query": trace.rewrite.query if trace.rewrite else case.question}
        per_case[case.id] = row
    return per_case


def summarise(per_case: dict) -> dict:
    ids = sorted(per_case)
    n = len(ids)
    out = {"questions": n, "hit_rate": {}, "sent_history": {}, "vs_rule": {}}
    for mode in MODES:
        out["hit_rate"][mode] = sum(per_case[i][mode]["hit"] for i in ids) / n if n else None
        out["sent_history"][mode] = sum(per_case[i][mode]["turns_sent"] > 0 for i in ids)
        if mode != "follow-ups":
            out["vs_rule"][mode] = mcnemar([per_case[i]["follow-ups"]["hit"] for i in ids],
                                           [per_case[i][mode]["hit"] for i in ids])
    return out


def main(argv: list[str] | None = None) -> int:
    from pipeline.config import PipelineConfig
    from pipeline.engine import Pipeline
    from pipeline.ingestion.ingest import ingest_paths
    from pipeline.models.encoders import set_torch_threads
    from pipeline.models.registry import Models
    from pipeline.storage.store import Store
    from workbench.golden import load_golden

    parser = argparse.ArgumentParser(prog="python -m benchmarks.followups", description=__doc__.splitlines()[0])
    parser.add_argument("--store", type=Path, default=ROOT / "build" / "followups-store")
    parser.add_argument("--print", action="store_true", help="only print the section from the results file")
    args = parser.parse_args(argv)
    if not args.print:
        set_torch_threads(1)
        cfg, models = PipelineConfig(), Models()
        meta = run_meta(model=configured_models(cfg, generation=False), depends=DEPENDS)
        cases = load_golden(ROOT / "golden" / "golden.jsonl").cases
        follow = [(c, c.history) for c in cases if c.history and c.answerable and c.expected_doc_ids]
        with Store.open(args.store) as store:
            ingest_paths(store, [ROOT / "golden" / "corpus"], cfg, models, progress=False)
            pipe = Pipeline(store, cfg=cfg, models=models, log_runs=False)
            sets = {}
            for key, pairs in (("follow_ups", follow), ("unrelated", unrelated_conversations(cases))):
                per_case = measure(pipe, pairs)
                sets[key] = {**summarise(per_case), "per_case": per_case}
        write_results(NAME, {"meta": meta, "k": K, "sets": sets,
                             "reproduce": ".venv/bin/python -m benchmarks.followups"})
    print(render(load_results(NAME)))
    return 0


def _p(p: float) -> str:
    return f"{p:.2g}" if p < 0.001 else f"{p:.3f}"


def render(results: dict) -> str:
    r = results
    lines = [SECTION, "", meta_line(r["meta"]) + " Reproduce: `.venv/bin/python -m benchmarks.followups`.", "",
             "Which earlier turns go with a question (`workbench.conversation.select_history`, the one rule of the Ask "
             "page and `workbench ask/search --history`), and whether an expected document is then among the first "
             f"{r['k']} documents searched (search only: rewrite, retrieve, rerank). Modes: **never** (the question "
             "alone), **follow-ups** (the shipped rule: the current thread, only for a question that reads as a "
             "follow-up), **always** (every turn: what the CLI sent before it shared the rule). 95 % Wilson intervals "
             "over questions; each mode against the rule by McNemar's exact test on the same questions.", "",
             "| questions | mode | history sent | expected document in the first "
             f"{r['k']} | vs the rule (only the rule hits / only this mode hits, p) |", "|---|---|---:|---:|---|"]
    for key, label in SETS.items():
        s = r["sets"][key]
        n = s["questions"]
        for mode in MODES:
            vs = s["vs_rule"].get(mode)
            versus = (f"{vs['only_first']} / {vs['only_second']}, p = {_p(vs['p'])}" if vs else "—")
            lines.append(f"| {label} ({n}) | {mode} | {s['sent_history'][mode]} of {n} | "
                         f"{rate_ci(s['hit_rate'][mode], n, counts=True)} | {versus} |")
    lines.append("")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
