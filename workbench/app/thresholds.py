"""Gate thresholds as the widgets and the text show them: each signal's range, step and precision.

The signals live on different scales, so one widget rule cannot serve them all:

- ``rerank``: the sigmoid of a cross-encoder logit, in [0, 1]; hundredths matter.
- ``dense``: a cosine in [-1, 1]; thresholds are tuned to the thousandth (0.595), so steps of 0.005.
- ``learned``: the learned rule's probability, in [0, 1]; steps of 0.005.
- ``fused``: a reciprocal-rank-fusion score, ``sum(weight / (k + rank))``, at most
  ``(dense_weight + keyword_weight) / (rrf_k + 1)`` (first on both legs). With k = 60 that ceiling is
  2/61 and "first on one leg, fourth on the other" is 1/61 + 1/64, so thresholds differ in the fourth
  significant digit: five decimals, steps of 0.0001, and nothing above the ceiling, where every question
  abstains. The ceiling moves with ``retrieve.rrf_k`` and the leg weights, which is why changing those
  changes what a fused threshold means (:func:`scale_warnings`).
- the single-signal rules (:data:`EVIDENCE`, :mod:`pipeline.gate.signals`): ``window`` is a cosine in [-1, 1];
  ``coverage``, ``critical`` and ``fused_norm`` are shares in [0, 1]; ``dense_margin`` is a difference of two
  cosines, small in practice; ``bm25`` is a BM25 score per unit of the query's IDF mass, at most about k1 + 1.
  Steps of 0.005, three decimals.

The widgets show the thresholds of rerank, fused, dense and learned always, and a single-signal rule's only
while it is the rule chosen (:func:`shown`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from pipeline.config import GateConfig, PipelineConfig, RetrieveConfig
from pipeline.gate.rule import EVIDENCE

CORE = ("rerank", "fused", "dense", "learned")
SIGNALS = (*CORE, *EVIDENCE)  # every gate threshold, by the scale it is on
FIELD = {name: f"confidence_threshold_{name}" for name in SIGNALS}
DIGITS = {"rerank": 3, "fused": 5, "dense": 3, "fused_and_dense": 5, "learned": 3, **dict.fromkeys(EVIDENCE, 3)}
LABEL = {"rerank": "Rerank threshold", "fused": "Fused (RRF) threshold", "dense": "Dense cosine threshold",
         "learned": "Learned rule threshold", "window": "Sentence-window cosine threshold",
         "coverage": "Term coverage threshold", "critical": "Critical-term threshold",
         "bm25": "Normalised BM25 threshold", "dense_margin": "Dense margin threshold",
         "fused_norm": "Normalised fused threshold"}
# the evidence signals' widget ranges and what each measures
_EVIDENCE_SPECS = {
    "window": (-1.0, 1.0, "Best cosine between the question and one sentence window of the top passages, -1 to 1."),
    "coverage": (0.0, 1.0, "Share of the question's IDF-weighted terms found together in one top passage, 0 to 1."),
    "critical": (0.0, 1.0, "Share of the question's identifiers, numbers, versions and names that the top passages "
                           "contain, 0 to 1 (1 when it has none)."),
    "bm25": (0.0, 3.0, "Top BM25 score divided by the question's IDF mass, so it does not grow with the question's "
                       "length; at most about k1 + 1."),
    "dense_margin": (0.0, 1.0, "How far the best dense cosine leads the second best."),
    "fused_norm": (0.0, 1.0, "Top fused (RRF) score divided by the highest one the fusion settings allow, 0 to 1 "
                             "whatever k is."),
}


def shown(signal: str) -> tuple[str, ...]:
    """The thresholds a widget row shows for the rule ``gate.signal``: rerank, fused, dense and learned, and a
    single-signal rule's own when that rule is chosen."""
    return (*CORE, signal) if signal in EVIDENCE else CORE


@dataclass(frozen=True)
class ThresholdSpec:
    """What a threshold widget needs: bounds, step and a printf format that shows every digit that matters."""
    signal: str
    lo: float
    hi: float
    step: float
    format: str
    help: str


def fused_ceiling(retrieve: RetrieveConfig) -> float:
    """The largest fused score a chunk can reach: first on every leg."""
    return (retrieve.dense_weight + retrieve.keyword_weight) / (retrieve.rrf_k + 1)


def _round_up(value: float, step: float) -> float:
    return round(math.ceil(value / step - 1e-9) * step, 10)


def spec(signal: str, retrieve: RetrieveConfig, current: float | None = None) -> ThresholdSpec:
    """The widget for ``signal``'s threshold under ``retrieve``'s fusion settings; ``current`` widens the
    range when a value from elsewhere (an imported config, another k) lies outside it, so it still shows."""
    if signal == "rerank":
        lo, hi, step = 0.0, 1.0, 0.01
        help_text = "Sigmoid of the cross-encoder's logit for the best passage, 0 to 1."
    elif signal == "dense":
        lo, hi, step = -1.0, 1.0, 0.005
        help_text = "Cosine similarity between the question and the closest passage, -1 to 1."
    elif signal == "fused":
        ceiling = fused_ceiling(retrieve)
        lo, hi, step = 0.0, _round_up(ceiling, 0.0001) or 0.0001, 0.0001
        help_text = (f"Reciprocal-rank fusion: weight / (k + rank), summed over the legs. With k = "
                     f"{retrieve.rrf_k} and weights {retrieve.dense_weight:g} / {retrieve.keyword_weight:g} the "
                     f"highest possible score is {ceiling:.5f} (first on both legs); first on one leg only "
                     f"scores {max(retrieve.dense_weight, retrieve.keyword_weight) / (retrieve.rrf_k + 1):.5f}. "
                     f"It measures whether the two legs agree, not relevance.")
    elif signal == "learned":
        lo, hi, step = 0.0, 1.0, 0.005
        help_text = ("Probability from the learned rule (a logistic model over the evidence signals: sentence-window "
                     "cosine, term coverage, critical terms, BM25, dense), 0 to 1; does not depend on the fusion k.")
    elif signal in _EVIDENCE_SPECS:
        lo, hi, help_text = _EVIDENCE_SPECS[signal]
        step = 0.005
        help_text += f" Read alone by gate.signal={signal}; a run without a value abstains."
    else:
        raise ValueError(f"no threshold for signal {signal!r}; one of {', '.join(SIGNALS)}")
    if current is not None:
        lo, hi = min(lo, float(current)), max(hi, float(current))
    return ThresholdSpec(signal, lo, hi, step, f"%.{DIGITS[signal]}f", help_text)


def fmt(signal: str, value: float | None) -> str:
    """A score or threshold on ``signal``'s scale, to the precision that matters there."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    return f"{value:.{DIGITS.get(signal, 4)}f}"


def scale_warnings(cfg: PipelineConfig) -> list[str]:
    """What makes a configured threshold mean something other than it seems: a fused threshold above the
    highest score the fusion settings allow (every question the fused rule decides abstains), or fusion
    settings that moved the fused scale away from the one the default threshold was tuned on."""
    out = []
    ceiling = fused_ceiling(cfg.retrieve)
    threshold = cfg.gate.confidence_threshold_fused
    reads_fused = cfg.gate.signal in ("auto", "fused", "fused_and_dense", "rerank")
    if threshold > ceiling and reads_fused:
        out.append(f"The fused threshold {fmt('fused', threshold)} is above the highest fused score these fusion "
                   f"settings allow ({fmt('fused', ceiling)} with k = {cfg.retrieve.rrf_k}), so every question "
                   "decided on the fused scale abstains.")
    default = PipelineConfig().retrieve
    if (cfg.retrieve.rrf_k, cfg.retrieve.dense_weight, cfg.retrieve.keyword_weight) != \
            (default.rrf_k, default.dense_weight, default.keyword_weight) and threshold <= ceiling and reads_fused:
        out.append(f"Fusion settings changed (k = {cfg.retrieve.rrf_k}, weights {cfg.retrieve.dense_weight:g} / "
                   f"{cfg.retrieve.keyword_weight:g}): the fused scale now tops out at {fmt('fused', ceiling)}, "
                   f"so the fused threshold {fmt('fused', threshold)} means something else than with the "
                   "defaults; re-tune it.")
    return out


def conditions_text(gate) -> str:
    """Every comparison a gate made, each at its scale's precision: "fused 0.03226 ≥ 0.03201 and dense
    0.712 ≥ 0.595" (a GateTrace)."""
    if not gate.conditions:
        return f"{gate.scale} {fmt(gate.scale, gate.score)} vs {fmt(gate.scale, gate.threshold)}"
    return " and ".join(f"{c.scale} {fmt(c.scale, c.score)} {'≥' if c.passed else '<'} {fmt(c.scale, c.threshold)}"
                        for c in gate.conditions)


def rule_name_of(scale: str) -> str:
    return {"fused_and_dense": "fused AND dense"}.get(scale, scale)


def rule_name(gate) -> str:
    """The rule a GateTrace applied, in words."""
    return rule_name_of(gate.scale)


def gate_thresholds(g: GateConfig) -> dict[str, float]:
    return {s: getattr(g, FIELD[s]) for s in SIGNALS}
