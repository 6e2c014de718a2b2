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


def roc_auc_ci(scores: Sequence[float], positive: Sequence[bool], resamples: int = 2000, seed: int = 0,
               confidence: float = 0.95) -> tuple[float, float] | None:
    """A percentile bootstrap interval of :func:`roc_auc`, resampling positives and negatives separately (each class
    keeps its size, so every resample has both). Each resample's AUC is the Mann-Whitney U of the two classes over
    their product of sizes (ties count one half), from the mid-ranks of all resamples in one vectorised
    ``scipy.stats.rankdata`` call (scikit-learn scores one resample per call and ``mannwhitneyu`` also computes a
    p-value per resample, both too slow for the app's interactive tables). None if one class is empty."""
    s = np.asarray(scores, dtype=np.float64)
    y = np.asarray(positive, dtype=bool)
    if roc_auc(s, y) is None:          # validates shapes and NaN the same way
        return None
    from scipy.stats import rankdata

    finite = s[np.isfinite(s)]
    low, high = (float(finite.min()), float(finite.max())) if finite.size else (0.0, 0.0)
    s = np.where(s == -np.inf, low - 1.0, np.where(s == np.inf, high + 1.0, s))
    pos, neg = s[y], s[~y]
    rng = np.random.default_rng(seed)
    a = pos[rng.integers(0, pos.size, size=(resamples, pos.size))]
    b = neg[rng.integers(0, neg.size, size=(resamples, neg.size))]
    ranks = rankdata(np.concatenate([a, b], axis=1), axis=1)
    u = ranks[:, :pos.size].sum(axis=1) - pos.size * (pos.size + 1) / 2
    aucs = u / (pos.size * neg.size)
    tail = 100 * (1 - confidence) / 2
    return float(np.percentile(aucs, tail)), float(np.percentile(aucs, 100 - tail))


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


# -- paired comparison of two binary outcomes on the same cases -----------------------------------------------

from dataclasses import dataclass  # noqa: E402  (the paired block's own import, kept beside it)


@dataclass(frozen=True)
class PairedTest:
    """Two arms' yes/no outcomes on the same ``n`` cases (:func:`paired_binary`): the four cells of the paired
    table, the difference of the rates (A minus B) with its 95 % paired-bootstrap interval, and the exact McNemar
    p-value on the discordant cases."""
    n: int
    a_only: int                 # A yes, B no
    b_only: int                 # B yes, A no
    both: int
    neither: int
    difference_ci95: tuple[float, float] | None     # None without cases
    p_value: float              # exact McNemar (two-sided binomial test on the discordant cases); 1.0 without any
    resamples: int

    @property
    def rate_a(self) -> float | None:
        return rate(self.a_only + self.both, self.n)

    @property
    def rate_b(self) -> float | None:
        return rate(self.b_only + self.both, self.n)

    @property
    def difference(self) -> float | None:
        return None if not self.n else (self.a_only - self.b_only) / self.n

    @property
    def discordant(self) -> int:
        return self.a_only + self.b_only

    def ci_a(self) -> tuple[float, float]:
        return wilson(self.a_only + self.both, self.n)

    def ci_b(self) -> tuple[float, float]:
        return wilson(self.b_only + self.both, self.n)

    def to_dict(self) -> dict:
        """Plain data for a results file (the rates and the difference included)."""
        return {"n": self.n, "a_only": self.a_only, "b_only": self.b_only, "both": self.both, "neither": self.neither,
                "rate_a": self.rate_a, "rate_b": self.rate_b, "difference": self.difference,
                "difference_ci95": None if self.difference_ci95 is None else list(self.difference_ci95),
                "mcnemar_p": self.p_value, "resamples": self.resamples}

    @classmethod
    def from_dict(cls, data: dict) -> PairedTest:
        ci = data.get("difference_ci95")
        return cls(n=data["n"], a_only=data["a_only"], b_only=data["b_only"], both=data["both"],
                   neither=data["neither"], difference_ci95=None if ci is None else (float(ci[0]), float(ci[1])),
                   p_value=float(data["mcnemar_p"]), resamples=int(data.get("resamples", 0)))

    def describe(self) -> str:
        """``+8.0 points [2.0 to 14.0], McNemar p 0.0078 (8 vs 0 discordant)``: A minus B."""
        if not self.n or self.difference_ci95 is None:
            return "no paired cases"
        low, high = self.difference_ci95
        return (f"{100 * self.difference:+.1f} points [{100 * low:+.1f} to {100 * high:+.1f}], McNemar p "
                f"{self.p_value:.2g} ({self.a_only} vs {self.b_only} discordant)")


def paired_binary(a: Sequence[bool], b: Sequence[bool], resamples: int = 2000, seed: int = 0,
                  groups: Sequence[str] | None = None, confidence: float = 0.95) -> PairedTest:
    """The paired comparison of outcomes ``a`` and ``b`` (one pair per case, same order): the exact McNemar test
    (SciPy ``binomtest`` on the discordant pairs, McNemar 1947; exact rather than chi-square because discordant
    counts here are small) and a percentile bootstrap interval of the mean difference ``a - b`` resampling cases,
    or whole ``groups`` when several pairs belong to one case (:func:`cluster_bootstrap`). The bootstrap is NumPy:
    SciPy's ``bootstrap`` has no clustered resampling, and this keeps one resampling scheme for both."""
    x = np.asarray(a, dtype=bool)
    y = np.asarray(b, dtype=bool)
    if x.shape != y.shape or x.ndim != 1:
        raise ValueError(f"paired_binary needs one outcome per case in each arm; got {x.shape} and {y.shape}")
    n = int(x.size)
    a_only, b_only = int((x & ~y).sum()), int((y & ~x).sum())
    both, neither = int((x & y).sum()), int((~x & ~y).sum())
    from scipy.stats import binomtest

    p = float(binomtest(a_only, a_only + b_only).pvalue) if a_only + b_only else 1.0
    diff = x.astype(np.float64) - y.astype(np.float64)
    if not n:
        ci = None
    elif groups is not None:
        ci = cluster_bootstrap(groups, lambda idx: float(diff[idx].mean()), resamples, seed, confidence)
    else:
        picks = np.random.default_rng(seed).integers(0, n, size=(resamples, n))
        values = diff[picks].mean(axis=1)
        tail = 100 * (1 - confidence) / 2
        ci = float(np.percentile(values, tail)), float(np.percentile(values, 100 - tail))
    return PairedTest(n=n, a_only=a_only, b_only=b_only, both=both, neither=neither, difference_ci95=ci,
                      p_value=p, resamples=resamples)
