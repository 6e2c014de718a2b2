"""The evaluation summary: pure functions from per-case rows and traces to the numbers ``workbench eval``
reports (keys in docs/ARCHITECTURE.md, "eval --json"; more keys may be added, none renamed).

Definitions (every rate is ``None`` when its denominator is empty):

- ``answer_rate_answerable``: answered / answerable cases; ``false_answer_rate_unanswerable``: answered /
  unanswerable cases. "Answered" means not abstained (gate decision, or the exact abstention sentence).
- ``abstention_precision``: abstentions on unanswerable / all abstentions; ``abstention_recall``:
  abstentions on unanswerable / unanswerable cases (= 1 - false-answer rate).
- ``recall_at_10`` is **hit@10** (shown so): answerable cases with ANY expected document among the documents of
  the top-10 ranked chunks. The key keeps its first name because ``golden/floors.json``, the floor history and
  scripts read it (keys are never renamed); every display calls it hit@10. ``recall_at_10_fraction``: mean share
  of the expected documents found there (document recall@10); ``mrr``: mean reciprocal rank of the first expected
  document in that top-10 document list (0 if absent).
- ``passage_recall_at_10`` / ``passage_ndcg_at_10``: passage level, the top-10 ranked chunks against the chunks
  that state the expected answer (:mod:`workbench.relevance`): the mean over labelled cases of the share of those
  chunks retrieved, and of nDCG@10 with binary gains (:func:`workbench.metrics.ndcg_at_k`).
  Retrieval is scored on every answerable case, whatever the gate decided.
- ``citation_support_rate``: supported claims / all claims of the validated answers (an uncited claim is not
  supported); ``citation_support_rate_cited``: supported / claims that cite an offered source.
- ``fabricated_marker_rate``: validated answers with at least one marker to a source never offered.
- ``llm_calls_made`` / ``llm_calls_saved``: summed over the run (saved = one generation call per gate
  abstention).
- ``latency_ms``: p50 / p95 per stage over the cases where the stage ran (``total`` for the whole ask).
- ``per_tag``: the gate and retrieval rates restricted to the cases carrying each tag.
- ``split`` (added by :func:`workbench.evaluate.evaluate`): the part of the golden split measured (``part``
  "all" | "tune" | "test", ``file``, ``seed``, ``cases``); ``per_split`` (a run of all cases with a split):
  :func:`part_figures` of each part.
- Answer correctness (each answered case's verdict from :mod:`workbench.correctness`):
  ``correct_answer_rate`` / ``partly_answer_rate`` / ``wrong_answer_rate``: verdicts among answered
  answerable cases that have one; ``supported_but_wrong_rate``: answered cases (answerable or not) whose
  every claim is supported and whose verdict is wrong, over answered cases; ``supported_but_wrong_rate_answerable``:
  the same among answered answerable cases. ``trust_answerable`` and ``trust_unanswerable``: over all cases of
  the kind, the shares ``answered_correctly`` / ``answered_partly`` / ``abstained`` / ``answered_wrongly``
  (they sum to 1 up to rounding and answerable cases without an expected answer, counted in ``unscored``); on
  unanswerable every answer is wrong. ``correctness``: the verdict counts and what judged (the embedder, the
  NLI status).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from pipeline.trace import Trace
from workbench.metrics import mean, percentile, rate, round_or_none

STAGES = ("rewrite", "retrieve", "rerank", "gate", "generate", "validate", "trust", "total")
TAG_METRICS = ("cases", "answerable", "unanswerable", "answer_rate_answerable", "false_answer_rate_unanswerable",
               "recall_at_10", "mrr")
SUMMARY_METRICS = (
    "cases", "answerable", "unanswerable", "answer_rate_answerable", "false_answer_rate_unanswerable",
    "abstention_precision", "abstention_recall", "recall_at_10", "recall_at_10_fraction", "mrr",
    "passage_recall_at_10", "passage_ndcg_at_10", "citation_support_rate", "citation_support_rate_cited",
    "fabricated_marker_rate", "answers_fully_supported", "answers_validated",
    "claims", "llm_calls_made", "llm_calls_saved")
NESTED_METRICS = ("nli.support_rate", "nli.agreement", "nli.embedding_only", "nli.nli_only",
                  "trust_answerable.answered_correctly", "trust_answerable.answered_wrongly",
                  "trust_unanswerable.answered_wrongly")
CORRECTNESS_METRICS = ("correct_answer_rate", "partly_answer_rate", "wrong_answer_rate", "supported_but_wrong_rate",
                       "supported_but_wrong_rate_answerable")
TRUST_KEYS = ("answered_correctly", "answered_partly", "abstained", "answered_wrongly")
PASSAGE_METRICS = ("passage_recall_at_10", "passage_ndcg_at_10")
# what the terminal shows for a summary key whose name says less than the metric is
LABELS = {"recall_at_10": "hit@10 (any expected document)", "recall_at_10_fraction": "recall@10 (expected documents)",
          "mrr": "MRR@10", "passage_recall_at_10": "passage recall@10", "passage_ndcg_at_10": "passage nDCG@10"}


def gate_counts(rows: Sequence) -> dict[str, tuple[int, int]]:
    """(hits, cases) behind each gate rate."""
    answerable = [r for r in rows if r.answerable]
    unanswerable = [r for r in rows if not r.answerable]
    abstained = [r for r in rows if r.abstained]
    correct_abstentions = sum(not r.answerable for r in abstained)
    return {"answer_rate_answerable": (sum(not r.abstained for r in answerable), len(answerable)),
            "false_answer_rate_unanswerable": (sum(not r.abstained for r in unanswerable), len(unanswerable)),
            "abstention_precision": (correct_abstentions, len(abstained)),
            "abstention_recall": (correct_abstentions, len(unanswerable))}


def gate_rates(rows: Sequence) -> dict:
    return {"cases": len(rows), "answerable": sum(r.answerable for r in rows),
            "unanswerable": sum(not r.answerable for r in rows),
            **{k: rate(*kn) for k, kn in gate_counts(rows).items()}}


def _labelled(rows: Sequence) -> list:
    return [r for r in rows if r.answerable and r.expected_doc_ids]


def retrieval_counts(rows: Sequence) -> dict[str, tuple[int, int]]:
    """(hits, labelled answerable cases) behind hit@10 (key ``recall_at_10``: any expected document in the top 10)."""
    labelled = _labelled(rows)
    return {"recall_at_10": (sum(bool(r.hit_at_10) for r in labelled), len(labelled))}


def retrieval_rates(rows: Sequence) -> dict:
    labelled = _labelled(rows)
    return {"recall_at_10": rate(*retrieval_counts(rows)["recall_at_10"]),
            "recall_at_10_fraction": mean(r.recall_at_10 for r in labelled),
            "mrr": mean(r.reciprocal_rank for r in labelled),
            **{key: mean(getattr(r, key, None) for r in labelled) for key in PASSAGE_METRICS}}


def citation_counts(rows: Sequence) -> dict[str, tuple[int, int]]:
    """(hits, validated answers) behind each answer-level citation rate."""
    validated = [r for r in rows if r.supported is not None]
    return {"fabricated_marker_rate": (sum(r.fabricated_markers > 0 for r in validated), len(validated)),
            "answers_fully_supported": (sum(bool(r.supported) for r in validated), len(validated))}


def claim_counts(rows: Sequence) -> dict[str, tuple[list[int], list[int]]]:
    """Per validated answer, (supported claims, claims) behind each claim-level support rate."""
    validated = [r for r in rows if r.supported is not None]
    supported = [r.supported_claims for r in validated]
    return {"citation_support_rate": (supported, [r.claims for r in validated]),
            "citation_support_rate_cited": (supported, [r.supported_claims + r.unsupported_claims
                                                        for r in validated])}


def citation_rates(rows: Sequence) -> dict:
    claims, answers = claim_counts(rows), citation_counts(rows)
    return {**{k: rate(sum(num), sum(den)) for k, (num, den) in claims.items()},
            "fabricated_marker_rate": rate(*answers["fabricated_marker_rate"]),
            "answers_validated": answers["answers_fully_supported"][1],
            "claims": sum(claims["citation_support_rate"][1]),
            "answers_fully_supported": rate(*answers["answers_fully_supported"])}


def verdict(row) -> str | None:
    """The row's correctness verdict, ``None`` for an abstention or an unscored answer."""
    correctness = getattr(row, "correctness", None)
    return None if row.abstained or correctness is None else correctness.verdict


def supported_but_wrong(row) -> bool:
    """Answered, every claim supported by its citation, and the answer is wrong."""
    return not row.abstained and bool(row.supported) and verdict(row) == "wrong"


def trust(rows: Sequence) -> dict:
    """Shares of ``rows`` answered correctly / partly / abstained / answered wrongly (summary docstring)."""
    counts = Counter("abstained" if r.abstained else
                     {"correct": "answered_correctly", "partly": "answered_partly", "wrong": "answered_wrongly"}
                     .get(verdict(r) or "", "unscored") for r in rows)
    if rows and not any(r.answerable for r in rows):  # on unanswerable every answer is wrong
        counts = Counter("abstained" if r.abstained else "answered_wrongly" for r in rows)
    out = {k: round_or_none(rate(counts[k], len(rows))) for k in TRUST_KEYS}
    return {**out, "cases": len(rows), "unscored": counts["unscored"]}


def correctness_counts(rows: Sequence) -> dict[str, tuple[int, int]]:
    """(hits, answers) behind each correctness rate."""
    answered = [r for r in rows if not r.abstained]
    answered_answerable = [r for r in answered if r.answerable]
    scored = [verdict(r) for r in answered_answerable if verdict(r) is not None]
    return {"correct_answer_rate": (scored.count("correct"), len(scored)),
            "partly_answer_rate": (scored.count("partly"), len(scored)),
            "wrong_answer_rate": (scored.count("wrong"), len(scored)),
            "supported_but_wrong_rate": (sum(supported_but_wrong(r) for r in answered), len(answered)),
            "supported_but_wrong_rate_answerable": (sum(supported_but_wrong(r) for r in answered_answerable),
                                                    len(answered_answerable))}


def correctness_rates(rows: Sequence) -> dict:
    return {k: rate(*kn) for k, kn in correctness_counts(rows).items()}


def correctness_block(rows: Sequence) -> dict:
    verdicts = Counter(verdict(r) for r in rows if verdict(r) is not None)
    return {"verdicts": {v: verdicts[v] for v in ("correct", "partly", "wrong")},
            "scored": sum(verdicts.values()),
            "supported_but_wrong": sum(supported_but_wrong(r) for r in rows)}


def latency(traces: Sequence[Trace]) -> dict:
    out = {}
    for stage in STAGES:
        values = [t.timings_ms[stage] for t in traces if stage in t.timings_ms]
        if values:
            out[stage] = {"p50": round_or_none(percentile(values, 50), 1),
                          "p95": round_or_none(percentile(values, 95), 1), "n": len(values)}
    return out


def per_tag(rows: Sequence, tags: Sequence[str]) -> dict:
    out = {}
    for tag in tags:
        tagged = [r for r in rows if tag in r.tags]
        if tagged:
            g, ret = gate_rates(tagged), retrieval_rates(tagged)
            out[tag] = {k: _rounded({**g, **ret}[k]) for k in TAG_METRICS}
    return out


def stack(rows: Sequence, traces: Sequence[Trace]) -> dict:
    """What ran: the gate scales used, the generator, and why the reranker did not run (if it did not)."""
    reasons = Counter(t.rerank.reason for t in traces if t.rerank.status != "ran" and t.rerank.reason)
    return {"gate_scales": dict(Counter(r.gate_scale for r in rows)),
            "gate_thresholds": dict(Counter(f"{r.gate_scale}:{r.gate_threshold:g}" for r in rows)),
            "generators": dict(Counter(r.generator or "none" for r in rows)),
            "rerank_ran": sum(t.rerank.status == "ran" for t in traces),
            "rerank_unavailable_reason": reasons.most_common(1)[0][0] if reasons else "",
            "rewrites": dict(Counter(t.rewrite.status for t in traces))}


def _rounded(value):
    return round_or_none(value) if isinstance(value, float) else value


def intervals(rows: Sequence, keys: Sequence[str] | None = None) -> dict:
    """The 95 % interval of every rate of the summary (or of ``keys``), with the counts behind it: ``{metric: {"k",
    "n", "ci95", "method"}}``, from the same counts the rates are computed from. A rate over independent cases gets
    the Wilson interval (:func:`workbench.metrics.wilson`); a claim-level rate a bootstrap resampling answers, and a
    mean over cases (MRR, the recall fraction, the passage-level recall and nDCG) a bootstrap resampling cases
    (:func:`workbench.metrics.ratio_bootstrap`).
    A metric with no cases is left out."""
    from workbench.metrics import ratio_bootstrap, wilson

    labelled = _labelled(rows)
    proportions = {**gate_counts(rows), **retrieval_counts(rows), **citation_counts(rows), **correctness_counts(rows)}
    wanted = set(keys) if keys is not None else None
    out = {}
    for key, (k, n) in proportions.items():
        if n and (wanted is None or key in wanted):
            out[key] = {"k": k, "n": n, "ci95": [round(v, 4) for v in wilson(k, n)], "method": "Wilson"}
    means = {key: [v for v in (getattr(r, attr, None) for r in labelled) if v is not None]
             for key, attr in (("mrr", "reciprocal_rank"), ("recall_at_10_fraction", "recall_at_10"),
                               *((k, k) for k in PASSAGE_METRICS))}
    clustered = {**{k: (num, den, "answers") for k, (num, den) in claim_counts(rows).items()},
                 **{k: (v, [1.0] * len(v), "cases") for k, v in means.items()}}
    for key, (num, den, unit) in clustered.items():
        if wanted is not None and key not in wanted:
            continue
        ci = ratio_bootstrap(num, den) if sum(den) else None
        if ci is not None:
            out[key] = {"k": round(float(sum(num)), 4), "n": int(sum(den)), "ci95": [round(v, 4) for v in ci],
                        "method": f"bootstrap over {len(num)} {unit}"}
    return out


def summarise(rows: Sequence, traces: Sequence[Trace], tags: Sequence[str] = (), nli: dict | None = None) -> dict:
    numbers = {**gate_rates(rows), **retrieval_rates(rows), **citation_rates(rows), **correctness_rates(rows),
               "llm_calls_made": sum(r.llm_calls for r in rows),
               "llm_calls_saved": sum(r.llm_calls_saved for r in rows)}
    summary = {k: _rounded(v) for k, v in numbers.items()}
    summary["nli"] = nli or {"status": "off", "support_rate": None, "agreement": None}
    summary["latency_ms"] = latency(traces)
    summary["latency_note"] = ("validate is measured with the evaluation's embedding memo (each distinct "
                               "passage encoded once per run), so it is lower than a cold ask's")
    summary["trust_answerable"] = trust([r for r in rows if r.answerable])
    summary["trust_unanswerable"] = trust([r for r in rows if not r.answerable])
    summary["correctness"] = correctness_block(rows)
    summary["per_tag"] = per_tag(rows, tags)
    summary["stack"] = stack(rows, traces)
    summary["intervals"] = intervals(rows)
    for tag in tags:   # the per-tag rates' intervals, under the dotted names floors use
        tagged = [r for r in rows if tag in r.tags]
        summary["intervals"] |= {f"per_tag.{tag}.{k}": v for k, v in intervals(tagged, TAG_METRICS).items()}
    return summary


PART_METRICS = ("cases", "answerable", "unanswerable", "answer_rate_answerable", "false_answer_rate_unanswerable",
                "abstention_precision", "abstention_recall", "recall_at_10", "mrr", "passage_recall_at_10",
                "passage_ndcg_at_10", "citation_support_rate", "answers_fully_supported", "correct_answer_rate",
                "supported_but_wrong_rate")


def part_figures(rows: Sequence) -> dict:
    """The headline figures of a subset of rows (one part of the golden split): gate, retrieval, citation and
    correctness rates with their 95 % intervals (:func:`intervals`), and the trust shares."""
    numbers = {**gate_rates(rows), **retrieval_rates(rows), **citation_rates(rows), **correctness_rates(rows)}
    out = {k: _rounded(numbers[k]) for k in PART_METRICS}
    out["intervals"] = intervals(rows, PART_METRICS)
    out["trust_answerable"] = trust([r for r in rows if r.answerable])
    out["trust_unanswerable"] = trust([r for r in rows if not r.answerable])
    return out


def lookup(summary: dict, key: str):
    """A metric by dotted path (``nli.agreement``, ``per_tag.off-topic.false_answer_rate_unanswerable``)."""
    value = summary
    for part in key.split("."):
        if not isinstance(value, dict) or part not in value:
            raise KeyError(key)
        value = value[part]
    return value


def _fmt(value) -> str:
    if value is None:
        return "n/a"
    return f"{value:.3f}" if isinstance(value, float) else str(value)


def _interval(summary: dict, key: str) -> str:
    """``  [0.482–0.672] (58/100)``: the metric's 95 % interval and counts from the summary's ``intervals``."""
    ci = (summary.get("intervals") or {}).get(key)
    if not ci:
        return ""
    k = f"{ci['k']:g}" if isinstance(ci["k"], float) else str(ci["k"])
    return f"  [{ci['ci95'][0]:.3f}–{ci['ci95'][1]:.3f}] ({k}/{ci['n']}, {ci['method']})"


def speed_line(run: dict) -> str:
    """The evaluation's speed from the summary's ``run`` block: cases per second over the whole evaluation, how the
    cases were walked, and how many reused an earlier run's retrieval ("" for a summary without it)."""
    if run.get("cases_per_s") is None:
        return ""
    walk = "batched" if run.get("batched") else "one case at a time"
    reused = f", retrieval of {run['reused_retrieval']} cases reused" if run.get("reused_retrieval") else ""
    return (f"speed: {run['cases_per_s']:.1f} cases/s ({run.get('cases', 0)} cases in "
            f"{run.get('seconds_total', 0):.1f} s, {walk}{reused}; {run.get('texts_encoded', 0)} texts encoded in "
            f"{run.get('encoder_calls', 0)} calls)")


def render_summary(summary: dict) -> str:
    """A plain-text table for the terminal."""
    split = summary.get("split") or {}
    lines = []
    if split.get("file"):
        lines.append(f"{'measured on':<34} {split['part']} part of {split['file']} ({split['cases']} cases)")
    lines += [f"{LABELS.get(k, k):<34} {_fmt(summary.get(k))}{_interval(summary, k)}" for k in SUMMARY_METRICS]
    nli = summary.get("nli", {})
    if nli.get("status") == "ran":
        lines.append(f"{'nli support / agreement':<34} {_fmt(nli.get('support_rate'))} / {_fmt(nli.get('agreement'))}"
                     f"  ({nli.get('model')}, {nli.get('claims')} claims)")
    else:
        lines.append(f"{'nli support':<34} {nli.get('status', 'off')}: {nli.get('reason', '')}")
    for k in CORRECTNESS_METRICS:
        if k in summary:
            lines.append(f"{k:<34} {_fmt(summary.get(k))}{_interval(summary, k)}")
    for kind in ("answerable", "unanswerable"):
        t = summary.get(f"trust_{kind}")
        if t:
            lines.append(f"{kind + ': ok/part/abst/wrong':<34} " + " / ".join(
                _fmt(t.get(k)) for k in TRUST_KEYS))
    judged = summary.get("correctness", {})
    if judged.get("nli"):
        lines.append(f"{'correctness judged by':<34} embedder {judged.get('embedder') or 'none'}, "
                     f"NLI {judged['nli']}" + (f" ({judged['nli_model']})" if judged["nli"] == "ran" else ""))
    lat = summary.get("latency_ms", {})
    lines.append("latency ms (p50/p95): " + ", ".join(f"{s} {v['p50']:.0f}/{v['p95']:.0f}" for s, v in lat.items()))
    speed = speed_line(summary.get("run") or {})
    if speed:
        lines.append(speed)
    tags = summary.get("per_tag", {})
    if tags:
        lines.append(f"\n{'tag':<22} {'cases':>5} {'answer@ans':>10} {'false@unans':>11} {'hit@10':>9} {'mrr':>6}")
        for tag, m in tags.items():
            lines.append(f"{tag:<22} {m['cases']:>5} {_fmt(m['answer_rate_answerable']):>10} "
                         f"{_fmt(m['false_answer_rate_unanswerable']):>11} {_fmt(m['recall_at_10']):>9} "
                         f"{_fmt(m['mrr']):>6}")
    parts = summary.get("per_split") or {}
    if parts:
        lines.append(f"\n{'part':<8} {'cases':>5} {'answer@ans':>10} {'false@unans':>11} {'hit@10':>9} "
                     f"{'correct':>7}  (tune: what workbench tune fits on; test: held out)")
        for part, m in parts.items():
            lines.append(f"{part:<8} {m['cases']:>5} {_fmt(m['answer_rate_answerable']):>10} "
                         f"{_fmt(m['false_answer_rate_unanswerable']):>11} {_fmt(m['recall_at_10']):>9} "
                         f"{_fmt(m['correct_answer_rate']):>7}")
    st = summary.get("stack", {})
    if st:
        lines.append(f"\ngate: {st.get('gate_thresholds')}; generator: {st.get('generators')}"
                     + (f"; rerank unavailable: {st['rerank_unavailable_reason']}"
                        if st.get("rerank_unavailable_reason") else ""))
    return "\n".join(lines)
