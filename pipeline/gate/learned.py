"""The learned rule: a small logistic model over the evidence signals (:mod:`pipeline.gate.signals`).

    p = sigmoid(intercept + sum_i coefficient_i * signal_i)

The coefficients are named fields of :class:`pipeline.config.GateConfig` (``learned_intercept``,
``learned_window``, ...), so they round-trip through JSON and ``--set`` like any setting, and the gate records
each decision's per-signal contribution (``coefficient * value``). A signal that cannot be measured for a run
is imputed: ``window`` by the dense cosine (the same encoder on the whole chunk), every other by 0 (no
evidence); the contribution says so (``imputed``).

:func:`fit` is plain L2-regularised logistic regression (Newton's method on standardised signals, mapped back to
raw coefficients). Pure NumPy; no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from pipeline.config import GateConfig
from pipeline.trace import EvidenceSignals, SignalContribution

FEATURES = ("window", "coverage", "critical", "bm25", "dense", "dense_margin", "fused_norm")
# What :func:`fit` fits by default: ``fused_norm`` is recorded and can be given a coefficient, but is left out of
# fitting because dividing by the maximum fixes its range, not how ranks map to scores: the same two ranks score
# differently for another ``rrf_k``, and a rule that leans on it moves when k changes. Every other signal reads
# each leg's own top candidates and does not depend on k.
FITTED = tuple(f for f in FEATURES if f != "fused_norm")


def coefficients(cfg: GateConfig) -> tuple[float, np.ndarray]:
    """(intercept, coefficients in :data:`FEATURES` order) from the config."""
    return cfg.learned_intercept, np.array([getattr(cfg, f"learned_{f}") for f in FEATURES], dtype=np.float64)


def settings(intercept: float, coefs: Sequence[float], digits: int = 4) -> dict[str, float]:
    """The config fields (``learned_*``) for a fitted model, rounded for reading."""
    out = {"learned_intercept": round(float(intercept), digits)}
    out.update({f"learned_{f}": round(float(c), digits) for f, c in zip(FEATURES, coefs, strict=True)})
    return out


def features(signals: Sequence[EvidenceSignals]) -> tuple[np.ndarray, np.ndarray]:
    """(values, imputed) matrices, one row per run, columns in :data:`FEATURES` order."""
    raw = np.array([[np.nan if getattr(s, f) is None else float(getattr(s, f)) for f in FEATURES] for s in signals],
                   dtype=np.float64).reshape(len(signals), len(FEATURES))
    imputed = ~np.isfinite(raw)
    values = raw.copy()
    w, d = FEATURES.index("window"), FEATURES.index("dense")
    values[:, w] = np.where(imputed[:, w], values[:, d], values[:, w])
    values[~np.isfinite(values)] = 0.0
    return values, imputed


def logit(values: np.ndarray, intercept: float, coefs: np.ndarray) -> np.ndarray:
    """Row by row in a fixed order (not a BLAS product, whose rounding depends on the batch), so one run and the
    same run inside a sweep get the same probability to the last bit."""
    return intercept + np.sum(np.ascontiguousarray(values) * coefs, axis=-1)


def probability(values: np.ndarray, intercept: float, coefs: np.ndarray) -> np.ndarray:
    z = np.clip(logit(values, intercept, coefs), -500, 500)
    return 1.0 / (1.0 + np.exp(-z))


def probabilities(signals: Sequence[EvidenceSignals], cfg: GateConfig) -> np.ndarray:
    """The learned rule's probability per run (what :func:`pipeline.gate.rule.answers` compares)."""
    values, _ = features(signals)
    intercept, coefs = coefficients(cfg)
    return probability(values, intercept, coefs)


def contributions(signals: EvidenceSignals, cfg: GateConfig) -> tuple[SignalContribution, ...]:
    """Each signal's term of the logit for one run, the intercept first."""
    values, imputed = features([signals])
    intercept, coefs = coefficients(cfg)
    return (SignalContribution("intercept", 1.0, intercept, intercept),
            *(SignalContribution(f, float(values[0, i]), float(coefs[i]), float(coefs[i] * values[0, i]),
                                 bool(imputed[0, i])) for i, f in enumerate(FEATURES)))


def fit(values: np.ndarray, labels: np.ndarray, l2: float = 1.0, iterations: int = 50,
        fitted: Sequence[str] | None = None) -> tuple[float, np.ndarray]:
    """L2-regularised logistic regression (intercept not penalised): (intercept, raw coefficients).

    ``values``: one row per case (:func:`features`, columns in :data:`FEATURES` order); ``labels``: True where the
    question is answerable; ``fitted``: the features to fit (default :data:`FITTED`; the others get 0).
    """
    x_all = np.asarray(values, dtype=np.float64)
    y = np.asarray(labels, dtype=np.float64)
    if x_all.ndim != 2 or x_all.shape[0] != y.shape[0] or x_all.shape[1] != len(FEATURES):
        raise ValueError(f"fit needs one row of {len(FEATURES)} signals per label; got {x_all.shape} and {y.shape}")
    use = [FEATURES.index(f) for f in (FITTED if fitted is None else fitted)]
    x = x_all[:, use]
    if not (0 < y.sum() < len(y)):
        raise ValueError("fit needs both answerable and unanswerable cases")
    mean, scale = x.mean(axis=0), x.std(axis=0)
    scale[scale < 1e-9] = 1.0
    z = np.hstack([np.ones((len(x), 1)), (x - mean) / scale])
    w = np.zeros(z.shape[1])
    penalty = np.full(z.shape[1], l2)
    penalty[0] = 0.0
    for _ in range(iterations):
        p = 1.0 / (1.0 + np.exp(-np.clip(z @ w, -500, 500)))
        grad = z.T @ (p - y) + penalty * w
        hess = (z * (p * (1 - p))[:, None]).T @ z + np.diag(penalty) + 1e-9 * np.eye(len(w))
        step = np.linalg.solve(hess, grad)
        w -= step
        if np.abs(step).max() < 1e-10:
            break
    coefs = np.zeros(len(FEATURES))
    coefs[use] = w[1:] / scale
    return float(w[0] - (coefs[use] * mean).sum()), coefs
