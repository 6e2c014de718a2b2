"""The gate's rule, once: answer or abstain from the scores and their thresholds, vectorised.

The gate compares one score with one threshold and answers when ``score >= threshold``. Which score
(``gate.signal``):

- ``auto`` (default): ``learned`` — which, where the reader scored sentences, is the learned rule's reader set,
  reading the reader's best sentence score beside the similarity signals (:mod:`pipeline.gate.learned`); where no
  learned score was given (callers from before the learned rule), the top rerank score where the reranker ran, else
  ``fused_and_dense``. (Until the reader came, ``auto`` read the rerank score alone: on the golden set's tune part
  the reader's score alone separates answerable questions less well than the signals combined, BENCHMARKS.md.) A
  passage cross-encoder from the hub is read with ``signal=rerank``. The seed's fallback — the fused
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
- ``learned``: the learned rule's probability (:mod:`pipeline.gate.learned`, a logistic model over the evidence
  signals) against ``confidence_threshold_learned``; falls back to ``fused_and_dense`` where there is none.
- one evidence signal alone (:data:`EVIDENCE`: ``window``, ``coverage``, ``critical``, ``bm25``,
  ``dense_margin``, ``fused_norm``; :mod:`pipeline.gate.signals`): that signal against its own
  ``confidence_threshold_<name>``. There is no fallback: a case without a value for the signal abstains
  (a signal that could not be measured is no evidence that the corpus states the answer, and reading another
  scale instead would answer on a threshold nobody chose for it).

Whatever the signal, a case without a fused score (retrieval found no candidates) abstains.

Inputs are arrays, one entry per case on the last axis, NaN where a scale has no score (the reranker did
not run, the dense leg returned nothing, no candidates, a signal not measured). The evidence signals come as a
mapping ``name -> array`` with their thresholds as a mapping ``name -> threshold``. Thresholds are scalars or
arrays broadcast against the cases, so one call decides a whole threshold grid (``workbench.sweep``) and a
one-element call decides one trace (:func:`pipeline.gate.stage.decide`). Pure NumPy: no I/O, no models, no
configuration.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
from numpy.typing import ArrayLike

EVIDENCE = ("window", "coverage", "critical", "bm25", "dense_margin", "fused_norm")  # single-signal rules
SIGNALS = ("auto", "rerank", "fused", "dense", "fused_and_dense", "learned", *EVIDENCE)
_SCALES = np.array(["fused", "rerank", "dense", "fused_and_dense", "learned"])


def _reads(signal: str, has_rerank: np.ndarray, has_dense: np.ndarray, has_learned: np.ndarray
           ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Where each case reads (rerank, dense alone, fused and dense, learned); every other case reads fused."""
    none = np.zeros((has_rerank & has_dense & has_learned).shape, dtype=bool)
    if signal == "auto":
        rerank = ~has_learned & has_rerank
        return rerank, none, ~has_learned & ~has_rerank & has_dense, has_learned | none
    if signal == "rerank":
        return has_rerank | none, none, none, none
    if signal == "fused":
        return none, none, none, none
    if signal == "dense":
        return none, has_dense | none, none, none
    if signal == "fused_and_dense":
        return none, none, has_dense | none, none
    if signal == "learned":
        return none, none, ~has_learned & has_dense, has_learned | none
    raise ValueError(f"unknown gate signal {signal!r}; expected one of {', '.join(SIGNALS)}")


def scale(signal: str, has_rerank: ArrayLike, has_dense: ArrayLike, has_learned: ArrayLike = False) -> np.ndarray:
    """The scale each case is read on: ``rerank``, ``fused``, ``dense``, ``fused_and_dense``, ``learned``, or
    the evidence signal itself for a single-signal rule (every case, with a value or not: no fallback)."""
    if signal in EVIDENCE:
        shape = np.broadcast(np.asarray(has_rerank), np.asarray(has_dense), np.asarray(has_learned)).shape
        return np.full(shape, signal)
    reads_rerank, reads_dense, reads_both, reads_learned = _reads(
        signal, np.asarray(has_rerank, dtype=bool), np.asarray(has_dense, dtype=bool),
        np.asarray(has_learned, dtype=bool))
    return _SCALES[reads_rerank * 1 + reads_dense * 2 + reads_both * 3 + reads_learned * 4]  # disjoint masks


def answers(rerank: ArrayLike, fused: ArrayLike, dense: ArrayLike, signal: str,
            t_rerank: ArrayLike, t_fused: ArrayLike, t_dense: ArrayLike,
            learned: ArrayLike | None = None, t_learned: ArrayLike = 0.5,
            evidence: Mapping[str, ArrayLike] | None = None,
            t_evidence: Mapping[str, ArrayLike] | None = None) -> np.ndarray:
    """``True`` where the gate answers: every condition of the case's scale holds (``score >= threshold``).

    ``rerank``/``fused``/``dense``/``learned``: scores per case (NaN: no score on that scale; ``learned`` None:
    none for any case). ``evidence``: evidence signal name -> values per case (NaN, or a name not given: not
    measured, which abstains under that signal's rule). ``t_*`` and ``t_evidence``'s values: thresholds,
    broadcast against the cases (cases on the last axis), e.g. shapes ``(n_fused, 1, 1)`` and ``(n_dense, 1)``
    for a grid. The result has the broadcast shape. A single-signal rule without its threshold in
    ``t_evidence`` is a caller's error (``ValueError``).
    """
    rerank, fused, dense = (np.asarray(a, dtype=np.float64) for a in (rerank, fused, dense))
    if signal in EVIDENCE:
        if t_evidence is None or signal not in t_evidence:
            raise ValueError(f"gate.signal={signal} needs its threshold: t_evidence[{signal!r}]")
        given = (evidence or {}).get(signal)
        values = np.full(fused.shape, np.nan) if given is None else np.asarray(given, dtype=np.float64)
        # NaN compares False: a signal not measured never answers
        answered = ~np.isnan(fused) & (values >= np.asarray(t_evidence[signal], dtype=np.float64))
        # the other rules' thresholds still shape the result, as they do for every rule
        return answered & np.ones(np.broadcast_shapes(*(np.shape(t) for t in (t_rerank, t_fused, t_dense,
                                                                               t_learned))), dtype=bool)
    learned = np.full(fused.shape, np.nan) if learned is None else np.asarray(learned, dtype=np.float64)
    reads_rerank, reads_dense, reads_both, reads_learned = _reads(signal, ~np.isnan(rerank), ~np.isnan(dense),
                                                                  ~np.isnan(learned))
    by_fused, by_dense = fused >= t_fused, dense >= t_dense  # NaN compares False: no score never passes
    answered = np.where(reads_rerank, rerank >= t_rerank,
                        np.where(reads_learned, learned >= t_learned,
                                 np.where(reads_dense, by_dense, np.where(reads_both, by_fused & by_dense,
                                                                          by_fused))))
    return ~np.isnan(fused) & answered
