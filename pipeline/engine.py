"""Pipeline: wires the stages; ``ask(question, history, config) -> Trace``.

    rewrite → retrieve → rerank → gate → generate → validate → trust → cache / log

Each stage is a plain function with one contract, ``run(inputs..., cfg_section, ctx) -> <Stage>Trace``: its
inputs, its own config section and a :class:`~pipeline.context.StageContext` (models, store, embedding
settings); the pure stages (gate, trust) take no context. This module only sequences them, times them (the
one place stage latencies are measured: ``Trace.timings_ms`` and each record's ``latency_ms``), counts LLM
calls, computes what one stage needs from another's config (:func:`rerank_stop_at`) and collects every
degradation into one list. The gate runs before any generation: an
abstention returns the fixed sentence and the closest documents with zero LLM calls after the rewrite.

A run is four steps, public so that a caller with many questions can take each for all of them before the next
(the golden-set driver encodes what a step will need for many questions at once): :meth:`Pipeline.begin` (clean,
rewrite), :meth:`~Pipeline.retrieve` (retrieve, rerank), :meth:`~Pipeline.decide` (gate, generate) and
:meth:`~Pipeline.finish` (validate, trust, cache, log); ``ask`` is the four with the answer cache between the first
two. :meth:`~Pipeline.resume` starts a run from an earlier trace's rewrite, retrieval and rerank when the two
configurations differ only after retrieval (:func:`retrieval_differences`): a new gate threshold, generator or
validation setting re-runs from the gate.

The side stores never cost an answer. The answer cache is disposable: a cache that is locked, damaged or
cannot be opened (:class:`~pipeline.storage.cache.CacheUnavailable`) is bypassed and the reason recorded as a
degradation. The run log is durable: a run it cannot take now is spooled beside it and written later
(:meth:`~pipeline.storage.runs.RunLog.record_or_spool`), the trace saying so. Only a clean answer is cached
(:func:`~pipeline.storage.cache.why_not_cacheable`: nothing flagged, no degradation), and an answer served from
the cache has its degradations recomputed from what it holds, so a flag travels with it.
"""

from __future__ import annotations

import dataclasses
import re
import time
import uuid
from collections.abc import Sequence
from pathlib import Path

from pipeline.config import GateConfig, PipelineConfig
from pipeline.context import StageContext
from pipeline.gate import stage as gate
from pipeline.generation import generate, rewrite, tiers
from pipeline.models.registry import Models, default_models
from pipeline.retrieval import rerank, retrieve
from pipeline.storage.cache import AnswerCache, CacheUnavailable, cache_key, why_not_cacheable
from pipeline.storage.runs import RunLog
from pipeline.storage.store import Store
from pipeline.trace import GenerationTrace, Message, Trace
from pipeline.validation import citations, trust

MAX_QUESTION_CHARS = 2000
MAX_HISTORY_TURNS = 100
MAX_TURN_CHARS = 8000   # an earlier answer can be long; a turn is still not a document
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f\u200b-\u200f\u202a-\u202e\u2066-\u2069\ufeff]")


class QuestionError(ValueError):
    """The question cannot be asked as given; the message says why."""


def clean_question(question: str) -> str:
    """Strip control and bidi-override characters; reject empty or oversized questions."""
    if not isinstance(question, str):
        raise QuestionError("the question must be text")
    cleaned = _CONTROL.sub("", question).strip()
    if not cleaned:
        raise QuestionError("the question is empty; type a question")
    if len(cleaned) > MAX_QUESTION_CHARS:
        raise QuestionError(f"the question is {len(cleaned):,} characters long; the limit is "
                            f"{MAX_QUESTION_CHARS:,} — ask about one thing at a time")
    return cleaned


def coerce_history(history: Sequence[Message | dict] | None) -> tuple[Message, ...]:
    """The conversation as Messages, capped like the question: it is stored with every run and shown to the
    rewriter, so an unbounded history would be an unbounded write."""
    turns = list(history or ())
    if len(turns) > MAX_HISTORY_TURNS:
        raise QuestionError(f"the history has {len(turns):,} turns; the limit is {MAX_HISTORY_TURNS:,} — start a new "
                            "conversation or pass only the recent turns")
    out = []
    for turn in turns:
        if isinstance(turn, Message):
            out.append(turn)
        elif isinstance(turn, dict) and isinstance(turn.get("content"), str):
            out.append(Message(role=str(turn.get("role", "user")), content=turn["content"]))
        else:
            raise QuestionError("history turns must be objects with 'role' and 'content'")
        if len(out[-1].content) > MAX_TURN_CHARS:
            raise QuestionError(f"history turn {len(out)} is {len(out[-1].content):,} characters long; the limit is "
                                f"{MAX_TURN_CHARS:,} per turn")
    return tuple(out)


class Pipeline:
    """The answerer over one store. Thread-safe: the store and the run log serialise their own writes."""

    def __init__(self, store: Store, models: Models | None = None, cfg: PipelineConfig | None = None,
                 runs: RunLog | None = None, cache: AnswerCache | None = None, log_runs: bool = True) -> None:
        self.store = store
        self.models = models or default_models()
        self.cfg = cfg or PipelineConfig()
        home = Path(store.home)
        self.runs = runs if runs is not None else (RunLog(home / "runs.sqlite") if log_runs else None)
        self.cache = cache if cache is not None else AnswerCache(home / "cache.sqlite")

    # -- the two entry points ---------------------------------------------------------------------------
    def search(self, question: str, cfg: PipelineConfig | None = None,
               history: Sequence[Message | dict] | None = None) -> Trace:
        """Rewrite, retrieve, rerank and gate; no generation (``workbench search``)."""
        return self._run(question, history, cfg or self.cfg, generate_answer=False)

    def ask(self, question: str, history: Sequence[Message | dict] | None = None,
            cfg: PipelineConfig | None = None) -> Trace:
        return self._run(question, history, cfg or self.cfg, generate_answer=True)

    # -- the run --------------------------------------------------------------------------------------------
    def _run(self, question: str, history, cfg: PipelineConfig, generate_answer: bool) -> Trace:
        started = time.perf_counter()
        trace = self.begin(question, history, cfg)
        key = self._cache_key(trace)
        side: list[str] = []   # what the side stores could not do for this run
        if generate_answer and cfg.cache.enabled:
            timings = dict(trace.timings_ms)
            cached = _timed(timings, "cache", self._cache_get, key, side)
            if cached is not None:
                hit = dataclasses.replace(
                    cached, question=trace.question, history=trace.history, rewrite=trace.rewrite, cache_hit=True,
                    llm_calls=trace.rewrite.llm_calls, llm_calls_saved=0, run_id=trace.run_id,
                    created_at=trace.created_at,
                    timings_ms={**timings, "total": round((time.perf_counter() - started) * 1000, 3)})
                return self._log(dataclasses.replace(hit, degradations=_degradations(hit)))
            trace = dataclasses.replace(trace, timings_ms=timings)
        trace = self.decide(self.retrieve(trace, cfg), cfg, generate_answer=generate_answer)
        return self.finish(trace, cfg, generate_answer=generate_answer, started=started, side=tuple(side))

    # -- the same run in steps: begin -> retrieve -> decide -> finish ----------------------------------------
    # ask() is these four steps with the answer cache between the first two. A caller with many questions
    # (the golden-set driver) takes each step for all of them before the next, so that what a step encodes can be
    # encoded for many questions at once; resume() starts a new run from an earlier trace's retrieval.
    def begin(self, question: str, history: Sequence[Message | dict] | None = None,
              cfg: PipelineConfig | None = None) -> Trace:
        """Clean the question and history (:class:`QuestionError` when they cannot be asked) and rewrite: the
        trace the later steps extend."""
        cfg = cfg or self.cfg
        question = clean_question(question)
        turns = coerce_history(history)
        timings: dict[str, float] = {}
        rw = _timed(timings, "rewrite", rewrite.run, question, turns, cfg.rewrite, self._context(cfg))
        return Trace(question=question, history=turns, rewrite=rw, timings_ms=timings, config_hash=cfg.config_hash(),
                     corpus_version=self.store.corpus_version, config=cfg, run_id=uuid.uuid4().hex[:16],
                     created_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))

    def retrieve(self, trace: Trace, cfg: PipelineConfig | None = None) -> Trace:
        """Retrieve and rerank the trace's query (the rewrite's, else the question)."""
        cfg = cfg or self.cfg
        ctx, timings = self._context(cfg), dict(trace.timings_ms)
        query = trace.rewrite.query or trace.question
        ret = _timed(timings, "retrieve", retrieve.run, query, cfg.retrieve, ctx)
        rr = _timed(timings, "rerank", rerank.run, query, ret, cfg.rerank, ctx, rerank_stop_at(cfg.gate))
        return dataclasses.replace(trace, retrieval=ret, rerank=rr, timings_ms=timings)

    def decide(self, trace: Trace, cfg: PipelineConfig | None = None, *, generate_answer: bool = True) -> Trace:
        """Gate; when it answers (and ``generate_answer``), generate; tiered generation validates each tier here,
        so :meth:`finish` does not validate again."""
        cfg = cfg or self.cfg
        ctx, timings = self._context(cfg), dict(trace.timings_ms)
        gt = _timed(timings, "gate", gate.run, trace.retrieval, trace.rerank, cfg.gate)
        trace = dataclasses.replace(trace, gate=gt)
        ranked = trace.ranked_candidates()
        if gt.decision == "abstain":
            trace = dataclasses.replace(trace, answer=gt.abstention_message, abstained=True,
                                        llm_calls_saved=gt.llm_calls_saved)
        elif not generate_answer:
            trace = dataclasses.replace(trace, generation=GenerationTrace(status="skipped"))
        elif cfg.generate.tiers:  # each tier is generate + validate; the validation time is reported apart
            tiered = _timed(timings, "generate", tiers.run, trace.question, trace.rewrite.query or trace.question,
                            ranked, cfg.generate, cfg.validate, ctx, trace.rerank.unit_scores())
            timings["validate"] = tiered.validation_ms
            timings["generate"] = round(timings["generate"] - tiered.validation_ms, 3)
            gen = dataclasses.replace(tiered.generation, latency_ms=timings["generate"])
            val = dataclasses.replace(tiered.validation, latency_ms=timings["validate"])  # all tiers; each in gen.tiers
            trace = dataclasses.replace(trace, generation=gen, validation=val)
        else:
            gen = _timed(timings, "generate", generate.run, trace.question, trace.rewrite.query or trace.question,
                         ranked, cfg.generate, ctx, trace.rerank.unit_scores())
            trace = dataclasses.replace(trace, generation=gen)
        return dataclasses.replace(trace, timings_ms=timings)

    def finish(self, trace: Trace, cfg: PipelineConfig | None = None, *, generate_answer: bool = True,
               started: float | None = None, side: tuple[str, ...] = ()) -> Trace:
        """Validate (unless tiered generation did), trust, count, then cache and log an asked run. ``total`` is the
        wall time since ``started`` (``time.perf_counter()``), or without it the sum of the recorded steps."""
        cfg = cfg or self.cfg
        timings = dict(trace.timings_ms)
        if generate_answer and trace.gate.decision != "abstain":
            gen, val = trace.generation, trace.validation
            if not cfg.generate.tiers:
                val = _timed(timings, "validate", citations.run, gen, trace.ranked_candidates(), cfg.validate,
                             self._context(cfg))
            tr = _timed(timings, "trust", trust.run, gen, val)
            trace = dataclasses.replace(trace, validation=val, trust=tr, answer=gen.answer,
                                        abstained=gen.is_abstention, confidence=tr.final_confidence,
                                        limitations=tr.limitations)
        llm_calls = trace.rewrite.llm_calls + trace.generation.llm_calls
        timings["total"] = round((time.perf_counter() - started) * 1000, 3) if started is not None \
            else round(sum(timings.values()), 3)
        trace = dataclasses.replace(trace, llm_calls=llm_calls, timings_ms=timings,
                                    degradations=_degradations(trace) + tuple(side))
        # Not while this process is writing: later commits of the same run keep the version this answer saw.
        if generate_answer and cfg.cache.enabled and not getattr(self.store, "write_in_progress", False):
            trace = self._cache_put(self._cache_key(trace), trace)
        return self._log(trace) if generate_answer else trace

    def resume(self, earlier: Trace, cfg: PipelineConfig | None = None) -> Trace:
        """A new run of ``earlier``'s question under ``cfg`` that keeps ``earlier``'s rewrite, retrieval and rerank
        (and their timings): what :meth:`begin` and :meth:`retrieve` would give when the two configurations
        differ only after retrieval (:func:`retrieval_differences` is empty) and the corpus has not changed since.
        Continue with :meth:`decide` and :meth:`finish`. Raises ``ValueError`` when the earlier run cannot stand
        for this one."""
        cfg = cfg or self.cfg
        if earlier.config is None:
            raise ValueError("the earlier trace records no configuration, so its retrieval cannot be reused")
        differences = retrieval_differences(earlier.config, cfg)
        if differences:
            raise ValueError(f"the earlier run retrieved under other settings ({', '.join(differences)}); "
                             "its retrieval cannot be reused")
        if earlier.corpus_version != self.store.corpus_version:
            raise ValueError(f"the earlier run saw corpus version {earlier.corpus_version}, the store is at "
                             f"{self.store.corpus_version}; its retrieval cannot be reused")
        kept = {k: v for k, v in earlier.timings_ms.items() if k in REUSED_STEPS}
        return Trace(question=earlier.question, history=earlier.history, rewrite=earlier.rewrite,
                     retrieval=earlier.retrieval, rerank=earlier.rerank, timings_ms=kept,
                     config_hash=cfg.config_hash(), corpus_version=earlier.corpus_version, config=cfg,
                     run_id=uuid.uuid4().hex[:16], created_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))

    def _context(self, cfg: PipelineConfig) -> StageContext:
        return StageContext(models=self.models, store=self.store, embedding=cfg.embedding)

    def _cache_key(self, trace: Trace) -> str:
        return cache_key(trace.rewrite.query or trace.question, trace.corpus_version, trace.config_hash,
                         getattr(self.store, "catalogue_id", ""))

    # -- the side stores: never cost an answer ------------------------------------------------------------
    def _cache_get(self, key: str, side: list[str]) -> Trace | None:
        try:
            return self.cache.get(key)
        except CacheUnavailable as exc:
            side.append(str(exc))
            return None

    def _cache_put(self, key: str, trace: Trace) -> Trace:
        """Cache ``trace`` if it is clean (the one rule: :func:`why_not_cacheable`); an unusable cache is a
        degradation of this run, never an error."""
        if why_not_cacheable(trace):
            return trace
        try:
            self.cache.put(key, trace)
        except CacheUnavailable as exc:
            return dataclasses.replace(trace, degradations=(*trace.degradations, str(exc)))
        return trace

    def _log(self, trace: Trace) -> Trace:
        """Record the run; a run log that cannot take it now spools it (the returned trace says so)."""
        if self.runs is None:
            return trace
        return self.runs.record_or_spool(trace)


def rerank_stop_at(gate: GateConfig) -> float | None:
    """The rerank score at which the gate's decision can no longer change (rerank early stop), or None when
    the gate's signal does not read rerank scores. The gate answers on the rerank scale when it is ``rerank`` and a
    score reaches ``confidence_threshold_rerank`` (``auto`` reads the learned rule, which reads every sentence's
    score through the reader's best, so nothing can be skipped)."""
    return gate.confidence_threshold_rerank if gate.signal == "rerank" else None


AFTER_RETRIEVAL = ("gate", "generate", "validate", "cache")
"""The config sections no step up to rerank reads: a run that differs from another only here may reuse its retrieval."""

REUSED_STEPS = ("rewrite", "retrieve", "rerank")
"""The steps (and ``timings_ms`` keys) a resumed run keeps from the earlier one (:meth:`Pipeline.resume`)."""


def retrieval_differences(a: PipelineConfig, b: PipelineConfig) -> tuple[str, ...]:
    """The settings (``section.key``) by which a run under ``b`` would rewrite, retrieve or rerank differently from
    one under ``a`` on the same store; empty when ``b`` may reuse ``a``'s retrieval (:meth:`Pipeline.resume`).

    Every section but :data:`AFTER_RETRIEVAL` counts, whether or not a query reads it (a section added later counts
    until it is listed there): wrongly reusing would change results, wrongly refusing only costs time. The gate's
    settings count in one case: with ``rerank.early_stop`` on, the rerank stops at a score the gate implies
    (:func:`rerank_stop_at`), so a gate change that moves that score changes the rerank."""
    out = []
    for section in dataclasses.fields(PipelineConfig):
        if section.name in AFTER_RETRIEVAL:
            continue
        left, right = getattr(a, section.name), getattr(b, section.name)
        if left != right:
            out += [f"{section.name}.{f.name}" for f in dataclasses.fields(left)
                    if getattr(left, f.name) != getattr(right, f.name)]
    if (a.rerank.early_stop or b.rerank.early_stop) and rerank_stop_at(a.gate) != rerank_stop_at(b.gate):
        out.append("gate (the rerank early-stop score it implies)")
    return tuple(out)


def _timed(timings: dict[str, float], name: str, fn, *args, **kwargs):
    """Run one stage, record its wall time under ``name`` (ms) and in the record's ``latency_ms``."""
    t0 = time.perf_counter()
    result = fn(*args, **kwargs)
    timings[name] = round((time.perf_counter() - t0) * 1000, 3)
    if dataclasses.is_dataclass(result) and hasattr(result, "latency_ms"):
        result = dataclasses.replace(result, latency_ms=timings[name])
    return result


def _degradations(trace: Trace) -> tuple[str, ...]:
    out = []
    if trace.rewrite.status in ("rejected", "failed"):
        out.append(f"rewrite {trace.rewrite.status}: {trace.rewrite.reason}")
    if trace.retrieval.status == "failed":
        out.append(f"retrieval failed: {trace.retrieval.reason}")
    elif trace.retrieval.reason:
        out.append(f"retrieval: {trace.retrieval.reason}")  # one leg failed; the other still ran
    if trace.rerank.status == "skipped" and trace.rerank.reason:
        out.append(f"rerank skipped: {trace.rerank.reason}")
    if trace.generation.status == "fallback":
        out.append(f"generation fell back to {trace.generation.backend}: {trace.generation.fallback_reason}")
    for flagged in trace.generation.flagged_sources:
        out.append(f"source [{flagged}] contains text addressed to a model; it was fenced and never quoted")
    return tuple(out)
