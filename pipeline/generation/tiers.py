"""Tiered generation: the cheapest tier answers, the validator checks, a costlier tier answers only when needed.

``generate.tiers`` is an ordered list of generators (:class:`~pipeline.config.TierConfig`: backend, model,
api_base, max_tokens). Each attempt is one :func:`pipeline.generation.generate.run` (the single-tier stage,
with the tier's backend, model and reply budget) followed by one :func:`pipeline.validation.citations.run`;
:func:`should_escalate` — the one rule — reads the two records and ``generate.escalate_on`` and names the
triggers that fired:

- ``unsupported`` / ``uncited``: a claim no cited source supports, or a claim with no citation;
- ``misattributed``: a cited claim that an offered source it does not cite states much more closely
  (:mod:`pipeline.validation.citations`, ``validate.misattribution_margin``);
- ``unchecked``: the validator ran but found no claim to check — every sentence is code, a heading, a lead-in
  or a question — so nothing in the answer is verified;
- ``fabricated``: a marker to a source that was never offered;
- ``malformed``: the reply was still malformed after its repair turn (the stage fell back to extractive);
- ``provider_error``: the provider failed or the backend could not load (the stage fell back to extractive);
- ``abstained``: the tier said "I don't know" although the gate had passed (tiers run only past the gate).

The first tier no trigger fires on is kept; when every tier escalates, the last tier's answer is kept (the last
tier is the final word, and its own extractive fallback covers a dead provider). Every attempt is recorded as a
:class:`~pipeline.trace.TierAttempt` (tokens, cost, latency, verdicts, the triggers) on the kept
GenerationTrace, with ``kept_tier``; ``llm_calls`` counts the calls of every tier.

Cost comes from litellm's offline price list (``LITELLM_LOCAL_MODEL_COST_MAP=True`` keeps it offline) for the
model name; a model it does not know costs ``None`` (unknown), the extractive generator and the local model 0.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Mapping, Sequence

from pipeline.config import GenerateConfig, TierConfig, ValidateConfig
from pipeline.context import StageContext, as_context
from pipeline.generation import generate
from pipeline.models.registry import Models
from pipeline.trace import Candidate, GenerationTrace, TierAttempt, ValidationTrace
from pipeline.validation import citations


@dataclasses.dataclass(frozen=True)
class TieredResult:
    generation: GenerationTrace       # the kept tier's record, carrying every tier's TierAttempt
    validation: ValidationTrace       # the kept tier's verdicts
    validation_ms: float = 0.0        # time spent validating, all tiers together


def should_escalate(generation: GenerationTrace, validation: ValidationTrace,
                    triggers: Sequence[str]) -> tuple[str, ...]:
    """The triggers in ``triggers`` that this tier's answer fires, in the order of ``triggers``; empty: keep it."""
    fired = set()
    last = generation.attempts[-1] if generation.attempts else None
    if generation.status == "fallback":
        if last is not None and last.parse_error and not last.error:
            fired.add("malformed")
        else:
            fired.add("provider_error")
    if generation.is_abstention:
        fired.add("abstained")
    else:
        if validation.unsupported:
            fired.add("unsupported")
        if validation.uncited:
            fired.add("uncited")
        if validation.misattributed:
            fired.add("misattributed")
        if validation.status == "ran" and not (validation.supported + validation.unsupported + validation.uncited):
            fired.add("unchecked")
        if validation.fabricated_markers:
            fired.add("fabricated")
    return tuple(t for t in triggers if t in fired)


def tier_config(cfg: GenerateConfig, tier: TierConfig) -> GenerateConfig:
    """The single-tier settings for one tier: its backend, model, api_base and reply budget; the rest shared."""
    return dataclasses.replace(cfg, backend=tier.backend, model=tier.model, api_base=tier.api_base,
                               max_output_tokens=tier.max_tokens, tiers=())


def token_cost(backend: str, model: str, prompt_tokens: int, completion_tokens: int) -> float | None:
    """US dollars by litellm's offline price list; 0 for extractive and local; None for a model it does not know."""
    if backend in ("extractive", "local"):
        return 0.0
    if not model:
        return None
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # never fetch the price list
    try:
        import litellm
        prompt_usd, completion_usd = litellm.cost_per_token(model=model, prompt_tokens=prompt_tokens,
                                                            completion_tokens=completion_tokens)
    except Exception:  # litellm missing, or a model it has no price for: unknown, not free
        return None
    return float(prompt_usd) + float(completion_usd)


def _attempt_record(number: int, tier: TierConfig, gen: GenerationTrace, val: ValidationTrace,
                    reasons: tuple[str, ...], latency_ms: float) -> TierAttempt:
    prompt = sum(a.usage.get("prompt_tokens", 0) for a in gen.attempts)
    completion = sum(a.usage.get("completion_tokens", 0) for a in gen.attempts)
    calls_cost = token_cost(tier.backend, tier.model, prompt, completion) if gen.attempts else 0.0
    return TierAttempt(tier=number, backend=gen.backend, model=tier.model or gen.model, status=gen.status,
                       answer=gen.answer,
                       prompt_tokens=prompt, completion_tokens=completion, cost_usd=calls_cost,
                       llm_calls=gen.llm_calls, latency_ms=round(latency_ms, 3), supported=val.supported,
                       unsupported=val.unsupported, uncited=val.uncited, misattributed=val.misattributed,
                       fabricated_markers=val.fabricated_markers, validation_status=val.status,
                       fallback_reason=gen.fallback_reason, escalate_reasons=reasons)


def run(question: str, query: str, candidates: tuple[Candidate, ...], cfg: GenerateConfig,
        validate_cfg: ValidateConfig, ctx: StageContext | Models,
        reader: Mapping[str, Mapping[str, float]] | None = None) -> TieredResult:
    """Answer with ``cfg.tiers`` in order (see the module docstring). ``validate_cfg`` is an input the engine
    passes: validation is part of each attempt. Never raises for a model's failure."""
    if not cfg.tiers:
        raise ValueError("tiers.run needs generate.tiers; call generate.run for one tier")
    context = as_context(ctx)
    tried: list[tuple[GenerationTrace, ValidationTrace, TierAttempt]] = []
    validation_ms = 0.0
    for number, tier in enumerate(cfg.tiers, start=1):
        t0 = time.perf_counter()
        gen = generate.run(question, query, candidates, tier_config(cfg, tier), context, reader)
        t1 = time.perf_counter()
        val = citations.run(gen, candidates, validate_cfg, context)
        t2 = time.perf_counter()
        validation_ms += (t2 - t1) * 1000
        gen = dataclasses.replace(gen, latency_ms=round((t1 - t0) * 1000, 3))
        val = dataclasses.replace(val, latency_ms=round((t2 - t1) * 1000, 3))
        reasons = should_escalate(gen, val, cfg.escalate_on) if number < len(cfg.tiers) else ()
        tried.append((gen, val, _attempt_record(number, tier, gen, val, reasons, (t2 - t0) * 1000)))
        if not reasons:
            break
    kept_gen, kept_val, kept = tried[-1]
    records = tuple(a for _, _, a in tried[:-1]) + (dataclasses.replace(kept, kept=True),)
    generation = dataclasses.replace(kept_gen, tiers=records, kept_tier=kept.tier,
                                     llm_calls=sum(a.llm_calls for a in records))
    return TieredResult(generation=generation, validation=kept_val, validation_ms=round(validation_ms, 3))


def total_cost(generation: GenerationTrace) -> float | None:
    """What every tier of one answer cost together; None when any tier's price is unknown."""
    costs = [a.cost_usd for a in generation.tiers]
    return None if any(c is None for c in costs) else float(sum(costs))


def cost_text(cost: float | None) -> str:
    return "cost unknown" if cost is None else f"${cost:.6f}"


def tiers_line(generation: GenerationTrace) -> str:
    """One line for the answer view: each tier tried, why it went on, which was kept, and the cost ("" without
    tiers). Plain text: callers escape it for their medium."""
    if not generation.tiers:
        return ""
    parts = []
    for a in generation.tiers:
        what = "kept" if a.kept else ("escalated: " + ", ".join(a.escalate_reasons) if a.escalate_reasons
                                      else "not kept")
        parts.append(f"{a.tier} {a.model or a.backend} ({what})")
    return f"tiers tried: {' → '.join(parts)} · {cost_text(total_cost(generation))}"
