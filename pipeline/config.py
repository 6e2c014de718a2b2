"""PipelineConfig: every tunable of the answerer, frozen, nested per stage, JSON round-trip, stable hash.

The defaults are the design's seed values. The two gate thresholds are marked ``provisional``: they were
chosen before any tuning on a labelled set and should be replaced by what ``workbench tune`` recommends.

Overrides come from the CLI and the app as ``stage.key=value`` strings (``--set gate.signal=dense``);
:func:`apply_overrides` parses each value by the field's declared type and fails with a message that names
the valid keys or the allowed range, so a typo never silently does nothing.
"""

from __future__ import annotations

import dataclasses
import difflib
import hashlib
import json
import math
from dataclasses import dataclass, field
from typing import Any, Literal, get_args, get_origin, get_type_hints

from pipeline.serde import from_dict, to_dict


class ConfigError(ValueError):
    """A configuration value or key the user must fix; the message says how."""


def _tunable(default: Any, help: str, *, lo: float | None = None, hi: float | None = None,
             provisional: bool = False) -> Any:
    return field(default=default, metadata={"help": help, "lo": lo, "hi": hi, "provisional": provisional})


@dataclass(frozen=True)
class ChunkingConfig:
    max_tokens: int = _tunable(220, "Target chunk size in words; tables, lists and code are never split mid-way.",
                               lo=20, hi=4000)
    overlap_tokens: int = _tunable(30, "Words of prose carried over from the previous chunk of the same section.",
                                   lo=0, hi=1000)


@dataclass(frozen=True)
class EmbeddingConfig:
    model: str = _tunable("sentence-transformers/all-MiniLM-L6-v2",
                          "Bi-encoder for the dense leg and the citation validator.")
    # smaller batches pad less to the longest text of a batch; the measured trade-off is in BENCHMARKS.md.
    batch_size: int = _tunable(16, "Texts per embedding call during ingestion.", lo=1, hi=4096)
    precision: Literal["fp32", "int8"] = _tunable(
        "fp32", "fp32 (PyTorch) or int8 (ONNX Runtime dynamic quantisation, exported once and cached). Part of the "
        "store's build signature: changing it re-embeds every document on the next ingest, so fp32 and int8 "
        "vectors are never mixed in one store.")


@dataclass(frozen=True)
class KeywordConfig:
    k1: float = _tunable(1.2, "BM25 term-frequency saturation (Robertson & Zaragoza 2009).", lo=0.0, hi=10.0)
    b: float = _tunable(0.75, "BM25 length normalisation.", lo=0.0, hi=1.0)
    heading_weight: float = _tunable(
        1.0, "BM25 term frequency of a word in a chunk's heading path (a document's title) counts this many times; "
        "1 = heading and text as one field. Changing it re-indexes the store on the next ingest.", lo=0.1, hi=10.0)


@dataclass(frozen=True)
class IngestConfig:
    supersede_similarity: float = _tunable(
        0.80, "Cosine above which a newer chunk that states different numbers/identifiers supersedes an older one.",
        lo=0.0, hi=1.0)
    batch_chunks: int = _tunable(
        512, "Chunks (whole documents) embedded and written together: one encoder call, one index flush and one "
             "catalogue transaction per batch.", lo=1, hi=100_000)
    passage_vectors: bool = _tunable(
        True, "Also embed each chunk's sentence windows at ingestion, so validating an answer encodes only its "
              "claims (what it costs at ingestion: BENCHMARKS.md, \"Passage vectors\"; off: the validator embeds "
              "them per answer).")
    # late is the default because the validator reached the same verdict on at least 98 % of the golden
    # evaluation's claims with late and with separately encoded windows (the rule issue 19 set; the measured
    # agreement is in BENCHMARKS.md, "Passage vectors: late chunking vs separate encoding").
    passage_vectors_mode: Literal["separate", "late"] = _tunable(
        "late", "How the sentence-window vectors are made: separate = each window encoded on its own (what the "
        "validator encodes when nothing is stored); late = pooled from the chunk's own forward pass (late chunking: "
        "no second encoder pass; windows past the encoder's token limit are still encoded on their own).")


@dataclass(frozen=True)
class RetrieveConfig:
    dense_top_k: int = _tunable(100, "Candidates from the dense leg.", lo=1, hi=1000)
    keyword_top_k: int = _tunable(100, "Candidates from the BM25 keyword leg.", lo=1, hi=1000)
    rrf_k: int = _tunable(60, "Reciprocal-rank-fusion constant k (Cormack et al. 2009).", lo=1, hi=1000)
    dense_weight: float = _tunable(1.0, "Weight of the dense leg in fusion.", lo=0.0, hi=10.0)
    keyword_weight: float = _tunable(1.0, "Weight of the keyword leg in fusion.", lo=0.0, hi=10.0)
    fusion: Literal["rrf", "convex"] = _tunable(
        "rrf", "rrf: reciprocal-rank fusion (rrf_k, dense/keyword weights; ranks only). convex: convex_dense_weight * "
        "normalised cosine + (1 - convex_dense_weight) * normalised BM25 (Bruch et al. 2023); the fused score is "
        "then in [0, 1], not on the RRF scale the fused gate threshold assumes.")
    convex_dense_weight: float = _tunable(0.5, "Convex fusion: weight of the dense leg (keyword: 1 - this).",
                                          lo=0.0, hi=1.0)
    convex_normalisation: Literal["minmax", "tmm"] = _tunable(
        "minmax", "Convex fusion: minmax over each leg's returned top-k, or tmm from the leg's lowest possible "
        "score (cosine -1, BM25 0).")


@dataclass(frozen=True)
class RerankConfig:
    enabled: bool = _tunable(True, "Run the cross-encoder; when off or unavailable the gate requires fused AND dense.")
    # The offline default is the project's own reader (pipeline/models/weights/answerability, `workbench train
    # answerability`): it reads one sentence at a time, so granularity=sentence. A passage cross-encoder from the
    # hub (cross-encoder/ms-marco-MiniLM-L-6-v2, `make models`) reads whole passages: granularity=passage.
    model: str = _tunable("workbench/answerability-reader",
                          "Cross-encoder: the project's reader (workbench/answerability-reader), a directory, or a "
                          "hub checkpoint such as cross-encoder/ms-marco-MiniLM-L-6-v2.")
    granularity: Literal["sentence", "passage"] = _tunable(
        "sentence", "sentence: score each quotable sentence of a candidate and keep its best (the reader); "
        "passage: score the whole passage (a passage cross-encoder).")
    # The reader says whether a sentence answers, not which document the question is about: ordering candidates by
    # it alone lowered the golden set's document MRR, so by default the order is a reciprocal-rank fusion of the
    # fused rank and the reader's rank (BENCHMARKS.md, "Golden-set evaluation").
    order: Literal["blend", "reader", "fused"] = _tunable(
        "blend", "Sentence granularity: order candidates by RRF of fused rank and reader rank (blend), by the "
        "reader's score alone (reader), or keep the fused order (fused; the reader's scores still feed the gate and "
        "the quotes). Passage granularity always orders by the cross-encoder's score.")
    blend_k: int = _tunable(60, "The RRF constant of the blend order.", lo=1, hi=1000)
    max_sentences: int = _tunable(24, "Sentences per candidate scored in sentence granularity (document order).",
                                  lo=1, hi=500)
    # The seed reranked the fused top-100 in fp32, far over the latency budget on 2 CPU cores. 20 candidates of
    # 128 tokens in int8 is the setting chosen from BENCHMARKS.md ("Rerank trade-off"); whether it
    # stays within 1 nDCG point of reranking the top-100 needs a relevance-trained cross-encoder to check,
    # which does not resolve offline. Raise candidates where a GPU or more cores are available.
    candidates: int = _tunable(20, "Fused candidates sent to the cross-encoder.", lo=1, hi=1000)
    top_k: int = _tunable(10, "Candidates kept after reranking.", lo=1, hi=1000)
    max_tokens: int = _tunable(128, "Truncate (query, passage) pairs to this many tokens.", lo=16, hi=512)
    precision: Literal["fp32", "int8"] = _tunable("int8", "fp32 (PyTorch) or int8 (ONNX Runtime dynamic quantisation).")
    batch_size: int = _tunable(16, "Pairs per cross-encoder forward pass.", lo=1, hi=1024)
    early_stop: bool = _tunable(False, "Stop scoring once the gate decision can no longer change.")


@dataclass(frozen=True)
class GateConfig:
    signal: Literal["auto", "rerank", "fused", "dense", "fused_and_dense", "learned", "window", "coverage",
                    "critical", "bm25", "dense_margin", "fused_norm"] = _tunable(
        "auto", "auto = the learned combination of the evidence signals, with the reader's best sentence score "
        "among them where the reader ran (its own coefficient set); or force one rule: rerank, fused, dense, "
        "fused_and_dense, learned, or one evidence signal alone "
        "(window, coverage, critical, bm25, dense_margin, fused_norm: that signal against its own threshold; a run "
        "without a value for it abstains).")
    confidence_threshold_rerank: float = _tunable(0.45, "Answer when the top rerank score (sigmoid) is at least this.",
                                                  lo=0.0, hi=1.0, provisional=True)
    # The seed was 0.015, below the 1/61 ~ 0.0164 that a chunk ranked first by ONE leg scores, so the gate
    # could never abstain. 0.0314 asks that the top chunk be near the top of both legs: first on one and in the
    # top 6 of the other (1/61 + 1/66 = 0.03154; 1/61 + 1/67 = 0.03132 is not enough), second and in the top 5,
    # or third and in the top 4 (with rrf_k = 60 and equal leg weights). The pair (fused 0.0314,
    # dense 0.595) is what `workbench tune` recommends at <= 5 % false answers when fitted on the golden set's
    # tune part only (golden/golden.split.json); its rates on the held-out test part are in BENCHMARKS.md
    # ("Golden-set evaluation"). Still provisional: re-tune on your data.
    confidence_threshold_fused: float = _tunable(
        0.0314, "Answer when the top fused RRF score is at least this (two legs: max 2/61 ~ 0.033; first on one "
        "leg only ~ 0.016).", lo=0.0, hi=1.0, provisional=True)
    confidence_threshold_dense: float = _tunable(
        0.595, "Answer when the best dense cosine (of the best dense hit) is at least this.",
        lo=-1.0, hi=1.0, provisional=True)
    closest_documents: int = _tunable(3, "Documents shown with an abstention.", lo=0, hi=50)
    # The learned rule (pipeline/gate/learned.py): answer when sigmoid(intercept + sum coefficient * signal)
    # reaches confidence_threshold_learned. The values are `workbench tune golden/golden.jsonl --fit` on the demo
    # golden set's tune part only (golden/golden.split.json; threshold read off the 5-fold held-out
    # probabilities at <= 5 % false answers), never on a set they are reported on; SQuAD 2.0 is not fitted on.
    # Fitted with the default passage-vector mode (late): the window signal reads those vectors.
    # fused_norm is not fitted (pipeline/gate/learned.py FITTED). Provisional: re-fit on your data.
    confidence_threshold_learned: float = _tunable(
        0.894, "Answer when the learned rule's probability is at least this.", lo=0.0, hi=1.0, provisional=True)
    learned_intercept: float = _tunable(-9.9186, "Learned rule: intercept of the logit.", lo=-1000.0, hi=1000.0,
                                        provisional=True)
    learned_window: float = _tunable(5.3271, "Learned rule: coefficient of the best sentence-window cosine.",
                                     lo=-1000.0, hi=1000.0, provisional=True)
    learned_coverage: float = _tunable(1.2998, "Learned rule: coefficient of the IDF-weighted query-term coverage.",
                                       lo=-1000.0, hi=1000.0, provisional=True)
    learned_critical: float = _tunable(4.0152, "Learned rule: coefficient of the critical-term coverage.",
                                       lo=-1000.0, hi=1000.0, provisional=True)
    learned_bm25: float = _tunable(1.9752, "Learned rule: coefficient of the normalised BM25 top score.",
                                   lo=-1000.0, hi=1000.0, provisional=True)
    learned_dense: float = _tunable(3.5368, "Learned rule: coefficient of the best dense cosine.",
                                    lo=-1000.0, hi=1000.0, provisional=True)
    learned_dense_margin: float = _tunable(0.2455, "Learned rule: coefficient of the dense top-1 margin.",
                                           lo=-1000.0, hi=1000.0, provisional=True)
    learned_fused_norm: float = _tunable(0.0, "Learned rule: coefficient of the normalised fused score.",
                                         lo=-1000.0, hi=1000.0, provisional=True)
    # The learned rule WITH the reader (pipeline/gate/learned.py READER_FEATURES): used instead of the set above for a
    # run where the reader scored sentences (rerank.granularity=sentence); all zero = not fitted (the set above
    # decides). Fitted like the set above by `workbench tune --fit` on the golden tune part, its intercept shifted so
    # that its chosen operating point sits at confidence_threshold_learned (one threshold for both sets).
    learned_r_intercept: float = _tunable(
        0.0, "Reader set: intercept of the logit.", lo=-1000.0, hi=1000.0, provisional=True)
    learned_r_window: float = _tunable(
        0.0, "Reader set: coefficient of the best sentence-window cosine.", lo=-1000.0, hi=1000.0, provisional=True)
    learned_r_coverage: float = _tunable(
        0.0, "Reader set: coefficient of the IDF-weighted term coverage.", lo=-1000.0, hi=1000.0, provisional=True)
    learned_r_critical: float = _tunable(
        0.0, "Reader set: coefficient of the critical-term coverage.", lo=-1000.0, hi=1000.0, provisional=True)
    learned_r_bm25: float = _tunable(
        0.0, "Reader set: coefficient of the normalised BM25 top score.", lo=-1000.0, hi=1000.0, provisional=True)
    learned_r_dense: float = _tunable(
        0.0, "Reader set: coefficient of the best dense cosine.", lo=-1000.0, hi=1000.0, provisional=True)
    learned_r_dense_margin: float = _tunable(
        0.0, "Reader set: coefficient of the dense top-1 margin.", lo=-1000.0, hi=1000.0, provisional=True)
    learned_r_fused_norm: float = _tunable(
        0.0, "Reader set: coefficient of the normalised fused score.", lo=-1000.0, hi=1000.0, provisional=True)
    learned_r_reader: float = _tunable(
        0.0, "Reader set: coefficient of the reader's best sentence score.", lo=-1000.0, hi=1000.0, provisional=True)
    # Single-signal rules (gate.signal=window, ...; pipeline/gate/rule.py): each threshold is the best point
    # `workbench tune golden/golden.jsonl` reports for that rule at <= 5 % false answers (made readable as its
    # recommendations are), fitted on the golden set's tune part only (golden/golden.split.json), never on the test
    # part; the same report gives each rule's rates on the held-out test part. The window cosines are those of the
    # default passage-vector mode (ingest.passage_vectors_mode): re-tune window after switching it. For critical
    # and fused_norm no threshold inside the signal's range answers anything within that bound on the tune part,
    # so their default is the strictest one in range, 1.0 (every critical term found; first on both legs), and
    # neither is a good rule alone. Provisional: re-tune on your data.
    confidence_threshold_window: float = _tunable(
        0.774, "Rule window: answer when the best sentence-window cosine of the top passages is at least this.",
        lo=-1.0, hi=1.0, provisional=True)
    confidence_threshold_coverage: float = _tunable(
        0.76, "Rule coverage: answer when one top passage holds at least this share of the query's IDF-weighted "
        "terms (0 to 1).", lo=0.0, hi=1.0, provisional=True)
    confidence_threshold_critical: float = _tunable(
        1.0, "Rule critical: answer when the top passages contain at least this share of the question's "
        "critical terms (identifiers, numbers, versions, names; 1 when it has none).", lo=0.0, hi=1.0,
        provisional=True)
    confidence_threshold_bm25: float = _tunable(
        0.912, "Rule bm25: answer when the top BM25 score divided by the query's IDF mass is at least this.",
        lo=0.0, hi=10.0, provisional=True)
    confidence_threshold_dense_margin: float = _tunable(
        0.083, "Rule dense_margin: answer when dense rank 1's cosine leads dense rank 2's by at least this.",
        lo=0.0, hi=2.0, provisional=True)
    confidence_threshold_fused_norm: float = _tunable(
        1.0, "Rule fused_norm: answer when the top fused (RRF) score divided by the highest one these fusion "
        "settings allow is at least this (0 to 1, whatever rrf_k is).", lo=0.0, hi=1.0, provisional=True)


@dataclass(frozen=True)
class RewriteConfig:
    backend: Literal["llm", "terms", "off"] = _tunable(
        "terms", "llm = rewrite with rewrite.model; terms = deterministic history-terms expansion; off.")
    model: str = _tunable("local", "litellm model string (e.g. ollama/qwen2.5) or 'local' for SmolLM2.")
    api_base: str = _tunable("", "Base URL for an OpenAI-compatible server (empty: provider default).")
    timeout_s: float = _tunable(20.0, "LLM timeout for one rewrite call.", lo=0.1, hi=600.0)
    temperature: float = _tunable(0.0, "Rewrite temperature.", lo=0.0, hi=2.0)
    query_rewrite_history_turns: int = _tunable(6, "Most recent history turns shown to the rewriter.", lo=0, hi=100)
    max_chars: int = _tunable(400, "Reject rewrites longer than this.", lo=10, hi=10000)
    max_growth: float = _tunable(6.0, "Reject rewrites that grew more than this factor ...", lo=1.0, hi=100.0)
    long_chars: int = _tunable(200, "... and are at least this long.", lo=1, hi=10000)


EscalationTrigger = Literal["unsupported", "uncited", "misattributed", "unchecked", "fabricated", "malformed",
                            "provider_error", "abstained"]
ESCALATION_TRIGGERS: tuple[str, ...] = get_args(EscalationTrigger)
TIER_KEYS = ("backend", "model", "api_base", "max_tokens")


@dataclass(frozen=True)
class TierConfig:
    """One tier of ``generate.tiers``: which generator answers, and its reply budget."""
    backend: Literal["extractive", "litellm", "local"] = "litellm"
    model: str = ""
    api_base: str = ""
    max_tokens: int = 512

    def __post_init__(self) -> None:
        if self.backend not in ("extractive", "litellm", "local"):
            raise ConfigError(f"a tier's backend must be one of extractive, litellm, local; got {self.backend!r}")
        if not isinstance(self.model, str) or not isinstance(self.api_base, str):
            raise ConfigError("a tier's model and api_base must be strings")
        if self.backend == "litellm" and not self.model.strip():
            raise ConfigError("a litellm tier needs a model, e.g. "
                              "{\"backend\": \"litellm\", \"model\": \"openai/gpt-4o\"}")
        if isinstance(self.max_tokens, bool) or not isinstance(self.max_tokens, int) or \
                not 16 <= self.max_tokens <= 8192:
            raise ConfigError(f"a tier's max_tokens must be an integer between 16 and 8192; got {self.max_tokens!r}")

    @property
    def label(self) -> str:
        return self.model or self.backend


def parse_tiers(raw: Any, key: str = "generate.tiers") -> tuple[TierConfig, ...]:
    """``generate.tiers`` from JSON text (as ``--set`` and the sidebar give it), a list of objects, or tiers.

    Strict: unknown keys and wrong types are a one-line :class:`ConfigError` naming the tier and the key."""
    if isinstance(raw, str):
        text = raw.strip() or "[]"
        try:
            raw = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"{key} must be a JSON list of tiers; {exc.msg} at character {exc.pos}") from None
    if not isinstance(raw, (list, tuple)):
        raise ConfigError(f"{key} must be a JSON list of tiers, e.g. [{{\"backend\": \"extractive\"}}]; "
                          f"got {type(raw).__name__}")
    out = []
    for i, item in enumerate(raw, start=1):
        if isinstance(item, TierConfig):
            out.append(item)
            continue
        if not isinstance(item, dict):
            raise ConfigError(f"{key}[{i}] must be an object with keys {', '.join(TIER_KEYS)}; got "
                              f"{type(item).__name__}")
        unknown = [k for k in item if k not in TIER_KEYS]
        if unknown:
            shown = unknown[0] if str(unknown[0]).isprintable() else repr(unknown[0])
            raise ConfigError(f"{key}[{i}]: unknown key {shown}; keys: {', '.join(TIER_KEYS)}")
        try:
            out.append(TierConfig(**item))
        except ConfigError as exc:
            raise ConfigError(f"{key}[{i}]: {exc}") from None
    return tuple(out)


def parse_triggers(raw: Any, key: str = "generate.escalate_on") -> tuple[str, ...]:
    """``generate.escalate_on`` from a JSON list, comma-separated text or a sequence; unknown names are errors."""
    if isinstance(raw, str):
        text = raw.strip()
        if text.startswith("["):
            try:
                raw = json.loads(text)
            except json.JSONDecodeError as exc:
                raise ConfigError(f"{key} must be a JSON list or comma-separated triggers; {exc.msg}") from None
        else:
            raw = [part.strip() for part in text.split(",") if part.strip()]
    if not isinstance(raw, (list, tuple)) or not all(isinstance(t, str) for t in raw):
        raise ConfigError(f"{key} must be a list of trigger names: {', '.join(ESCALATION_TRIGGERS)}")
    bad = [t for t in raw if t not in ESCALATION_TRIGGERS]
    if bad:
        shown = bad[0] if bad[0].isprintable() else repr(bad[0])
        raise ConfigError(f"{key}: unknown trigger {shown}; use any of {', '.join(ESCALATION_TRIGGERS)}")
    return tuple(dict.fromkeys(raw))


@dataclass(frozen=True)
class GenerateConfig:
    backend: Literal["extractive", "litellm", "local"] = _tunable(
        "extractive", "extractive (offline, deterministic), litellm (any provider) or local (SmolLM2).")
    model: str = _tunable("", "litellm model string, e.g. ollama/qwen2.5 or openai/gpt-4o-mini.")
    api_base: str = _tunable("", "Base URL for an OpenAI-compatible server (empty: provider default).")
    timeout_s: float = _tunable(30.0, "LLM timeout per call.", lo=0.1, hi=600.0)
    retries: int = _tunable(1, "Provider retries on transient errors (litellm num_retries).", lo=0, hi=10)
    llm_temperature: float = _tunable(0.1, "Generation temperature.", lo=0.0, hi=2.0)
    max_output_tokens: int = _tunable(512, "Upper bound on the reply length.", lo=16, hi=8192)
    max_sources: int = _tunable(6, "Reranked chunks offered to the generator as numbered sources.", lo=1, hi=50)
    extractive_sentences: int = _tunable(3, "Sentences the extractive generator quotes.", lo=1, hi=20)
    reader_min_score: float = _tunable(
        0.5, "With reader scores (rerank granularity=sentence), the extractive generator quotes only sentences "
        "the reader scores at least this; none -> it abstains and names the closest sentence.", lo=0.0, hi=1.0)
    tiers: tuple[TierConfig, ...] = _tunable(
        (), "Tiered generation (JSON list, cheapest first), e.g. [{\"backend\": \"litellm\", \"model\": "
            "\"openai/gpt-4o-mini\"}, {\"backend\": \"litellm\", \"model\": \"openai/gpt-4o\"}]: tier 1 answers, "
            "the validator checks, the next tier answers when a trigger in generate.escalate_on fires. Keys: "
            "backend, model, api_base, max_tokens. Empty: one tier, generate.backend/model.")
    escalate_on: tuple[EscalationTrigger, ...] = _tunable(
        ESCALATION_TRIGGERS, "When a tier's answer goes to the next tier (JSON list or comma-separated): "
        "unsupported / uncited claim, a claim another offered source states much more closely (misattributed), "
        "an answer with no claim the validator could check (unchecked: only code, headings, lead-ins), "
        "fabricated marker, malformed reply after its repair turn, provider error, "
        "abstained although the gate passed.")

    def __post_init__(self) -> None:
        bad = [t for t in self.escalate_on if t not in ESCALATION_TRIGGERS]
        if bad:
            raise ConfigError(f"generate.escalate_on: unknown trigger {bad[0]!r}; use any of "
                              f"{', '.join(ESCALATION_TRIGGERS)}")


@dataclass(frozen=True)
class ValidateConfig:
    enabled: bool = _tunable(
        True, "Check each claim against the sources it cites; off is the week-one setting (retrieval plus "
              "citations, no verifier): citations are shown unchecked and the trust rules see no verdicts.")
    claim_threshold: float = _tunable(0.50, "A claim is supported when a cited chunk's cosine reaches this.",
                                      lo=-1.0, hi=1.0)
    match: Literal["passage", "chunk"] = _tunable(
        "passage", "passage = best of the whole chunk and its sentence windows (a claim usually restates one "
                   "sentence; robust to the encoder's 256-token limit); chunk = the whole chunk only.")
    encode_batch_size: int = _tunable(
        8, "Texts per forward pass inside the one validation encoder call (length-sorted): small batches keep "
           "short claims from being padded to the longest chunk.", lo=1, hi=1024)
    # Set a priori, not tuned: a sentence copied from one source scores near 1 against that source's window,
    # while a topical neighbour reaches the claim threshold well below it. How often it fires on right and on
    # wrong answers is measured in BENCHMARKS.md ("Tiered generation").
    misattribution_margin: float = _tunable(
        0.2, "Flag a cited claim as misattributed when an offered source it does not cite reaches the claim "
             "threshold AND beats every source it cites by at least this cosine margin; 0 switches the check off.",
        lo=0.0, hi=2.0)
    nli_model: str = _tunable(
        "workbench/nli-check", "Entailment classifier that reads each cited claim against its cited passage (the "
        "NLI model trained here, int8 ONNX in pipeline/models/weights/nli; a hub MNLI cross-encoder also works). "
        "When it does not resolve the validator records the degradation and judges by the embedding check alone.")
    nli: Literal["entailment", "contradiction", "off"] = _tunable(
        "entailment", "How the NLI verdict decides support, after the embedding pre-filter and the key-fact check: "
                      "entailment = supported only when a cited passage entails the claim (neutral and "
                      "contradicted claims are unsupported); contradiction = only a contradicted claim loses its "
                      "support; off = the embedding check alone (the model is not loaded).")


@dataclass(frozen=True)
class CacheConfig:
    enabled: bool = _tunable(True, "Serve repeated questions from the answer cache (clean answers only).")


@dataclass(frozen=True)
class PipelineConfig:
    chunking: ChunkingConfig = field(default_factory=ChunkingConfig)
    embedding: EmbeddingConfig = field(default_factory=EmbeddingConfig)
    keyword: KeywordConfig = field(default_factory=KeywordConfig)
    ingest: IngestConfig = field(default_factory=IngestConfig)
    retrieve: RetrieveConfig = field(default_factory=RetrieveConfig)
    rerank: RerankConfig = field(default_factory=RerankConfig)
    gate: GateConfig = field(default_factory=GateConfig)
    rewrite: RewriteConfig = field(default_factory=RewriteConfig)
    generate: GenerateConfig = field(default_factory=GenerateConfig)
    validate: ValidateConfig = field(default_factory=ValidateConfig)
    cache: CacheConfig = field(default_factory=CacheConfig)

    def __post_init__(self) -> None:
        for section in dataclasses.fields(self):
            _check_section(section.name, getattr(self, section.name))
        if self.rerank.top_k > self.rerank.candidates:
            raise ConfigError(f"rerank.top_k ({self.rerank.top_k}) must not exceed rerank.candidates "
                              f"({self.rerank.candidates})")

    # -- serialisation -------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return to_dict(self)

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent, sort_keys=True)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PipelineConfig:
        """Strict: unknown sections or keys are errors (a config file with a typo must not load quietly)."""
        if not isinstance(data, dict):
            raise ConfigError("a config must be a JSON object of sections, e.g. {\"gate\": {\"signal\": \"auto\"}}")
        for section_name, values in data.items():
            section_type = _section_type(section_name)
            if not isinstance(values, dict):
                raise ConfigError(f"config section {section_name!r} must be an object")
            for key in values:
                f = _field_of(section_type, section_name, key)
                if _kind(get_type_hints(section_type)[f.name])[0] == "json":  # strict inside the list too
                    values = {**values, key: to_dict(_parse_json_value(f"{section_name}.{key}", values[key]))}
            data = {**data, section_name: values}
        try:
            return from_dict(cls, data)
        except (TypeError, ValueError) as exc:
            if isinstance(exc, ConfigError):
                raise
            raise ConfigError(f"invalid config: {exc}") from None

    @classmethod
    def from_json(cls, text: str) -> PipelineConfig:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"config is not valid JSON: {exc}") from None
        return cls.from_dict(data)

    def config_hash(self) -> str:
        """Stable across processes and key order: sha256 of the canonical JSON, first 12 hex digits."""
        canonical = json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:12]

    def with_overrides(self, overrides: dict[str, Any] | list[str] | tuple[str, ...]) -> PipelineConfig:
        return apply_overrides(self, overrides)


# -- overrides and introspection (the app builds its sidebar from these) ------------------------------

@dataclass(frozen=True)
class Tunable:
    """One editable setting, as the app sidebar and ``--set`` see it."""
    key: str                 # "gate.confidence_threshold_rerank"
    type: str                # "int" | "float" | "bool" | "str" | "choice"
    default: Any
    help: str
    choices: tuple[str, ...] = ()
    lo: float | None = None
    hi: float | None = None
    provisional: bool = False


def tunables() -> list[Tunable]:
    """Every tunable of :class:`PipelineConfig`, in declaration order."""
    out = []
    for section in dataclasses.fields(PipelineConfig):
        section_type = get_type_hints(PipelineConfig)[section.name]
        hints = get_type_hints(section_type)
        for f in dataclasses.fields(section_type):
            tp = hints[f.name]
            kind, choices = _kind(tp)
            default = _json_text(f.default) if kind == "json" else f.default
            out.append(Tunable(key=f"{section.name}.{f.name}", type=kind, default=default, help=f.metadata["help"],
                               choices=choices, lo=f.metadata["lo"], hi=f.metadata["hi"],
                               provisional=f.metadata["provisional"]))
    return out


def get_value(cfg: PipelineConfig, key: str) -> Any:
    """A setting's value as the sidebar and Compare show it: tuple-valued settings as canonical JSON text."""
    section, name = _split_key(key)
    value = getattr(getattr(cfg, section), name)
    return _json_text(value) if isinstance(value, tuple) else value


def apply_overrides(cfg: PipelineConfig, overrides: dict[str, Any] | list[str] | tuple[str, ...]) -> PipelineConfig:
    """Return a new config with ``stage.key`` values replaced.

    ``overrides`` is either a mapping of key → value (values of the right type, or strings to parse) or a list
    of ``"stage.key=value"`` strings as the CLI receives them.
    """
    if isinstance(overrides, (list, tuple)):
        pairs = {}
        for item in overrides:
            if "=" not in item:
                raise ConfigError(f"--set expects stage.key=value, got {item!r}")
            key, _, raw = item.partition("=")
            pairs[key.strip()] = raw.strip()
        overrides = pairs
    changes: dict[str, dict[str, Any]] = {}
    for key, raw in overrides.items():
        section, name = _split_key(key)
        f = _field_of(_section_type(section), section, name)
        tp = get_type_hints(_section_type(section))[f.name]
        changes.setdefault(section, {})[name] = _parse_value(key, tp, raw)
    new_sections = {}
    for section, values in changes.items():
        new_sections[section] = dataclasses.replace(getattr(cfg, section), **values)
    return dataclasses.replace(cfg, **new_sections)


def _split_key(key: str) -> tuple[str, str]:
    section, dot, name = key.partition(".")
    if not dot or not name:
        raise ConfigError(f"config key {key!r} must look like stage.key, e.g. gate.signal")
    _section_type(section)
    return section, name


def _section_type(section: str) -> type:
    hints = get_type_hints(PipelineConfig)
    if section not in hints:
        near = difflib.get_close_matches(section, list(hints), n=1)
        hint = f" (did you mean {near[0]!r}?)" if near else ""
        raise ConfigError(f"unknown config section {section!r}{hint}; sections: {', '.join(hints)}")
    return hints[section]


def _field_of(section_type: type, section: str, name: str) -> dataclasses.Field:
    names = {f.name: f for f in dataclasses.fields(section_type)}
    if name not in names:
        near = difflib.get_close_matches(name, list(names), n=1)
        hint = f" (did you mean {section}.{near[0]}?)" if near else ""
        shown = name if name.isprintable() else repr(name)  # a key with a newline must not break the one line
        raise ConfigError(f"unknown config key {section}.{shown}{hint}; keys in {section}: {', '.join(names)}")
    return names[name]


def _kind(tp: Any) -> tuple[str, tuple[str, ...]]:
    if get_origin(tp) is Literal:
        return "choice", tuple(get_args(tp))
    if get_origin(tp) is tuple:  # generate.tiers, generate.escalate_on: JSON text in the sidebar and --set
        return "json", ()
    return {bool: "bool", int: "int", float: "float", str: "str"}[tp], ()


def _parse_value(key: str, tp: Any, raw: Any) -> Any:
    kind, choices = _kind(tp)
    if kind == "json":
        return _parse_json_value(key, raw)
    if kind == "choice":
        if raw not in choices:
            raise ConfigError(f"{key} must be one of {', '.join(choices)}; got {raw!r}")
        return raw
    if kind == "bool":
        if isinstance(raw, bool):
            return raw
        text = str(raw).strip().lower()
        if text in ("true", "1", "yes", "on"):
            return True
        if text in ("false", "0", "no", "off"):
            return False
        raise ConfigError(f"{key} must be true or false; got {raw!r}")
    if kind == "int":
        if isinstance(raw, bool):
            raise ConfigError(f"{key} must be an integer; got {raw!r}")
        if isinstance(raw, int):
            return raw
        try:
            return int(str(raw).strip())
        except ValueError:
            raise ConfigError(f"{key} must be an integer; got {raw!r}") from None
    if kind == "float":
        if isinstance(raw, bool):
            raise ConfigError(f"{key} must be a number; got {raw!r}")
        try:
            value = float(raw)
        except (TypeError, ValueError):
            raise ConfigError(f"{key} must be a number; got {raw!r}") from None
        if value != value or value in (float("inf"), float("-inf")):
            raise ConfigError(f"{key} must be a finite number; got {raw!r}")
        return value
    return str(raw)


def _parse_json_value(key: str, raw: Any) -> Any:
    """The one parser of the tuple-valued settings (``--set``, the sidebar's text, a config file)."""
    if key == "generate.tiers":
        return parse_tiers(raw, key)
    if key == "generate.escalate_on":
        return parse_triggers(raw, key)
    raise ConfigError(f"{key} cannot be set from text")  # pragma: no cover - a new tuple field needs a parser


def _json_text(value: Any) -> str:
    return json.dumps(to_dict(value), sort_keys=True)


def _check_section(section_name: str, section: Any) -> None:
    hints = get_type_hints(type(section))
    for f in dataclasses.fields(section):
        value = getattr(section, f.name)
        key = f"{section_name}.{f.name}"
        kind, choices = _kind(hints[f.name])
        if kind == "json" and _parse_json_value(key, value) != value:
            raise ConfigError(f"{key} must be a tuple; got {value!r}")
        if kind == "choice" and value not in choices:
            raise ConfigError(f"{key} must be one of {', '.join(choices)}; got {value!r}")
        if kind in ("int", "float"):
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise ConfigError(f"{key} must be a number; got {value!r}")
            if not math.isfinite(value):  # NaN slips through every range check, infinity through open ones
                raise ConfigError(f"{key} must be a finite number; got {value!r}")
            lo, hi = f.metadata["lo"], f.metadata["hi"]
            if (lo is not None and value < lo) or (hi is not None and value > hi):
                raise ConfigError(f"{key} must be between {lo} and {hi}; got {value!r}")
        if kind == "bool" and not isinstance(value, bool):
            raise ConfigError(f"{key} must be true or false; got {value!r}")
        if kind == "str" and not isinstance(value, str):
            raise ConfigError(f"{key} must be a string; got {value!r}")


PROVISIONAL_KEYS = tuple(t.key for t in tunables() if t.provisional)
