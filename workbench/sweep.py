"""Threshold tuning (``workbench tune GOLDEN``): replay the confidence gate over stored traces, no re-retrieval.

Method:

1. **Traces** come from an evaluation (``traces.jsonl``) or one ``Pipeline.search`` per case
   (:mod:`workbench.tune`); either way retrieval ran once and is never repeated here.
2. **Scores**, once per trace, with :func:`pipeline.gate.stage.gate_inputs`,
   :func:`pipeline.gate.stage.score_arrays` and :func:`pipeline.gate.stage.evidence_arrays` (the gate's own
   extraction): the top rerank score (NaN when the reranker did not run), the top fused RRF score, the best dense
   cosine, and each evidence signal a single-signal rule reads (NaN where it was not measured).
3. **Vectorised replay**: :func:`pipeline.gate.rule.answers`, the rule the gate itself decides with,
   broadcast over thresholds × cases — the sweep's decisions are the gate's by construction.
4. **Per signal** (rerank, fused, dense, learned and each single evidence signal): ROC-AUC of answerable vs
   unanswerable (a missing score ranks lowest), the exact trade-off curve (every midpoint between two distinct
   observed scores is a candidate threshold, so a chosen threshold never sits on a case's score), the current
   threshold's rates, and the **best point**: the most answerable cases answered with a false-answer rate on
   unanswerable <= the bound (ties: the lower false-answer rate). The combined rule is searched exactly over both
   candidate sets.
5. **Cross-validation**: a threshold chosen and scored on the same cases flatters itself, so each best
   point is also chosen on 4/5 of the cases and scored on the held-out 1/5 (folds stratified by answerable /
   unanswerable, seed 0; given ``groups``, linked cases — one conversation, near-duplicates — share a fold).
   ``workbench tune`` runs the whole sweep on the golden set's tune part and measures the recommendation on
   the held-out test part (:mod:`workbench.tune`); the cross-validation then happens inside the tune part.
6. **Grids** for the heatmaps: ``--grid`` quantiles per axis plus the configured value — ``auto`` over
   (fused, rerank) thresholds and ``fused_and_dense`` over (fused, dense).
7. **Readable thresholds**: a recommended threshold is the midpoint of a gap between two observed scores; it
   is reported as the shortest decimal inside the same gap (:func:`readable_threshold`), which decides every
   fitted case the same way.

It reports; it never rewrites the config.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from pipeline.config import GateConfig
from pipeline.gate import learned as gate_learned
from pipeline.gate import rule as gate_rule
from pipeline.gate import signals as gate_signals
from pipeline.gate.stage import GateInputs, evidence_arrays, gate_inputs, learned_scores, score_arrays
from pipeline.trace import Trace
from workbench.metrics import roc_auc

# the single-score rules: each reads one signal against its own threshold t_<signal>
SIGNALS = ("rerank", "fused", "dense", "learned", *gate_rule.EVIDENCE)
FIELDS = {f"t_{name}": f"confidence_threshold_{name}" for name in SIGNALS}
RULE_KEYS = {**{name: (f"t_{name}",) for name in SIGNALS}, "fused_and_dense": ("t_fused", "t_dense"),
             "auto": ("t_rerank", "t_fused", "t_dense", "t_learned")}
FAR_BOUNDS = (0.05, 0.10, 0.20)


@dataclass(frozen=True)
class Scores:
    """The numbers the gate reads, one entry per case (NaN where a scale has no score)."""
    ids: tuple[str, ...]
    answerable: np.ndarray          # bool
    rerank: np.ndarray
    fused: np.ndarray
    dense: np.ndarray
    inputs: tuple[GateInputs, ...]  # the gate's own inputs, for per-case replay with pipeline.gate.stage.decide
    learned: np.ndarray | None = None  # the learned rule's probability (NaN: no candidates); None: not computed
    # the single-signal rules' values (pipeline.gate.rule.EVIDENCE), NaN where not measured; None: taken from
    # ``inputs`` (all NaN without them: those rules then abstain on every case)
    evidence_values: Mapping[str, np.ndarray] | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        given = dict(self.evidence_values or {})
        found = evidence_arrays(self.inputs) if self.inputs else {}
        object.__setattr__(self, "evidence_values", {
            name: np.asarray(given[name], dtype=np.float64) if name in given
            else found.get(name, np.full(len(self.ids), np.nan)) for name in gate_rule.EVIDENCE})

    def signal(self, name: str) -> np.ndarray:
        if name == "learned":
            return self.learned if self.learned is not None else np.full(len(self.ids), np.nan)
        if name in gate_rule.EVIDENCE:
            return self.evidence_values[name]
        return getattr(self, name)

    def answers(self, rule: str, *, t_rerank, t_fused, t_dense, t_learned=0.5, **t_evidence) -> np.ndarray:
        """:func:`pipeline.gate.rule.answers` on these cases (thresholds broadcast, cases on the last axis);
        ``t_evidence``: the single-signal rules' thresholds by key (``t_window=...``)."""
        unknown = set(t_evidence) - {f"t_{name}" for name in gate_rule.EVIDENCE}
        if unknown:
            raise TypeError(f"unknown threshold(s) {', '.join(sorted(unknown))}")
        return gate_rule.answers(self.rerank, self.fused, self.dense, rule, t_rerank, t_fused, t_dense,
                                 self.learned, t_learned, self.evidence_values,
                                 {key[2:]: value for key, value in t_evidence.items()})

    def available(self) -> tuple[str, ...]:
        return tuple(s for s in SIGNALS if np.isfinite(self.signal(s)).any())

    def take(self, idx: np.ndarray) -> Scores:
        return Scores(ids=tuple(self.ids[i] for i in idx), answerable=self.answerable[idx], rerank=self.rerank[idx],
                      fused=self.fused[idx], dense=self.dense[idx],
                      inputs=tuple(self.inputs[i] for i in idx) if self.inputs else (),
                      learned=None if self.learned is None else self.learned[idx],
                      evidence_values={name: values[idx] for name, values in self.evidence_values.items()})

    def with_gate(self, gate: GateConfig) -> Scores:
        """The same cases with the learned probability recomputed under ``gate``'s coefficients."""
        return replace(self, learned=learned_scores(self.inputs, gate))

    def evidence(self) -> dict[str, np.ndarray]:
        """Every evidence signal (:mod:`pipeline.gate.signals`) per case, NaN where not measured."""
        return evidence_arrays(self.inputs, gate_signals.NAMES)


def extract(ids: Sequence[str], answerable: Sequence[bool], traces: Sequence[Trace],
            gate: GateConfig | None = None) -> Scores:
    """The gate's scores of each trace; the learned probability under ``gate``'s coefficients (default config)."""
    inputs = tuple(gate_inputs(t.retrieval, t.rerank) for t in traces)
    rerank, fused, dense = score_arrays(inputs)
    return Scores(ids=tuple(ids), answerable=np.asarray(answerable, dtype=bool), rerank=rerank, fused=fused,
                  dense=dense, inputs=inputs, learned=learned_scores(inputs, gate or GateConfig()))


def rates(answered: np.ndarray, answerable: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(answer rate on answerable, false-answer rate on unanswerable) over the last axis."""
    nan = np.full(answered.shape[:-1], np.nan)
    ar = answered[..., answerable].mean(axis=-1) if answerable.any() else nan
    far = answered[..., ~answerable].mean(axis=-1) if (~answerable).any() else nan
    return ar, far


def thresholds_of(cfg: GateConfig) -> dict[str, float]:
    return {key: getattr(cfg, name) for key, name in FIELDS.items()}


# -- exact search -----------------------------------------------------------------------------------------------

def candidate_thresholds(scores: np.ndarray) -> np.ndarray:
    """Every distinct outcome: midpoints between consecutive distinct scores, plus one below and one above."""
    finite = np.unique(scores[np.isfinite(scores)])
    if not len(finite):
        return np.array([0.0])
    span = max(float(finite[-1] - finite[0]), 1e-6)
    return np.concatenate([[finite[0] - span * 0.01], (finite[:-1] + finite[1:]) / 2.0, [finite[-1] + span * 0.01]])


def _signal_of(key: str) -> str:
    return key[2:]


def evaluate_grid(s: Scores, rule: str, axes: dict[str, np.ndarray], cfg: GateConfig):
    """Rates over the outer product of the given threshold axes (other thresholds as configured)."""
    keys = list(axes)
    shaped = {}
    for d, key in enumerate(keys):
        shape = [1] * (len(keys) + 1)
        shape[d] = len(axes[key])
        shaped[key] = np.asarray(axes[key]).reshape(shape)
    fixed = {k: v for k, v in thresholds_of(cfg).items() if k not in axes}
    return rates(s.answers(rule, **shaped, **fixed), s.answerable)


def best_setting(s: Scores, rule: str, cfg: GateConfig, max_far: float) -> dict | None:
    """The thresholds answering the most answerable cases with far <= max_far (exact over candidates)."""
    keys = RULE_KEYS[rule]
    axes = {k: candidate_thresholds(s.signal(_signal_of(k))) for k in keys}
    ar, far = evaluate_grid(s, rule, axes, cfg)
    feasible = np.argwhere(far <= max_far + 1e-12)
    if not len(feasible):
        return None
    best = min(map(tuple, feasible), key=lambda ix: (-ar[ix], far[ix]))
    return {**{k: float(axes[k][i]) for k, i in zip(keys, best, strict=True)},
            "answer_rate_answerable": float(ar[best]), "false_answer_rate_unanswerable": float(far[best])}


def folds(answerable: np.ndarray, k: int = 5, seed: int = 0, groups: Sequence[int] | None = None
          ) -> list[np.ndarray]:
    """Stratified k folds of case indices (answerable and unanswerable shuffled separately).

    ``groups`` (one label per case): cases with the same label land in the same fold; groups are shuffled,
    taken largest first, and each goes to the fold holding the fewest cases of its majority class.
    """
    rng = np.random.default_rng(seed)
    parts: list[list[int]] = [[] for _ in range(k)]
    if groups is None:
        for cls in (True, False):
            idx = np.flatnonzero(answerable == cls)
            rng.shuffle(idx)
            for j, i in enumerate(idx):
                parts[j % k].append(int(i))
        return [np.array(sorted(p), dtype=int) for p in parts if p]
    members: dict = {}
    for i, g in enumerate(groups):
        members.setdefault(g, []).append(i)
    order = list(members.values())
    rng.shuffle(order)
    order.sort(key=len, reverse=True)
    for idx in order:
        cls = bool(answerable[idx].sum() * 2 >= len(idx))
        fold = min(range(k), key=lambda f: (sum(bool(answerable[i]) == cls for i in parts[f]), len(parts[f]), f))
        parts[fold].extend(idx)
    return [np.array(sorted(p), dtype=int) for p in parts if p]


def cross_validate(s: Scores, rule: str, cfg: GateConfig, max_far: float, k: int = 5,
                   groups: Sequence[int] | None = None) -> dict:
    """Choose on k-1 folds, apply to the held-out fold; rates pooled over the held-out predictions."""
    answered = np.zeros(len(s.ids), dtype=bool)
    for held in folds(s.answerable, k, groups=groups):
        best = best_setting(s.take(np.setdiff1d(np.arange(len(s.ids)), held)), rule, cfg, max_far)
        chosen = {key: best[key] if best else np.inf for key in RULE_KEYS[rule]}
        fixed = {key: v for key, v in thresholds_of(cfg).items() if key not in chosen}
        answered[held] = s.take(held).answers(rule, **chosen, **fixed)
    ar, far = rates(answered, s.answerable)
    return {"folds": k, "grouped": groups is not None, "answer_rate_answerable": float(ar),
            "false_answer_rate_unanswerable": float(far)}


def curve(s: Scores, signal: str, cfg: GateConfig) -> dict:
    thresholds = candidate_thresholds(s.signal(signal))
    ar, far = evaluate_grid(s, signal, {f"t_{signal}": thresholds}, cfg)
    return {"threshold": thresholds.tolist(), "answer_rate_answerable": ar.tolist(),
            "false_answer_rate_unanswerable": far.tolist()}


def current_rates(s: Scores, rule: str, cfg: GateConfig) -> dict:
    ar, far = rates(s.answers(rule, **thresholds_of(cfg)), s.answerable)
    return {**{k: thresholds_of(cfg)[k] for k in RULE_KEYS[rule]}, "answer_rate_answerable": float(ar),
            "false_answer_rate_unanswerable": float(far)}


def configured_rule(cfg: GateConfig) -> str:
    """The sweep rule that reproduces ``gate.signal``: the rules are named like the signals."""
    return cfg.signal


def rule_report(s: Scores, rule: str, cfg: GateConfig, max_far: float, groups: Sequence[int] | None = None) -> dict:
    out = {"rule": rule, "current": current_rates(s, rule, cfg), "best": best_setting(s, rule, cfg, max_far),
           "cross_validated": cross_validate(s, rule, cfg, max_far, groups=groups),
           "at_bounds": {f"{b:g}": best_setting(s, rule, cfg, b) for b in sorted({*FAR_BOUNDS, max_far})}}
    if rule in SIGNALS:
        values = s.signal(rule)
        out["cases_with_score"] = int(np.isfinite(values).sum())
        out["roc_auc"] = roc_auc(np.where(np.isfinite(values), values, -np.inf), s.answerable)
        out["curve"] = curve(s, rule, cfg)
    return out


# -- evidence signals and the learned rule ------------------------------------------------------------------------

def evidence_report(s: Scores, cfg: GateConfig, max_far: float) -> dict:
    """Each evidence signal (:mod:`pipeline.gate.signals`): how many cases have a value, ROC-AUC, and the best
    point at false answers <= ``max_far`` of its own gate rule (:func:`best_setting`; every signal is one:
    ``rerank``, ``dense`` and the single-signal rules)."""
    out = {}
    for name, values in s.evidence().items():
        finite = np.isfinite(values)
        if not finite.any():
            out[name] = {"cases_with_score": 0, "roc_auc": None, "best": None}
            continue
        best = best_setting(s, name, cfg, max_far) if name in RULE_KEYS else None  # reader: the rerank rule reads it
        out[name] = {"cases_with_score": int(finite.sum()),
                     "roc_auc": roc_auc(np.where(finite, values, -np.inf), s.answerable),
                     "best": best and {"threshold": best[f"t_{name}"], **{k: best[k] for k in (
                         "answer_rate_answerable", "false_answer_rate_unanswerable")}}}
    return out


def with_reader(s: Scores) -> bool:
    """Whether these cases are the reader set's to fit: the reader scored every one of them."""
    return bool(s.inputs) and all(i.signals.reader is not None for i in s.inputs)


def _fit_gate(s: Scores, cfg: GateConfig, l2: float | None, reader: bool = False) -> tuple[GateConfig, float]:
    """(``cfg`` with the first coefficient set fitted on these cases, or with ``reader`` the reader set (the first
    set is then left as it is: it decides the runs without the reader, and these cases all had it); the L2 strength
    used: ``l2``, or when None the one :func:`pipeline.gate.learned.choose_l2` picks by cross-validation on these
    cases)."""
    values, _ = gate_learned.features([i.signals for i in s.inputs], reader=reader)
    if l2 is None:
        l2 = gate_learned.choose_l2(values, s.answerable)
    intercept, coefs = gate_learned.fit(values, s.answerable, l2)
    return replace(cfg, **gate_learned.settings(intercept, coefs, reader=reader)), l2


def fit_learned(s: Scores, cfg: GateConfig, max_far: float, k: int = 5, groups: Sequence[int] | None = None,
                l2: float | None = None) -> dict:
    """``workbench tune --fit``: the learned rule's coefficients and threshold fitted on these cases, and the
    fitting procedure k-fold cross-validated (coefficients AND threshold chosen on k-1 folds, applied to the
    held-out fold): the pooled held-out probabilities give the held-out trade-off curve and ROC-AUC. ``l2`` None:
    the L2 strength is chosen by an inner cross-validation on the cases each fit sees (so the outer folds stay
    held out from that choice too)."""
    reader = with_reader(s)
    held_p = np.full(len(s.ids), np.nan)
    answered = np.zeros(len(s.ids), dtype=bool)
    for held in folds(s.answerable, k, groups=groups):
        train = s.take(np.setdiff1d(np.arange(len(s.ids)), held))
        gate, _ = _fit_gate(train, cfg, l2, reader)
        best = best_setting(train.with_gate(gate), "learned", gate, max_far)
        test = s.take(held).with_gate(gate)
        held_p[held] = test.learned
        answered[held] = test.answers("learned", **{**thresholds_of(gate),
                                                    "t_learned": best["t_learned"] if best else np.inf})
    ar, far = rates(answered, s.answerable)
    gate, chosen = _fit_gate(s, cfg, l2, reader)
    fitted = s.with_gate(gate)
    pooled = replace(s, learned=held_p)
    # The threshold is read off the held-out probabilities: in-sample ones are over-confident, so a threshold
    # chosen on them lets more false answers through on new questions than it promises.
    best = best_setting(pooled, "learned", gate, max_far) or best_setting(fitted, "learned", gate, max_far)
    threshold = readable_threshold(best["t_learned"], fitted.learned) if best else None
    intercept, coefs = gate_learned.coefficients(gate, reader=reader)
    if threshold is not None:
        ar_in, far_in = rates(fitted.answers("learned", **{**thresholds_of(gate), "t_learned": threshold}),
                              s.answerable)
        best = {"answer_rate_answerable": float(ar_in), "false_answer_rate_unanswerable": float(far_in)}
        if reader:  # one threshold for both sets: move the reader set's operating point onto the shared threshold
            intercept = gate_learned.shift_intercept(intercept, threshold, cfg.confidence_threshold_learned)
            threshold = cfg.confidence_threshold_learned
    coefficients = gate_learned.settings(intercept, coefs, reader=reader)
    settings = [f"gate.{name}={value:g}" for name, value in coefficients.items()]
    if threshold is not None and not reader:
        settings.append(f"gate.confidence_threshold_learned={threshold:.6g}")
    return {"cases": len(s.ids), "folds": k, "grouped": groups is not None, "l2": chosen,
            "l2_chosen_by": "given" if l2 is not None else "cross-validation", "reader_set": reader,
            "coefficients": coefficients, "threshold": threshold,
            "in_sample": best and {"answer_rate_answerable": best["answer_rate_answerable"],
                                   "false_answer_rate_unanswerable": best["false_answer_rate_unanswerable"]},
            "cross_validated": {"answer_rate_answerable": float(ar), "false_answer_rate_unanswerable": float(far),
                                "roc_auc": roc_auc(np.where(np.isfinite(held_p), held_p, -np.inf), s.answerable)},
            "held_out_curve": curve(pooled, "learned", cfg), "settings": settings}


def gate_with(cfg: GateConfig, fit: dict) -> GateConfig:
    """``cfg`` with a :func:`fit_learned` result's coefficients and threshold applied."""
    extra = {} if fit.get("threshold") is None else {"confidence_threshold_learned": fit["threshold"]}
    return replace(cfg, **fit["coefficients"], **extra)


# -- heatmap grids ----------------------------------------------------------------------------------------------

def axis(scores: np.ndarray, n: int, current: float) -> np.ndarray:
    finite = scores[np.isfinite(scores)]
    points = np.quantile(finite, np.linspace(0.0, 1.0, n)) if len(finite) else np.array([])
    return np.unique(np.round(np.concatenate([points, [current]]), 6))


def grid(s: Scores, rule: str, x_key: str, y_key: str, axes: dict[str, np.ndarray], cfg: GateConfig) -> dict:
    """Answer / false-answer rates at every (x, y) pair, as lists of rows (y) of columns (x)."""
    ar, far = evaluate_grid(s, rule, {y_key: axes[y_key], x_key: axes[x_key]}, cfg)
    return {"rule": rule, "x": x_key, "y": y_key, "xs": axes[x_key].tolist(), "ys": axes[y_key].tolist(),
            "answer_rate_answerable": ar.tolist(), "false_answer_rate_unanswerable": far.tolist()}


def sweep(s: Scores, cfg: GateConfig, max_far: float = 0.05, grid_size: int = 20,
          groups: Sequence[int] | None = None) -> dict:
    """Everything the tune report shows, as plain data (``groups``: see :func:`folds`)."""
    available = s.available()
    rules = [*available, *(("fused_and_dense",) if {"fused", "dense"} <= set(available) else ())]
    axes = {k: axis(s.signal(_signal_of(k)), grid_size, getattr(cfg, FIELDS[k])) for k in FIELDS}
    return {"cases": len(s.ids), "answerable": int(s.answerable.sum()), "unanswerable": int((~s.answerable).sum()),
            "max_false_answer_rate": max_far,
            "current_gate": {"signal": cfg.signal, **thresholds_of(cfg), **current_rates(s, configured_rule(cfg), cfg)},
            "rules": {rule: rule_report(s, rule, cfg, max_far, groups) for rule in rules},
            "evidence": evidence_report(s, cfg, max_far),
            "grids": {"auto": grid(s, "auto", "t_fused", "t_rerank", axes, cfg),
                      "fused_and_dense": grid(s, "fused_and_dense", "t_fused", "t_dense", axes, cfg)}}


def readable_threshold(threshold: float, scores: np.ndarray) -> float:
    """The shortest decimal in the same gap between observed ``scores`` as ``threshold``: it decides every one of
    those cases the same way (``score >= threshold``) and never sits on a score."""
    finite = scores[np.isfinite(scores)]
    below, above = finite[finite < threshold], finite[finite >= threshold]
    lo = below.max() if len(below) else -np.inf
    hi = above.min() if len(above) else np.inf
    for digits in range(1, 12):
        short = round(float(threshold), digits)
        if lo < short < hi:
            return short
    return float(threshold)


def at_setting(s: Scores, rule: str, thresholds: dict, cfg: GateConfig) -> dict:
    """Answer / false-answer rates of one setting on these cases (thresholds not given: as configured)."""
    ar, far = rates(s.answers(rule, **{**thresholds_of(cfg), **thresholds}), s.answerable)
    return {"cases": len(s.ids), "answerable": int(s.answerable.sum()), "unanswerable": int((~s.answerable).sum()),
            "answer_rate_answerable": None if np.isnan(ar) else float(ar),
            "false_answer_rate_unanswerable": None if np.isnan(far) else float(far)}


def recommend(report: dict, scores: Scores | None = None) -> dict:
    """The rule and thresholds that answer the most answerable cases within the false-answer bound.

    Every rule is a ``gate.signal`` option; ``fused_and_dense`` is also what ``auto`` applies when the
    reranker did not run, so when it wins without rerank scores the settings keep ``gate.signal=auto``.
    Given the ``scores`` the sweep ran on, each threshold is made readable (:func:`readable_threshold`).
    """
    rules = report["rules"]
    found = [(name, r["best"]) for name, r in rules.items() if r.get("best")]
    if not found:
        return {"signal": None, "why": "no rule reaches the false-answer bound at any threshold"}
    name, best = max(found, key=lambda nb: (nb[1]["answer_rate_answerable"],
                                            -nb[1]["false_answer_rate_unanswerable"]))
    keys = RULE_KEYS[name]
    chosen = {k: readable_threshold(best[k], scores.signal(_signal_of(k))) if scores is not None else best[k]
              for k in keys}
    signal = "auto" if name == "learned" and "rerank" not in rules else name
    out = {"signal": signal, "rule": name, "answer_rate_answerable": best["answer_rate_answerable"],
           "false_answer_rate_unanswerable": best["false_answer_rate_unanswerable"],
           "cross_validated": rules[name]["cross_validated"],
           "settings": [f"gate.signal={signal}", *(f"gate.{FIELDS[k]}={chosen[k]:.6g}" for k in keys)]}
    out.update(chosen)
    if len(keys) == 1:
        out["threshold"] = chosen[keys[0]]
    return out
