"""Pure metric functions shared by the evaluation, the sweep and the benchmarks.

- **Retrieval** over a document ranking (distinct documents in the order of their best chunk):
  hit@k ("any expected document in the top k" — the golden set lists every document that states an answer,
  so a fraction of all of them is capped below 1 for facts repeated across the corpus; both are given),
  recall@k as that fraction, and the reciprocal rank of the first expected document. The same recall and
  :func:`ndcg_at_k` serve a passage (chunk) ranking against a set of relevant chunks, and SciFact's graded
  judgements.
- **Paired comparisons** of two settings on the same cases (:func:`paired_difference`): the mean difference with a
  bootstrap interval over cases and the Wilcoxon signed-rank test (SciPy).
- **Rates** return ``None`` when the denominator is empty, never a made-up 0 or 1.
- **ROC-AUC** from scikit-learn's ``roc_auc_score`` (ties count one half): the probability that a random positive
  scores above a random negative (Hanley & McNeil, Radiology 1982). A NaN score is an error, not a number.
- **Percentiles** by linear interpolation (numpy's default), for latency p50/p95.
- **Intervals** for a proportion: the Wilson score interval (no continuity correction; Wilson 1927, Newcombe 1998
  method 3) from SciPy's ``binomtest(...).proportion_ci``, not re-derived here.
  For a statistic over clustered rows (several evidence pairs per claim), a percentile bootstrap that resamples
  whole clusters (:func:`cluster_bootstrap`; Efron & Tibshirani 1993, ch. 13, resampling the independent units).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import numpy as np


def document_ranking(chunk_doc_ids: Iterable[str]) -> list[str]:
    """Chunk ranking → document ranking: a document ranks at its best chunk."""
    return list(dict.fromkeys(chunk_doc_ids))


def hit_at_k(ranked_docs: Sequence[str], expected: Iterable[str], k: int = 10) -> bool:
    wanted = set(expected)
    return any(d in wanted for d in ranked_docs[:k])


def recall_at_k(ranked_docs: Sequence[str], expected: Iterable[str], k: int = 10) -> float | None:
    wanted = set(expected)
    if not wanted:
        return None
    return len(wanted & set(ranked_docs[:k])) / len(wanted)


def reciprocal_rank(ranked_docs: Sequence[str], expected: Iterable[str], k: int | None = None) -> float:
    wanted = set(expected)
    for rank, doc_id in enumerate(ranked_docs[:k] if k else ranked_docs, 1):
        if doc_id in wanted:
            return 1.0 / rank
    return 0.0


def ndcg_at_k(ranked: Sequence[str], gains: Mapping[str, float] | Iterable[str], k: int = 10) -> float | None:
    """nDCG@k with linear gains, ``gain / log2(rank + 1)`` (Järvelin & Kekäläinen, TOIS 2002; trec_eval's
    ``ndcg_cut`` and BEIR use the same form): ``gains`` maps an id to its graded relevance, or is a plain collection
    of relevant ids (gain 1 each). An id ranked twice counts once, at its first rank. None when nothing is relevant
    (the ideal ranking scores 0), so a caller decides what a query without a relevant item counts as."""
    graded = dict(gains) if isinstance(gains, Mapping) else dict.fromkeys(gains, 1.0)
    ideal = sorted((g for g in graded.values() if g > 0), reverse=True)[:k]
    idcg = sum(g / np.log2(rank + 1) for rank, g in enumerate(ideal, 1))
    if idcg <= 0:
        return None
    dcg = sum(graded.get(item, 0) / np.log2(rank + 1)
              for rank, item in enumerate(dict.fromkeys(ranked[:k]), 1))
    return float(dcg / idcg)


def paired_difference(before: Sequence[float], after: Sequence[float], resamples: int = 10000,
                      seed: int = 0, confidence: float = 0.95) -> dict:
    """``after`` minus ``before`` on the same cases (one value per case from each arm): the mean difference with a
    percentile bootstrap interval resampling cases (SciPy's ``bootstrap``), the cases better / worse / tied, and the
    two-sided Wilcoxon signed-rank p (SciPy; tied cases dropped, its default; 1.0 when every case ties)."""
    from scipy.stats import bootstrap, wilcoxon

    a = np.asarray(before, dtype=np.float64)
    b = np.asarray(after, dtype=np.float64)
    if a.shape != b.shape or a.size == 0:
        raise ValueError(f"paired_difference needs one value per case from each arm; got {a.shape} and {b.shape}")
    diff = b - a
    if np.ptp(diff) == 0:   # a constant difference: every resample has the same mean
        low = high = float(diff[0])
    else:
        ci = bootstrap((diff,), np.mean, n_resamples=resamples, confidence_level=confidence, method="percentile",
                       random_state=np.random.default_rng(seed)).confidence_interval
        low, high = float(ci.low), float(ci.high)
    nonzero = diff[diff != 0]
    return {"cases": int(diff.size), "mean_difference": float(diff.mean()), "interval": [low, high],
            "better": int((diff > 0).sum()), "worse": int((diff < 0).sum()), "tied": int((diff == 0).sum()),
            "wilcoxon_p": float(wilcoxon(nonzero).pvalue) if nonzero.size else 1.0,
            "resamples": resamples, "seed": seed}


def rate(numerator: int, denominator: int) -> float | None:
    return numerator / denominator if denominator else None


def mean(values: Iterable[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return sum(known) / len(known) if known else None


def percentile(values: Sequence[float], q: float) -> float | None:
    return float(np.percentile(np.asarray(values, dtype=np.float64), q)) if len(values) else None


def roc_auc(scores: Sequence[float], positive: Sequence[bool]) -> float | None:
    """Area under the ROC curve of ``scores`` separating ``positive`` from the rest; None if one class is empty.

    Missing scores must be mapped by the caller (e.g. to -inf: "no evidence at all" ranks lowest).
    """
    s = np.asarray(scores, dtype=np.float64)
    y = np.asarray(positive, dtype=bool)
    if s.shape != y.shape:
        raise ValueError(f"roc_auc needs one score per label; got {s.shape} and {y.shape}")
    if np.isnan(s).any():
        raise ValueError("roc_auc got a NaN score: map a missing score to -inf (no evidence) before calling")
    if int(y.sum()) == 0 or int((~y).sum()) == 0:
        return None
    from sklearn.metrics import roc_auc_score

    # scikit-learn refuses infinities; -inf / +inf only need to rank below / above every finite score
    finite = s[np.isfinite(s)]
    low, high = (float(finite.min()), float(finite.max())) if finite.size else (0.0, 0.0)
    s = np.where(s == -np.inf, low - 1.0, np.where(s == np.inf, high + 1.0, s))
    return float(roc_auc_score(y, s))


def round_or_none(value: float | None, digits: int = 4) -> float | None:
    return None if value is None else round(float(value), digits)


def wilson(k: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """The Wilson score interval for ``k`` successes of ``n`` (SciPy); ``n = 0`` gives (0, 1): nothing is known."""
    if n == 0:
        return 0.0, 1.0
    from scipy.stats import binomtest

    ci = binomtest(k, n).proportion_ci(confidence_level=confidence, method="wilson")
    return (0.0 if k == 0 else float(ci.low)), (1.0 if k == n else float(ci.high))


def ratio_bootstrap(numerators: Sequence[float], denominators: Sequence[float], resamples: int = 2000, seed: int = 0,
                    confidence: float = 0.95) -> tuple[float, float] | None:
    """A percentile bootstrap interval of ``sum(numerators) / sum(denominators)`` resampling the units (one per
    position: an answer with its supported and total claims, or a case with its reciprocal rank and 1). Claims of
    one answer are not independent, so a claim-level rate is resampled by answer (Efron & Tibshirani 1993, ch. 13).
    None without units; resamples with a zero denominator are dropped. Vectorised NumPy: no library takes a
    ratio of sums over clustered units (scipy.stats.bootstrap resamples single observations)."""
    num = np.asarray(numerators, dtype=np.float64)
    den = np.asarray(denominators, dtype=np.float64)
    if num.size == 0 or num.shape != den.shape:
        return None
    picks = np.random.default_rng(seed).integers(0, num.size, size=(resamples, num.size))
    top, bottom = num[picks].sum(axis=1), den[picks].sum(axis=1)
    values = top[bottom > 0] / bottom[bottom > 0]
    if values.size == 0:
        return None
    tail = 100 * (1 - confidence) / 2
    return float(np.percentile(values, tail)), float(np.percentile(values, 100 - tail))


def cluster_bootstrap(groups: Sequence[str], statistic, resamples: int = 2000, seed: int = 0,
                      confidence: float = 0.95) -> tuple[float, float]:
    """A percentile bootstrap interval of ``statistic(indices)`` resampling whole groups with replacement (a claim's
    evidence pairs are not independent of each other: the unit drawn is the claim). ``statistic`` takes an index
    array into the original rows and returns a number; resamples where it returns None are dropped."""
    order: dict[str, list[int]] = {}
    for i, g in enumerate(groups):
        order.setdefault(g, []).append(i)
    members = [np.asarray(v) for v in order.values()]
    if not members:
        return 0.0, 1.0
    rng = np.random.default_rng(seed)
    values = []
    for _ in range(resamples):
        picks = rng.integers(0, len(members), size=len(members))
        value = statistic(np.concatenate([members[p] for p in picks]))
        if value is not None:
            values.append(value)
    tail = 100 * (1 - confidence) / 2
    return float(np.percentile(values, tail)), float(np.percentile(values, 100 - tail))
