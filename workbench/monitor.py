"""Online monitoring over ``query_runs``: rates per hour or day, and a drift alarm with a stated false-alarm rate.

Pure (no Streamlit): ``workbench monitor`` and the Monitor page call :func:`report` on the rows
:meth:`pipeline.storage.runs.RunLog.monitor_rows` and :meth:`~pipeline.storage.runs.RunLog.clicks` return.

**The rates.** Per run: abstained (the gate or the generator), fell back (the configured generator failed and a
fallback answered), at least one unsupported claim, served from the answer cache, and, among runs that offered
sources, whether a person opened one of them (citation click-through). Per bucket (UTC hour or day) also the
latency p50/p95 (nearest rank) and the LLM tokens and cost.

**The alarm** (:func:`check`). The most recent ``recent`` runs (the recent window) are compared with the
``baseline`` runs just before them (the baseline window), metric by metric, with a one-sided Fisher exact test:
given the hits in both windows together, the recent window's hits follow a hypergeometric law when the rate did
not change, and the p-value is the probability of a recent count at least as extreme in the metric's bad
direction (more abstentions, fallbacks and unsupported claims; fewer cache hits and click-throughs). A metric
alarms when its p-value is at most ``alpha / m``, ``m`` the metrics testable in this check (Bonferroni). So
**one check raises a false alarm with probability at most ``alpha``** when no rate changed (the exact test is
conservative on counts, so the real rate is lower). Checks on overlapping windows are not independent: over
``T`` checks, expect at most ``alpha * T`` false alarms. The runs behind an alarm are the recent window's runs
that count towards the change (the abstentions, for the abstention rate).

**Cost.** Tokens come from each run's LLM attempts; the price per token from litellm's local cost map
(``LITELLM_LOCAL_MODEL_COST_MAP``, no network) for a model it knows. Local models (SmolLM2, the extractive
generator) cost nothing; a model without a price is listed under ``unpriced_models`` and counted as 0.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from pipeline.ingestion.files import escape

DEFAULT_BASELINE = 100
DEFAULT_RECENT = 25
DEFAULT_ALPHA = 0.01
BUCKETS = ("hour", "day")

Row = Mapping[str, Any]


@dataclass(frozen=True)
class Metric:
    name: str
    label: str
    direction: Literal["up", "down"]            # which change is bad
    hit: Callable[[Row], bool]
    counts: Callable[[Row], bool] = lambda row: True   # which runs the rate is over


METRICS: tuple[Metric, ...] = (
    Metric("abstention", "abstention rate", "up", lambda r: bool(r["abstained"])),
    Metric("fallback", "fallback rate", "up", lambda r: bool(r["fallback"])),
    Metric("unsupported", "unsupported-claim rate", "up", lambda r: int(r["unsupported"]) > 0),
    Metric("cache_hit", "cache-hit rate", "down", lambda r: bool(r["cache_hit"])),
    Metric("click_through", "citation click-through", "down", lambda r: bool(r["clicked"]),
           counts=lambda r: int(r["sources"]) > 0),
)
METRIC_NAMES = tuple(m.name for m in METRICS)


# -- the test -------------------------------------------------------------------------------------------------

def fisher_one_sided(recent_hits: int, recent_n: int, baseline_hits: int, baseline_n: int,
                     direction: Literal["up", "down"]) -> float:
    """P(recent count at least as extreme as ``recent_hits`` in ``direction``) when both windows share one rate:
    the hypergeometric tail given the total hits (one-sided Fisher exact test, SciPy's ``fisher_exact``)."""
    for value, name in ((recent_hits, "recent_hits"), (recent_n, "recent_n"), (baseline_hits, "baseline_hits"),
                        (baseline_n, "baseline_n")):
        if value < 0:
            raise ValueError(f"{name} must not be negative")
    if recent_hits > recent_n or baseline_hits > baseline_n:
        raise ValueError("hits cannot exceed the runs they are counted over")
    from scipy.stats import fisher_exact

    table = [[recent_hits, recent_n - recent_hits], [baseline_hits, baseline_n - baseline_hits]]
    if recent_n == 0 or baseline_n == 0:
        return 1.0   # an empty window says nothing (SciPy would answer NaN)
    return float(min(1.0, fisher_exact(table, alternative="greater" if direction == "up" else "less").pvalue))


def runs_to_detect(p0: float, p1: float, alpha: float, power: float = 0.8) -> int | None:
    """About how many runs each window needs for a one-sided test at level ``alpha`` to detect a rate moving
    from ``p0`` to ``p1`` with probability ``power`` (the normal approximation for two proportions, equal windows);
    None when the rates are equal."""
    if not (0 <= p0 <= 1 and 0 <= p1 <= 1) or not (0 < alpha < 1) or not (0 < power < 1):
        raise ValueError("rates must be in [0, 1], alpha and power in (0, 1)")
    if p0 == p1:
        return None
    from statistics import NormalDist

    z_a, z_b = NormalDist().inv_cdf(1 - alpha), NormalDist().inv_cdf(power)
    mean = (p0 + p1) / 2
    n = ((z_a * math.sqrt(2 * mean * (1 - mean)) + z_b * math.sqrt(p0 * (1 - p0) + p1 * (1 - p1)))
         / (p1 - p0)) ** 2
    return math.ceil(n)


@dataclass(frozen=True)
class MetricTest:
    name: str
    label: str
    direction: str
    baseline_hits: int
    baseline_n: int
    recent_hits: int
    recent_n: int
    p_value: float | None            # None: not testable (no runs count towards it in a window)
    alarm: bool
    runs: tuple[str, ...] = ()       # the recent runs behind the change (only when it alarms)

    @property
    def baseline_rate(self) -> float | None:
        return self.baseline_hits / self.baseline_n if self.baseline_n else None

    @property
    def recent_rate(self) -> float | None:
        return self.recent_hits / self.recent_n if self.recent_n else None

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "runs": list(self.runs), "baseline_rate": self.baseline_rate,
                "recent_rate": self.recent_rate}


@dataclass(frozen=True)
class Check:
    """One alarm check: the windows, every metric's test, and whether any alarmed."""
    ready: bool
    reason: str                      # why not ready, or the rule in words
    alpha: float
    baseline: int
    recent: int
    threshold: float = 0.0           # alpha / m: the p-value at or under which a metric alarms
    tests: tuple[MetricTest, ...] = ()
    baseline_span: tuple[str, str] = ("", "")
    recent_span: tuple[str, str] = ("", "")
    runs_behind: tuple[dict[str, Any], ...] = field(default=())

    @property
    def alarm(self) -> bool:
        return any(t.alarm for t in self.tests)

    @property
    def alarmed(self) -> tuple[MetricTest, ...]:
        return tuple(t for t in self.tests if t.alarm)

    def to_dict(self) -> dict[str, Any]:
        return {"ready": self.ready, "reason": self.reason, "alarm": self.alarm, "alpha": self.alpha,
                "false_alarm_rate_per_check_at_most": self.alpha, "threshold": self.threshold,
                "baseline": self.baseline, "recent": self.recent, "baseline_span": list(self.baseline_span),
                "recent_span": list(self.recent_span), "tests": [t.to_dict() for t in self.tests],
                "runs_behind": [dict(r) for r in self.runs_behind]}


def validate_windows(baseline: int, recent: int, alpha: float) -> None:
    if isinstance(baseline, bool) or not isinstance(baseline, int) or baseline < 1:
        raise ValueError(f"the baseline window must be a whole number of runs ≥ 1, not {baseline!r}")
    if isinstance(recent, bool) or not isinstance(recent, int) or recent < 1:
        raise ValueError(f"the recent window must be a whole number of runs ≥ 1, not {recent!r}")
    if not (isinstance(alpha, int | float) and 0 < alpha < 1):
        raise ValueError(f"alpha must be between 0 and 1 (exclusive), not {alpha!r}")


def rule_text(alpha: float, m: int) -> str:
    return (f"one-sided Fisher exact test per metric at alpha/m = {alpha:g}/{m} (Bonferroni): a check raises a "
            f"false alarm with probability at most {alpha:g} when no rate changed")


def check(rows: Sequence[Row], baseline: int = DEFAULT_BASELINE, recent: int = DEFAULT_RECENT,
          alpha: float = DEFAULT_ALPHA, metrics: Sequence[Metric] = METRICS) -> Check:
    """The alarm over ``rows`` (oldest first): the last ``recent`` runs against the ``baseline`` runs before them."""
    validate_windows(baseline, recent, alpha)
    if len(rows) < baseline + recent:
        return Check(False, f"{len(rows)} run(s) logged; the check needs {baseline + recent} ({baseline} baseline + "
                     f"{recent} recent): {baseline + recent - len(rows)} more", alpha, baseline, recent)
    window = list(rows[-(baseline + recent):])
    base, rec = window[:baseline], window[baseline:]
    counted = []
    for metric in metrics:
        b = [r for r in base if metric.counts(r)]
        n = [r for r in rec if metric.counts(r)]
        counted.append((metric, b, n))
    m = sum(1 for _, b, n in counted if b and n) or 1
    threshold = alpha / m
    tests, behind = [], {}
    for metric, b, n in counted:
        bh, rh = sum(metric.hit(r) for r in b), sum(metric.hit(r) for r in n)
        if not b or not n:
            tests.append(MetricTest(metric.name, metric.label, metric.direction, bh, len(b), rh, len(n), None, False))
            continue
        p = fisher_one_sided(rh, len(n), bh, len(b), metric.direction)
        alarm = p <= threshold
        runs: tuple[str, ...] = ()
        if alarm:
            bad = [r for r in n if metric.hit(r) == (metric.direction == "up")]
            runs = tuple(r["run_id"] for r in bad)
            for r in bad:
                behind.setdefault(r["run_id"], {"run_id": r["run_id"], "created_at": r["created_at"],
                                                "question": r["question"], "metrics": []})["metrics"].append(
                    metric.name)
        tests.append(MetricTest(metric.name, metric.label, metric.direction, bh, len(b), rh, len(n), p, alarm, runs))
    return Check(True, rule_text(alpha, m), alpha, baseline, recent, threshold, tuple(tests),
                 (base[0]["created_at"], base[-1]["created_at"]), (rec[0]["created_at"], rec[-1]["created_at"]),
                 tuple(behind.values()))


# -- rates per bucket -------------------------------------------------------------------------------------------

def bucket_key(timestamp: str, bucket: str) -> str:
    """``2026-12-04T20:00Z`` (hour) or ``2026-12-04`` (day) for an ISO UTC timestamp."""
    if bucket not in BUCKETS:
        raise ValueError(f"bucket must be one of {', '.join(BUCKETS)}, not {bucket!r}")
    return f"{timestamp[:13]}:00Z" if bucket == "hour" else timestamp[:10]


def percentile(values: Sequence[float], q: float) -> float | None:
    """The nearest-rank ``q``-th percentile (0 < q ≤ 100); None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)]


def rate(rows: Sequence[Row], metric: Metric) -> float | None:
    """The share of ``rows`` counted by ``metric`` that hit it; None when none is counted."""
    counted = [r for r in rows if metric.counts(r)]
    return sum(metric.hit(r) for r in counted) / len(counted) if counted else None


def _price_table(models: set[str]) -> dict[str, tuple[float, float]]:
    """(input, output) USD per token from litellm's local cost map, for the models it knows."""
    if not models:
        return {}
    try:
        import litellm
    except ImportError:  # pragma: no cover - litellm is a dependency
        return {}
    table = {}
    for model in models:
        info = litellm.model_cost.get(model) or litellm.model_cost.get(model.split("/", 1)[-1])
        if info and (info.get("input_cost_per_token") is not None or info.get("output_cost_per_token") is not None):
            table[model] = (float(info.get("input_cost_per_token") or 0.0),
                            float(info.get("output_cost_per_token") or 0.0))
    return table


LOCAL_MODEL_PREFIXES = ("local/", "smollm", "huggingfacetb/", "extractive", "fake")


def _is_local(model: str) -> bool:
    return model.lower().startswith(LOCAL_MODEL_PREFIXES)


def priced(rows: Sequence[Row], prices: Mapping[str, tuple[float, float]] | None = None
           ) -> tuple[dict[str, float], list[str]]:
    """Each run's LLM cost in USD (run id → cost), and the models with tokens but no price."""
    paid = {r["llm_model"] for r in rows if r["llm_model"] and not _is_local(r["llm_model"])
            and (r["prompt_tokens"] or r["completion_tokens"])}
    table = dict(prices) if prices is not None else _price_table(paid)
    costs, unpriced = {}, set()
    for r in rows:
        model = r["llm_model"]
        if model in table:
            inp, out = table[model]
            costs[r["run_id"]] = r["prompt_tokens"] * inp + r["completion_tokens"] * out
        else:
            costs[r["run_id"]] = 0.0
            if model in paid:
                unpriced.add(model)
    return costs, sorted(unpriced)


def buckets(rows: Sequence[Row], bucket: str = "day", costs: Mapping[str, float] | None = None
            ) -> list[dict[str, Any]]:
    """One dict per bucket with runs, every metric's rate, latency p50/p95, tokens and cost, oldest first."""
    grouped: dict[str, list[Row]] = defaultdict(list)
    for r in rows:
        grouped[bucket_key(r["created_at"], bucket)].append(r)
    costs = costs or {}
    out = []
    for key in sorted(grouped):
        group = grouped[key]
        latencies = [float(r["latency_ms"]) for r in group]
        out.append({"bucket": key, "runs": len(group),
                    **{f"{m.name}_rate": rate(group, m) for m in METRICS},
                    "latency_p50_ms": percentile(latencies, 50), "latency_p95_ms": percentile(latencies, 95),
                    "prompt_tokens": sum(int(r["prompt_tokens"]) for r in group),
                    "completion_tokens": sum(int(r["completion_tokens"]) for r in group),
                    "llm_cost_usd": sum(costs.get(r["run_id"], 0.0) for r in group)})
    return out


def clicks_per_bucket(clicks: Sequence[Row], bucket: str = "day") -> list[dict[str, Any]]:
    """Clicks and distinct runs clicked per bucket of the click time."""
    grouped: dict[str, list[Row]] = defaultdict(list)
    for c in clicks:
        grouped[bucket_key(c["clicked_at"], bucket)].append(c)
    return [{"bucket": k, "clicks": len(v), "runs_clicked": len({c["run_id"] for c in v})}
            for k, v in sorted(grouped.items())]


def click_through_by_document(rows: Sequence[Row], clicks: Sequence[Row]) -> list[dict[str, Any]]:
    """Per document: the runs that offered it as a source, the runs in which a person opened it, the ratio
    (click-through), and the clicks; most offered first."""
    offered: dict[str, set[str]] = defaultdict(set)
    for r in rows:
        for doc in _docs(r):
            offered[doc].add(r["run_id"])
    opened: dict[str, set[str]] = defaultdict(set)
    count: dict[str, int] = defaultdict(int)
    for c in clicks:
        opened[c["doc_id"]].add(c["run_id"])
        count[c["doc_id"]] += 1
    out = []
    for doc in set(offered) | set(opened):
        n = len(offered[doc])
        clicked = len(opened[doc] & offered[doc]) if n else len(opened[doc])
        out.append({"doc_id": doc, "runs_offered": n, "runs_clicked": clicked,
                    "click_through": clicked / n if n else None, "clicks": count[doc]})
    return sorted(out, key=lambda d: (-d["runs_offered"], -d["clicks"], d["doc_id"]))


def _docs(row: Row) -> list[str]:
    try:
        docs = json.loads(row.get("source_docs_json") or "[]")
    except ValueError:
        return []
    return [d for d in docs if isinstance(d, str)]


# -- the whole report ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Report:
    runs: int
    bucket: str
    buckets: list[dict[str, Any]]
    clicks_per_bucket: list[dict[str, Any]]
    documents: list[dict[str, Any]]
    check: Check
    unpriced_models: list[str]

    def to_dict(self) -> dict[str, Any]:
        return {"runs": self.runs, "bucket": self.bucket, "alarm": self.check.alarm, "check": self.check.to_dict(),
                "buckets": self.buckets, "clicks_per_bucket": self.clicks_per_bucket, "documents": self.documents,
                "unpriced_models": self.unpriced_models}


def report(rows: Sequence[Row], clicks: Sequence[Row], bucket: str = "day", baseline: int = DEFAULT_BASELINE,
           recent: int = DEFAULT_RECENT, alpha: float = DEFAULT_ALPHA,
           prices: Mapping[str, tuple[float, float]] | None = None) -> Report:
    """Everything ``workbench monitor`` prints and the Monitor page shows, from the run rows (oldest first) and
    the clicks."""
    bucket_key("", bucket)  # validates the bucket name
    costs, unpriced = priced(rows, prices)
    return Report(len(rows), bucket, buckets(rows, bucket, costs), clicks_per_bucket(clicks, bucket),
                  click_through_by_document(rows, clicks), check(rows, baseline, recent, alpha), unpriced)


def report_text(rep: Report) -> str:
    """What ``workbench monitor`` prints without ``--json``."""
    c = rep.check
    lines = [f"{rep.runs} run(s); rates per {rep.bucket} (UTC)"]
    header = f"{rep.bucket:<17} {'runs':>5} {'abst':>6} {'fallb':>6} {'unsup':>6} {'cache':>6} {'click':>6} " \
             f"{'p50 ms':>8} {'p95 ms':>8} {'cost $':>9}"
    lines.append(header)
    for b in rep.buckets:
        lines.append(f"{b['bucket']:<17} {b['runs']:>5} " + " ".join(_pct(b[f'{m}_rate']) for m in METRIC_NAMES)
                     + f" {_ms(b['latency_p50_ms'])} {_ms(b['latency_p95_ms'])} {b['llm_cost_usd']:>9.4f}")
    if rep.unpriced_models:
        lines.append("no price for: " + ", ".join(rep.unpriced_models) + " (counted as 0)")
    if not c.ready:
        lines.append(f"alarm check: not ready: {c.reason}")
        return "\n".join(lines)
    lines.append(f"alarm check: last {c.recent} runs ({c.recent_span[0]} .. {c.recent_span[1]}) against the "
                 f"{c.baseline} before ({c.baseline_span[0]} .. {c.baseline_span[1]}); {c.reason}")
    for t in c.tests:
        verdict = "ALARM" if t.alarm else ("not testable" if t.p_value is None else "ok")
        p = "" if t.p_value is None else f" p={t.p_value:.3g}"
        lines.append(f"  {t.label:<24} baseline {t.baseline_hits}/{t.baseline_n} recent {t.recent_hits}/{t.recent_n}"
                     f"{p} ({'higher' if t.direction == 'up' else 'lower'} is bad): {verdict}")
    if c.alarm:
        lines.append(f"ALARM: {', '.join(t.label for t in c.alarmed)} departed from the baseline; the runs behind it:")
        lines += [f"  {r['run_id']}  {r['created_at']}  {','.join(r['metrics'])}  {escape(r['question'][:70])}"
                  for r in c.runs_behind]
    return "\n".join(lines)


def _pct(rate: float | None) -> str:
    return f"{'–':>6}" if rate is None else f"{100 * rate:>5.1f}%"


def _ms(value: float | None) -> str:
    return f"{'–':>8}" if value is None else f"{value:>8.0f}"
