"""The gate's rule, once: answer or abstain from three scores and three thresholds, vectorised.

The gate compares one score with one threshold and answers when ``score >= threshold``. Which score
(``gate.signal``):

- ``auto`` (default): the top rerank score (sigmoid, [0, 1]) against ``confidence_threshold_rerank`` where
  the reranker ran (the design's seed rule); otherwise ``fused_and_dense``. The seed's fallback — the fused
  score alone against 0.015 — cannot abstain: whatever the dense leg ranks first already scores
  1/61 ~ 0.0164, and the dense leg always returns something. How well each score alone and both together
  separate answerable from unanswerable questions — why, without a cross-encoder, the gate asks for both —
  is measured in BENCHMARKS.md ("Golden-set evaluation").
- ``rerank``: the same, but where there is no rerank score it falls back to the fused score alone.
- ``fused``: the fused score of fused rank 1, even when the reranker ran. An RRF score measures rank
  agreement between the legs more than relevance (:data:`pipeline.trace.FUSED_SCALE_NOTE`).
- ``dense``: the cosine of the best dense hit (dense rank 1) against ``confidence_threshold_dense``; falls
  back to fused where the dense leg returned nothing.
- ``fused_and_dense``: the top fused score reaches ``confidence_threshold_fused`` AND the best dense cosine
  reaches ``confidence_threshold_dense``; falls back to fused alone where the dense leg returned nothing.

Whatever the signal, a case without a fused score (retrieval found no candidates) abstains.

Inputs are arrays, one entry per case on the last axis, NaN where a scale has no score (the reranker did
not run, the dense leg returned nothing, no candidates). Thresholds are scalars or arrays broadcast against
the cases, so one call decides a whole threshold grid (``workbench.sweep``) and a one-element call decides
one trace (:func:`pipeline.gate.stage.decide`). Pure NumPy: no I/O, no models, no configuration.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

SIGNALS = ("auto", "rerank", "fused", "dense", "fused_and_dense")
_SCALES = np.array(["fused", "rerank", "dense", "fused_and_dense"])


def _reads(signal: str, has_rerank: np.ndarray, has_dense: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Where each case reads (rerank, dense alone, fused and dense); every other case reads fused alone."""
    none = np.zeros((has_rerank & has_dense).shape, dtype=bool)
    if signal == "auto":
        return has_rerank | none, none, ~has_rerank & has_dense
    if signal == "rerank":
        return has_rerank | none, none, none
    if signal == "fused":
        return none, none, none
    if signal == "dense":
        return none, has_dense | none, none
    if signal == "fused_and_dense":
        return none, none, has_dense | none
    raise ValueError(f"unknown gate signal {signal!r}; expected one of {', '.join(SIGNALS)}")


def scale(signal: str, has_rerank: ArrayLike, has_dense: ArrayLike) -> np.ndarray:
    """The scale each case is read on: ``rerank``, ``fused``, ``dense`` or ``fused_and_dense`` (str array)."""
    reads_rerank, reads_dense, reads_both = _reads(signal, np.asarray(has_rerank, dtype=bool),
                                                   np.asarray(has_dense, dtype=bool))
    return _SCALES[reads_rerank * 1 + reads_dense * 2 + reads_both * 3]  # the masks are disjoint


def answers(rerank: ArrayLike, fused: ArrayLike, dense: ArrayLike, signal: str,
            t_rerank: ArrayLike, t_fused: ArrayLike, t_dense: ArrayLike) -> np.ndarray:
    """``True`` where the gate answers: every condition of the case's scale holds (``score >= threshold``).

    ``rerank``/``fused``/``dense``: scores per case (NaN: no score on that scale). ``t_*``: thresholds,
    broadcast against the cases (cases on the last axis), e.g. shapes ``(n_fused, 1, 1)`` and
    ``(n_dense, 1)`` for a grid. The result has the broadcast shape.
    """
    rerank, fused, dense = (np.asarray(a, dtype=np.float64) for a in (rerank, fused, dense))
    reads_rerank, reads_dense, reads_both = _reads(signal, ~np.isnan(rerank), ~np.isnan(dense))
    by_fused, by_dense = fused >= t_fused, dense >= t_dense  # NaN compares False: no score never passes
    answered = np.where(reads_rerank, rerank >= t_rerank,
                        np.where(reads_dense, by_dense, np.where(reads_both, by_fused & by_dense, by_fused)))
    return ~np.isnan(fused) & answered
