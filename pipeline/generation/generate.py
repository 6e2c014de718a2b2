"""Generation: a closed-book, cited answer over numbered sources, or the fixed abstention sentence.

The candidates arrive ranked and already past the gate; the first ``max_sources`` become sources [1..n].
Backends (``generate.backend``): ``extractive`` (no model; ``pipeline.generation.extractive``), ``litellm`` and
``local`` (SmolLM2). The LLM path is a declared contract, as in DSPy: a prompt (``pipeline.generation.prompts``), an
output schema (answer, used_source_ids, confidence HIGH/MEDIUM/LOW, limitations) and a validator
(:func:`parse_answer`). The degradations, each recorded in the trace, never raised:

- a malformed reply or a missing field -> one retry that states the parse error (models usually fix the
  one thing they are told about); still bad -> the extractive answer, with the reason;
- a provider failure (timeout, refused connection, 5xx, garbage body, or a backend that raises or cannot
  load) -> the extractive answer at once, flagged ``fallback``: a retry was already spent inside the
  backend, and a user waiting on a dead provider should get the cited passage, never an error.

Injection: sources reach the model only fenced as untrusted data (``pipeline.generation.prompts``); a source whose text
reads as instructions to a model or a reader — in any language, in any wording (:mod:`pipeline.text.instructions`)
— is also marked inside its fence and listed in ``flagged_sources``, and the extractive answer never quotes
such text (``pipeline.generation.extractive.drop_instructions``).

Abstention is detected by the exact sentence (``prompts.is_abstention``). An answer that is only that
sentence carries no citations (a marker on "I don't know" would claim a source backs it).
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from pipeline.config import ConfigError, GenerateConfig
from pipeline.context import StageContext, as_context
from pipeline.generation.extractive import extractive_answer
from pipeline.generation.prompts import (
    ABSTENTION_MESSAGE,
    ANSWER_KEYS,
    ANSWER_SCHEMA,
    CONFIDENCE_LEVELS,
    PromptSource,
    contains_abstention,
    copies_example,
    generation_messages,
    instruction_signals,
    is_abstention,
    new_nonce,
    repair_message,
)
from pipeline.models.llm import LLMReply, LLMRequest
from pipeline.models.registry import Models
from pipeline.models.resolve import ModelUnavailable
from pipeline.text.instructions import dominant_language
from pipeline.trace import Candidate, GenerationTrace, LLMAttempt, Message, Source

ECHO_CHARS = 2000       # how much of a bad reply is echoed back in the retry turn
CHARS_PER_TOKEN_CEILING = 8
_MARKER = re.compile(r"\[\s*(\d+(?:\s*[,;]\s*\d+)*)\s*\]")
_JSON_FENCE = re.compile(r"^```(?:json)?\s*(.*?)\s*```$", re.DOTALL | re.IGNORECASE)


@dataclass(frozen=True)
class ParsedAnswer:
    answer: str
    used_source_ids: tuple[int, ...]
    confidence: str
    limitations: tuple[str, ...]


# -- the output validator ------------------------------------------------------------------------------------

def _json_object(raw: str) -> tuple[object, str]:
    text = raw.strip()
    fenced = _JSON_FENCE.match(text)
    if fenced:
        text = fenced.group(1)
    if not text.startswith("{"):
        try:
            return json.loads(text), ""  # valid JSON that is not an object: say what it is
        except json.JSONDecodeError:
            pass
        start, end = text.find("{"), text.rfind("}")
        if start < 0 or end <= start:
            return None, "the reply contains no JSON object"
        text = text[start:end + 1]
    try:
        return json.loads(text), ""
    except json.JSONDecodeError as exc:
        return None, f"the reply is not valid JSON ({exc.msg} at character {exc.pos})"


def _source_ids(value: object) -> tuple[tuple[int, ...], str]:
    if not isinstance(value, list):
        return (), "used_source_ids must be a list of source numbers"
    ids = []
    for item in value:
        text = str(item).strip().strip("[]") if not isinstance(item, bool) else ""
        if isinstance(item, int) and not isinstance(item, bool):
            ids.append(item)
        elif text.isdigit():
            ids.append(int(text))
        else:
            return (), f"used_source_ids must hold source numbers; got {item!r}"
    return tuple(ids), ""


def parse_answer(raw: str) -> tuple[ParsedAnswer | None, str]:
    """The structured answer in ``raw``, or None and the parse error to state in the retry.

    Lenient where models are sloppy but the meaning is unambiguous (a ```json fence, prose around the
    object, "1" for 1, "high" for HIGH, one limitation as a string); strict on what downstream relies on.
    """
    if not raw or not raw.strip():
        return None, "the reply is empty"
    data, error = _json_object(raw)
    if error:
        return None, error
    if not isinstance(data, dict):
        return None, f"the reply is a JSON {type(data).__name__}, not an object"
    missing = [key for key in ANSWER_KEYS if key not in data]
    if missing:
        return None, f"missing required field(s): {', '.join(missing)}"
    answer = data["answer"]
    if not isinstance(answer, str) or not answer.strip():
        return None, "answer must be a non-empty string"
    ids, error = _source_ids(data["used_source_ids"])
    if error:
        return None, error
    confidence = str(data["confidence"]).strip().upper() if isinstance(data["confidence"], str) else ""
    if confidence not in CONFIDENCE_LEVELS:
        return None, f"confidence must be HIGH, MEDIUM or LOW; got {data['confidence']!r}"
    limitations = data["limitations"]
    if isinstance(limitations, str):
        limitations = [limitations] if limitations.strip() else []
    if not isinstance(limitations, list) or not all(isinstance(x, str) for x in limitations):
        return None, "limitations must be a list of strings"
    return ParsedAnswer(answer.strip(), ids, confidence, tuple(x.strip() for x in limitations if x.strip())), ""


def check_reply(raw: str, max_output_tokens: int = 0) -> tuple[ParsedAnswer | None, str]:
    """:func:`parse_answer`, plus the content rules a well-formed reply can still break.

    A reply longer than ``max_output_tokens`` could hold (at ``CHARS_PER_TOKEN_CEILING`` characters a token,
    twice what English text averages) means the provider ignored the output limit — a runaway or looping
    model; serving it whole would bury the user, so it is rejected like a malformed reply."""
    ceiling = max_output_tokens * CHARS_PER_TOKEN_CEILING
    if ceiling and len(raw) > ceiling:
        return None, (f"the reply is {len(raw):,} characters, more than generate.max_output_tokens="
                      f"{max_output_tokens} allows (about {ceiling:,}); answer briefly")
    parsed, error = parse_answer(raw)
    if parsed is not None and copies_example(parsed.answer):
        return None, "the answer repeats the worked example; answer the question from the numbered sources"
    return parsed, error


def markers_in(text: str) -> tuple[int, ...]:
    out: list[int] = []
    for match in _MARKER.finditer(text):
        for part in re.split(r"[,;]", match.group(1)):
            number = int(part)
            if number not in out:
                out.append(number)
    return tuple(out)


def _finalise(parsed: ParsedAnswer, n_sources: int) -> tuple[ParsedAnswer, bool, tuple[str, ...]]:
    """Apply the abstention and citation rules; return (answer, is_abstention, what was changed)."""
    if is_abstention(parsed.answer):
        notes = ("citations on the abstention sentence removed",) if (parsed.used_source_ids or
                                                                      markers_in(parsed.answer)) else ()
        return ParsedAnswer(ABSTENTION_MESSAGE, (), parsed.confidence, parsed.limitations), True, notes
    cited = tuple(dict.fromkeys(markers_in(parsed.answer) + parsed.used_source_ids))
    offered = tuple(sorted(n for n in cited if 1 <= n <= n_sources))
    notes: list[str] = []
    never_offered = [n for n in cited if not 1 <= n <= n_sources]
    if never_offered:
        notes.append("the model cited source(s) never offered: " + ", ".join(f"[{n}]" for n in never_offered))
    limitations = parsed.limitations
    if contains_abstention(parsed.answer):
        limitations += ("The answer also says the sources do not fully answer the question.",)
    return replace(parsed, used_source_ids=offered, limitations=limitations), False, tuple(notes)


# -- sources ----------------------------------------------------------------------------------------------

def offered_sources(candidates: Sequence[Candidate], max_sources: int) -> tuple[Source, ...]:
    return tuple(Source(number=i, chunk_id=c.chunk_id, doc_id=c.doc_id, title=c.title, version=c.version,
                        effective_date=c.effective_date)
                 for i, c in enumerate(candidates[:max_sources], start=1))


def flagged_sources(candidates: Sequence[Candidate], question: str = "") -> tuple[int, ...]:
    """Numbers of the sources whose text, title or version reads as instructions to a model or a reader
    (shown, fenced, never obeyed). The title and version are checked too: front matter and JSONL titles reach
    the prompt. A sentence in another language than the candidates' (the corpus's) or its own source's
    counts when it addresses someone in its own language (:mod:`pipeline.text.instructions`); ``question``
    decides the language only when the candidates have no words to tell."""
    reference = dominant_language([c.text for c in candidates] or [question])
    return tuple(i for i, c in enumerate(candidates, start=1)
                 if instruction_signals(f"{c.title}\n\n{c.version}\n\n{c.text}", reference))


def _prompt_sources(candidates: Sequence[Candidate], flagged: Sequence[int]) -> tuple[PromptSource, ...]:
    flagged = set(flagged)
    return tuple(PromptSource(number=i, title=c.title, text=c.text, version=c.version,
                              effective_date=c.effective_date, superseded=bool(c.superseded_by),
                              flagged=i in flagged)
                 for i, c in enumerate(candidates, start=1))


# -- the stage ----------------------------------------------------------------------------------------------

def run(question: str, query: str, candidates: tuple[Candidate, ...], cfg: GenerateConfig,
        ctx: StageContext | Models, reader: Mapping[str, Mapping[str, float]] | None = None) -> GenerationTrace:
    """Answer from the top ``cfg.max_sources`` candidates; never raises for a model's failure (falls back).

    ``reader``: the rerank stage's sentence scores (:meth:`pipeline.trace.RerankTrace.unit_scores`); the extractive
    generator (the default, and every fallback) then quotes what the reader says answers, or abstains."""
    models = as_context(ctx).models
    offered = tuple(candidates[:cfg.max_sources])
    base = GenerationTrace(requested_backend=cfg.backend, model=_model_label(cfg),
                           sources=offered_sources(offered, cfg.max_sources),
                           flagged_sources=flagged_sources(offered, question))
    if not offered:
        trace = replace(base, status="abstained", backend="none", answer=ABSTENTION_MESSAGE, is_abstention=True,
                        fallback_reason="no sources were offered")
    elif cfg.backend == "extractive":
        trace = _extractive(base, question, query, offered, cfg, status="answered", reason="", reader=reader)
    else:
        trace = _with_llm(base, question, query, offered, cfg, models, reader)
    return trace


def _model_label(cfg: GenerateConfig) -> str:
    if cfg.backend == "local":
        return "SmolLM2-135M-Instruct"
    return cfg.model if cfg.backend == "litellm" else ""


def _extractive(base: GenerationTrace, question: str, query: str, offered: Sequence[Candidate],
                cfg: GenerateConfig, status: str, reason: str,
                reader: Mapping[str, Mapping[str, float]] | None = None) -> GenerationTrace:
    text = question if query.strip() == question.strip() else f"{question} {query}"
    result = extractive_answer(text, offered, cfg.extractive_sentences, reader, cfg.reader_min_score)
    limitations = result.limitations
    if reason:
        limitations = (f"The language model's answer could not be used ({reason}); this is the extractive "
                       f"fallback.",) + limitations
    if result.reader_abstained:
        why = (f"the reader scored no sentence of the sources at least {cfg.reader_min_score:g}; the closest "
               f"({result.closest_score:.2f}) does not answer the question")
        return replace(base, status="abstained", backend="extractive", answer=ABSTENTION_MESSAGE, is_abstention=True,
                       confidence="LOW", limitations=limitations, fallback_reason=f"{reason}; {why}" if reason else why,
                       reader_closest=result.closest, reader_closest_score=result.closest_score)
    if not result.answer.strip():  # nothing quotable (one giant token, only markup): say so, never answer ""
        return replace(base, status="abstained", backend="extractive", answer=ABSTENTION_MESSAGE, is_abstention=True,
                       confidence="LOW", limitations=limitations, fallback_reason=reason or "the sources contain no "
                       "quotable sentence")
    return replace(base, status=status, backend="extractive", answer=result.answer,
                   used_source_ids=result.used_source_ids, confidence=result.confidence,
                   limitations=limitations, fallback_reason=reason, reader_scores=result.reader_scores)


def _attempt(messages: tuple[Message, ...], reply: LLMReply, parse_error: str = "") -> LLMAttempt:
    error = f"{reply.error_kind}: {reply.error}" if reply.error_kind else ""
    return LLMAttempt(messages=messages, raw_reply=reply.text, error=error, parse_error=parse_error,
                      latency_ms=reply.latency_ms, usage=dict(reply.usage))


def _call(llm, messages: tuple[Message, ...], cfg: GenerateConfig) -> LLMReply:
    request = LLMRequest(messages=messages, temperature=cfg.llm_temperature, json_schema=ANSWER_SCHEMA,
                         max_tokens=cfg.max_output_tokens)
    t0 = time.perf_counter()
    try:
        return llm.complete(request)
    except Exception as exc:  # a backend that raises is a provider failure, not a crash
        return LLMReply(error=f"backend raised {type(exc).__name__}: {exc}"[:400], error_kind="other",
                        latency_ms=round((time.perf_counter() - t0) * 1000, 3))


def _with_llm(base: GenerationTrace, question: str, query: str, offered: Sequence[Candidate],
              cfg: GenerateConfig, models: Models,
              reader: Mapping[str, Mapping[str, float]] | None = None) -> GenerationTrace:
    try:
        llm = models.llm("generate", backend=cfg.backend, model=cfg.model, api_base=cfg.api_base,
                         timeout_s=cfg.timeout_s, retries=cfg.retries)
    except (ModelUnavailable, ImportError) as exc:
        return _extractive(base, question, query, offered, cfg, "fallback", f"{cfg.backend} unavailable: {exc}",
                           reader)
    except ConfigError:
        raise  # the user must fix the setting; the message says how
    base = replace(base, model=getattr(llm, "name", base.model) or base.model)
    messages = generation_messages(_prompt_sources(offered, base.flagged_sources), question, query, new_nonce())
    attempts: list[LLMAttempt] = []
    parse_error = ""
    for round_no in range(2):  # the first call, and one retry that states the parse error
        reply = _call(llm, messages, cfg)
        if not reply.ok:
            attempts.append(_attempt(messages, reply))
            reason = f"provider {reply.error_kind or 'error'}: {reply.error}"[:300]
            return replace(_extractive(base, question, query, offered, cfg, "fallback", reason, reader),
                           attempts=tuple(attempts), llm_calls=len(attempts))
        parsed, parse_error = check_reply(reply.text, cfg.max_output_tokens)
        attempts.append(_attempt(messages, reply, parse_error))
        if parsed is not None:
            return _answered(base, parsed, len(offered), tuple(attempts))
        if round_no == 0:
            messages = messages + (Message("assistant", reply.text[:ECHO_CHARS]), repair_message(parse_error))
    reason = f"malformed output twice; last parse error: {parse_error}"
    return replace(_extractive(base, question, query, offered, cfg, "fallback", reason, reader),
                   attempts=tuple(attempts), llm_calls=len(attempts))


def _answered(base: GenerationTrace, parsed: ParsedAnswer, n_sources: int,
              attempts: tuple[LLMAttempt, ...]) -> GenerationTrace:
    final, abstained, notes = _finalise(parsed, n_sources)
    return replace(base, status="abstained" if abstained else "answered", backend=base.requested_backend,
                   attempts=attempts, answer=final.answer, used_source_ids=final.used_source_ids,
                   confidence=final.confidence, limitations=final.limitations, is_abstention=abstained,
                   llm_calls=len(attempts), notes=notes)
