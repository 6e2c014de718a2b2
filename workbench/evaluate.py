"""Golden-set evaluation (``workbench eval GOLDEN``): every case through the real pipeline, every trace kept.

Method:

1. The golden file is loaded and validated line by line (:mod:`workbench.golden`); bad lines are reported
   and skipped, the rest run.
2. Each case is asked with its history (multi-turn follow-ups go through the rewrite stage) by
   :func:`run_cases`, the one golden-set driver (``workbench eval``, ``workbench tune``'s searches, the app's
   Evaluate & tune page and Gate lab all walk the cases through it), on a :class:`~pipeline.engine.Pipeline`
   built for evaluation (:func:`eval_pipeline`): the answer cache is off (``cache.enabled=False``:
   a cached answer would hide the stages being measured) and nothing is written to the user's
   ``runs.sqlite`` (``log_runs=False``). The embedder is wrapped in a per-run memo
   (:class:`~workbench.memo.MemoEmbedder`): the validator encodes the passages of every cited chunk, and the same
   chunks are cited by many cases, so each distinct text is encoded once per run.
   **Batched** (the default; ``batch=False`` is the one-at-a-time walk): the cases go through the pipeline's
   steps (:meth:`~pipeline.engine.Pipeline.begin`, ``retrieve``, ``decide``, ``finish``) in blocks of
   :data:`workbench.walk.BATCH_CASES`, and what a block's steps will encode (its queries, its answers' claims,
   the correctness check's texts; each listed by a dry run of the step itself) is encoded ahead in one call per
   block, in a worker thread that runs beside the next block's retrieval (:mod:`workbench.memo`). The same
   stages see the same texts; a text's vector batched differs from its vector alone only by float rounding, so
   every decision, hit and verdict is the same and the gate's scores agree to about 1e-5
   (``tests/workbench/test_evaluate_batch.py``).
   The retrieve and validate latencies are then mostly memo lookups, and the summary's note says so.
   **Reuse** (``evaluate(reuse=earlier)``): a run whose configuration differs from an earlier run's only after
   retrieval (:func:`pipeline.engine.retrieval_differences`: gate, generation, validation, cache settings) keeps
   that run's rewrite, retrieval and rerank for each case with the same question and history
   (:meth:`~pipeline.engine.Pipeline.resume`) and its encoded vectors, and asks only the gate onwards: what the
   app's Evaluate page does when only a threshold changed.
3. One row per case (:func:`build_row`) and a summary (:mod:`workbench.summary`): answer rate on answerable,
   false-answer rate on unanswerable, abstention precision/recall, hit@10 (ANY expected document in the
   documents of the top-10 ranked chunks; the summary key is ``recall_at_10``, kept for the floors files and
   scripts that read it; and the fraction-of-expected variant), MRR@10, passage-level recall@10 and nDCG@10 (the
   top-10 chunks against the chunks that state the expected answer, :mod:`workbench.relevance`), citation
   support, fabricated markers, LLM calls made and saved, latency per stage, NLI support when an NLI
   model resolves (:mod:`workbench.nli`), and a per-tag breakdown. Each answered case also gets an answer
   correctness verdict against its ``expected_answer`` (:mod:`workbench.correctness`: token recall with exact
   key facts, a semantic match with the evaluation's embedder, NLI entailment when a model resolves), kept
   in the row's ``correctness`` and summarised as ``correct_answer_rate``, ``supported_but_wrong_rate`` and
   the trust triples. The summary's ``run`` block says how the run went: ``seconds`` (the walk), ``seconds_total``
   and ``cases_per_s`` (the whole evaluation), ``batched``, ``reused_retrieval``, ``texts_encoded`` and
   ``encoder_calls``.
4. **Which cases.** ``--split tune|test|all`` (default ``all``; with ``--check``, the part the floors file names)
   evaluates one part of the golden set's fixed split (:mod:`workbench.golden`: ``golden.split.json`` beside
   the golden file, or ``--split-file``). The summary's ``split`` says which part was measured (``part``,
   ``file``, ``seed``, ``cases``); a run over all cases with a split also gets ``per_split``: the headline
   rates of each part (:func:`workbench.summary.part_figures`), so a reader can tell held-out figures from
   figures on the cases the gate was tuned on.
5. Outputs (:func:`run_eval`; ``workbench.cli`` parses the flags): ``--json`` prints ``{"summary", "rows"}``
   (docs/ARCHITECTURE.md); ``--out DIR`` writes ``traces.jsonl`` (one ``{"id", "trace"}`` per case: what ``workbench
   tune`` replays), ``summary.json``, ``eval.json`` and ``rows.csv``; ``--csv FILE`` writes the rows too;
   ``--check FLOORS`` applies the deploy gate (:mod:`workbench.floors`).

Abstention is the gate's decision or an answer that is exactly ``ABSTENTION_MESSAGE``.
"""

from __future__ import annotations

import csv
import dataclasses
import json
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from pipeline.config import PipelineConfig
from pipeline.engine import Pipeline
from pipeline.generation.prompts import ABSTENTION_MESSAGE
from pipeline.models.registry import Models, default_models
from pipeline.models.resolve import ModelUnavailable
from pipeline.storage.store import Store
from pipeline.trace import Trace
from workbench import floors as floors_mod
from workbench import walk
from workbench.correctness import Correctness, score_case, semantic_match
from workbench.golden import GoldenCase, GoldenSet, GoldenSplit, find_split, load_golden, select, subset
from workbench.memo import MemoEmbedder, TextRecorder
from workbench.metrics import document_ranking, hit_at_k, ndcg_at_k, rate, recall_at_k, reciprocal_rank, round_or_none
from workbench.nli import from_validator, nli_support
from workbench.relevance import case_relevance
from workbench.summary import part_figures, render_summary, summarise

TOP_K = 10


class EvalModels:
    """The caller's models with the embedder memoised; everything else is delegated unchanged."""

    def __init__(self, inner: Models, cfg: PipelineConfig, memo: MemoEmbedder | None = None) -> None:
        self.inner = inner
        self.memo = memo if memo is not None else MemoEmbedder(inner.embedder(cfg.embedding))

    def embedder(self, cfg):
        return self.memo

    def reranker(self, cfg):
        return self.inner.reranker(cfg)

    def llm(self, *args, **kwargs):
        return self.inner.llm(*args, **kwargs)

    def nli(self, name: str):
        return self.inner.nli(name)


def eval_config(cfg: PipelineConfig) -> PipelineConfig:
    """The configuration as given, with the answer cache off."""
    return cfg.with_overrides({"cache.enabled": False})


def eval_pipeline(store: Store, models: Models, cfg: PipelineConfig, memo: MemoEmbedder | None = None) -> Pipeline:
    """The pipeline every golden run uses: answer cache off, nothing logged, the embedder memoised
    (``pipeline.models.memo`` counts what was encoded; pass an earlier run's ``memo`` to keep its vectors)."""
    cfg = eval_config(cfg)
    return Pipeline(store, EvalModels(models, cfg, memo), cfg, log_runs=False)


# -- rows (pure) --------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class EvalRow:
    id: str
    answerable: bool
    abstained: bool
    gate_score: float
    gate_scale: str
    retrieved_doc_ids: tuple[str, ...]
    supported: bool | None          # every claim of the answer supported; None when nothing was validated
    llm_calls: int
    abstained_by: str = ""          # "gate" | "generator" | ""
    gate_threshold: float = 0.0
    best_fused_score: float | None = None
    best_dense_cosine: float | None = None
    top_rerank_score: float | None = None
    expected_doc_ids: tuple[str, ...] = ()
    hit_at_10: bool | None = None
    recall_at_10: float | None = None
    reciprocal_rank: float | None = None
    relevant_chunks: int | None = None          # chunks that state the expected answer (workbench.relevance)
    passage_recall_at_10: float | None = None   # share of them among the top-10 ranked chunks
    passage_ndcg_at_10: float | None = None     # nDCG@10 of the chunk ranking against them (binary gains)
    claims: int = 0
    supported_claims: int = 0
    unsupported_claims: int = 0
    uncited_claims: int = 0
    fabricated_markers: int = 0
    llm_calls_saved: int = 0
    generator: str = ""
    latency_ms: float = 0.0
    tags: tuple[str, ...] = ()
    question: str = ""
    correctness: Correctness | None = None   # answered cases only (workbench.correctness); None: abstained

    def to_dict(self) -> dict:
        return {k: list(v) if isinstance(v, tuple) else v for k, v in dataclasses.asdict(self).items()}


def abstained_by(trace: Trace) -> str:
    if trace.gate.decision == "abstain":
        return "gate"
    if trace.answer.strip() == ABSTENTION_MESSAGE:
        return "generator"
    return ""


def build_row(case: GoldenCase, trace: Trace, correctness: Correctness | None = None,
              relevant: Sequence[str] | None = None) -> EvalRow:
    """One case's row; ``relevant``: the chunks that state its expected answer (:mod:`workbench.relevance`), for
    the passage-level metrics (None: not labelled, they stay None)."""
    chunks = [c.chunk_id for c in trace.ranked_candidates()[:TOP_K]]
    docs = tuple(document_ranking(c.doc_id for c in trace.ranked_candidates()[:TOP_K]))
    val = trace.validation
    validated = val.status == "ran" and bool(val.claims)
    fused = trace.retrieval.candidates[0].fused_score if trace.retrieval.candidates else None
    expected = case.expected_doc_ids
    return EvalRow(
        id=case.id, answerable=case.answerable, abstained=bool(abstained_by(trace)),
        gate_score=round(trace.gate.score, 6), gate_scale=trace.gate.scale, retrieved_doc_ids=docs,
        supported=(val.supported == len(val.claims) and not val.fabricated_markers) if validated else None,
        llm_calls=trace.llm_calls, abstained_by=abstained_by(trace), gate_threshold=trace.gate.threshold,
        best_fused_score=fused, best_dense_cosine=trace.gate.best_dense_cosine,
        top_rerank_score=trace.gate.top_rerank_score, expected_doc_ids=expected,
        hit_at_10=hit_at_k(docs, expected, TOP_K) if expected else None,
        recall_at_10=recall_at_k(docs, expected, TOP_K) if expected else None,
        reciprocal_rank=reciprocal_rank(docs, expected, TOP_K) if expected else None,
        relevant_chunks=len(relevant) if relevant else None,
        passage_recall_at_10=recall_at_k(chunks, relevant, TOP_K) if relevant else None,
        passage_ndcg_at_10=ndcg_at_k(chunks, relevant, TOP_K) if relevant else None,
        claims=len(val.claims) if val.status == "ran" else 0, supported_claims=val.supported,
        unsupported_claims=val.unsupported, uncited_claims=val.uncited,
        fabricated_markers=len(val.fabricated_markers), llm_calls_saved=trace.llm_calls_saved,
        generator=trace.generation.backend, latency_ms=trace.timings_ms.get("total", 0.0), tags=case.tags,
        question=case.question, correctness=correctness)


# -- the driver: every golden walk goes through run_cases ---------------------------------------------------

Progress = Callable[[int, int, str], None]
"""``(done, total, case_id)``: called before each case with its id, then once more as ``(total, total, "")``."""


@dataclass(frozen=True)
class GoldenRun:
    """One walk of golden cases through a pipeline (:func:`run_cases`): the cases that ran and their traces,
    in golden order; the golden file's problems and the questions the pipeline rejected; what it ran on."""
    cases: tuple[GoldenCase, ...]
    traces: tuple[Trace, ...]
    generated: bool                        # ask (True) or search only (False)
    golden: str = ""                       # the golden file's path ("" for bare cases)
    config_hash: str = ""
    corpus_version: int = 0
    seconds: float = 0.0
    golden_problems: tuple[str, ...] = ()  # bad lines of the golden file
    rejected: tuple[str, ...] = ()         # "case ID (line N): why" for each question the pipeline rejected
    correctness: tuple[Correctness | None, ...] = ()  # per case, when scored (:func:`score_correctness`)
    relevant: tuple[tuple[str, ...] | None, ...] = ()  # per case, its relevant chunks (workbench.relevance)
    batched: bool = False                  # walked in blocks of BATCH_CASES (run_cases(batch=True))
    reused: int = 0                        # cases whose rewrite, retrieval and rerank came from an earlier run

    @property
    def problems(self) -> tuple[str, ...]:
        return self.golden_problems + self.rejected

    @cached_property
    def rows(self) -> tuple[EvalRow, ...]:
        verdicts = self.correctness or (None,) * len(self.cases)
        relevant = self.relevant or (None,) * len(self.cases)
        return tuple(build_row(c, t, v, r)
                     for c, t, v, r in zip(self.cases, self.traces, verdicts, relevant, strict=True))

    def by_id(self) -> dict[str, Trace]:
        return {c.id: t for c, t in zip(self.cases, self.traces, strict=True)}

    def scores(self):
        """The gate signals per case (:class:`workbench.sweep.Scores`), what the threshold sweep replays."""
        from workbench.sweep import extract

        return extract([c.id for c in self.cases], [c.answerable for c in self.cases], self.traces)


def run_cases(golden: GoldenSet | Sequence[GoldenCase], pipeline: Pipeline, *, generate: bool = True,
              on_progress: Progress | None = None, batch: bool = True, reuse: GoldenRun | None = None) -> GoldenRun:
    """Ask (or, ``generate=False``, only search) every case with its history; a question the pipeline rejects is
    recorded in ``rejected`` and skipped. Build ``pipeline`` with :func:`eval_pipeline`.

    ``batch`` (default): the cases go through the pipeline's steps in blocks, and what a block's steps will encode
    is encoded ahead in one call (:func:`workbench.walk.walk_batched`; for an asked walk, also the texts the
    correctness check will encode: :func:`prime_correctness`): the same stages, the same texts and the same model,
    in fewer and larger calls. ``batch=False`` asks one case at a time (:func:`workbench.walk.walk_one_by_one`),
    the walk before batching. ``reuse``: an earlier walk of the same cases on the same corpus whose configuration
    differs from this one only after retrieval (:func:`pipeline.engine.retrieval_differences` is empty); its rewrite,
    retrieval and rerank stand for this walk's (:meth:`~pipeline.engine.Pipeline.resume`), case by case where the
    question and history are the same. An earlier walk that does not qualify is ignored. ``on_progress`` is called
    once per case, in golden order."""
    cases = tuple(golden.cases if isinstance(golden, GoldenSet) else golden)
    started = time.perf_counter()
    earlier = walk.reusable(reuse.cases, reuse.traces, pipeline) if reuse is not None else {}
    if batch:
        memo = getattr(pipeline.models, "memo", None)
        after = (lambda finished: prime_correctness(finished, memo, wait=False)) if memo and generate else None
        ran, traces, rejected, reused = walk.walk_batched(cases, pipeline, generate, on_progress, earlier, after)
    else:
        ran, traces, rejected, reused = walk.walk_one_by_one(cases, pipeline, generate, on_progress, earlier)
    if on_progress is not None:
        on_progress(len(cases), len(cases), "")
    return GoldenRun(cases=tuple(ran), traces=tuple(traces), generated=generate,
                     golden=golden.path if isinstance(golden, GoldenSet) else "",
                     config_hash=pipeline.cfg.config_hash(), corpus_version=pipeline.store.corpus_version,
                     seconds=time.perf_counter() - started,
                     golden_problems=tuple(golden.problems) if isinstance(golden, GoldenSet) else (),
                     rejected=tuple(rejected), batched=batch, reused=reused)


def prime_correctness(finished: Sequence[tuple[GoldenCase, Trace]], memo: MemoEmbedder, wait: bool = True) -> int:
    """Encode, in one call, what the correctness check's semantic match will encode for these finished cases
    (:func:`score_correctness` scores an answered, answerable case that has an expected answer)."""
    recorder = TextRecorder(memo.name, memo.dim)
    for case, trace in finished:
        if not abstained_by(trace) and case.answerable and case.expected_answer:
            semantic_match(case.expected_answer, trace.answer, recorder)
    return memo.prime(recorder.recorded, wait=wait)


def tqdm_progress(desc: str) -> Progress:
    """A :data:`Progress` that draws a tqdm bar on stderr (the CLI's, when stderr is a terminal)."""
    from tqdm import tqdm

    bar = None

    def update(done: int, total: int, case_id: str) -> None:
        nonlocal bar
        if bar is None:
            bar = tqdm(total=total, desc=desc, unit="case", file=sys.stderr, dynamic_ncols=True)
        bar.update(done - bar.n)
        if case_id:
            bar.set_postfix_str(case_id, refresh=False)
        if done >= total:
            bar.close()
    return update


# -- the measured run ---------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Evaluation:
    """A :class:`GoldenRun` that asked every case, measured: one row per case and the summary; ``memo`` holds the
    vectors it encoded, for a later evaluation that reuses this one (``evaluate(reuse=...)``)."""
    run: GoldenRun
    summary: dict
    memo: MemoEmbedder | None = dataclasses.field(default=None, compare=False, repr=False)

    @property
    def cases(self) -> tuple[GoldenCase, ...]:
        return self.run.cases

    @property
    def traces(self) -> tuple[Trace, ...]:
        return self.run.traces

    @property
    def rows(self) -> tuple[EvalRow, ...]:
        return self.run.rows

    @property
    def problems(self) -> tuple[str, ...]:
        return self.run.problems

    def to_dict(self) -> dict:
        return {"summary": self.summary, "rows": [r.to_dict() for r in self.rows]}


def score_correctness(run: GoldenRun, embedder, models: Models, nli_model: str, nli: bool
                      ) -> tuple[tuple[Correctness | None, ...], dict]:
    """Every case's correctness verdict (:mod:`workbench.correctness`) and the summary's note of what judged."""
    model, status, reason = None, "off", "--no-nli"
    if nli and not nli_model:
        status, reason = "unavailable", "validate.nli_model is empty"
    elif nli:
        try:
            model, status, reason = models.nli(nli_model), "ran", ""
        except (ModelUnavailable, ImportError, OSError) as exc:
            status, reason = "unavailable", str(exc)
    verdicts = tuple(score_case(c, t, abstained=bool(abstained_by(t)), embedder=embedder, nli_model=model,
                                nli_status=status) for c, t in zip(run.cases, run.traces, strict=True))
    return verdicts, {"embedder": getattr(embedder, "name", ""), "nli": status, "nli_model": nli_model,
                      "nli_reason": reason}


def split_block(part: str, split: GoldenSplit | None, cases: int) -> dict:
    """The summary's ``split``: which part of which split file these figures were measured on."""
    return {"part": part, "file": split.path if split else None, "seed": split.seed if split else None,
            "cases": cases}


def per_split(rows: Sequence[EvalRow], split: GoldenSplit) -> dict:
    """The headline figures of each part of ``split`` over the rows of a run of all cases."""
    return {part: part_figures([r for r in rows if split.part_of(r.id) == part]) for part in split.parts}


def evaluate(golden: GoldenSet, store: Store, models: Models, cfg: PipelineConfig, *, nli: bool = True,
             progress: bool = False, on_progress: Progress | None = None, split: GoldenSplit | None = None,
             part: str = "all", batch: bool = True, reuse: Evaluation | GoldenRun | None = None) -> Evaluation:
    """Run the golden set through the pipeline and measure it (the module docstring says how). ``progress``
    draws tqdm bars on stderr (the cases and the NLI check); ``on_progress`` replaces the cases' bar.
    ``golden`` holds the cases to run (:func:`workbench.golden.select` picks a part); ``split`` and ``part``
    label the summary (and, for ``part="all"``, add the per-part figures). ``batch`` and ``reuse``: see
    :func:`run_cases` (``batch=False`` is the one-at-a-time walk, kept for comparison); the summary's ``run`` block
    says which walk ran, how many cases reused an earlier retrieval, and the cases per second of the whole call."""
    started = time.perf_counter()
    pipeline = eval_pipeline(store, models, cfg, memo=shared_memo(reuse, eval_config(cfg)))
    memo = pipeline.models.memo
    before = memo.counts()
    walk = {} if batch else {"batch": False}   # only what differs from run_cases' defaults
    if reuse is not None:
        walk["reuse"] = reuse.run if isinstance(reuse, Evaluation) else reuse
    run = run_cases(golden, pipeline, generate=True,
                    on_progress=on_progress or (tqdm_progress("eval") if progress else None), **walk)
    nli_block = nli_support(run.traces, models, pipeline.cfg.validate.nli_model, progress) if nli else \
        from_validator(run.traces, pipeline.cfg.validate.nli_model) or \
        {"status": "off", "model": pipeline.cfg.validate.nli_model, "reason": "--no-nli", "support_rate": None,
         "agreement": None}
    verdicts, judged = score_correctness(run, memo, models, pipeline.cfg.validate.nli_model, nli)
    run = dataclasses.replace(run, correctness=verdicts, relevant=case_relevance(run.cases, store))
    summary = summarise(run.rows, run.traces, tags=golden.tags, nli=nli_block)
    summary["correctness"] = {**summary["correctness"], **judged}
    summary["run"] = {"golden": golden.path, "cases": len(run.rows), "seconds": round(run.seconds, 1),
                      "seconds_per_case": round(run.seconds / max(len(run.rows), 1), 3),
                      "config_hash": run.config_hash, "corpus_version": run.corpus_version,
                      "embedder": memo.name, "golden_problems": list(run.problems)}
    done = memo.counts()
    summary["run"] |= {"texts_encoded": done["encoded"] - before["encoded"],
                       "texts_requested": done["texts"] - before["texts"],
                       "encoder_calls": done["batches"] - before["batches"], "batched": run.batched,
                       "reused_retrieval": run.reused}
    summary["latency_note"] += latency_note(run)
    summary["split"] = split_block(part, split, len(run.rows))
    if pipeline.cfg.generate.tiers:
        summary["tiers"] = tier_summary(run.rows, run.traces, pipeline.cfg)
    if split is not None and part == "all":
        summary["per_split"] = per_split(run.rows, split)
    total = time.perf_counter() - started
    summary["run"] |= {"seconds_total": round(total, 1), "cases_per_s": round(len(run.rows) / max(total, 1e-9), 2)}
    return Evaluation(run=run, summary=summary, memo=memo)


def latency_note(run: GoldenRun) -> str:
    """What the batched walk and reuse change in the per-stage latencies (appended to the summary's note)."""
    note = ""
    if run.batched:
        note += ("; the walk was batched: the queries and claims were encoded ahead for blocks of cases, so "
                 "retrieve's and validate's latencies are mostly lookups")
    if run.reused:
        note += (f"; {run.reused} cases reused an earlier run's retrieval, so their rewrite, retrieve and rerank "
                 "latencies are that run's")
    return note


def shared_memo(reuse: Evaluation | GoldenRun | None, cfg: PipelineConfig) -> MemoEmbedder | None:
    """The earlier evaluation's embedding memo when its every trace was made with ``cfg``'s embedding settings
    (a text's vector is then the same), so a re-run encodes only texts the earlier one did not; else None."""
    if not isinstance(reuse, Evaluation) or reuse.memo is None or not reuse.traces:
        return None
    same = all(t.config is not None and t.config.embedding == cfg.embedding for t in reuse.traces)
    return reuse.memo if same else None


# -- tiered generation (generate.tiers) ---------------------------------------------------------------------

def tier_summary(rows: Sequence[EvalRow], traces: Sequence[Trace], cfg: PipelineConfig) -> dict:
    """What tiering did on a run (only when ``generate.tiers`` is set): how often the cheap answer went on, the
    calls each tier took, the calls to the most expensive LLM tier, the cost (litellm's offline list prices;
    None when a model has no price) per answered question, and the answer quality of each tier's kept answers."""
    tiers = cfg.generate.tiers
    llm_tiers = [i for i, t in enumerate(tiers, start=1) if t.backend != "extractive"]
    expensive = llm_tiers[-1] if llm_tiers else 0
    generated = [(r, t) for r, t in zip(rows, traces, strict=True) if t.generation.tiers]
    answered = [r for r, _ in generated if not r.abstained]
    costs = [a.cost_usd for _, t in generated for a in t.generation.tiers]
    known = all(c is not None for c in costs)
    per_tier = []
    for number, tier in enumerate(tiers, start=1):
        tried = [a for _, t in generated for a in t.generation.tiers if a.tier == number]
        kept_rows = [r for r, t in generated if t.generation.kept_tier == number]
        scored = [r.correctness.verdict for r in kept_rows
                  if not r.abstained and r.answerable and r.correctness is not None]
        tier_costs = [a.cost_usd for a in tried]
        per_tier.append({
            "tier": number, "backend": tier.backend, "model": tier.model, "tried": len(tried),
            "kept": len(kept_rows), "escalated": sum(bool(a.escalate_reasons) for a in tried),
            "llm_calls": sum(a.llm_calls for a in tried),
            "prompt_tokens": sum(a.prompt_tokens for a in tried),
            "completion_tokens": sum(a.completion_tokens for a in tried),
            "cost_usd": None if any(c is None for c in tier_costs) else round(sum(tier_costs), 8),
            "correct_answer_rate": round_or_none(rate(scored.count("correct"), len(scored))),
            "escalate_reasons": dict(Counter(x for a in tried for x in a.escalate_reasons))})
    return {
        "tiers": len(tiers), "escalate_on": list(cfg.generate.escalate_on), "generated": len(generated),
        "answered": len(answered),
        "escalation_rate": round_or_none(rate(sum(len(t.generation.tiers) > 1 for _, t in generated),
                                              len(generated))),
        "expensive_tier": expensive,
        "expensive_calls": sum(a.llm_calls for _, t in generated for a in t.generation.tiers if a.tier == expensive),
        "cost_usd": round(sum(costs), 8) if known else None,
        "cost_per_answered_usd": round(sum(costs) / len(answered), 8) if known and answered else None,
        "per_tier": per_tier,
    }


def render_tiers(block: dict) -> str:
    """The text ``workbench eval`` prints for :func:`tier_summary`."""
    def usd(value):
        return "unknown (a model has no litellm price)" if value is None else f"${value:.6f}"

    lines = [f"tiered generation ({block['tiers']} tiers; escalate on {', '.join(block['escalate_on'])}):",
             f"  escalation rate {_pct(block['escalation_rate'])} of {block['generated']} generated answers; "
             f"calls to the expensive tier ({block['expensive_tier']}): {block['expensive_calls']}",
             f"  cost {usd(block['cost_usd'])}; per answered question {usd(block['cost_per_answered_usd'])} "
             f"({block['answered']} answered)"]
    for t in block["per_tier"]:
        lines.append(f"  tier {t['tier']} {t['model'] or t['backend']}: tried {t['tried']}, kept {t['kept']}, "
                     f"escalated {t['escalated']}, LLM calls {t['llm_calls']}, cost {usd(t['cost_usd'])}, "
                     f"correct answers (kept, answerable) {_pct(t['correct_answer_rate'])}")
    return "\n".join(lines)


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{100 * value:.1f} %"


# -- outputs ------------------------------------------------------------------------------------------------

CSV_LIST_SEPARATOR = " "


def write_csv(path: Path, rows: Sequence[EvalRow]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    names = [f.name for f in dataclasses.fields(EvalRow)]
    with path.open("w", encoding="utf-8", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=names)
        writer.writeheader()
        for row in rows:
            writer.writerow({k: CSV_LIST_SEPARATOR.join(v) if isinstance(v, tuple) else ("" if v is None else v)
                             for k, v in dataclasses.asdict(row).items()}
                            | {"correctness": row.correctness.verdict if row.correctness else ""})


def write_traces(path: Path, cases: Sequence[GoldenCase], traces: Sequence[Trace]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as fh:
        for case, trace in zip(cases, traces, strict=True):
            fh.write(json.dumps({"id": case.id, "trace": trace.to_dict()}, ensure_ascii=False) + "\n")


def read_traces(path: Path) -> dict[str, Trace]:
    """``traces.jsonl`` as written by :func:`write_traces` → {case id: Trace}."""
    out = {}
    with Path(path).open(encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                record = json.loads(line)
                out[record["id"]] = Trace.from_dict(record["trace"])
    return out


def write_outputs(out: Path, evaluation: Evaluation) -> None:
    out.mkdir(parents=True, exist_ok=True)
    write_traces(out / "traces.jsonl", evaluation.cases, evaluation.traces)
    (out / "summary.json").write_text(json.dumps(evaluation.summary, indent=2) + "\n", encoding="utf-8")
    (out / "eval.json").write_text(json.dumps(evaluation.to_dict(), indent=2) + "\n", encoding="utf-8")
    write_csv(out / "rows.csv", evaluation.rows)


# -- the command ----------------------------------------------------------------------------------------------

StoreOpener = Callable[[], AbstractContextManager[Store]]


def _missing_expected(golden: GoldenSet, store: Store) -> list[str]:
    known = {d.doc_id for d in store.documents()}
    return sorted({d for c in golden.cases for d in c.expected_doc_ids if d not in known})


def run_eval(golden: str | Path, cfg: PipelineConfig, *, open_store: StoreOpener, models: Models | None = None,
             check: str | Path | None = None, out: str | Path | None = None, csv_path: str | Path | None = None,
             limit: int | None = None, nli: bool = True, json_output: bool = False, progress: bool = False,
             split: str | None = None, split_file: str | Path | None = None, batch: bool = True) -> int:
    """``workbench eval`` (``workbench.cli`` parses the flags): 0 passed, 1 the deploy gate failed, 2 bad input
    (bad golden lines included). ``open_store()`` gives the store as a context manager (the CLI's says "ingest
    first" when it is empty); ``models`` defaults to the process-wide ones. ``split``: the part to evaluate
    (``None``: the floors file's part when checking, else ``all``). ``batch=False``: one case at a time (the walk
    before batching; the rows are the same)."""
    full = load_golden(golden)
    gate = floors_mod.load_floors(check, full.tags) if check else None
    if gate is not None and gate.split is not None and split is not None and split != gate.split:
        raise floors_mod.FloorsError(f"floors file {check} bounds the {gate.split!r} part of the golden set; "
                                     f"--split {split} evaluates another part (leave --split out, or use "
                                     f"--split {gate.split})")
    part = split or (gate.split if gate is not None and gate.split else "all")
    golden_split = find_split(golden, split_file)
    golden_set = subset(select(full, golden_split, part), limit)
    for problem in golden_set.problems:
        print(f"problem: {problem}", file=sys.stderr)
    with open_store() as store:
        missing = _missing_expected(golden_set, store)
        if missing:
            print(f"note: {len(missing)} expected documents are not in the store {store.home}: "
                  f"{', '.join(missing[:5])}{' ...' if len(missing) > 5 else ''}", file=sys.stderr)
        evaluation = evaluate(golden_set, store, models or default_models(), cfg, nli=nli, progress=progress,
                              split=golden_split, part=part, batch=batch)
    for problem in evaluation.run.rejected:
        print(f"problem: {problem}", file=sys.stderr)
    if out:
        write_outputs(Path(out), evaluation)
    if csv_path:
        write_csv(Path(csv_path), evaluation.rows)
    if json_output:
        print(json.dumps(evaluation.to_dict(), indent=2, ensure_ascii=False))
    else:
        print(render_summary(evaluation.summary))
        if "tiers" in evaluation.summary:
            print(render_tiers(evaluation.summary["tiers"]))
    run = evaluation.summary["run"]
    where = "" if part == "all" else f" of the {part} part ({golden_split.path})"
    print(f"evaluated {run['cases']} cases{where} in {run['seconds_total']:.1f} s ({run['cases_per_s']:.1f} cases/s)"
          + (f"; traces, summary and rows in {out}" if out else ""), file=sys.stderr)
    status = 0
    if gate is not None:
        failures = floors_mod.check(evaluation.summary, gate)
        for line in floors_mod.report_lines(failures, gate, str(check)):
            print(line, file=sys.stderr)
        status = 1 if failures else 0
    return 2 if evaluation.problems else status
