"""The learned rule: a small logistic model over the evidence signals (:mod:`pipeline.gate.signals`).

    p = sigmoid(intercept + sum_i coefficient_i * signal_i)

The coefficients are named fields of :class:`pipeline.config.GateConfig` (``learned_intercept``,
``learned_window``, ...), so they round-trip through JSON and ``--set`` like any setting, and the gate records
each decision's per-signal contribution (``coefficient * value``). A signal that cannot be measured for a run
is imputed: ``window`` by the dense cosine (the same encoder on the whole chunk), every other by 0 (no
evidence); the contribution says so (``imputed``).

Two coefficient sets. ``learned_*`` reads :data:`FEATURES`; ``learned_r_*`` (the reader set) reads
:data:`READER_FEATURES`, the same signals plus the reader's best sentence score, and decides every run where the
reader scored sentences, once fitted (a reader set of all zeros is "not fitted": the first set decides). A run
without the reader (rerank off, the model missing, a passage cross-encoder) is decided by the first set, so the rule
never reads a missing reader score as "no answer". Both sets share ``confidence_threshold_learned``: fitting the
reader set shifts its intercept so that its chosen operating point sits at that threshold (:func:`shift_intercept`).

:func:`fit` is L2-regularised logistic regression (scikit-learn's ``LogisticRegression`` on standardised signals,
mapped back to raw coefficients); :func:`choose_l2` picks its strength by cross-validated log-loss
(``LogisticRegressionCV``). No I/O.
"""

from __future__ import annotations

import warnings
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
READER_FEATURES = (*FEATURES, "reader")
READER_FITTED = (*FITTED, "reader")


def reader_fitted(cfg: GateConfig) -> bool:
    return cfg.learned_r_reader != 0.0


def uses_reader(signals: EvidenceSignals, cfg: GateConfig) -> bool:
    """Whether this run is decided by the reader set: the reader scored it and that set is fitted."""
    return signals.reader is not None and reader_fitted(cfg)


def _prefix(reader: bool) -> str:
    return "learned_r_" if reader else "learned_"


def names(reader: bool = False) -> tuple[str, ...]:
    return READER_FEATURES if reader else FEATURES


def coefficients(cfg: GateConfig, reader: bool = False) -> tuple[float, np.ndarray]:
    """(intercept, coefficients in :data:`FEATURES` or :data:`READER_FEATURES` order) from the config."""
    prefix = _prefix(reader)
    return (getattr(cfg, f"{prefix}intercept"),
            np.array([getattr(cfg, f"{prefix}{f}") for f in names(reader)], dtype=np.float64))


def settings(intercept: float, coefs: Sequence[float], digits: int = 4, reader: bool = False) -> dict[str, float]:
    """The config fields (``learned_*``, or ``learned_r_*`` for the reader set) for a fitted model, rounded."""
    prefix = _prefix(reader)
    out = {f"{prefix}intercept": round(float(intercept), digits)}
    out.update({f"{prefix}{f}": round(float(c), digits) for f, c in zip(names(reader), coefs, strict=True)})
    return out


def shift_intercept(intercept: float, chosen: float, shared: float) -> float:
    """The intercept under which ``p >= shared`` decides as ``p >= chosen`` did: logit(shared) - logit(chosen)."""
    def logit_of(p: float) -> float:
        p = min(max(p, 1e-9), 1 - 1e-9)
        return float(np.log(p / (1 - p)))

    return intercept + logit_of(shared) - logit_of(chosen)


def features(signals: Sequence[EvidenceSignals], reader: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """(values, imputed) matrices, one row per run, columns in :data:`FEATURES` (or READER_FEATURES) order."""
    cols = names(reader)
    raw = np.array([[np.nan if getattr(s, f) is None else float(getattr(s, f)) for f in cols] for s in signals],
                   dtype=np.float64).reshape(len(signals), len(cols))
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
    """The learned rule's probability per run (what :func:`pipeline.gate.rule.answers` compares): the reader set
    where :func:`uses_reader`, the first set elsewhere."""
    values, _ = features(signals)
    intercept, coefs = coefficients(cfg)
    out = probability(values, intercept, coefs)
    with_reader = np.array([uses_reader(s, cfg) for s in signals], dtype=bool)
    if with_reader.any():
        r_values, _ = features([s for s, r in zip(signals, with_reader, strict=True) if r], reader=True)
        r_intercept, r_coefs = coefficients(cfg, reader=True)
        out[with_reader] = probability(r_values, r_intercept, r_coefs)
    return out


def contributions(signals: EvidenceSignals, cfg: GateConfig) -> tuple[SignalContribution, ...]:
    """Each signal's term of the logit for one run, the intercept first (the reader set's when it decides)."""
    reader = uses_reader(signals, cfg)
    values, imputed = features([signals], reader=reader)
    intercept, coefs = coefficients(cfg, reader=reader)
    return (SignalContribution("intercept", 1.0, intercept, intercept),
            *(SignalContribution(f, float(values[0, i]), float(coefs[i]), float(coefs[i] * values[0, i]),
                                 bool(imputed[0, i])) for i, f in enumerate(names(reader))))


L2_GRID = (0.01, 0.03, 0.1, 0.3, 1.0, 3.0, 10.0, 30.0, 100.0)   # the strengths choose_l2 tries


def choose_l2(values: np.ndarray, labels: np.ndarray, folds: int = 5, fitted: Sequence[str] | None = None) -> float:
    """The L2 strength of :data:`L2_GRID` with the best cross-validated log-loss on these cases (stratified
    ``folds``-fold; scikit-learn's ``LogisticRegressionCV`` on the standardised signals :func:`fit` uses)."""
    from sklearn.linear_model import LogisticRegressionCV

    x, y, _, _ = _design(values, labels, fitted)
    mean, scale = x.mean(axis=0), x.std(axis=0)
    scale[scale < 1e-9] = 1.0
    folds = max(2, min(folds, int(y.sum()), int(len(y) - y.sum())))
    with warnings.catch_warnings():   # scikit-learn 1.9 announces changes to defaults this call does not rely on
        warnings.simplefilter("ignore", FutureWarning)
        model = LogisticRegressionCV(Cs=[1.0 / v for v in L2_GRID], cv=folds, scoring="neg_log_loss", tol=1e-8,
                                     max_iter=10_000).fit((x - mean) / scale, y.astype(int))
    return float(1.0 / model.C_[0])


def _design(values: np.ndarray, labels: np.ndarray, fitted: Sequence[str] | None):
    """(the fitted columns, labels, every column's name, the fitted columns' indices), checked."""
    x_all = np.asarray(values, dtype=np.float64)
    y = np.asarray(labels, dtype=np.float64)
    cols = READER_FEATURES if x_all.ndim == 2 and x_all.shape[1] == len(READER_FEATURES) else FEATURES
    if x_all.ndim != 2 or x_all.shape[0] != y.shape[0] or x_all.shape[1] != len(cols):
        raise ValueError(f"fit needs one row of {len(FEATURES)} (or {len(READER_FEATURES)} with the reader) signals "
                         f"per label; got {x_all.shape} and {y.shape}")
    default = READER_FITTED if cols is READER_FEATURES else FITTED
    use = [cols.index(f) for f in (default if fitted is None else fitted)]
    if not (0 < y.sum() < len(y)):
        raise ValueError("fit needs both answerable and unanswerable cases")
    return x_all[:, use], y, cols, use


def fit(values: np.ndarray, labels: np.ndarray, l2: float = 1.0,
        fitted: Sequence[str] | None = None) -> tuple[float, np.ndarray]:
    """L2-regularised logistic regression (intercept not penalised): (intercept, raw coefficients).

    ``values``: one row per case (:func:`features`, columns in :data:`FEATURES` order); ``labels``: True where the
    question is answerable; ``fitted``: the features to fit (default :data:`FITTED`; the others get 0).
    """
    x, y, cols, use = _design(values, labels, fitted)
    mean, scale = x.mean(axis=0), x.std(axis=0)
    scale[scale < 1e-9] = 1.0
    from sklearn.linear_model import LogisticRegression

    # sklearn minimises C * sum(log-loss) + |w|^2 / 2 with the intercept unpenalised: C = 1 / l2
    model = LogisticRegression(C=1.0 / l2, tol=1e-10, max_iter=10_000).fit((x - mean) / scale, y.astype(int))
    w = np.concatenate([model.intercept_, model.coef_[0]])
    coefs = np.zeros(len(cols))
    coefs[use] = w[1:] / scale
    return float(w[0] - (coefs[use] * mean).sum()), coefs
