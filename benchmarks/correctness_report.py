"""The "Answer correctness" section of BENCHMARKS.md: the correctness scorer (:mod:`workbench.correctness`)
against hand labels. NOT a test (``tests/benchmarks/test_report.py`` checks that the committed markdown is what
:func:`render` gives from the committed results file).

Two steps:

- ``python -m benchmarks.correctness_report --measure EVAL_DIR [--handcheck EVAL_DIR2] --labels FILE`` re-scores
  the traces of a ``workbench eval --split all --out EVAL_DIR`` run with the current scorer (the packaged embedder
  and the NLI model trained here), rebuilds the evaluation summary from the same traces (on the held-out test
  part of the golden split), and scores every answered answerable case of ``EVAL_DIR2`` (default ``EVAL_DIR``; the
  committed labels are of a run with the gate open, so answers the gate withholds are checked too); it writes
  ``benchmarks/results/correctness_handcheck.json``: for each hand-checked case the question, the expected
  answer, the answer, the scorer's verdict and signals, and the hand label (from ``--labels FILE``,
  ``{"id": "correct|partly|wrong"}`` or ``{"_about": ..., "first_pass": [ids], "labels": {...}}`` as committed
  under ``benchmarks/labels/``, or carried over from the existing results file where the answer text is
  unchanged), plus the run's summary figures and the ``meta`` block (date, machine, load, commit, model).
- ``make report`` renders the section with :func:`render`: exact verdict agreement, the confusion matrix, and the
  summary figures, with the model that produced them. ``python -m benchmarks.correctness_report`` (no flag)
  prints the section.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path

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

NAME = "correctness_handcheck"
# the scorer and its models (the answers come from a run it re-scores; their texts are in the results file)
DEPENDS = Depends(("benchmarks/correctness_report.py", "workbench/correctness.py", "benchmarks/labels",
                   "pipeline/models/weights/nli", "golden/golden.jsonl"), ("validate", "embedding"))
GOLDEN = ROOT / "golden" / "golden.jsonl"
MODEL = "extractive generator, packaged all-MiniLM-L6-v2"
# How the labelled answers of benchmarks/labels/correctness_2026-12-07_gate-open.json were made
LABELS_FILE = "correctness_2026-12-07_gate-open.json"
LABELLED_BY = ("both passes written within the development sessions, the later 155 by a separate agent that was "
               "given only those fields and the same written rubric; see benchmarks/labels/" + LABELS_FILE)
HAND_RUN = ("the 200 answerable golden cases asked with the gate open so that every one gets an answer, the ones the "
            "shipped gate withholds included (`--set gate.signal=dense --set gate.confidence_threshold_dense=-1 --set "
            "generate.reader_min_score=0`, offline default stack otherwise)")
VERDICTS = ("correct", "partly", "wrong")
SUMMARY_KEYS = ("cases", "answer_rate_answerable", "false_answer_rate_unanswerable", "citation_support_rate",
                "answers_fully_supported", "correct_answer_rate", "partly_answer_rate", "wrong_answer_rate",
                "supported_but_wrong_rate", "supported_but_wrong_rate_answerable", "trust_answerable",
                "trust_unanswerable", "correctness", "intervals")


# -- the section (pure) ---------------------------------------------------------------------------------------

def _pct(value) -> str:
    return "n/a" if value is None else f"{value:.1%}"


def agreement(cases: list[dict], key: str = "scorer") -> dict:
    """Exact agreement of ``case[key]`` with the hand label, with its 95 % Wilson interval, Cohen's kappa
    (scikit-learn; chance agreement removed) and the confusion matrix {hand: {scorer: n}}."""
    from sklearn.metrics import cohen_kappa_score

    from workbench.metrics import wilson

    matrix = {h: {s: 0 for s in VERDICTS} for h in VERDICTS}
    for case in cases:
        matrix[case["hand"]][case[key]] += 1
    agree = sum(matrix[v][v] for v in VERDICTS)
    kappa = (float(cohen_kappa_score([c["hand"] for c in cases], [c[key] for c in cases], labels=list(VERDICTS)))
             if cases else None)
    return {"cases": len(cases), "agree": agree, "rate": agree / len(cases) if cases else None,
            "ci95": list(wilson(agree, len(cases))), "kappa": kappa, "matrix": matrix}


def paired(cases: list[dict]) -> dict | None:
    """The shipped scorer vs the other NLI choice on the same hand-labelled answers: cases only one of them gets
    right, the exact McNemar test on those (SciPy ``binomtest``), and a bootstrap interval of the kappa difference
    (resampling cases; shipped minus alternative)."""
    if not cases or "alternative" not in cases[0]:
        return None
    import numpy as np
    from sklearn.metrics import cohen_kappa_score

    from workbench.metrics import cluster_bootstrap, paired_binary

    test = paired_binary([c["scorer"] == c["hand"] for c in cases], [c["alternative"] == c["hand"] for c in cases])
    hand = np.array([c["hand"] for c in cases])
    arms = [np.array([c[k] for c in cases]) for k in ("scorer", "alternative")]

    def kappa_difference(i: np.ndarray) -> float | None:
        k = [cohen_kappa_score(hand[i], arm[i], labels=list(VERDICTS)) for arm in arms]
        return None if any(np.isnan(k)) else k[0] - k[1]

    low, high = cluster_bootstrap([c["id"] for c in cases], kappa_difference, resamples=2000, seed=0)
    return {"shipped_only": test.a_only, "alternative_only": test.b_only, "mcnemar_p": test.p_value,
            "kappa_diff_ci95": [low, high], "resamples": 2000}


def _direction(matrix: dict) -> str:
    """Which way the scorer errs, in words generated from the confusion matrix."""
    lenient = matrix["wrong"]["correct"] + matrix["partly"]["correct"] + matrix["wrong"]["partly"]
    strict = matrix["correct"]["wrong"] + matrix["correct"]["partly"] + matrix["partly"]["wrong"]
    line = (f"The scorer is stricter than the hand labels on {strict} cases and more lenient on {lenient}; it "
            f"called {matrix['wrong']['correct']} hand-labelled wrong answers correct.")
    if strict > lenient:
        line += (" Expected answers carry more detail than a correct short answer states, so read"
                 " `correct_answer_rate` as a lower bound and `supported_but_wrong_rate` as an upper bound.")
    return line


def _handcheck(results: dict, n: int) -> str:
    h = results.get("handcheck")
    if not h:
        return f"The first {n} answered answerable golden cases by id."
    if h.get("run"):
        return f"All {n} answered answerable golden cases of a run of {h['run']}."
    if h["source"].startswith("labelled on this run"):
        return f"The first {n} answered answerable golden cases by id, in this run."
    dropped = h["dropped"]
    return (f"{n} answered answerable golden cases whose hand label was carried over from an earlier run because "
            "this run gave the identical answer text" + (f" ({len(dropped)} labelled cases dropped: abstained or "
                                                         "answered differently)." if dropped else "."))


def _by_pass(cases: list[dict]) -> list[str]:
    """Agreement and kappa apart for the labels the scorer's NLI choice was made on and for the later ones."""
    first = [c for c in cases if c.get("first_pass")]
    later = [c for c in cases if not c.get("first_pass")]
    if not first or not later:
        return []
    out = []
    for name, group in (("labels the scorer's NLI choice was made on (in sample)", first),
                        ("labels written after that choice (out of sample)", later)):
        a = agreement(group)
        out.append(f"{name}: {a['agree']} of {a['cases']} ({_pct(a['rate'])}, {_pct(a['ci95'][0])}–"
                   f"{_pct(a['ci95'][1])}), kappa " + ("n/a" if a["kappa"] is None else f"{a['kappa']:.2f}"))
    return ["By labelling pass — " + "; ".join(out) + ".", ""]


def _rate(s: dict, key: str) -> str:
    """A summary rate with its 95 % interval from the summary's own ``intervals`` block (where it has one)."""
    value, ci = s.get(key), (s.get("intervals") or {}).get(key)
    if value is None:
        return "n/a"
    return _pct(value) + (f" [{_pct(ci['ci95'][0])}–{_pct(ci['ci95'][1])}]" if ci else "")


def _summary_heading(results: dict) -> str:
    s, part = results["summary"], results.get("part", "all")
    if part == "all":
        return (f"**The golden set** ({s['cases']} cases, offline default stack, the same run; every case, so the "
                "rates of the gate include the cases its defaults were fitted on):")
    return (f"**The golden set's held-out {part} part** ({s['cases']} cases, offline default stack, the same run; the "
            "gate's defaults were fitted on the other part):")


def _comparison(results: dict) -> list[str]:
    """The same answers scored with the other NLI choice, and the paired test of the two scorers: on the labels
    written after the choice was made where there are such, else on all (and then the text says it is in sample)."""
    later = [c for c in results["cases"] if not c.get("first_pass")]
    out_of_sample = len(later) < len(results["cases"])
    cases = later if out_of_sample else results["cases"]
    p = paired(cases)
    if p is None:
        return []
    b, a = agreement(cases, "alternative"), agreement(cases)
    decides = results.get("nli_decides", False)
    shipped = "the NLI labels decide" if decides else "the NLI labels recorded, not deciding"
    other = "recorded, not deciding" if decides else "deciding (a contradiction either way is wrong, an entailment " \
        "either way can make an answer with its key facts correct)"
    kappa = ("n/a" if a["kappa"] is None else f"{a['kappa']:.2f}", "n/a" if b["kappa"] is None else f"{b['kappa']:.2f}")
    return [
        f"**Shipped scorer ({shipped}) vs the NLI labels {other}, same answers.** The alternative agrees on "
        f"{b['agree']} of {b['cases']} ({_pct(b['rate'])}, {_pct(b['ci95'][0])}–{_pct(b['ci95'][1])}), kappa "
        f"{kappa[1]}; the shipped scorer's kappa is {kappa[0]}. Kappa difference (shipped minus alternative) 95 % "
        f"bootstrap interval {p['kappa_diff_ci95'][0]:+.2f} to {p['kappa_diff_ci95'][1]:+.2f} "
        f"({p['resamples']:,} resamples of the cases); only the shipped scorer agrees with the hand label on "
        f"{p['shipped_only']} cases, only the alternative on {p['alternative_only']} (exact McNemar p "
        f"{p['mcnemar_p']:.2g}). " + (
            f"These are the {len(cases)} labels written after the choice was made (on the first pass's labels): out "
            "of sample for it." if out_of_sample else
            "The shipped choice was made after this comparison, on these labels, so its kappa here is not out of "
            "sample."), "",
        "| hand \\ alternative | " + " | ".join(VERDICTS) + " |", "|---|" + "---:|" * len(VERDICTS),
        *(f"| {h} | " + " | ".join(str(b["matrix"][h][v]) for v in VERDICTS) + " |" for h in VERDICTS), "",
    ]


def render(results: dict) -> str:
    cases = results["cases"]
    a = agreement(cases)
    s = results["summary"]
    hand = Counter(c["hand"] for c in cases)
    lines = [
        "## Answer correctness", "",
        "Does an answer say what the golden case's `expected_answer` says? The citation check cannot tell: with the "
        "extractive generator every quoted sentence is supported by the passage it quotes. `workbench eval` scores "
        "each answered case with `workbench/correctness.py` (token recall with exact numbers, versions and "
        "identifiers, a semantic match with the evaluation's embedder, NLI entailment when a model resolves) and "
        "gives one verdict: correct, partly or wrong.", "",
        meta_line(results["meta"]) + f" NLI: {results['nli']}"
        + (f" ({results['nli_model']}, read both ways: answer ⇒ expected and expected ⇒ answer)"
           if results.get("nli") == "ran" and results.get("nli_model") else "")
        + ". Regenerate: `workbench eval golden/golden.jsonl --store STORE --split all --out DIR`, then "
        "`python -m benchmarks.correctness_report --measure DIR` and `make report`.", "",
        f"**Hand check.** {_handcheck(results, a['cases'])} Each answer was labelled from the question, the "
        "expected answer and the answer only, before the scorer's verdicts on it were computed"
        + (f" ({results['handcheck']['labelled_by']})" if results.get("handcheck", {}).get("labelled_by") else "")
        + " (labels: " + ", ".join(f"{hand[v]} {v}" for v in VERDICTS)
        + f"). The scorer agrees exactly on {a['agree']} of {a['cases']} ({_pct(a['rate'])}, 95 % Wilson interval "
        f"{_pct(a['ci95'][0])}–{_pct(a['ci95'][1])}); Cohen's kappa "
        + ("n/a" if a["kappa"] is None else f"{a['kappa']:.2f}") + " (agreement beyond chance; 1 is perfect, 0 "
        "chance).", "",
        "| hand \\ scorer | " + " | ".join(VERDICTS) + " |", "|---|" + "---:|" * len(VERDICTS),
        *(f"| {h} | " + " | ".join(str(a["matrix"][h][v]) for v in VERDICTS) + " |" for h in VERDICTS), "",
        _direction(a["matrix"]), "",
        *_by_pass(cases),
        *_comparison(results),
        _summary_heading(results), "",
        "| metric | value [95 % interval] |", "|---|---:|",
        *(f"| {label} | {_rate(s, key)} |" for label, key in (
            ("answered (answerable)", "answer_rate_answerable"),
            ("claims supported by their citation", "citation_support_rate"),
            ("answers with every claim supported", "answers_fully_supported"),
            ("correct answers (of answered answerable)", "correct_answer_rate"),
            ("partly correct (of answered answerable)", "partly_answer_rate"),
            ("wrong (of answered answerable)", "wrong_answer_rate"),
            ("supported but wrong (of all answered)", "supported_but_wrong_rate"),
            ("supported but wrong (of answered answerable)", "supported_but_wrong_rate_answerable"))), "",
        "Trust, over every case of the kind (on unanswerable every answer is wrong; 95 % Wilson intervals):", "",
        "| cases | answered correctly | answered partly | abstained | answered wrongly |", "|---|---:|---:|---:|---:|",
    ]
    for kind in ("answerable", "unanswerable"):
        t = s[f"trust_{kind}"]
        keys = ("answered_correctly", "answered_partly", "abstained", "answered_wrongly")
        lines.append(f"| {kind} ({t['cases']}) | " + " | ".join(rate_ci(t[k], t["cases"]) for k in keys) + " |")
    return "\n".join(lines) + "\n"


# -- measuring ------------------------------------------------------------------------------------------------

def _case_record(case, trace, verdict, other, hand: str) -> dict:
    """One hand-checked case: the shipped scorer's verdict (``scorer``) and the other NLI choice's (``alternative``)."""
    return {"id": case.id, "question": case.question, "expected_answer": case.expected_answer,
            "answer": trace.answer, "hand": hand, "scorer": verdict.verdict, "why": verdict.why,
            "alternative": other.verdict, "why_alternative": other.why,
            "nli_forward": verdict.nli_forward, "nli_backward": verdict.nli_backward,
            "token_recall": verdict.token_recall, "semantic": verdict.semantic,
            "missing_facts": list(verdict.missing_facts), "contradicted_facts": list(verdict.contradicted_facts)}


def _nli_model():
    """(the NLI model, its name, status): the shipped one where it resolves, else (None, name, "unavailable")."""
    from pipeline.config import PipelineConfig
    from pipeline.models.registry import default_models
    from pipeline.models.resolve import ModelUnavailable

    name = PipelineConfig().validate.nli_model
    try:
        return default_models().nli(name), name, "ran"
    except ModelUnavailable:
        return None, name, "unavailable"


def measure(eval_dir: Path, labels: dict[str, str] | None, labelled: list[dict] | None = None,
            hand_dir: Path | None = None, first_pass: frozenset[str] = frozenset(), hand_run: str = "") -> dict:
    """Re-score an ``eval --out`` directory of the WHOLE golden set with the shipped scorer (the NLI model's two
    labels recorded; whether they decide is ``workbench.correctness.NLI_DECIDES``) and with the other choice, so
    the hand check compares the two scorers on the same answers.

    Hand check: on the answers of ``hand_dir`` (default ``eval_dir``; e.g. a run with the gate open, so that the
    answers the gate withholds are checked too), with ``labels`` ({id: verdict}, labelled on that run's answers),
    every answered answerable case — each must have a label. ``first_pass``: the ids whose labels the scorer's NLI
    choice was made on (reported apart: in sample for that choice). Without labels, the ``labelled`` cases of the
    previous results file, each kept only when this run answered it with the identical answer text (a label judges
    a text, not a case).
    Summary (scored with NLI): the held-out ``test`` part of the golden split when there is one (the gate's
    defaults were fitted on the ``tune`` part), else every case (``part`` says which).
    """
    from pipeline.config import PipelineConfig
    from pipeline.models.registry import default_models
    from workbench.correctness import NLI_DECIDES, score_case
    from workbench.evaluate import abstained_by, build_row, read_traces
    from workbench.golden import find_split, load_golden
    from workbench.summary import summarise

    golden = load_golden(GOLDEN)
    split = find_split(GOLDEN)
    traces = read_traces(eval_dir / "traces.jsonl")
    cases = [c for c in golden.cases if c.id in traces]
    embedder = default_models().embedder(PipelineConfig().embedding)
    model, nli_model, nli = _nli_model()

    def scored_all(nli_decides: bool, run: dict, among: list) -> dict:
        return {c.id: score_case(c, run[c.id], abstained=bool(abstained_by(run[c.id])), embedder=embedder,
                                 nli_model=model, nli_status=nli, nli_decides=nli_decides) for c in among}

    verdicts = scored_all(NLI_DECIDES, traces, cases)
    part = "test" if split is not None and set(split.parts["test"]) <= set(traces) else "all"
    scored = [c for c in cases if part == "all" or split.part_of(c.id) == part]
    rows = [build_row(c, traces[c.id], verdicts[c.id]) for c in scored]
    summary = summarise(rows, [traces[c.id] for c in scored], tags=golden.tags)
    hand_traces = read_traces(hand_dir / "traces.jsonl") if hand_dir is not None else traces
    answered = {c.id: c for c in golden.cases if c.id in hand_traces and c.answerable
                and not abstained_by(hand_traces[c.id])}
    among = list(answered.values())
    mine, other = scored_all(NLI_DECIDES, hand_traces, among), scored_all(not NLI_DECIDES, hand_traces, among)
    out, dropped = [], []
    if labels is not None:
        missing = sorted(set(answered) - set(labels))
        if missing:
            raise SystemExit(f"hand labels missing for {len(missing)} answered answerable case(s): "
                             f"{', '.join(missing[:10])}")
        for cid in sorted(answered):
            out.append({**_case_record(answered[cid], hand_traces[cid], mine[cid], other[cid], labels[cid]),
                        "first_pass": cid in first_pass})
        source = "labelled on this run's answers"
    else:
        for old in labelled or []:
            cid = old["id"]
            if cid in answered and hand_traces[cid].answer == old["answer"]:
                out.append({**_case_record(answered[cid], hand_traces[cid], mine[cid], other[cid], old["hand"]),
                            "first_pass": old.get("first_pass", False)})
            else:
                dropped.append(cid)
        source = "carried over from an earlier run's labels where this run gave the identical answer"
    return {"nli": nli, "nli_model": nli_model, "nli_decides": NLI_DECIDES, "part": part,
            "summary": {k: summary[k] for k in SUMMARY_KEYS},
            "handcheck": {"source": source, "dropped": dropped, "run": hand_run}, "cases": out}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--measure", metavar="EVAL_DIR", help="re-score an eval --out directory and write the "
                                                               "results file")
    parser.add_argument("--handcheck", metavar="EVAL_DIR", help="the eval --out directory whose answers were "
                        "labelled (default: --measure's)")
    parser.add_argument("--hand-run", default=HAND_RUN, help="how the labelled run was made, for the section")
    parser.add_argument("--labels", metavar="FILE", help="hand labels {id: verdict} (default: the results file's)")
    args = parser.parse_args(argv)
    if args.measure:
        labels = json.loads(Path(args.labels).read_text(encoding="utf-8")) if args.labels else None
        first_pass: frozenset[str] = frozenset()
        if isinstance(labels, dict) and isinstance(labels.get("labels"), dict):   # {"_about": ..., "labels": {...}}
            first_pass = frozenset(labels.get("first_pass", ()))
            labels = labels["labels"]
        labelled = None if args.labels else load_results(NAME)["cases"]
        labelled_by = LABELLED_BY if args.labels and Path(args.labels).name == LABELS_FILE else ""
        meta = run_meta(model=MODEL, depends=DEPENDS)
        results = {"meta": meta, **measure(Path(args.measure), labels, labelled,
                                           Path(args.handcheck) if args.handcheck else None, first_pass,
                                           args.hand_run)}
        if labelled_by:
            results["handcheck"]["labelled_by"] = labelled_by
        meta["load_average_end"] = load_average()
        write_results(NAME, results)
        print(f"wrote {results_path(NAME)}; run `make report` to update BENCHMARKS.md", file=sys.stderr)
    print(render(load_results(NAME)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
