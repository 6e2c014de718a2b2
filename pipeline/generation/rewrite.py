"""Query rewriting: turn a follow-up ("what about the backoff?") into a standalone search query.

Retrieval sees one string. A follow-up on its own retrieves nothing useful, so the recent conversation
(``query_rewrite_history_turns``, default 6) is folded into the query. Backends (``rewrite.backend``):

- ``terms`` (default, no model): the identifiers and key terms of the recent *user* turns are appended to
  the question. Deterministic and cheap; it cannot resolve "it", but it carries "ERR_TIMEOUT_502" forward,
  which is what the keyword leg needs. User turns only, because the assistant's answers mention every
  nearby topic and would pull retrieval sideways.
- ``llm``: the model at ``rewrite.model`` (``local`` = SmolLM2, else a litellm string) at temperature 0.0
  (a rewrite should be the same every time). Its output is validated (:func:`validate_rewrite`).
- ``off``: the question as typed.

Rules, each for a failure it prevents:

- Skipped on the first turn: with no history there is nothing to resolve, and a rewriter can only lose
  information (or an identifier) from a question that is already standalone.
- History is rendered as data inside ONE user message (a fenced transcript, ``pipeline.generation.prompts``), never
  replayed as chat turns: replayed turns read as instructions, and an injected earlier turn would steer it.
- The prompt asks for identifiers verbatim, and a rewrite that drops an identifier the user wrote is
  rejected: models "tidy" ``ERR_TIMEOUT_502`` into "timeout error", which the keyword leg cannot match.
- The validator rejects empty output, over 400 characters, growth > 6x that is also long in absolute
  terms (a short question may legitimately grow 6x; a long essay never is a query), more than one
  paragraph or line (the model answered or explained), openings like "Sure, here is" or a refusal, and a
  line that opens like an answer ("Yes: ...", "No, ..."), which keeps the identifiers yet is no question.
- Any rejection, error reply or exception keeps the raw question as the query and records why: a bad
  rewrite must never cost the user their question.
"""

from __future__ import annotations

import re
import time
from dataclasses import replace

from pipeline.config import ConfigError, RewriteConfig
from pipeline.context import StageContext, as_context
from pipeline.generation.prompts import new_nonce, rewrite_messages
from pipeline.models.llm import LLMRequest
from pipeline.models.registry import Models
from pipeline.models.resolve import ModelUnavailable
from pipeline.text.tokenize import STOP_WORDS
from pipeline.trace import Message, RewriteTrace

FIRST_TURN = "skipped: first turn"

# -- identifiers -----------------------------------------------------------------------------------------

_WORD = re.compile(r"[0-9A-Za-z_]+(?:[.\-/:][0-9A-Za-z_]+)*")
_BACKTICKED = re.compile(r"`([^`\n]{1,80})`")


def _is_identifier(token: str) -> bool:
    """Error codes, versions, config keys, paths, flags: the tokens a user means literally.

    ``_``, ``.``, ``/`` or ``:`` inside a token, letters mixed with digits, or a number of three or more
    digits (status codes, limits). Plain hyphenated words ("dead-letter") are not identifiers unless they
    carry a digit, so a rewrite may write "dead letter" without being rejected.
    """
    if any(sep in token for sep in "_./:"):
        return True
    has_digit = any(c.isdigit() for c in token)
    if has_digit and any(c.isalpha() for c in token):
        return True
    return token.isdigit() and len(token) >= 3


def identifiers(text: str) -> list[str]:
    """Identifiers in order of appearance (no repeats); anything in backticks counts as one."""
    found: list[str] = [m.group(1).strip() for m in _BACKTICKED.finditer(text)]
    found += [m.group(0) for m in _WORD.finditer(_BACKTICKED.sub(" ", text)) if _is_identifier(m.group(0))]
    out: list[str] = []
    for item in found:
        if item and item.lower() not in {o.lower() for o in out}:
            out.append(item)
    return out


# -- the validator ---------------------------------------------------------------------------------------

_PREAMBLE = re.compile(
    r"^\W*(sure|certainly|of course|okay|ok\b|here is|here's|here are|absolutely|great|"
    r"(the )?(rewritten|standalone|reformulated) (question|query)|rewritten|standalone question|"
    r"i'm sorry|i am sorry|sorry|i can't|i cannot|i can not|i'm unable|i am unable|i won't|i will not|"
    r"unfortunately|as an ai)\b",
    re.IGNORECASE)
# "Yes: ERR_TIMEOUT_502 counts against ..." keeps the identifier and is one line, but it answers the question.
_ANSWER_OPENING = re.compile(r"^\W*(yes|no|yep|nope)\s*[,:;.!\u2014]", re.IGNORECASE)


def validate_rewrite(original: str, proposed: str, cfg: RewriteConfig) -> str:
    """The reason to reject ``proposed``, or "" to accept it. Each check is a rule of the module docstring."""
    text = proposed.strip()
    if not text:
        return "empty rewrite"
    lines = [line for line in text.splitlines() if line.strip()]
    if len(lines) > 1:
        return f"more than one paragraph ({len(lines)} lines; a rewrite is one question)"
    if len(text) > cfg.max_chars:
        return f"over {cfg.max_chars} characters ({len(text)})"
    growth = len(text) / max(len(original.strip()), 1)
    if growth > cfg.max_growth and len(text) >= cfg.long_chars:
        return f"grew {growth:.1f}x to {len(text)} characters (limit {cfg.max_growth:g}x and {cfg.long_chars})"
    if _PREAMBLE.match(text):
        return f"opens with a preamble or refusal ({text[:30]!r})"
    if _ANSWER_OPENING.match(text):
        return f"reads as an answer, not a question ({text[:30]!r})"
    lowered = text.lower()
    dropped = [ident for ident in identifiers(original) if ident.lower() not in lowered]
    if dropped:
        return f"dropped identifier(s) the user wrote: {', '.join(dropped)}"
    return ""


def _clean_reply(reply: str) -> str:
    """Surrounding whitespace and one pair of surrounding quotes go: models quote the question they wrote."""
    text = reply.strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "\"'`":
        text = text[1:-1].strip()
    return text


# -- history-terms expansion ------------------------------------------------------------------------------

_FILLER = frozenset("""about above after again against also any anything before below between both during each
else even explain every few from further happen happens here just know like mean more most much need once only
other over please same should show since some still tell than thing things through under until upon very want
way while work works yes okay thanks thank""".split())
MAX_EXPANSION_TERMS = 8


def _key_terms(text: str) -> list[str]:
    words = [m.group(0) for m in _WORD.finditer(_BACKTICKED.sub(" ", text))]
    return [w for w in words if len(w) >= 4 and w.replace("-", "").isalpha() and not _is_identifier(w)
            and w.lower() not in STOP_WORDS and w.lower() not in _FILLER]


def expansion_terms(question: str, history: tuple[Message, ...]) -> list[str]:
    """Identifiers first, then key terms, from the most recent user turn backwards; none already asked."""
    present = question.lower()
    idents: list[str] = []
    words: list[str] = []
    for turn in reversed(history):
        if turn.role != "user":
            continue
        idents += [i for i in identifiers(turn.content) if i.lower() not in present]
        words += [w for w in _key_terms(turn.content) if w.lower() not in present]
    out: list[str] = []
    for term in idents + words:
        if term.lower() not in {o.lower() for o in out}:
            out.append(term)
    return out[:MAX_EXPANSION_TERMS]


def _expand(question: str, recent: tuple[Message, ...], cfg: RewriteConfig) -> RewriteTrace:
    terms = expansion_terms(question, recent)
    base = RewriteTrace(backend="terms", original=question, history_turns_used=len(recent))
    if not terms:
        return _keep(base, question, "expanded", "history adds no new terms")
    query = question
    added = []
    for term in terms:  # stop before the query outgrows the rewrite length limit
        if len(query) + 1 + len(term) > cfg.max_chars:
            break
        query = f"{query} {term}"
        added.append(term)
    return _keep(base, query, "expanded", f"appended terms from the last user turns: {', '.join(added)}",
                 proposed=query)


# -- the stage -------------------------------------------------------------------------------------------

def _keep(base: RewriteTrace, query: str, status: str, reason: str, **extra) -> RewriteTrace:
    return replace(base, status=status, query=query, reason=reason, **extra)


def _recent(history: tuple[Message, ...], cfg: RewriteConfig) -> tuple[Message, ...]:
    turns = tuple(t for t in history if t.content.strip())
    return turns[-cfg.query_rewrite_history_turns:] if cfg.query_rewrite_history_turns else ()


def run(question: str, history: tuple[Message, ...], cfg: RewriteConfig, ctx: StageContext | Models) -> RewriteTrace:
    """The standalone query for ``question``; ``query`` is always usable (the raw question on any failure)."""
    models = as_context(ctx).models
    if cfg.backend == "off":
        return RewriteTrace(status="off", backend="off", original=question, query=question,
                            reason="rewrite.backend=off")
    recent = _recent(tuple(history), cfg)
    backend_name = "terms" if cfg.backend == "terms" else f"llm:{cfg.model}"
    if not recent:
        return RewriteTrace(status="skipped", backend=backend_name, original=question, query=question,
                            reason=FIRST_TURN)
    if cfg.backend == "terms":
        return _expand(question, recent, cfg)
    return _rewrite_with_llm(question, recent, cfg, models)


def _rewrite_with_llm(question: str, recent: tuple[Message, ...], cfg: RewriteConfig,
                      models: Models) -> RewriteTrace:
    messages = rewrite_messages(question, recent, new_nonce())
    base = RewriteTrace(backend=f"llm:{cfg.model}", original=question, history_turns_used=len(recent),
                        prompt=messages)
    started = time.perf_counter()
    try:
        llm = models.llm("rewrite", backend="local" if cfg.model == "local" else "litellm", model=cfg.model,
                         api_base=cfg.api_base, timeout_s=cfg.timeout_s, retries=0)
    except (ModelUnavailable, ConfigError, ImportError) as exc:
        return _keep(base, question, "failed", f"rewrite model unavailable: {exc}")
    try:
        reply = llm.complete(LLMRequest(messages=messages, temperature=cfg.temperature, max_tokens=128))
    except Exception as exc:  # a backend that raises is a degradation, never a failed request
        return _keep(base, question, "failed", f"rewrite LLM raised {type(exc).__name__}: {exc}"[:300],
                     llm_calls=1, latency_ms=_ms(started))
    done = {"llm_calls": 1, "latency_ms": reply.latency_ms or _ms(started), "raw_reply": reply.text}
    if not reply.ok:
        return _keep(base, question, "failed", f"rewrite LLM error ({reply.error_kind}): {reply.error}"[:300],
                     **done)
    proposed = _clean_reply(reply.text)
    reason = validate_rewrite(question, proposed, cfg)
    if reason:
        return _keep(base, question, "rejected", reason, proposed=proposed, **done)
    return _keep(base, proposed, "accepted", "", proposed=proposed, **done)


def _ms(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 3)
