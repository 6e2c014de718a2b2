"""How a golden run walks its cases through the pipeline (:func:`workbench.evaluate.run_cases` chooses).

- :func:`walk_one_by_one`: each case asked (``Pipeline.ask``) before the next: the walk before batching, kept for
  comparison (``run_cases(batch=False)``, ``benchmarks/eval_speed.py``).
- :func:`walk_batched`: the cases in blocks of :data:`BATCH_CASES`, each of the pipeline's steps
  (:meth:`~pipeline.engine.Pipeline.begin`, ``retrieve``, ``decide``, ``finish``) taken for a whole block before the
  next, and what a step will encode handed ahead to the memo's worker (:mod:`workbench.memo`): the block's queries
  before it is retrieved, its claims (listed by a dry run of the validator) before it is validated. The steps are
  the ones ``ask`` takes, in the same order for each case, so every trace is the one ``ask`` gives, up to the float
  rounding of a batched encoding.
  The block's text analyses are memoised for the walk (:func:`pipeline.text.memo.text_memo`): the same chunks come
  back for many questions, and their tokens, language and instruction findings are pure functions of their text.
- Either walk **reuses** an earlier walk's rewrite, retrieval and rerank for a case (:func:`reusable`,
  :meth:`~pipeline.engine.Pipeline.resume`) when that walk's configuration differs from this one only after
  retrieval and the question and history are the same: only the gate onwards runs.

A walk returns ``(cases run, their traces, rejected questions, cases reused)``, in golden order; ``on_progress``
is called once per case, in golden order (the caller adds the final call).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence

from pipeline.context import StageContext
from pipeline.engine import Pipeline, QuestionError, clean_question, coerce_history, retrieval_differences
from pipeline.text.memo import text_memo
from pipeline.trace import Trace
from pipeline.validation import citations
from workbench.golden import GoldenCase
from workbench.memo import MemoEmbedder, TextRecorder

Progress = Callable[[int, int, str], None]
AfterBlock = Callable[[list[tuple[GoldenCase, Trace]]], None]
Walked = tuple[list[GoldenCase], list[Trace], list[str], int]

BATCH_CASES = 64
"""Cases per block of a batched walk: each step is taken for a whole block before the next (the queries of a block
are encoded in one call, then its claims); also the embedder's own batch size, so one block is one padded batch."""


def _history(case: GoldenCase) -> list[dict]:
    return [{"role": m.role, "content": m.content} for m in case.history]


def _rejected(case: GoldenCase, exc: QuestionError) -> str:
    return f"case {case.id} (line {case.line}): {exc}"


def walk_one_by_one(cases: Sequence[GoldenCase], pipeline: Pipeline, generate: bool, on_progress: Progress | None,
                    earlier: dict[str, Trace]) -> Walked:
    """Each case through :meth:`~pipeline.engine.Pipeline.ask` (or ``search``), one at a time: the walk before
    batching; a case with an ``earlier`` trace resumes from it."""
    ran, traces, rejected, reused = [], [], [], 0
    for i, case in enumerate(cases):
        if on_progress is not None:
            on_progress(i, len(cases), case.id)
        try:
            before = earlier_for(case, earlier)
            if before is not None:
                trace = pipeline.finish(pipeline.decide(pipeline.resume(before), generate_answer=generate),
                                        generate_answer=generate)
                reused += 1
            else:
                trace = (pipeline.ask(case.question, _history(case)) if generate
                         else pipeline.search(case.question, history=_history(case)))
        except QuestionError as exc:
            rejected.append(_rejected(case, exc))
            continue
        ran.append(case)
        traces.append(trace)
    return ran, traces, rejected, reused


def walk_batched(cases: Sequence[GoldenCase], pipeline: Pipeline, generate: bool, on_progress: Progress | None,
                 earlier: dict[str, Trace], after_block: AfterBlock | None = None) -> Walked:
    """Blocks of :data:`BATCH_CASES`, each step for a whole block; what a step will encode is encoded ahead in the
    memo's worker thread (:mod:`workbench.memo`), one block ahead: while block k is retrieved and generated, the
    worker encodes block k+1's queries and block k's claims, and block k-1 is validated. ``after_block`` is called
    with each finished block's (case, trace) pairs (the caller primes what it will encode for them)."""
    ran, traces, rejected = [], [], []
    memo = getattr(pipeline.models, "memo", None)
    blocks = [cases[i:i + BATCH_CASES] for i in range(0, len(cases), BATCH_CASES)]
    with memo.background() if memo is not None else contextlib.nullcontext(), text_memo():
        begun = _begin_block(blocks[0], pipeline, earlier, rejected, memo) if blocks else None
        waiting: list[tuple[GoldenCase, Trace]] = []   # the previous block, decided, to finish
        reused = 0
        for k, block in enumerate(blocks):
            current, begun = begun, None
            if k + 1 < len(blocks):
                begun = _begin_block(blocks[k + 1], pipeline, earlier, rejected, memo)
            started, resumed = current
            reused += len(resumed)
            offset = k * BATCH_CASES
            for j, case in enumerate(block):
                if on_progress is not None:
                    on_progress(offset + j, len(cases), case.id)
                if j in started and j not in resumed:
                    started[j] = pipeline.retrieve(started[j])
            decided = [(block[j], pipeline.decide(t, generate_answer=generate)) for j, t in started.items()]
            if memo is not None and generate:
                prime_claims([t for _, t in decided], pipeline, memo, wait=False)
            _finish_block(waiting, pipeline, generate, after_block, ran, traces)
            waiting = decided
        _finish_block(waiting, pipeline, generate, after_block, ran, traces)
    return ran, traces, rejected, reused


def _begin_block(block, pipeline: Pipeline, earlier: dict[str, Trace], rejected: list[str], memo
                 ) -> tuple[dict[int, Trace], set[int]]:
    """Begin (or resume) every case of a block and hand its queries to the memo's worker: ({position: trace},
    the positions resumed from an earlier run). A rejected question is recorded and left out."""
    started: dict[int, Trace] = {}
    resumed: set[int] = set()
    for j, case in enumerate(block):
        try:
            before = earlier_for(case, earlier)
            if before is not None:
                started[j] = pipeline.resume(before)
                resumed.add(j)
            else:
                started[j] = pipeline.begin(case.question, _history(case))
        except QuestionError as exc:
            rejected.append(_rejected(case, exc))
    if memo is not None:
        prime_queries([t for j, t in started.items() if j not in resumed], memo, wait=False)
    return started, resumed


def _finish_block(decided: list[tuple[GoldenCase, Trace]], pipeline: Pipeline, generate: bool,
                  after_block: AfterBlock | None, ran: list, traces: list) -> None:
    finished = [(case, pipeline.finish(trace, generate_answer=generate)) for case, trace in decided]
    if after_block is not None and finished:
        after_block(finished)
    for case, trace in finished:
        ran.append(case)
        traces.append(trace)


def prime_queries(traces: Sequence[Trace], memo: MemoEmbedder, wait: bool = True) -> int:
    """Encode the queries the dense leg will embed (each trace's rewritten query, else its question) in one call."""
    return memo.prime([t.rewrite.query or t.question for t in traces], wait=wait)


def prime_claims(traces: Sequence[Trace], pipeline: Pipeline, memo: MemoEmbedder, wait: bool = True) -> int:
    """Encode, in one call, what validating these decided traces will encode: a dry run of the validator with a
    :class:`~workbench.memo.TextRecorder` (the same claims, the same stored passage vectors) lists the texts.
    Tiered generation has validated already, and an abstention has nothing to validate."""
    cfg = pipeline.cfg
    if cfg.generate.tiers or not cfg.validate.enabled:
        return 0
    recorder = TextRecorder(memo.name, memo.dim)
    ctx = StageContext(models=recorder, store=pipeline.store, embedding=cfg.embedding)
    for trace in traces:
        if trace.gate.decision != "abstain":
            citations.run(trace.generation, trace.ranked_candidates(), cfg.validate, ctx)
    return memo.prime(recorder.recorded, wait=wait)


def reusable(cases: Sequence[GoldenCase], traces: Sequence[Trace], pipeline: Pipeline) -> dict[str, Trace]:
    """{case id: trace} of an earlier walk whose rewrite, retrieval and rerank this pipeline may reuse: every trace
    records a configuration that differs from the pipeline's only after retrieval
    (:func:`pipeline.engine.retrieval_differences`), on the store's corpus version; else nothing."""
    if not traces or any(t.config is None or t.corpus_version != pipeline.store.corpus_version
                         or retrieval_differences(t.config, pipeline.cfg) for t in traces):
        return {}
    return {c.id: t for c, t in zip(cases, traces, strict=True)}


def earlier_for(case: GoldenCase, earlier: dict[str, Trace]) -> Trace | None:
    """The earlier trace of this case, when it asked the same question with the same history."""
    trace = earlier.get(case.id)
    if trace is None:
        return None
    if trace.question != clean_question(case.question) or trace.history != coerce_history(_history(case)):
        return None
    return trace


