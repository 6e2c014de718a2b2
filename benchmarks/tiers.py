"""The "Tiered generation" section of BENCHMARKS.md: the golden set answered cheap-only, expensive-only and
tiered (cheap first, the expensive model only when the validator disagrees), on the same cases.

``python -m benchmarks.tiers [--limit N]`` measures and writes ``benchmarks/results/tiers.json``:

1. ingests ``golden/corpus`` into ``build/tiers-store`` (incremental; its own, so a running golden report or tune
   does not lock it);
2. starts an OpenAI-compatible stub on 127.0.0.1 (``tests/support/openai_stub.py``) that serves two models under
   litellm's names ``openai/gpt-4o-mini`` (cheap) and ``openai/gpt-4o`` (expensive). Their replies are SCRIPTED,
   not generated: for an answerable case both reply with the golden expected answer, citing the offered source
   that shares the most words with it, except that on a fixed, hash-chosen share of the cases
   (:data:`CHEAP_WRONG_SHARE`) the cheap model instead states the first sentence of the offered source that
   shares the fewest words with the expected answer, citing the best one (a wrong answer, cited wrongly);
   for an unanswerable case that passed the gate both reply with the abstention sentence. Token counts are the
   stub's estimate (characters / 4 of the prompt and of the reply), so costs are litellm's list prices
   (offline price map) applied to estimated tokens;
3. runs :func:`workbench.evaluate.evaluate` once per arm (:func:`workbench.compare.tier_arms`) with the
   packaged embedder, NLI off, and compares the arms (:func:`workbench.compare.compare_arms`); every case's
   outcome in every arm is recorded by case id (:func:`workbench.compare.case_outcomes`), and tiered is tested
   against each single-model arm on the same cases (:func:`workbench.compare.paired_rates`: exact McNemar, paired
   bootstrap interval of the difference).

Every rate shown carries its 95 % interval: Wilson for case rates, a bootstrap over answers for the share of
claims supported.

What this measures is the tiering machinery — how many expensive calls the validator saves and whether the kept
answers are as good — given a cheap model that is wrong in a known share of cases; it says nothing about how
often a real gpt-4o-mini is wrong.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
import time

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

NAME = "tiers"
GOLDEN = ROOT / "golden" / "golden.jsonl"
CORPUS = ROOT / "golden" / "corpus"
STORE = ROOT / "build" / "tiers-store"
CHEAP, EXPENSIVE = "openai/gpt-4o-mini", "openai/gpt-4o"
CHEAP_WRONG_SHARE = 0.3
CHARS_PER_TOKEN = 4
_SOURCE = re.compile(r'<source n="(\d+)" fence="[^"]*">\n(.*?)\n</source fence=', re.DOTALL)
_WORD = re.compile(r"[a-z0-9_.]+")
PAIRS = (("tiered", "expensive only"), ("tiered", "cheap only"))
DEPENDS = Depends(paths=("benchmarks/tiers.py", "tests/support/openai_stub.py", "pipeline", "workbench/compare.py",
                         "workbench/evaluate.py", "workbench/walk.py", "workbench/summary.py", "workbench/metrics.py",
                         "workbench/correctness.py", "workbench/golden.py", "golden/golden.jsonl", "golden/corpus"),
                  config=("chunking", "embedding", "keyword", "retrieve", "rerank", "gate", "rewrite", "generate",
                          "validate"))


# -- the scripted models (pure) -------------------------------------------------------------------------------

def cheap_is_wrong(case_id: str, share: float = CHEAP_WRONG_SHARE) -> bool:
    """Whether the scripted cheap model answers ``case_id`` wrongly: a fixed hash of the id, never random."""
    digest = int(hashlib.sha256(case_id.encode("utf-8")).hexdigest()[:8], 16)
    return digest / 0xFFFFFFFF < share


def offered_sources(prompt: str) -> dict[int, str]:
    """Source number → body text, from the last user turn of a generation prompt."""
    out = {}
    for number, block in _SOURCE.findall(prompt):
        out[int(number)] = block.split("\n---\n", 1)[-1]
    return out


def _words(text: str) -> set[str]:
    return set(_WORD.findall(text.lower()))


def scripted_reply(case, prompt: str, cheap: bool) -> str:
    """The JSON reply of the scripted model for ``case`` given the prompt's sources (module docstring)."""
    from pipeline.generation.prompts import ABSTENTION_MESSAGE

    sources = offered_sources(prompt)
    if case is None or not case.answerable or not case.expected_answer or not sources:
        return json.dumps({"answer": ABSTENTION_MESSAGE, "used_source_ids": [], "confidence": "LOW",
                           "limitations": []})
    expected = _words(case.expected_answer)
    ranked = sorted(sources, key=lambda n: (-len(expected & _words(sources[n])), n))
    best, worst = ranked[0], ranked[-1]
    text = case.expected_answer.strip()
    if cheap and cheap_is_wrong(case.id) and worst != best:
        sentence = re.split(r"(?<=[.!?])\s+", " ".join(sources[worst].split()))[0]
        text = sentence
    text = text.rstrip(".") + f" [{best}]."
    return json.dumps({"answer": text, "used_source_ids": [best], "confidence": "HIGH", "limitations": []})


# -- the section (pure) ---------------------------------------------------------------------------------------

def _pct(value) -> str:
    return "n/a" if value is None else f"{100 * value:.1f} %"


def _usd(value, digits: int = 4) -> str:
    return "unknown" if value is None else f"${value:.{digits}f}"


def _share_by(k: int, n: int, counts: dict | None) -> str:
    """``(100.0 % [92.0–100.0]; misattributed 32, unchecked 3)``: a share with its Wilson interval, by trigger."""
    return (f"({rate_ci(k / n if n else None, n)}"
            + ("; " + ", ".join(f"{name} {c}" for name, c in counts.items()) if counts else "") + ")")


def _counts(outcomes: dict | None) -> dict[str, int]:
    """The denominators of an arm's case rates, from its per-case outcomes (0 for results without them)."""
    cases = (outcomes or {}).values()
    return {"answerable": sum(c["answerable"] for c in cases),
            "answered_answerable": sum(c["answerable"] and c["answered"] for c in cases)}


def _bootstrap(ci) -> str:
    return "" if not ci else f" [{100 * ci[0]:.1f}–{100 * ci[1]:.1f}]"


def _paired_lines(paired: dict) -> list[str]:
    """Tiered against each single-model arm on the same cases, one line per pair."""
    from workbench.metrics import PairedTest

    lines = []
    for pair, rates in paired.items():
        shown = "; ".join(f"{r['label']}: {100 * r['rate_a']:.1f} % vs {100 * r['rate_b']:.1f} %, "
                          f"{PairedTest.from_dict(r).describe()}" for r in rates)
        lines += [f"**{pair.replace(' vs ', ' vs. ').capitalize()}, paired on the same cases** (first minus second, "
                  f"95 % paired bootstrap interval, exact McNemar p on the cases where they differ): {shown}.", ""]
    return lines


def arm_extras(rows: list[dict], outcomes: dict[str, dict[str, dict]]) -> None:
    """Each arm's claims-supported interval (a bootstrap over its validated answers), added to its row."""
    from workbench.metrics import ratio_bootstrap

    for row in rows:
        validated = [c for c in outcomes[row["arm"]].values() if c["claims"] is not None]
        ci = ratio_bootstrap([c["supported_claims"] for c in validated], [c["claims"] for c in validated])
        row["citation_support_ci95"] = None if ci is None else list(ci)


def paired_arms(outcomes: dict[str, dict[str, dict]]) -> dict[str, list[dict]]:
    from workbench.compare import paired_rates

    return {f"{a} vs {b}": [r.to_dict() for r in paired_rates(outcomes[a], outcomes[b])] for a, b in PAIRS}


def render(results: dict) -> str:
    """The BENCHMARKS.md section, from ``benchmarks/results/tiers.json`` alone."""
    meta, rows, verdict = results["meta"], results["arms"], results["verdict"]
    by = {r["arm"]: r for r in rows}
    tiered = by["tiered"]
    lines = [
        "## Tiered generation", "",
        meta_line(meta) + f" Reproduce: `{results['reproduce']}`.", "",
        f"{results['cases']} golden cases{results['subset_note']}, each answered three ways on the same retrieval "
        f"and gate: the cheap model alone, the expensive model alone, and tiered (`generate.tiers` = cheap, then "
        f"expensive; `generate.escalate_on` = {', '.join(results['escalate_on'])}). **The two models are an "
        f"OpenAI-compatible stub with scripted replies** served under litellm's names `{results['cheap']}` and "
        f"`{results['expensive']}`: both reply with the golden expected answer citing the best-matching offered "
        f"source, except that the cheap model answers a fixed, hash-chosen {_pct(results['cheap_wrong_share'])} of "
        "the answerable cases wrongly (the first sentence of the offered source sharing the fewest words with the "
        "expected answer, cited to the best one); an unanswerable case that passes the gate gets the abstention "
        "sentence from both. Costs are litellm's list "
        "prices (offline price map) on the stub's estimated tokens (characters / 4); the embedder is "
        f"{results['embedder']}, NLI off. This measures the escalation machinery, not a real model's error rate.",
        "", "Rates with their 95 % intervals: Wilson for case rates (escalations of the generated answers, answered "
        "of the answerable cases, correct of the answered answerable ones), a bootstrap over answers for the claims "
        "supported.", "",
        "| arm | LLM calls | calls to the expensive model | escalation rate | cost (all cases) | "
        "cost per answered question | answered (answerable) | claims supported | correct answers |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    outcomes = results.get("outcomes") or {}
    for arm in ("cheap only", "expensive only", "tiered"):
        r = by[arm]
        n = _counts(outcomes.get(arm))
        lines.append(f"| {arm} | {r['llm_calls']} | {r['expensive_calls']} | "
                     f"{rate_ci(r['escalation_rate'], results['generated']) if arm == 'tiered' else '—'} | "
                     f"{_usd(r['cost_usd'])} | {_usd(r['cost_per_answered_usd'], 6)} | "
                     f"{rate_ci(r['answer_rate_answerable'], n['answerable'])} | "
                     f"{_pct(r['citation_support_rate'])}{_bootstrap(r.get('citation_support_ci95'))} | "
                     f"{rate_ci(r['correct_answer_rate'], n['answered_answerable'])} |")
    reasons = results["escalate_reasons"]
    lines += ["", f"Tiered kept the cheap answer on {tiered['kept_per_tier'].get(results['cheap'], 0)} and the "
              f"expensive one on {tiered['kept_per_tier'].get(results['expensive'], 0)} of "
              f"{results['generated']} generated answers; escalations by trigger: "
              + (", ".join(f"{k} {v}" for k, v in reasons.items()) or "none") + ". "
              + ("Tiered made **fewer expensive calls** than expensive-only"
                 if verdict["fewer_expensive_calls"] else "Tiered did **not** make fewer expensive calls")
              + (" at **no lower correct-answer rate**." if verdict["no_lower_correct_rate"] else
                 " but its correct-answer rate is **lower**." if verdict["no_lower_correct_rate"] is False
                 else " (correct-answer rate not scored)."), ""]
    lines += _paired_lines(results.get("paired") or {})
    v = results.get("validator")
    if v:
        lines += [f"Of the {v['cheap_wrong']} answerable cases where the scripted cheap model answered wrongly, the "
                  f"validator sent {v['caught']} on to the expensive model "
                  f"{_share_by(v['caught'], v['cheap_wrong'], v.get('caught_by'))} and kept "
                  f"{v['cheap_wrong'] - v['caught']}. The scripted wrong answer is a sentence of another offered "
                  "source cited to the best one: a topical neighbour, so the cited source can still reach the claim "
                  "threshold (supported), and what catches it is the misattribution check (an uncited offered "
                  "source states the sentence far more closely, by cosine or by copied words, "
                  "`validate.misattribution_margin`); a wrong sentence "
                  "that is all code leaves no claim to check (`unchecked`). A real model's wrong answers need not be "
                  f"copied sentences, so read this as the check working, not as its recall. Of the "
                  f"{v['cheap_right']} it answered right, {v['escalated_anyway']} were sent on "
                  f"anyway {_share_by(v['escalated_anyway'], v['cheap_right'], v.get('escalated_anyway_by'))} "
                  "(the golden answers paraphrase the documents, and a "
                  "paraphrase can fall below the threshold). The `abstained` escalations are unanswerable questions "
                  "that passed the gate: the cheap model's abstention is sent on, and the expensive one abstains "
                  "too.", ""]
    return "\n".join(lines)


# -- the measurement ----------------------------------------------------------------------------------------

def measure(limit: int | None, progress: bool) -> dict:
    sys.path.insert(0, str(ROOT))
    from pipeline.config import PipelineConfig
    from pipeline.ingestion.ingest import ingest_paths
    from pipeline.models.registry import default_models
    from pipeline.storage.store import Store
    from tests.support.openai_stub import OpenAIStub, RecordedRequest, Reply
    from workbench.compare import case_outcomes, compare_arms, expensive_model, tier_arms, tiering_verdict
    from workbench.evaluate import evaluate
    from workbench.golden import load_golden, subset

    golden = load_golden(GOLDEN)
    cases = subset(golden, limit) if limit else golden
    by_id = {c.id: c for c in cases.cases}
    current: dict[str, str] = {"id": ""}

    def on_progress(done: int, total: int, case_id: str) -> None:
        current["id"] = case_id
        if progress and done % 25 == 0:
            print(f"  {done}/{total}", file=sys.stderr)

    def case_of(user_turn: str):
        """The case a generation prompt is for: the one whose question the prompt quotes (the evaluation may
        generate in another order than it reports progress); the case in progress breaks a tie."""
        quoted = [c for c in cases.cases if c.question.strip() and c.question.strip() in user_turn]
        if len(quoted) > 1 and current["id"] in {c.id for c in quoted}:
            return by_id[current["id"]]
        return max(quoted, key=lambda c: len(c.question), default=by_id.get(current["id"]))

    def responder(cheap: bool):
        def reply(request: RecordedRequest) -> Reply:
            prompt = "\n".join(str(m.get("content", "")) for m in request.messages)
            last = str(request.messages[-1].get("content", "")) if request.messages else ""
            content = scripted_reply(case_of(last), last, cheap)
            return Reply(content, prompt_tokens=len(prompt) // CHARS_PER_TOKEN,
                         completion_tokens=max(1, len(content) // CHARS_PER_TOKEN), model=request.model)
        return reply

    models = default_models()
    summaries, seconds, tiered_run, outcomes = {}, {}, None, {}
    with OpenAIStub() as stub, Store.open(STORE) as store:
        ingest_paths(store, [CORPUS], PipelineConfig(), models, progress=progress)
        stub.respond(CHEAP.split("/", 1)[1], responder(cheap=True))
        stub.respond(EXPENSIVE.split("/", 1)[1], responder(cheap=False))
        base = PipelineConfig().with_overrides({"generate.timeout_s": 30.0, "generate.tiers": json.dumps([
            {"backend": "litellm", "model": CHEAP, "api_base": stub.api_base},
            {"backend": "litellm", "model": EXPENSIVE, "api_base": stub.api_base}])})
        for arm, cfg in tier_arms(base).items():
            started = time.perf_counter()
            evaluation = evaluate(cases, store, models, cfg, nli=False, on_progress=on_progress)
            seconds[arm] = round(time.perf_counter() - started, 1)
            summaries[arm] = evaluation.summary
            outcomes[arm] = case_outcomes(evaluation.rows)
            if arm == "tiered":
                tiered_run = evaluation.run
            print(f"{arm}: {len(evaluation.rows)} cases in {seconds[arm]} s", file=sys.stderr)
    rows = compare_arms(summaries, expensive_model(base))
    arm_extras(rows, outcomes)
    tiered = summaries["tiered"]["tiers"]
    reasons: dict[str, int] = {}
    for tier in tiered["per_tier"]:
        for k, v in tier["escalate_reasons"].items():
            reasons[k] = reasons.get(k, 0) + v
    return {
        "cases": len(cases.cases), "total_cases": len(golden.cases),
        "subset_note": "" if not limit or limit >= len(golden.cases) else
        f" (the first {len(cases.cases)} of {len(golden.cases)}: `--limit`)",
        "cheap": CHEAP, "expensive": EXPENSIVE, "cheap_wrong_share": CHEAP_WRONG_SHARE,
        "escalate_on": tiered["escalate_on"], "generated": tiered["generated"], "escalate_reasons": reasons,
        "embedder": summaries["tiered"]["run"]["embedder"], "arms": rows, "verdict": tiering_verdict(rows),
        "seconds_per_arm": seconds, "tiers_summary": tiered, "validator": validator_catch(tiered_run),
        "paired": paired_arms(outcomes), "outcomes": outcomes,
    }


def validator_catch(run) -> dict:
    """On the tiered arm's generated answerable cases: of the cheap answers the script made wrong, how many the
    validator sent on; of those it made right, how many it sent on anyway."""
    wrong = right = caught = needless = 0
    caught_by: dict[str, int] = {}
    needless_by: dict[str, int] = {}
    for case, trace in zip(run.cases, run.traces, strict=True):
        attempts = trace.generation.tiers
        if not attempts or not case.answerable or not case.expected_answer:
            continue
        reasons = attempts[0].escalate_reasons
        counts = caught_by if cheap_is_wrong(case.id) else needless_by
        for reason in reasons:
            counts[reason] = counts.get(reason, 0) + 1
        if cheap_is_wrong(case.id):
            wrong, caught = wrong + 1, caught + bool(reasons)
        else:
            right, needless = right + 1, needless + bool(reasons)
    return {"cheap_wrong": wrong, "caught": caught, "cheap_right": right, "escalated_anyway": needless,
            "caught_by": dict(sorted(caught_by.items())), "escalated_anyway_by": dict(sorted(needless_by.items()))}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.tiers", description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=int, default=None, help="only the first N golden cases")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    parser.add_argument("--print", action="store_true", help="only print the section from the results file")
    args = parser.parse_args(argv)
    if args.limit is not None and args.limit < 1:
        print("--limit must be a positive number of cases", file=sys.stderr)
        return 2
    if not args.print:
        import os

        os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
        os.environ.setdefault("OPENAI_API_KEY", "sk-stub")   # the stub ignores it; litellm wants one
        from pipeline.models.encoders import set_torch_threads

        set_torch_threads(args.threads)
        meta = run_meta(model=f"stub-scripted {CHEAP} (cheap) and {EXPENSIVE} (expensive); "
                              "embedder all-MiniLM-L6-v2", depends=DEPENDS)
        started = time.perf_counter()
        results = {"meta": meta, **measure(args.limit, sys.stderr.isatty())}
        meta["seconds"] = round(time.perf_counter() - started, 1)
        meta["load_average_end"] = load_average()
        results["reproduce"] = ".venv/bin/python -m benchmarks.tiers" + (f" --limit {args.limit}"
                                                                         if args.limit else "")
        write_results(NAME, results)
        print(f"wrote {results_path(NAME)}", file=sys.stderr)
    print(render(load_results(NAME)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
