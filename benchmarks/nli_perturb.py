"""Citation check on perturbed claims: faithful ones must pass, altered ones must fail (``make bench-perturb``).

Claims are written from the demo corpus's own sentences by :mod:`workbench.perturb` (seeded; three faithful kinds,
five altered kinds, up to 50 each), each citing the chunk its sentence comes from, and run once each through the
shipped validator with the NLI check on (:func:`workbench.perturb.judge`). Three judges are read from the same
traces: the embedding validator (cosine pre-filter + key facts), the NLI model alone (a cited passage entails the
claim) and the combination the validator ships. Reported per kind: how many passed, as a catch rate (altered
kinds) or a false-alarm rate (faithful kinds), each with a 95 % Wilson interval; and NLI vs embedding on the same
altered claims, an exact McNemar test on the discordant claims (SciPy ``binomtest``).

Nothing here was tuned on these claims: the NLI model never saw the demo corpus, and ``validate.nli=entailment``
was chosen before this benchmark existed. Two of the altered kinds (a changed number, a flipped negation) are also
kinds the NLI training perturbations write (from the training pool's premises, not this corpus): the other three
are not.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from benchmarks.results_io import ROOT, Depends, load_average, meta_line, rate_ci, run_meta, write_results

NAME = "nli_perturb"
DEPENDS = Depends(("benchmarks/nli_perturb.py", "workbench/perturb.py", "pipeline/validation", "pipeline/ingestion",
                   "pipeline/text", "pipeline/models", "golden/corpus"), ("embedding", "chunking", "validate"))
JUDGES = ("embedding", "nli", "combined")
LABEL = {"embedding": "embedding validator (cosine + key facts)", "nli": "NLI model alone",
         "combined": "shipped validator (both)"}


def chunks_of(corpus: Path):
    from pipeline.config import PipelineConfig
    from pipeline.ingestion.chunking import chunk_document
    from pipeline.ingestion.documents import load_paths

    docs, _ = load_paths([corpus])
    cfg = PipelineConfig()
    return [c for d in docs for c in chunk_document(d, cfg.chunking)]


def mcnemar(a: list[bool], b: list[bool]) -> dict:
    """Exact McNemar on paired outcomes (:func:`workbench.metrics.paired_binary`): a right where b is wrong vs the
    reverse, with the paired bootstrap interval of the difference in rates (a minus b)."""
    from workbench.metrics import paired_binary

    test = paired_binary(a, b)
    return {"only_first": test.a_only, "only_second": test.b_only, "p": test.p_value,
            "difference_ci95": None if test.difference_ci95 is None else list(test.difference_ci95)}


def measure(per_kind: int, seed: int) -> dict:
    from pipeline.config import PipelineConfig
    from pipeline.context import StageContext
    from pipeline.models.registry import default_models
    from workbench.perturb import ALTERED, judge, perturbed_claims, rates

    chunks = chunks_of(ROOT / "golden" / "corpus")
    claims = perturbed_claims(chunks, per_kind=per_kind, seed=seed)
    cfg = PipelineConfig()
    meta = run_meta(f"embedder {cfg.embedding.model}; NLI {cfg.validate.nli_model} (int8 ONNX)", depends=DEPENDS)
    judged = judge(claims, {c.chunk_id: c for c in chunks}, cfg.validate, StageContext(models=default_models()))
    statuses = sorted({j.nli_status for j in judged})
    altered = [j for j in judged if j.claim.kind in ALTERED]
    paired = mcnemar([not j.nli_pass for j in altered], [not j.embedding_pass for j in altered])
    faithful = [j for j in judged if j.claim.faithful]
    paired_faithful = mcnemar([j.nli_pass for j in faithful], [j.embedding_pass for j in faithful])
    meta["load_average_end"] = load_average()
    examples = {}
    for j in judged:
        examples.setdefault(j.claim.kind, {"claim": j.claim.text, "source": j.claim.source,
                                           "nli_label": j.nli_label, "nli_probs": j.nli_probs,
                                           "similarity": j.similarity})
    return {"meta": meta, "per_kind": per_kind, "seed": seed, "claims": len(judged), "nli_status": statuses,
            "claim_threshold": cfg.validate.claim_threshold, "nli_rule": cfg.validate.nli, "kinds": rates(judged),
            "altered_nli_vs_embedding": paired, "faithful_nli_vs_embedding": paired_faithful, "examples": examples}


def _judge_totals(kinds: dict, judge: str, faithful: bool) -> tuple[int, int]:
    """(claims the judge got wrong, claims) over the faithful or the altered kinds: a faithful claim failed is a
    false alarm, an altered claim passed is a miss."""
    rows = [k for k in kinds.values() if k["faithful"] == faithful]
    n = sum(k["claims"] for k in rows)
    passed = sum(k["passed"][judge] for k in rows)
    return (n - passed if faithful else passed), n


def _difference(test: dict) -> str:
    """``; NLI minus embedding +4.0 points [1.0 to 7.0]`` (paired bootstrap), or nothing for results measured
    before the interval was recorded."""
    ci = test.get("difference_ci95")
    if ci is None:
        return ""
    return f"; NLI minus embedding, 95 % paired bootstrap interval {100 * ci[0]:+.1f} to {100 * ci[1]:+.1f} points"


def render(results: dict) -> str:
    kinds = results["kinds"]
    lines = ["## Citation check: perturbed claims", "",
             meta_line(results["meta"]) + " Reproduce: `make bench-perturb` (= `.venv/bin/python -m "
             "benchmarks.nli_perturb`), then `make report`.", "",
             f"{results['claims']} claims written from the demo corpus's sentences (`workbench/perturb.py`, seed "
             f"{results['seed']}, up to {results['per_kind']} per kind), each citing the chunk its sentence comes "
             f"from, through the shipped validator (`validate.claim_threshold={results['claim_threshold']}`, "
             f"`validate.nli={results['nli_rule']}`; NLI check status: {', '.join(results['nli_status'])}). "
             "Faithful kinds must pass (the rate shown is false alarms: faithful claims failed); altered kinds must "
             "fail (the rate shown is the catch rate). 95 % Wilson intervals. The faithful paraphrases are "
             "rule-written (synonyms, a lead-in phrase, a first clause), lighter than an LLM's rewording; a changed "
             "number and a flipped negation are also kinds the NLI training perturbations write (from training "
             "premises), the other altered kinds are not.", "",
             "| kind | claims | " + " | ".join(LABEL[j] for j in JUDGES) + " |",
             "|---|---:|" + "---:|" * len(JUDGES)]
    for kind, row in kinds.items():
        n = row["claims"]
        cells = []
        for judge in JUDGES:
            failed = n - row["passed"][judge]   # faithful: a false alarm; altered: caught
            cells.append(rate_ci(failed / n if n else None, n, counts=True))
        label = f"{kind} (faithful: false alarms)" if row["faithful"] else f"{kind} (altered: caught)"
        lines.append(f"| {label} | {n} | " + " | ".join(cells) + " |")
    totals = []
    for judge in JUDGES:
        missed, altered = _judge_totals(kinds, judge, faithful=False)
        alarms, faithful = _judge_totals(kinds, judge, faithful=True)
        totals.append((judge, altered - missed, altered, alarms, faithful))
    lines.append("| **all altered: caught** | " + str(totals[0][2]) + " | " +
                 " | ".join(rate_ci(c / a if a else None, a, counts=True) for _, c, a, _, _ in totals) + " |")
    lines.append("| **all faithful: false alarms** | " + str(totals[0][4]) + " | " +
                 " | ".join(rate_ci(f / n if n else None, n, counts=True) for _, _, _, f, n in totals) + " |")
    pa, pf = results["altered_nli_vs_embedding"], results["faithful_nli_vs_embedding"]
    lines += ["", f"NLI alone vs the embedding validator on the same claims (exact McNemar): altered claims caught by "
              f"NLI only {pa['only_first']}, by the embedding check only {pa['only_second']} (p {pa['p']:.2g}"
              f"{_difference(pa)}); faithful claims passed by NLI only {pf['only_first']}, by the embedding check "
              f"only {pf['only_second']} (p {pf['p']:.2g}{_difference(pf)}).", "",
              "One example per kind (the first generated):", "",
              "| kind | claim | NLI label (entailment, neutral, contradiction) | cosine |", "|---|---|---|---:|"]
    for kind, ex in results["examples"].items():
        probs = ", ".join(f"{p:.2f}" for p in ex["nli_probs"]) if ex["nli_probs"] else "—"
        text = ex["claim"].replace("|", "\\|").replace("`", "")
        cosine = "—" if ex["similarity"] is None else f"{ex['similarity']:.2f}"
        lines.append(f"| {kind} | {text[:140]}{'…' if len(text) > 140 else ''} | {ex['nli_label'] or '—'} "
                     f"({probs}) | {cosine} |")
    lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--per-kind", type=int, default=50)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    print(write_results(NAME, measure(args.per_kind, args.seed)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
