"""Hand-built Trace records for the cache, audit-log and concurrency tests (no engine needed), and
`timeless`: what two runs of one question must share."""

from __future__ import annotations

import dataclasses

from pipeline.config import PipelineConfig
from pipeline.trace import (
    Candidate,
    CitationScore,
    ClaimCheck,
    GateTrace,
    GenerationTrace,
    RerankScore,
    RerankTrace,
    RetrievalTrace,
    RewriteTrace,
    Source,
    Trace,
    TrustTrace,
    ValidationTrace,
)


def answered_trace(question: str = "What is the default delivery timeout?", *, doc_ids=("err-timeout-502",),
                   corpus_version: int = 3, run_id: str = "", **validation_changes) -> Trace:
    """A clean, cited, validated answer; ``validation_changes`` make it dirty (``unsupported=1``, ...)."""
    cfg = PipelineConfig()
    cands = tuple(Candidate(chunk_id=f"{d}#0", doc_id=d, title=d, text=f"Text of {d}.", fused_score=0.03 - i / 1000,
                            fused_rank=i + 1, dense_rank=i + 1) for i, d in enumerate(doc_ids))
    sources = tuple(Source(number=i + 1, chunk_id=c.chunk_id, doc_id=c.doc_id, title=c.title)
                    for i, c in enumerate(cands))
    claim = ClaimCheck(text="The default is 15000 ms.", markers=(1,), verdict="supported", best_similarity=0.71,
                       similarities=(CitationScore(marker=1, chunk_id=cands[0].chunk_id, similarity=0.71),),
                       span=(0, 28))
    validation = ValidationTrace(status="ran", claims=(claim,), supported=1, cited_sources=(1,), encoder_calls=1,
                                 uncited_sources=tuple(range(2, len(sources) + 1)))
    validation = dataclasses.replace(validation, **validation_changes)
    return Trace(
        question=question,
        rewrite=RewriteTrace(status="skipped", original=question, query=question),
        retrieval=RetrievalTrace(status="ran", query=question, candidates=cands),
        rerank=RerankTrace(status="ran", candidates=tuple(
            RerankScore(chunk_id=c.chunk_id, doc_id=c.doc_id, rerank_score=0.9 - i / 10, rerank_rank=i + 1,
                        fused_rank=i + 1) for i, c in enumerate(cands))),
        gate=GateTrace(status="ran", decision="answer", scale="rerank", score=0.9, threshold=0.45),
        generation=GenerationTrace(status="answered", backend="litellm", sources=sources,
                                   answer="The default is 15000 ms [1].", used_source_ids=(1,), confidence="HIGH",
                                   llm_calls=1),
        validation=validation,
        trust=TrustTrace(status="ran", reported_confidence="HIGH", final_confidence="HIGH"),
        answer="The default is 15000 ms [1].", confidence="HIGH", llm_calls=1,
        timings_ms={"retrieve": 12.5, "generate": 800.0, "total": 830.25},
        config_hash=cfg.config_hash(), corpus_version=corpus_version, config=cfg, run_id=run_id,
        created_at="2025-11-12T09:14:03Z")


def abstained_trace(question: str = "How do I bake bread?") -> Trace:
    """A gate abstention: no generation, the fixed sentence, zero LLM calls."""
    return Trace(question=question, rewrite=RewriteTrace(query=question),
                 gate=GateTrace(status="ran", decision="abstain", scale="rerank", score=0.02, threshold=0.45,
                                abstention_message="I cannot answer that from the documents I have."),
                 answer="I cannot answer that from the documents I have.", abstained=True,
                 config_hash=PipelineConfig().config_hash(), corpus_version=3, created_at="2025-11-12T09:15:00Z")


STAGES = ("rewrite", "retrieval", "rerank", "gate", "generation", "validation", "trust")


def timeless(trace) -> dict:
    """``trace.to_dict()`` without its run id, creation time and every latency or timing field."""
    d = trace.to_dict()
    for key in ("run_id", "created_at", "timings_ms"):
        d.pop(key)
    for stage in STAGES:
        d[stage].pop("latency_ms", None)
    d["retrieval"].pop("timings_ms", None)
    d["validation"].pop("nli_ms", None)
    return d
