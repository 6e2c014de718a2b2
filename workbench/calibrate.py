"""Label-free gate calibration (``workbench calibrate``): where does the gate's operating point land on THIS corpus?

The gate's thresholds were fitted on the demo golden set; on another corpus the same threshold answers a different
share of questions and lets through a different share of false answers, and nobody has labels to measure it. This
module estimates both from the corpus alone, with probes it writes itself (:mod:`workbench.probes`):

1. **Pseudo-questions** (answerable; the expected chunk is known). A live chunk is drawn (seeded), one of its prose
   sentences is chosen, and a contiguous run of its content words is left out as the "answer" (a cloze question,
   the way reading-comprehension questions restate a sentence without its answer); a wh-word opens what remains.
   So the question shares most, not all, of its sentence's words, and never quotes the answer.
2. **Unanswerable probes**, five kinds:

   - ``off-corpus``: general questions from a built-in pool on everyday topics (:data:`OFF_CORPUS`); one whose
     content words meet in a single chunk of this corpus is dropped (the corpus might answer it).
   - ``swapped-out``: a pseudo-question whose critical term (identifier, number, version, name; else its rarest
     word) is replaced by one the corpus never uses: digits changed, or a real word or name from a built-in pool
     that no chunk contains. The on-topic question about something the corpus lacks: ``v4.2`` when it has ``v3.1``.
   - ``swapped-in``: the same term replaced by a similarly rare word of the same shape from another document, so
     every word is the corpus's own but they never meet in one chunk (dropped when some chunk holds them all).
   - ``swapped-near``: the same term replaced by a word of the same shape from the source chunk itself, kept only
     when no sentence of the chunk holds all the probe's words: the adversarial unanswerable question, written
     against a passage with its own entities (the way SQuAD 2.0's were, Rajpurkar, Jia & Liang, ACL 2018).
   - ``answer-removed``: a pseudo-question asked unchanged, with its source chunk (and every chunk holding all its
     words and its answer) left out of the candidates: the on-topic question whose answer the corpus lacks while
     its neighbours stay. Searched through a view of the store that hides those chunks (:class:`_Hiding`).

3. **Replay**: every probe is searched once (retrieve, rerank, gate; no generation), the gate's scores are extracted
   with :func:`workbench.sweep.extract` and the configured rule (:func:`pipeline.gate.rule.answers`, the gate's own)
   is applied at every threshold. The rule read is the one the gate applies (:func:`effective_rule`: ``auto``
   resolved by the gate's own :func:`pipeline.gate.rule.scale`, i.e. the learned rule's probability wherever it
   was computed).
4. **Estimate**: the answer rate is the share of pseudo-questions answered; the false-answer rate is a weighted mean
   of the probe kinds' answered shares (:data:`WEIGHTS`). What mix of unanswerable questions a corpus will get is
   exactly what a corpus cannot say, so the default is a neutral prior for support traffic: half off-topic, half
   on-topic, the on-topic half split equally between ``swapped-out``, ``swapped-in`` and ``answer-removed``
   (a prior, not fitted to any labelled set). ``swapped-near`` is written and
   reported but weighs 0 by default: it is the adversarial end of the range, which a retrieval-score gate cannot
   tell from answerable questions; ``--weights`` states another mix. Reported at the configured threshold and at
   the lowest threshold whose estimated false-answer rate is within the target (the calibrated threshold), with
   every kind's share, so the range from off-topic to adversarial is visible next to the single figure.

:func:`compare` measures the estimate against labelled cases (a golden set's replayed traces). Probe generation,
the estimate and the comparison are pure; :func:`calibrate` is the one function that searches.
"""


from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from pipeline.config import GateConfig, PipelineConfig
from pipeline.gate import rule as gate_rule
from pipeline.text.tokenize import tokenize
from workbench import sweep
from workbench.display.rates import rates_ci
from workbench.probes import DEFAULT_PROBES, KINDS, PSEUDO, UNANSWERABLE, Corpus, Probe, make_probes

# how much each kind weighs in the estimated false-answer rate (swapped-near: reported, not weighed; see above)
WEIGHTS: Mapping[str, float] = {"off-corpus": 0.5, "swapped-out": 0.5 / 3, "swapped-in": 0.5 / 3,
                                 "answer-removed": 0.5 / 3, "swapped-near": 0.0}
DEFAULT_TARGET = 0.05



def parse_weights(text: str) -> dict[str, float]:
    """``off-corpus=0.5,swapped-near=0.5`` -> a weight per unanswerable kind (kinds not named weigh 0). Raises
    ValueError naming the part that is wrong: an unknown kind, a repeated one, a weight that is not a finite number
    >= 0, or weights that are all 0."""
    out = dict.fromkeys(UNANSWERABLE, 0.0)
    seen: set[str] = set()
    for part in text.split(","):
        kind, sep, value = part.partition("=")
        kind = kind.strip()
        if not sep or not kind:
            raise ValueError(f"weights: {part.strip()!r} is not KIND=WEIGHT")
        if kind not in out:
            raise ValueError(f"weights: unknown probe kind {kind!r}; expected one of {', '.join(UNANSWERABLE)}")
        if kind in seen:
            raise ValueError(f"weights: {kind} is given twice")
        try:
            weight = float(value)
        except ValueError:
            raise ValueError(f"weights: {kind}={value.strip()!r} is not a number") from None
        if not math.isfinite(weight) or weight < 0:
            raise ValueError(f"weights: {kind}={value.strip()} must be a finite number >= 0")
        seen.add(kind)
        out[kind] = weight
    if not sum(out.values()) > 0:
        raise ValueError("weights: at least one kind must weigh more than 0")
    return out


def format_weights(weights: Mapping[str, float]) -> str:
    return ",".join(f"{k}={w!r}" for k, w in weights.items())


# -- the estimate (pure) ----------------------------------------------------------------------------------------

def effective_rule(scores: sweep.Scores, gate: GateConfig) -> str:
    """The rule the gate applies on these runs: a forced ``gate.signal`` as is; ``auto`` resolved per case by the
    gate's own :func:`pipeline.gate.rule.scale` (the learned rule where it gave a probability, else rerank, else
    fused and dense), and the scale most of the cases with candidates are read on."""
    if gate.signal != "auto":
        return gate.signal
    n = len(scores.ids)
    learned = scores.learned if scores.learned is not None else np.full(n, np.nan)
    read = gate_rule.scale("auto", np.isfinite(scores.rerank), np.isfinite(scores.dense), np.isfinite(learned))
    found = read[np.isfinite(scores.fused)] if np.isfinite(scores.fused).any() else read
    names, counts = np.unique(found, return_counts=True)
    return str(names[np.argmax(counts)]) if len(names) else "fused_and_dense"


@dataclass(frozen=True)
class Point:
    """Estimated rates at one setting of the rule's thresholds."""
    thresholds: Mapping[str, float]
    answer_rate: float                         # share of pseudo-questions answered
    false_answer_rate: float                   # weighted share of unanswerable probes answered
    by_kind: Mapping[str, float] = field(default_factory=dict)  # each kind's answered share


@dataclass(frozen=True)
class Estimate:
    rule: str
    target: float
    weights: Mapping[str, float]
    probes: Mapping[str, int]                  # probes per kind
    current: Point
    calibrated: Point | None                   # None: no threshold reaches the target on these probes

    def settings(self) -> list[str]:
        if self.calibrated is None:
            return []
        return [f"gate.{sweep.FIELDS[k]}={v:.6g}" for k, v in self.calibrated.thresholds.items()]


def _kinds(probes: Sequence[Probe]) -> np.ndarray:
    return np.array([p.kind for p in probes])


def _point(answered: np.ndarray, kinds: np.ndarray, weights: Mapping[str, float]) -> tuple[np.ndarray, np.ndarray,
                                                                                             dict[str, np.ndarray]]:
    """(answer rate, weighted false-answer rate, per-kind shares) over the last axis, for any leading shape."""
    share = {k: answered[..., kinds == k].mean(axis=-1) for k in KINDS if (kinds == k).any()}
    present = {k: w for k, w in weights.items() if k in share}
    total = sum(present.values())
    if PSEUDO not in share or not total:
        raise ValueError("calibration needs pseudo-questions and unanswerable probes; the corpus gave "
                         + ", ".join(f"{int((kinds == k).sum())} {k}" for k in KINDS))
    far = sum(share[k] * (w / total) for k, w in present.items())
    return share[PSEUDO], far, share


def estimate(scores: sweep.Scores, probes: Sequence[Probe], gate: GateConfig, target: float = DEFAULT_TARGET,
             weights: Mapping[str, float] = WEIGHTS) -> Estimate:
    """The operating point at the configured thresholds and the calibrated one, from the probes' scores."""
    kinds = _kinds(probes)
    rule = effective_rule(scores, gate)
    keys = sweep.RULE_KEYS[rule]
    current = sweep.thresholds_of(gate)
    ar, far, share = _point(scores.answers(rule, **current), kinds, weights)
    now = Point({k: current[k] for k in keys}, float(ar), float(far), {k: float(v) for k, v in share.items()})
    axes = {k: sweep.candidate_thresholds(scores.signal(k[2:])) for k in keys}
    shaped = {k: axes[k].reshape([-1 if i == d else 1 for i in range(len(keys) + 1)]) for d, k in enumerate(keys)}
    ar_g, far_g, share_g = _point(scores.answers(rule, **{**current, **shaped}), kinds, weights)
    feasible = np.argwhere(far_g <= target + 1e-12)
    calibrated = None
    if len(feasible):
        best = min(map(tuple, feasible), key=lambda ix: (-ar_g[ix], far_g[ix]))
        chosen = {k: sweep.readable_threshold(float(axes[k][i]), scores.signal(k[2:]))
                  for k, i in zip(keys, best, strict=True)}
        calibrated = Point(chosen, float(ar_g[best]), float(far_g[best]),
                           {k: float(v[best]) for k, v in share_g.items()})
    return Estimate(rule=rule, target=target, weights=dict(weights),
                    probes={k: int((kinds == k).sum()) for k in KINDS}, current=now, calibrated=calibrated)


@dataclass(frozen=True)
class Comparison:
    """The estimate against labelled cases: measured rates at the configured and at the calibrated thresholds."""
    cases: int
    answerable: int
    unanswerable: int
    measured_current: Mapping[str, float | None]
    measured_calibrated: Mapping[str, float | None] | None
    error_current_points: float | None         # estimated minus measured false-answer rate, in points
    error_calibrated_points: float | None


def compare(est: Estimate, labelled: sweep.Scores, gate: GateConfig) -> Comparison:
    """Replay labelled traces (:func:`workbench.sweep.extract`) at the estimate's two settings."""
    def points(estimated: float, measured: float | None) -> float | None:
        return None if measured is None else round(100 * (estimated - measured), 2)

    current = sweep.at_setting(labelled, est.rule, dict(est.current.thresholds), gate)
    calibrated = (sweep.at_setting(labelled, est.rule, dict(est.calibrated.thresholds), gate)
                  if est.calibrated else None)
    return Comparison(
        cases=current["cases"], answerable=current["answerable"], unanswerable=current["unanswerable"],
        measured_current=current, measured_calibrated=calibrated,
        error_current_points=points(est.current.false_answer_rate, current["false_answer_rate_unanswerable"]),
        error_calibrated_points=None if calibrated is None else points(
            est.calibrated.false_answer_rate, calibrated["false_answer_rate_unanswerable"]))


# -- the driver --------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Calibration:
    """One calibration run: the probes, their scores on the effective rule, and the estimate."""
    store: str
    corpus_version: int
    seed: int
    probes: tuple[Probe, ...]
    scores: sweep.Scores
    estimate: Estimate
    gate: GateConfig = GateConfig()

    def rows(self) -> list[dict]:
        """One row per probe: kind, query, source chunk, what changed, the score read, answered at the
        configured threshold."""
        values = self.scores.signal(self.estimate.rule) if self.estimate.rule in sweep.SIGNALS else self.scores.dense
        answered = self.scores.answers(self.estimate.rule, **{**sweep.thresholds_of(self.gate),
                                                               **self.estimate.current.thresholds})
        return [{"kind": p.kind, "query": p.query, "chunk_id": p.chunk_id, "changed": p.changed,
                 "removed": list(p.removed),
                 "score": None if not np.isfinite(v) else float(v), "answered": bool(a)}
                for p, v, a in zip(self.probes, values, answered, strict=True)]


def corpus_of(store) -> Corpus:
    """The live chunks and their tokens from a store's catalogue."""
    chunks = [c for c in store.chunks() if not c.superseded_by and not c.superseded_reason]
    by_point = store.chunk_terms()
    return Corpus.build([(c.chunk_id, c.doc_id, c.text) for c in chunks],
                        {c.chunk_id: by_point.get(c.point_id, tokenize(c.text)) for c in chunks})


class _Hiding:
    """The store, read through a view whose searches leave ``hidden`` chunks out (the answer-removed probes): each
    leg asks for as many more hits as are hidden and drops them, so a leg still returns its ``limit``. Everything
    else (statistics, payloads, passage vectors) is the store's own."""

    def __init__(self, store) -> None:
        self._store = store
        self.hidden: frozenset[str] = frozenset()

    def __getattr__(self, name: str):
        return getattr(self._store, name)

    def _without(self, hits, limit: int):
        return [h for h in hits if h.chunk_id not in self.hidden][:limit]

    def dense_search(self, vector, limit: int):
        return self._without(self._store.dense_search(vector, limit + len(self.hidden)), limit)

    def keyword_search(self, indices, values, limit: int):
        return self._without(self._store.keyword_search(indices, values, limit + len(self.hidden)), limit)


def calibrate(store, models, cfg: PipelineConfig, n: int = DEFAULT_PROBES, seed: int = 0,
              target: float = DEFAULT_TARGET, on_progress: Callable[[int, int], None] | None = None,
              weights: Mapping[str, float] = WEIGHTS) -> Calibration:
    """Write the probes for ``store``'s corpus, search each once (no generation) and estimate."""
    from workbench.evaluate import eval_pipeline

    if n < 1:
        raise ValueError(f"calibration needs at least one pseudo-question, got {n}")
    if not 0.0 < target < 1.0:
        raise ValueError(f"the target false-answer rate must be between 0 and 1, got {target}")
    probes = make_probes(corpus_of(store), n, seed)
    view = _Hiding(store)
    pipe = eval_pipeline(view, models, cfg)
    traces = []
    for i, p in enumerate(probes):
        if on_progress is not None:
            on_progress(i, len(probes))
        view.hidden = frozenset(p.removed)
        traces.append(pipe.search(p.query))
    view.hidden = frozenset()
    if on_progress is not None:
        on_progress(len(probes), len(probes))
    scores = sweep.extract([f"{p.kind}-{i}" for i, p in enumerate(probes)], [p.answerable for p in probes], traces,
                           cfg.gate)
    return Calibration(store=str(store.home), corpus_version=store.corpus_version, seed=seed, probes=probes,
                       scores=scores, estimate=estimate(scores, probes, cfg.gate, target, weights), gate=cfg.gate)


@dataclass(frozen=True)
class Measured:
    """:func:`compare` on a labelled set, with a label saying which set and which part."""
    label: str
    comparison: Comparison


def measure(store, models, cfg: PipelineConfig, est: Estimate, golden, label: str) -> Measured:
    """Search every labelled case once (no generation) and compare the estimate with what it measures."""
    from workbench.evaluate import eval_pipeline, run_cases

    run = run_cases(golden, eval_pipeline(store, models, cfg), generate=False)
    labelled = sweep.extract([c.id for c in run.cases], [c.answerable for c in run.cases], run.traces, cfg.gate)
    return Measured(label, compare(est, labelled, cfg.gate))


# -- output ------------------------------------------------------------------------------------------------------

def _pct(x: float | None) -> str:
    return "–" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{100 * x:.1f} %"


def _setting(thresholds: Mapping[str, float]) -> str:
    return ", ".join(f"{sweep.FIELDS[k]}={v:.6g}" for k, v in thresholds.items())


def _kinds_line(point: Point) -> str:
    return ", ".join(f"{k} {_pct(point.by_kind.get(k))}" for k in UNANSWERABLE if k in point.by_kind)


def report_lines(result: Calibration, measured: Measured | None = None) -> list[str]:
    """What ``workbench calibrate`` prints: one line per key figure."""
    e = result.estimate
    lines = [f"probes: {e.probes[PSEUDO]} pseudo-questions, "
             + ", ".join(f"{e.probes[k]} {k}" for k in UNANSWERABLE) + f" (seed {result.seed}; corpus version "
             f"{result.corpus_version}); false answers weigh " + ", ".join(f"{k} {w:g}" for k, w in e.weights.items()),
             f"rule read: {e.rule}",
             f"at the configured threshold ({_setting(e.current.thresholds)}): estimated answered "
             f"{_pct(e.current.answer_rate)}, estimated false answers {_pct(e.current.false_answer_rate)} "
             f"({_kinds_line(e.current)})"]
    if e.calibrated is None:
        lines.append(f"for at most {_pct(e.target)} false answers: no threshold gets there on these probes")
    else:
        lines += [f"for at most {_pct(e.target)} false answers: {_setting(e.calibrated.thresholds)}: estimated "
                  f"answered {_pct(e.calibrated.answer_rate)}, estimated false answers "
                  f"{_pct(e.calibrated.false_answer_rate)} ({_kinds_line(e.calibrated)})",
                  "settings: " + " ".join(f"--set {s}" for s in e.settings())]
    if measured is not None:
        c = measured.comparison
        for name, point, error in (("configured", c.measured_current, c.error_current_points),
                                   ("calibrated", c.measured_calibrated, c.error_calibrated_points)):
            if point is not None:
                lines.append(f"measured on {measured.label}: at the {name} threshold "
                             f"{rates_ci(point, point.get('answerable', 0), point.get('unanswerable', 0))} "
                             f"(95 % Wilson intervals; estimate off by {_points(error)})")
    return lines


def _points(x: float | None) -> str:
    return "–" if x is None else f"{x:+.1f} points"


def _point_dict(p: Point | None) -> dict | None:
    if p is None:
        return None
    return {"thresholds": {sweep.FIELDS[k]: v for k, v in p.thresholds.items()}, "answer_rate": p.answer_rate,
            "false_answer_rate": p.false_answer_rate, "by_kind": dict(p.by_kind)}


def to_dict(result: Calibration, measured: Measured | None = None, with_probes: bool = False) -> dict:
    """``workbench calibrate --json``."""
    e = result.estimate
    out = {"store": result.store, "corpus_version": result.corpus_version, "seed": result.seed, "rule": e.rule,
           "target": e.target, "weights": dict(e.weights), "probes": dict(e.probes),
           "current": _point_dict(e.current), "calibrated": _point_dict(e.calibrated), "settings": e.settings()}
    if measured is not None:
        c = measured.comparison
        out["measured"] = {"label": measured.label, "cases": c.cases, "answerable": c.answerable,
                           "unanswerable": c.unanswerable, "current": dict(c.measured_current),
                           "calibrated": None if c.measured_calibrated is None else dict(c.measured_calibrated),
                           "error_current_points": c.error_current_points,
                           "error_calibrated_points": c.error_calibrated_points}
    if with_probes:
        out["probe_rows"] = result.rows()
    return out


# -- the Gate lab's table and chart points ----------------------------------------------------------------------

def estimate_table(est: Estimate, labelled: sweep.Scores | None = None, gate: GateConfig | None = None) -> list[dict]:
    """One row per setting (configured, calibrated): estimated rates, and with labelled cases the measured ones
    and the error in points."""
    comp = compare(est, labelled, gate or GateConfig()) if labelled is not None else None
    rows = []
    for name, point, measured, error in (
            ("configured", est.current, comp and comp.measured_current, comp and comp.error_current_points),
            (f"calibrated for ≤ {_pct(est.target)} false answers", est.calibrated,
             comp and comp.measured_calibrated, comp and comp.error_calibrated_points)):
        if point is None:
            continue
        row = {"setting": name, "thresholds": _setting(point.thresholds), "estimated answered": point.answer_rate,
               "estimated false answers": point.false_answer_rate}
        if comp is not None and measured:
            row.update({"measured answered": measured["answer_rate_answerable"],
                        "measured false answers": measured["false_answer_rate_unanswerable"],
                        "false answers: estimate − measured (points)": error})
        rows.append(row)
    return rows


def chart_points(est: Estimate, labelled: sweep.Scores | None = None, gate: GateConfig | None = None) -> list[dict]:
    """Markers for the trade-off chart: the estimate at both settings, and the calibrated setting measured on the
    labelled cases."""
    out = [{"label": f"estimate ({name})", "answer_rate_answerable": p.answer_rate,
            "false_answer_rate_unanswerable": p.false_answer_rate}
           for name, p in (("configured", est.current), ("calibrated", est.calibrated)) if p is not None]
    if labelled is not None and est.calibrated is not None:
        m = sweep.at_setting(labelled, est.rule, dict(est.calibrated.thresholds), gate or GateConfig())
        out.append({"label": "calibrated, measured", "answer_rate_answerable": m["answer_rate_answerable"],
                    "false_answer_rate_unanswerable": m["false_answer_rate_unanswerable"]})
    return out
