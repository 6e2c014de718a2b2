"""Diff two traces of the same question run under two configurations (the app's Compare page).

Pure functions over stored :class:`~pipeline.trace.Trace` records, no models: what the configurations
change, whether the rewrite changed, how each chunk moved in the final ranking, whether the gate decision
flipped, and how each claim's verdict changed. Claims are matched by their text (whitespace and case
folded), because the same sentence may carry other marker numbers when the sources are ordered differently.

Tiered generation (``generate.tiers``): each side's tiers tried and cost are part of the diff, and
:func:`tier_arms` / :func:`compare_arms` / :func:`tiering_verdict` put "cheap only" and "expensive only" beside
"tiered" on the same cases (``benchmarks/tiers.py``, the Compare page's presets).

Two runs over the same golden cases (two arms, or two configurations on the Compare page): each case's outcome in
each run (:func:`case_outcomes`), and per compared rate the paired test on the cases both ran
(:func:`paired_rates`: exact McNemar on the cases where they differ, paired bootstrap interval of the difference;
:func:`workbench.metrics.paired_binary`), beside each run's rate with its Wilson interval.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Literal

from pipeline.config import PipelineConfig, TierConfig, get_value, tunables
from pipeline.generation.tiers import tiers_line, total_cost
from pipeline.trace import Trace
from workbench.metrics import PairedTest, paired_binary

Movement = Literal["same", "up", "down", "new", "dropped"]


@dataclass(frozen=True)
class ConfigChange:
    key: str
    a: Any
    b: Any


@dataclass(frozen=True)
class RankMove:
    """One chunk's place in the final ranking of each run (1-based; None: not retrieved at all)."""
    chunk_id: str
    doc_id: str
    title: str
    rank_a: int | None
    rank_b: int | None
    movement: Movement

    @property
    def places(self) -> int:
        """Positive when B ranks the chunk higher than A (0 when new or dropped)."""
        if self.rank_a is None or self.rank_b is None:
            return 0
        return self.rank_a - self.rank_b


@dataclass(frozen=True)
class ClaimChange:
    text: str
    verdict_a: str | None            # None: the claim is not in that answer
    verdict_b: str | None
    similarity_a: float | None = None
    similarity_b: float | None = None

    @property
    def status(self) -> Literal["same", "changed", "only_a", "only_b"]:
        if self.verdict_a is None:
            return "only_b"
        if self.verdict_b is None:
            return "only_a"
        return "same" if self.verdict_a == self.verdict_b else "changed"


@dataclass(frozen=True)
class GateSide:
    decision: str
    scale: str
    score: float
    threshold: float
    reason: str


@dataclass(frozen=True)
class TraceDiff:
    question: str
    config_changes: tuple[ConfigChange, ...]
    query_a: str
    query_b: str
    rewrite_status_a: str
    rewrite_status_b: str
    gate_a: GateSide
    gate_b: GateSide
    rank_moves: tuple[RankMove, ...]
    claim_changes: tuple[ClaimChange, ...]
    answer_a: str
    answer_b: str
    confidence_a: str
    confidence_b: str
    llm_calls_a: int
    llm_calls_b: int
    backend_a: str
    backend_b: str
    tiers_a: str = ""                  # generate.tiers: the tiers tried and the cost (tiers_line), "" without
    tiers_b: str = ""
    cost_a: float | None = None        # every tier's cost together (litellm list prices); None: unknown or untiered
    cost_b: float | None = None

    @property
    def rewrite_changed(self) -> bool:
        return self.query_a != self.query_b or self.rewrite_status_a != self.rewrite_status_b

    @property
    def gate_changed(self) -> bool:
        return self.gate_a.decision != self.gate_b.decision

    @property
    def answer_changed(self) -> bool:
        return self.answer_a.strip() != self.answer_b.strip()

    @property
    def verdicts_changed(self) -> int:
        return sum(1 for c in self.claim_changes if c.status != "same")

    def summary(self) -> list[str]:
        """One line per thing that differs, most consequential first; empty when the runs agree."""
        lines = []
        if self.gate_changed:
            lines.append(f"gate decision: {self.gate_a.decision} → {self.gate_b.decision}")
        if self.answer_changed:
            lines.append("the answer text differs")
        if self.verdicts_changed:
            lines.append(f"{self.verdicts_changed} claim verdict(s) differ")
        if self.rewrite_changed:
            lines.append(f"rewrite: {self.rewrite_status_a} {self.query_a!r} → "
                         f"{self.rewrite_status_b} {self.query_b!r}")
        moved = [m for m in self.rank_moves if m.movement != "same"]
        if moved:
            lines.append(f"{len(moved)} chunk(s) moved in or out of the compared top ranks")
        if self.confidence_a != self.confidence_b:
            lines.append(f"confidence: {self.confidence_a or '–'} → {self.confidence_b or '–'}")
        if self.llm_calls_a != self.llm_calls_b:
            lines.append(f"LLM calls: {self.llm_calls_a} → {self.llm_calls_b}")
        if self.tiers_a != self.tiers_b:
            lines.append(f"{self.tiers_a or 'one generator'} → {self.tiers_b or 'one generator'}")
        return lines


def config_changes(a: PipelineConfig | None, b: PipelineConfig | None) -> tuple[ConfigChange, ...]:
    """Every tunable whose value differs between the two configs, in declaration order."""
    a = a or PipelineConfig()
    b = b or PipelineConfig()
    return tuple(ConfigChange(t.key, get_value(a, t.key), get_value(b, t.key)) for t in tunables()
                 if get_value(a, t.key) != get_value(b, t.key))


def _movement(rank_a: int | None, rank_b: int | None, top_k: int) -> Movement:
    in_a = rank_a is not None and rank_a <= top_k
    in_b = rank_b is not None and rank_b <= top_k
    if in_a and not in_b:
        return "dropped"
    if in_b and not in_a:
        return "new"
    if rank_a == rank_b:
        return "same"
    return "up" if rank_b < rank_a else "down"


def rank_moves(a: Trace, b: Trace, top_k: int = 10) -> tuple[RankMove, ...]:
    """Chunks in either run's top ``top_k`` (final order), with their rank in each full ranking.

    Ordered by B's rank, then the chunks B dropped by A's rank.
    """
    ranked_a = {c.chunk_id: (i, c) for i, c in enumerate(a.ranked_candidates(), start=1)}
    ranked_b = {c.chunk_id: (i, c) for i, c in enumerate(b.ranked_candidates(), start=1)}
    ids = [cid for cid, (i, _) in ranked_b.items() if i <= top_k]
    ids += [cid for cid, (i, _) in ranked_a.items() if i <= top_k and cid not in ids]
    moves = []
    for cid in ids:
        ra = ranked_a.get(cid, (None, None))
        rb = ranked_b.get(cid, (None, None))
        cand = rb[1] or ra[1]
        moves.append(RankMove(cid, cand.doc_id, cand.title, ra[0], rb[0], _movement(ra[0], rb[0], top_k)))
    return tuple(moves)


def _norm(text: str) -> str:
    return " ".join(text.split()).casefold()


def claim_changes(a: Trace, b: Trace) -> tuple[ClaimChange, ...]:
    """Claims of A (in order), then claims only B has; each with its verdict and best similarity per run."""
    claims_a = {_norm(c.text): c for c in a.validation.claims}
    claims_b = {_norm(c.text): c for c in b.validation.claims}
    out = []
    for key, ca in claims_a.items():
        cb = claims_b.get(key)
        out.append(ClaimChange(ca.text, ca.verdict, cb.verdict if cb else None, ca.best_similarity,
                               cb.best_similarity if cb else None))
    for key, cb in claims_b.items():
        if key not in claims_a:
            out.append(ClaimChange(cb.text, None, cb.verdict, None, cb.best_similarity))
    return tuple(out)


def _gate(trace: Trace) -> GateSide:
    g = trace.gate
    return GateSide(g.decision, g.scale, g.score, g.threshold, g.reason)


def diff_traces(a: Trace, b: Trace, top_k: int = 10) -> TraceDiff:
    return TraceDiff(
        question=a.question, config_changes=config_changes(a.config, b.config),
        query_a=a.rewrite.query or a.question, query_b=b.rewrite.query or b.question,
        rewrite_status_a=a.rewrite.status, rewrite_status_b=b.rewrite.status,
        gate_a=_gate(a), gate_b=_gate(b), rank_moves=rank_moves(a, b, top_k), claim_changes=claim_changes(a, b),
        answer_a=a.answer, answer_b=b.answer, confidence_a=a.confidence, confidence_b=b.confidence,
        llm_calls_a=a.llm_calls, llm_calls_b=b.llm_calls, backend_a=a.generation.backend,
        backend_b=b.generation.backend, tiers_a=tiers_line(a.generation), tiers_b=tiers_line(b.generation),
        cost_a=total_cost(a.generation) if a.generation.tiers else None,
        cost_b=total_cost(b.generation) if b.generation.tiers else None)


# -- tiered generation: "cheap only" and "expensive only" beside "tiered" -------------------------------------

ARMS = ("cheap only", "expensive only", "tiered")


def tier_arms(cfg: PipelineConfig) -> dict[str, PipelineConfig]:
    """The three arms of a tiering comparison from a config with two or more ``generate.tiers``: the first tier
    alone, the last LLM tier alone (the extractive final fallback is not "expensive"), and ``cfg`` itself. Each
    arm is a one-tier list, so every arm records the same per-tier costs and verdicts."""
    tiers = cfg.generate.tiers
    if len(tiers) < 2:
        raise ValueError("a tiering comparison needs generate.tiers with two or more tiers")
    llm = [t for t in tiers if t.backend != "extractive"] or [tiers[-1]]
    return {"cheap only": replace_tiers(cfg, (tiers[0],)), "expensive only": replace_tiers(cfg, (llm[-1],)),
            "tiered": cfg}


def replace_tiers(cfg: PipelineConfig, tiers: tuple[TierConfig, ...]) -> PipelineConfig:
    return dataclasses.replace(cfg, generate=dataclasses.replace(cfg.generate, tiers=tiers))


def expensive_model(cfg: PipelineConfig) -> str:
    """The model of the last LLM tier: the one tiering tries to call less."""
    llm = [t for t in cfg.generate.tiers if t.backend != "extractive"]
    return llm[-1].model if llm else ""


def compare_arms(summaries: dict[str, dict], expensive: str) -> list[dict]:
    """One row per arm from each arm's evaluation summary (:func:`workbench.evaluate.evaluate`): the
    calls to the ``expensive`` model, the escalation rate, the cost and the correct-answer rate, same cases."""
    rows = []
    for arm, summary in summaries.items():
        block = summary.get("tiers") or {}
        per_tier = block.get("per_tier", [])
        rows.append({
            "arm": arm, "cases": summary.get("run", {}).get("cases", block.get("generated")),
            "answered": block.get("answered"), "escalation_rate": block.get("escalation_rate"),
            "expensive_calls": sum(t["llm_calls"] for t in per_tier if t["model"] == expensive),
            "llm_calls": sum(t["llm_calls"] for t in per_tier),
            "cost_usd": block.get("cost_usd"), "cost_per_answered_usd": block.get("cost_per_answered_usd"),
            "correct_answer_rate": summary.get("correct_answer_rate"),
            "answer_rate_answerable": summary.get("answer_rate_answerable"),
            "citation_support_rate": summary.get("citation_support_rate"),
            "kept_per_tier": {t["model"] or t["backend"]: t["kept"] for t in per_tier}})
    return rows


def tiering_verdict(rows: list[dict]) -> dict:
    """Whether tiered made fewer expensive calls than expensive-only at no lower correct-answer rate."""
    by = {r["arm"]: r for r in rows}
    tiered, expensive = by.get("tiered"), by.get("expensive only")
    if tiered is None or expensive is None:
        return {"fewer_expensive_calls": None, "no_lower_correct_rate": None}
    t_rate, e_rate = tiered["correct_answer_rate"], expensive["correct_answer_rate"]
    return {"fewer_expensive_calls": tiered["expensive_calls"] < expensive["expensive_calls"],
            "no_lower_correct_rate": None if t_rate is None or e_rate is None else t_rate >= e_rate}


# -- two runs over the same cases: paired tests ---------------------------------------------------------------

# the compared rates: name, label, which cases it is a rate of (answerable or not), the outcome counted
PAIRED_RATES = (("answered", "answered (of answerable)", True, "answered"),
                ("correct", "correct answers (of answerable; an abstention is not one)", True, "correct"),
                ("false_answers", "false answers (of unanswerable)", False, "answered"))


def case_outcomes(rows) -> dict[str, dict]:
    """Case id → what one run did with it: answerable, answered, correct (a ``correct`` correctness verdict;
    None when the run scored no correctness at all), supported and total claims of the validated answer."""
    scored = any(getattr(r, "correctness", None) is not None for r in rows)
    out = {}
    for r in rows:
        correctness = getattr(r, "correctness", None)
        out[r.id] = {"answerable": bool(r.answerable), "answered": not r.abstained,
                     "correct": (not r.abstained and correctness is not None and correctness.verdict == "correct")
                     if scored else None,
                     "supported_claims": int(r.supported_claims) if r.supported is not None else None,
                     "claims": int(r.claims) if r.supported is not None else None}
    return out


@dataclass(frozen=True)
class PairedRate:
    """One rate of run A and run B over the same cases, and the paired test of A against B."""
    name: str
    label: str
    test: PairedTest

    def to_dict(self) -> dict:
        return {"name": self.name, "label": self.label, **self.test.to_dict()}


def paired_rates(a: dict[str, dict], b: dict[str, dict], resamples: int = 2000,
                 seed: int = 0) -> tuple[PairedRate, ...]:
    """Each of :data:`PAIRED_RATES` over the cases both runs have (``case_outcomes`` of each), A minus B; a rate
    neither run can count (no answerable case, correctness not scored) is left out."""
    shared = [cid for cid in a if cid in b]
    out = []
    for name, label, of_answerable, outcome in PAIRED_RATES:
        cases = [cid for cid in shared if a[cid]["answerable"] == of_answerable]
        if not cases or any(a[cid][outcome] is None or b[cid][outcome] is None for cid in cases):
            continue
        out.append(PairedRate(name, label, paired_binary([a[cid][outcome] for cid in cases],
                                                         [b[cid][outcome] for cid in cases], resamples, seed)))
    return tuple(out)


def compare_runs(rows_a, rows_b, resamples: int = 2000, seed: int = 0) -> tuple[PairedRate, ...]:
    """Two evaluations over the same golden cases (their rows), A against B on every compared rate."""
    return paired_rates(case_outcomes(rows_a), case_outcomes(rows_b), resamples, seed)


def _pct_ci(value: float | None, ci: tuple[float, float]) -> str:
    return "—" if value is None else f"{100 * value:.1f} % [{100 * ci[0]:.1f}–{100 * ci[1]:.1f}]"


def comparison_table(rates: tuple[PairedRate, ...]) -> list[dict[str, object]]:
    """One row per compared rate, as the Compare page shows it: the cases, each run's rate with its 95 % Wilson
    interval, A minus B with its 95 % paired bootstrap interval, the cases where only A / only B counted, and the
    exact McNemar p on those."""
    rows = []
    for r in rates:
        t = r.test
        low, high = t.difference_ci95 or (0.0, 0.0)
        rows.append({"rate": r.label, "cases": t.n, "A [95 % CI]": _pct_ci(t.rate_a, t.ci_a()),
                     "B [95 % CI]": _pct_ci(t.rate_b, t.ci_b()),
                     "A − B, points [95 % paired bootstrap]": "—" if t.difference is None else
                     f"{100 * t.difference:+.1f} [{100 * low:+.1f} to {100 * high:+.1f}]",
                     "only A / only B": f"{t.a_only} / {t.b_only}", "McNemar p (exact)": round(t.p_value, 4)})
    return rows
