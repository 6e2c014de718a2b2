"""The Trace: one frozen record per stage of one question's run, and the run as a whole.

Every intermediate result is kept (docs/ARCHITECTURE.md): the app renders it, the audit log stores it, the sweep
replays the gate over it, and ``Trace.to_json()`` / ``Trace.from_json()`` round-trip exactly so a stored run
can be diffed and replayed. A stage that did not run keeps its default record with ``status="skipped"``.

Candidate texts are stored once, in ``retrieval.candidates``; later stages refer to chunks by ``chunk_id``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from pipeline.config import PipelineConfig
from pipeline.serde import from_dict, to_dict

Confidence = Literal["HIGH", "MEDIUM", "LOW", ""]


@dataclass(frozen=True)
class Message:
    role: str
    content: str


# -- rewrite -------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class RewriteTrace:
    status: Literal["skipped", "accepted", "rejected", "failed", "expanded", "off"] = "skipped"
    backend: str = ""                 # "llm:<model>" | "terms" | "off"
    original: str = ""                # the user's question as typed
    proposed: str = ""                # what the rewriter produced (before validation)
    query: str = ""                   # the standalone query used downstream
    reason: str = ""                  # why skipped / rejected / failed, or what the expansion added
    history_turns_used: int = 0
    prompt: tuple[Message, ...] = ()
    raw_reply: str = ""
    llm_calls: int = 0
    latency_ms: float = 0.0


# -- retrieval -----------------------------------------------------------------------------------------

@dataclass(frozen=True)
class MatchedTerm:
    """Why a chunk matched on the keyword leg: one query term's share of the BM25 score."""
    term: str
    query_weight: float               # occurrences of the term in the query
    doc_weight: float                 # the chunk's BM25 term-frequency weight (k1, b, avgdl)
    idf: float                        # ln(1 + (N - n + 0.5) / (n + 0.5)), as the engine applies it
    contribution: float               # query_weight * doc_weight * idf


@dataclass(frozen=True)
class Candidate:
    chunk_id: str
    doc_id: str
    title: str
    text: str
    heading_path: tuple[str, ...] = ()
    kind: str = "prose"
    version: str = ""
    effective_date: str = ""
    superseded_by: tuple[str, ...] = ()
    superseded_reason: str = ""
    dense_rank: int | None = None     # 1-based rank on the dense leg, None if not in its top-k
    dense_score: float | None = None  # cosine similarity
    keyword_rank: int | None = None
    keyword_score: float | None = None  # BM25 score from the engine
    matched_terms: tuple[MatchedTerm, ...] = ()
    dense_contribution: float = 0.0   # w_dense / (k + dense_rank)
    keyword_contribution: float = 0.0
    fused_score: float = 0.0
    fused_rank: int = 0
    rrf_score: float | None = None    # the RRF value whatever retrieve.fusion is (= fused_score under rrf)
    dense_norm: float | None = None   # convex fusion: dense score normalised to [0, 1] (None: rrf, or not returned)
    keyword_norm: float | None = None  # convex fusion: BM25 score normalised to [0, 1]


FUSED_SCALE_NOTE = (
    "Fused score = sum over legs of weight / (k + rank). With two legs and k = 60 the maximum is "
    "2/61 ~ 0.033 (first on both legs); a chunk ranked first by one leg only scores 1/61 ~ 0.016. "
    "So a fused threshold near 0.015-0.03 measures whether the legs agree, not relevance."
)
CONVEX_SCALE_NOTE = (
    "Fused score = alpha * dense_norm + (1 - alpha) * keyword_norm, each leg's score normalised to [0, 1] over "
    "its returned top-k (minmax) or from its lowest possible score (tmm: cosine -1, BM25 0); a leg that did not "
    "return the chunk adds 0. Maximum 1 (top of both legs). rrf_score keeps the RRF value."
)


@dataclass(frozen=True)
class WindowScore:
    """The best sentence-window cosine of one top candidate against the query (stored passage vectors)."""
    chunk_id: str
    cosine: float                     # max over the chunk's stored sentence windows (whole chunk excluded)
    passage: str = ""                 # the window that reached it


@dataclass(frozen=True)
class RetrievalTrace:
    status: Literal["skipped", "ran", "failed"] = "skipped"
    query: str = ""
    query_terms: tuple[str, ...] = ()
    dense_top_k: int = 0
    keyword_top_k: int = 0
    rrf_k: int = 60
    dense_weight: float = 1.0
    keyword_weight: float = 1.0
    fusion: str = "rrf"               # rrf | convex (retrieve.fusion); traces older than the field: rrf
    convex_dense_weight: float | None = None  # convex: alpha, the dense leg's weight (keyword: 1 - alpha)
    convex_normalisation: str = ""    # convex: minmax | tmm
    dense_hits: int = 0
    keyword_hits: int = 0
    candidates: tuple[Candidate, ...] = ()   # in fused order
    fused_scale_note: str = FUSED_SCALE_NOTE
    reason: str = ""
    timings_ms: dict[str, float] = field(default_factory=dict)
    dense_status: str = ""            # ran | failed; "" when retrieval did not run
    keyword_status: str = ""          # ran | failed | no-terms (the query was all stop words)
    query_idf: dict[str, float] = field(default_factory=dict)  # IDF of every query term (gate coverage signals)
    window_scores: tuple[WindowScore, ...] = ()  # top candidates' best sentence-window cosine (gate signal)
    window_status: str = ""           # ran | why there are no window scores ("" in traces older than the field)
    # retracted documents holding what the query names and no top candidate does (pipeline.gate.signals)
    retracted_matches: tuple[str, ...] = ()


# -- rerank --------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class UnitScore:
    """One quotable sentence of a candidate as the reader scored it (rerank granularity=sentence)."""
    text: str
    score: float                      # sigmoid of the reader's logit: the probability the sentence answers


@dataclass(frozen=True)
class RerankScore:
    chunk_id: str
    doc_id: str
    rerank_score: float               # sigmoid of the cross-encoder logit, in [0, 1]; best sentence's in sentence mode
    rerank_rank: int
    fused_rank: int
    logit: float = 0.0
    units: tuple[UnitScore, ...] = ()  # sentence granularity: every scored sentence, in document order


@dataclass(frozen=True)
class RerankTrace:
    status: Literal["skipped", "ran", "disabled"] = "skipped"
    reason: str = ""                  # why skipped, and what to install
    model: str = ""
    precision: str = ""
    candidates_in: int = 0
    scored: int = 0                   # fewer than candidates_in when early stop fired
    early_stopped: bool = False
    max_tokens: int = 0
    candidates: tuple[RerankScore, ...] = ()  # top-k, in rerank order
    latency_ms: float = 0.0
    granularity: str = "passage"      # "sentence": candidates scored by their best sentence (the reader)
    pairs_scored: int = 0             # (query, text) pairs the model read

    def unit_scores(self) -> dict[str, dict[str, float]]:
        """chunk id -> sentence text -> reader score, for the candidates kept (empty in passage granularity)."""
        return {c.chunk_id: {u.text: u.score for u in c.units} for c in self.candidates if c.units}

    def best_unit(self) -> tuple[RerankScore, UnitScore] | None:
        """The highest-scored sentence over the kept candidates, with its candidate (None without unit scores)."""
        best = None
        for c in self.candidates:
            for u in c.units:
                if best is None or u.score > best[1].score:
                    best = (c, u)
        return best


# -- gate ----------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class ClosestDocument:
    doc_id: str
    title: str
    chunk_id: str
    score: float
    scale: str


@dataclass(frozen=True)
class GateCondition:
    """One comparison the gate made: ``passed`` is ``score >= threshold``."""
    scale: str
    score: float
    threshold: float
    passed: bool


@dataclass(frozen=True)
class EvidenceSignals:
    """The gate's evidence signals for one run (:mod:`pipeline.gate.signals`); None: not measurable there."""
    window: float | None = None       # best sentence-window cosine over the top candidates (stored vectors)
    coverage: float | None = None     # IDF-weighted share of the query's terms found in the top candidates
    critical: float | None = None     # share of the critical terms (identifiers, numbers, versions, names) found
    bm25: float | None = None         # top BM25 score / the query's IDF mass
    dense: float | None = None        # dense rank 1's cosine
    dense_margin: float | None = None  # dense rank 1's cosine minus dense rank 2's
    fused_norm: float | None = None   # top fused score / its maximum for this rrf_k and these leg weights
    rerank: float | None = None       # top rerank score (sigmoid), when a cross-encoder ran
    reader: float | None = None       # the reader's best sentence score (rerank granularity=sentence), else None
    critical_terms: tuple[str, ...] = ()
    missing_critical: tuple[str, ...] = ()  # critical terms no top candidate contains
    missing_terms: tuple[str, ...] = ()     # query terms no top candidate contains
    top_k: int = 0                    # top candidates read
    retracted_top: int = 0            # of those, superseded or retracted chunks


@dataclass(frozen=True)
class SignalContribution:
    """One term of the learned rule's logit: ``coefficient * value`` (value imputed when missing)."""
    name: str
    value: float
    coefficient: float
    contribution: float
    imputed: bool = False


@dataclass(frozen=True)
class GateTrace:
    status: Literal["skipped", "ran"] = "skipped"
    decision: Literal["answer", "abstain"] = "abstain"
    signal: str = "auto"              # as configured
    scale: Literal["rerank", "fused", "dense", "fused_and_dense", "learned", "window", "coverage", "critical", "bm25",
                   "dense_margin", "fused_norm"] = "fused"  # the rule actually applied
    score: float = 0.0
    threshold: float = 0.0
    margin: float = 0.0               # score - threshold (of the binding condition)
    conditions: tuple[GateCondition, ...] = ()  # every comparison made; all must pass to answer
    reason: str = ""
    top_chunk_id: str = ""
    top_rerank_score: float | None = None
    top_fused_score: float | None = None
    top_dense_cosine: float | None = None
    closest_documents: tuple[ClosestDocument, ...] = ()
    abstention_message: str = ""
    llm_calls_saved: int = 0
    best_dense_cosine: float | None = None  # dense rank 1's cosine (the dense signal); top chunk's may be None
    score_chunk_id: str = ""          # the chunk whose score was compared (each scale reads its own top)
    signals: EvidenceSignals = field(default_factory=EvidenceSignals)
    contributions: tuple[SignalContribution, ...] = ()  # the learned rule's logit, term by term (scale learned)
    case: str = ""                    # abstentions: off-topic | on-topic | retracted | no-retrieval
    plain_reason: str = ""            # abstentions: the case in one short sentence, for a reader
    closest_sentence: str = ""        # abstentions with the reader: its best-scored sentence, which does not answer
    closest_sentence_score: float | None = None


# -- generation ----------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Source:
    number: int                       # the [n] the generator sees
    chunk_id: str
    doc_id: str
    title: str
    version: str = ""
    effective_date: str = ""


@dataclass(frozen=True)
class LLMAttempt:
    messages: tuple[Message, ...] = ()
    raw_reply: str = ""
    error: str = ""                   # provider error (timeout, connection, 5xx)
    parse_error: str = ""             # why the reply did not satisfy the output schema
    latency_ms: float = 0.0
    usage: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class TierAttempt:
    """One tier's try at the answer under ``generate.tiers``: what it cost, what the validator said, and why it
    was escalated (empty when it was kept or was the last tier)."""
    tier: int                         # 1-based position in generate.tiers
    backend: str                      # the generator that produced this tier's answer (extractive on fallback)
    model: str = ""
    status: str = ""                  # this tier's GenerationTrace.status
    answer: str = ""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float | None = None     # litellm's offline price list; None when it does not know the model
    llm_calls: int = 0
    latency_ms: float = 0.0           # generation + validation of this tier
    supported: int = 0
    unsupported: int = 0
    uncited: int = 0
    misattributed: int = 0
    fabricated_markers: tuple[int, ...] = ()
    validation_status: str = ""
    fallback_reason: str = ""
    escalate_reasons: tuple[str, ...] = ()   # the triggers that fired (generate.escalate_on)
    kept: bool = False


@dataclass(frozen=True)
class GenerationTrace:
    status: Literal["skipped", "answered", "abstained", "fallback", "cached"] = "skipped"
    backend: str = ""                 # the generator that produced the answer
    requested_backend: str = ""       # the configured one (differs on fallback)
    model: str = ""
    sources: tuple[Source, ...] = ()
    attempts: tuple[LLMAttempt, ...] = ()
    answer: str = ""
    used_source_ids: tuple[int, ...] = ()
    confidence: Confidence = ""
    limitations: tuple[str, ...] = ()
    fallback_reason: str = ""
    is_abstention: bool = False
    llm_calls: int = 0
    latency_ms: float = 0.0
    notes: tuple[str, ...] = ()       # what the generator changed in the model's reply, and why
    flagged_sources: tuple[int, ...] = ()  # offered sources holding text addressed to a model (injection)
    tiers: tuple[TierAttempt, ...] = ()    # generate.tiers: every tier tried, in order; empty for one tier
    kept_tier: int = 0                     # the tier whose answer was kept (1-based); 0 without tiers
    reader_scores: tuple[float, ...] = ()  # extractive with the reader: each quoted unit's reader score, in order
    reader_closest: str = ""               # the reader abstained: its best-scored sentence, and the score
    reader_closest_score: float | None = None


# -- validation and trust ------------------------------------------------------------------------------

@dataclass(frozen=True)
class CitationScore:
    marker: int
    chunk_id: str                     # "" when the marker is fabricated
    similarity: float | None          # None when the marker is fabricated
    passage: str = ""                 # the part of the chunk that matched best (validate.match="passage")


@dataclass(frozen=True)
class ClaimCheck:
    text: str
    markers: tuple[int, ...] = ()
    similarities: tuple[CitationScore, ...] = ()
    verdict: Literal["supported", "unsupported", "uncited"] = "uncited"
    fabricated_markers: tuple[int, ...] = ()
    best_similarity: float | None = None
    span: tuple[int, int] = (0, 0)    # [start, end) of the sentence in the answer, markers included
    # an offered source this claim does not cite that matches it by validate.misattribution_margin more than
    # every source it cites, by cosine or by copied words (pipeline.validation.citations): likely that source's
    closer_source: int | None = None
    closer_similarity: float | None = None     # its cosine; None when only the word test found it
    closer_passage: str = ""
    # the NLI check (pipeline.validation.entailment): the verdict the embedding check and key facts gave before it,
    # the NLI label of the claim against its best cited passage, its (entailment, neutral, contradiction)
    # probabilities, and which cited source and passage that was; "" / None when the check did not run
    embedding_verdict: str = ""
    nli_label: str = ""
    nli_probs: tuple[float, ...] | None = None
    nli_marker: int | None = None
    nli_passage: str = ""
    nli_quoted: bool = False     # the claim is cited text word for word: entailed by definition, whatever the model


@dataclass(frozen=True)
class ValidationTrace:
    status: Literal["skipped", "ran", "failed"] = "skipped"   # failed: the encoder raised or returned junk
    reason: str = ""
    threshold: float = 0.5
    claims: tuple[ClaimCheck, ...] = ()
    fabricated_markers: tuple[int, ...] = ()
    cited_sources: tuple[int, ...] = ()
    uncited_sources: tuple[int, ...] = ()      # offered, never cited: dimmed in the UI
    superseded_sources: tuple[int, ...] = ()   # offered chunks carrying superseded_by: amber badge
    supported: int = 0
    unsupported: int = 0
    uncited: int = 0
    misattributed: int = 0                     # cited claims an uncited offered source matches much better
    not_compared: tuple[int, ...] = ()         # offered sources left out of its cosine test (no stored vectors)
    encoder_calls: int = 0
    latency_ms: float = 0.0
    non_claims: tuple[str, ...] = ()           # headings, lead-ins, questions: not checked, listed for review
    # the NLI check: "ran", "off" (validate.nli=off), "unavailable" (the model does not resolve: a recorded
    # degradation, verdicts from the embedding check alone) or "failed" (the model raised); the model and the reason
    nli_status: str = "off"
    nli_model: str = ""
    nli_reason: str = ""
    nli_pairs: int = 0
    nli_ms: float = 0.0


@dataclass(frozen=True)
class TrustTrace:
    status: Literal["skipped", "ran"] = "skipped"
    reported_confidence: Confidence = ""
    final_confidence: Confidence = ""
    limitations: tuple[str, ...] = ()
    rules_fired: tuple[str, ...] = ()


# -- the run -------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Trace:
    question: str
    history: tuple[Message, ...] = ()
    rewrite: RewriteTrace = field(default_factory=RewriteTrace)
    retrieval: RetrievalTrace = field(default_factory=RetrievalTrace)
    rerank: RerankTrace = field(default_factory=RerankTrace)
    gate: GateTrace = field(default_factory=GateTrace)
    generation: GenerationTrace = field(default_factory=GenerationTrace)
    validation: ValidationTrace = field(default_factory=ValidationTrace)
    trust: TrustTrace = field(default_factory=TrustTrace)
    answer: str = ""
    abstained: bool = False
    confidence: Confidence = ""
    limitations: tuple[str, ...] = ()
    llm_calls: int = 0
    llm_calls_saved: int = 0
    cache_hit: bool = False
    degradations: tuple[str, ...] = ()     # every recorded fallback or skipped stage, one line each
    timings_ms: dict[str, float] = field(default_factory=dict)
    config_hash: str = ""
    corpus_version: int = 0
    config: PipelineConfig | None = None
    run_id: str = ""
    created_at: str = ""

    # -- serialisation -------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return to_dict(self)

    def to_json(self, indent: int | None = None) -> str:
        return json.dumps(self.to_dict(), indent=indent, ensure_ascii=False)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Trace:
        return from_dict(cls, data)

    @classmethod
    def from_json(cls, text: str) -> Trace:
        return cls.from_dict(json.loads(text))

    # -- lookups the app, the validator and the sweep share --------------------------------------------
    def candidate(self, chunk_id: str) -> Candidate | None:
        for c in self.retrieval.candidates:
            if c.chunk_id == chunk_id:
                return c
        return None

    def ranked_candidates(self) -> tuple[Candidate, ...]:
        """Candidates in final order: rerank order when the reranker ran, else fused order."""
        if self.rerank.status == "ran" and self.rerank.candidates:
            by_id = {c.chunk_id: c for c in self.retrieval.candidates}
            return tuple(by_id[r.chunk_id] for r in self.rerank.candidates if r.chunk_id in by_id)
        return self.retrieval.candidates

    def rerank_score(self, chunk_id: str) -> float | None:
        for r in self.rerank.candidates:
            if r.chunk_id == chunk_id:
                return r.rerank_score
        return None

    def with_stage(self, **stages: Any) -> Trace:
        return replace(self, **stages)
