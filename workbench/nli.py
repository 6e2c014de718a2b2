"""NLI citation support and the validator–NLI agreement report (used by ``workbench eval``, on by default).

The validator's embedding check (``pipeline.validation.citations``) calls a claim supported when the cosine between
the claim and a cited passage reaches 0.50 and its key facts are in the source. Cosine measures topical closeness,
not entailment ("publishers never receive X" and "publishers receive X" score alike). The NLI model
(``validate.nli_model``, default the one trained here: ``workbench/nli-check``) reads the same claims — a model
that is not the generator judging itself.

Method, per answered trace whose validation ran: every claim that cites at least one offered source is a
hypothesis. When the validator already ran the NLI check (``validation.nli_status == "ran"``, the default), its
label per claim is used as it is (the best cited sentence window as premise, ANY cited source entailing) and the
validator's verdict compared is the embedding check's (``embedding_verdict``: the verdict before the model).
Otherwise (validation with ``validate.nli=off``, or a model that was missing when answering) the claims are judged
here: each cited chunk's text is a premise, and the claim is NLI-supported when, for ANY of its cited chunks,
"entailment" is the most probable of the model's labels. Reported:

- ``support_rate``: NLI-supported claims / cited claims (compare with the summary's
  ``citation_support_rate_cited``, which has the same denominator);
- ``agreement``: the share of cited claims on which the embedding check's verdict (supported / unsupported)
  equals NLI's, with both disagreement directions — ``embedding_only`` (the cheap check passed a claim NLI
  does not find entailed: how often it is too lenient) and ``nli_only`` (the reverse).

When no NLI model resolves (offline, nothing in the cache) the result is ``status: "unavailable"`` with the
reason, and every number is ``None``: never a substituted value.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from pipeline.models.registry import Models
from pipeline.models.resolve import ModelUnavailable
from pipeline.trace import Trace
from workbench.metrics import rate, round_or_none

BATCH_PAIRS = 64


@dataclass(frozen=True)
class ClaimPairs:
    trace_index: int
    claim_index: int
    embedding_supported: bool
    premises: tuple[str, ...]
    hypothesis: str
    nli_label: str = ""      # the validator's own NLI label, when it ran the check


def cited_claims(traces: Sequence[Trace]) -> list[ClaimPairs]:
    """Every validated claim that cites an offered source, with the texts of the chunks it cites; where the validator
    ran the NLI check, a claim it left unread (a table row, a command, a log line: not prose) is not an NLI claim."""
    from pipeline.validation.entailment import structured

    out = []
    for t_index, trace in enumerate(traces):
        if trace.validation.status != "ran":
            continue
        offered = {s.number: s.chunk_id for s in trace.generation.sources}
        texts = {c.chunk_id: c.text for c in trace.retrieval.candidates}
        for c_index, claim in enumerate(trace.validation.claims):
            if trace.validation.nli_status == "ran" and structured(claim.text):
                continue
            premises = tuple(dict.fromkeys(texts[offered[n]] for n in claim.markers
                                           if n in offered and offered[n] in texts))
            before = claim.embedding_verdict or claim.verdict
            if premises and before in ("supported", "unsupported"):
                out.append(ClaimPairs(t_index, c_index, before == "supported", premises, claim.text,
                                      claim.nli_label if trace.validation.nli_status == "ran" else ""))
    return out


def entailed(probabilities: np.ndarray, labels: Sequence[str]) -> np.ndarray:
    """Per row: is "entailment" the most probable label?"""
    column = list(labels).index("entailment")
    return np.argmax(probabilities, axis=1) == column if len(probabilities) else np.zeros(0, dtype=bool)


def judge(claims: Sequence[ClaimPairs], model, progress: bool = False) -> list[bool]:
    """NLI verdict per claim: entailed by ANY of its premises."""
    pairs = [(premise, c.hypothesis) for c in claims for premise in c.premises]
    owners = [i for i, c in enumerate(claims) for _ in c.premises]
    verdicts = [False] * len(claims)
    batches = range(0, len(pairs), BATCH_PAIRS)
    if progress:
        from tqdm import tqdm

        batches = tqdm(batches, desc="nli", unit="batch", file=sys.stderr, leave=False)
    for start in batches:
        chunk = pairs[start:start + BATCH_PAIRS]
        for owner, ok in zip(owners[start:start + BATCH_PAIRS], entailed(model.predict(chunk), model.labels),
                             strict=True):
            verdicts[owner] = verdicts[owner] or bool(ok)
    return verdicts


def unavailable(model_name: str, reason: str) -> dict:
    return {"status": "unavailable", "model": model_name, "reason": reason, "claims": None, "support_rate": None,
            "agreement": None, "embedding_only": None, "nli_only": None}


def summarise(claims: Sequence[ClaimPairs], verdicts: Sequence[bool], model_name: str) -> dict:
    n = len(claims)
    both = sum(c.embedding_supported and v for c, v in zip(claims, verdicts, strict=True))
    embedding_only = sum(c.embedding_supported and not v for c, v in zip(claims, verdicts, strict=True))
    nli_only = sum(v and not c.embedding_supported for c, v in zip(claims, verdicts, strict=True))
    return {"status": "ran", "model": model_name, "reason": "", "claims": n,
            "support_rate": round_or_none(rate(sum(verdicts), n)),
            "agreement": round_or_none(rate(n - embedding_only - nli_only, n)),
            "embedding_only": round_or_none(rate(embedding_only, n)),
            "nli_only": round_or_none(rate(nli_only, n)), "both_supported": both}


def _read_by_validator(claims: Sequence[ClaimPairs], model_name: str) -> dict | None:
    if claims and all(c.nli_label for c in claims):
        return {**summarise(claims, [c.nli_label == "entailment" for c in claims], model_name), "source": "validator"}
    return None


def from_validator(traces: Sequence[Trace], model_name: str) -> dict | None:
    """The NLI block from the validator's own labels, when it read every cited claim (no model run here)."""
    return _read_by_validator(cited_claims(traces), model_name)


def nli_support(traces: Sequence[Trace], models: Models, model_name: str, progress: bool = False) -> dict:
    """The NLI block of the evaluation summary (see the module docstring)."""
    claims = cited_claims(traces)
    read = _read_by_validator(claims, model_name)
    if read is not None:   # the validator read every claim already
        return read
    if not model_name:
        return unavailable(model_name, "validate.nli_model is empty")
    try:
        model = models.nli(model_name)
    except (ModelUnavailable, ImportError, OSError) as exc:
        return unavailable(model_name, str(exc))
    if not claims:
        return {**unavailable(model_name, "no validated claim cites a source"), "status": "ran", "claims": 0}
    pending = [c for c in claims if not c.nli_label]
    judged = iter(judge(pending, model, progress))
    verdicts = [c.nli_label == "entailment" if c.nli_label else next(judged) for c in claims]
    return {**summarise(claims, verdicts, model_name), "source": "validator and evaluation" if len(pending) <
            len(claims) else "evaluation"}
