"""The NLI check inside the validator: a contradicted claim loses its support whatever its cosine, the rule decides
what neutral means, the trace keeps the label, probabilities and the verdict before the model, and a missing or
broken model is a recorded degradation (fakes here; the shipped model is tested in tests/pipeline/models)."""

from __future__ import annotations

import numpy as np
import pytest

from pipeline.config import ValidateConfig
from pipeline.context import StageContext
from pipeline.models.registry import Models
from pipeline.testing import FakeEmbedder, FakeNLI
from pipeline.trace import Candidate, GenerationTrace, Source
from pipeline.validation import citations, entailment

TIMEOUT = "ERR_TIMEOUT_502 is recorded when the endpoint does not answer. The default timeout is 15000 ms per attempt."
RETRIES = "Deliveries are retried with exponential backoff. After 8 retries the delivery moves to the dead-letter queue."


def run(answer: str, nli=None, cfg: ValidateConfig | None = None, texts=(TIMEOUT, RETRIES)):
    cands = tuple(Candidate(chunk_id=f"c{i}", doc_id=f"d{i}", title=f"T{i}", text=t) for i, t in enumerate(texts))
    gen = GenerationTrace(status="answered", backend="litellm", answer=answer,
                          sources=tuple(Source(i + 1, c.chunk_id, c.doc_id, c.title) for i, c in enumerate(cands)))
    models = Models(embedder=FakeEmbedder(), nli=nli if nli is not None else FakeNLI())
    return citations.run(gen, cands, cfg or ValidateConfig(), StageContext(models))


def test_an_entailed_claim_stays_supported_and_the_trace_says_why():
    val = run("The default timeout is 15000 ms per attempt [1].")
    claim = val.claims[0]
    assert (claim.verdict, claim.embedding_verdict, claim.nli_label) == ("supported", "supported", "entailment")
    assert claim.nli_marker == 1 and "15000 ms" in claim.nli_passage
    assert claim.nli_probs is not None and len(claim.nli_probs) == 3 and abs(sum(claim.nli_probs) - 1) < 0.01
    assert (val.nli_status, val.nli_pairs, val.supported) == ("ran", 1, 1)


def test_a_negated_claim_close_by_cosine_is_contradicted_and_unsupported():
    val = run("The default timeout is not 15000 ms per attempt [1].")
    claim = val.claims[0]
    assert claim.embedding_verdict == "supported", "the cosine and key-fact checks alone pass it"
    assert (claim.nli_label, claim.verdict) == ("contradiction", "unsupported")
    assert (val.supported, val.unsupported) == (0, 1)


def test_neutral_loses_support_under_the_entailment_rule_only():
    answer = "The default timeout is 15000 ms per attempt for partners [1]."
    strict = run(answer).claims[0]
    lenient = run(answer, cfg=ValidateConfig(nli="contradiction")).claims[0]
    assert strict.nli_label == lenient.nli_label == "neutral"
    assert strict.embedding_verdict == "supported"
    assert (strict.verdict, lenient.verdict) == ("unsupported", "supported")


def test_any_cited_passage_that_entails_is_enough():
    val = run("After 8 retries the delivery moves to the dead-letter queue [1][2].")
    claim = val.claims[0]
    assert claim.nli_label == "entailment" and claim.nli_marker == 2


def test_the_model_only_takes_support_away():
    val = run("Harbor Relay stores events in PostgreSQL [1].", nli=_Always("entailment"))
    assert val.claims[0].embedding_verdict == "unsupported" and val.claims[0].verdict == "unsupported"


def test_a_word_for_word_quote_is_entailed_whatever_the_model_says():
    contrarian = _Always("contradiction")
    quote = run("ERR_TIMEOUT_502 is recorded when the endpoint does not answer [1].", nli=contrarian).claims[0]
    assert (quote.nli_label, quote.nli_quoted, quote.verdict) == ("entailment", True, "supported")
    assert quote.nli_probs[2] > 0.8, "the model's own reading stays in the trace"
    altered = run("ERR_TIMEOUT_502 is recorded when the endpoint does answer [1].", nli=contrarian).claims[0]
    assert (altered.nli_label, altered.nli_quoted, altered.verdict) == ("contradiction", False, "unsupported")


@pytest.mark.parametrize("claim, whole", [
    ("The default timeout is 15000 ms per attempt.", True),
    ("ERR_TIMEOUT_502 is recorded when the endpoint does not answer.", True),
    ("ERR_TIMEOUT_502 is recorded.", False),                      # cut from inside a sentence
    ("The default timeout is 15000 ms.", False),
    ("timeout is 15000 ms per attempt.", False),                  # starts inside a sentence
])
def test_only_a_whole_sentence_or_clause_counts_as_a_quote(claim, whole):
    chunk = Candidate(chunk_id="c", doc_id="d", title="T", text=TIMEOUT)
    assert entailment.quoted(claim, chunk) is whole


def test_markers_are_not_part_of_the_hypothesis():
    nli = _Always("entailment")
    run("The default timeout is 15000 ms per attempt [1].", nli=nli)
    assert nli.seen and all("[1]" not in h for _, h in nli.seen)


def test_off_loads_no_model_and_says_so():
    nli = _Always("contradiction")
    val = run("The default timeout is 15000 ms per attempt [1].", nli=nli, cfg=ValidateConfig(nli="off"))
    assert val.nli_status == "off" and not nli.seen
    assert val.claims[0].verdict == "supported" and val.claims[0].nli_label == ""


def test_a_missing_model_is_a_recorded_degradation(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    cfg = ValidateConfig(nli_model="no-such-org/no-such-nli-model")
    cands = (Candidate(chunk_id="c0", doc_id="d0", title="T", text=TIMEOUT),)
    gen = GenerationTrace(status="answered", backend="litellm", answer="The default timeout is 15000 ms per attempt [1].",
                          sources=(Source(1, "c0", "d0", "T"),))
    val = citations.run(gen, cands, cfg, StageContext(Models(embedder=FakeEmbedder())))
    assert val.status == "ran" and val.nli_status == "unavailable"
    assert "no-such-org/no-such-nli-model" in val.nli_reason and "embedding check alone" in val.nli_reason
    assert val.claims[0].verdict == "supported" and val.claims[0].nli_label == ""


@pytest.mark.parametrize("broken", [RuntimeError("model crashed"), np.full((1, 3), np.nan)])
def test_a_model_that_raises_or_returns_junk_is_recorded_not_raised(broken):
    val = run("The default timeout is 15000 ms per attempt [1].", nli=_Broken(broken))
    assert val.status == "ran" and val.nli_status == "failed" and val.nli_reason
    assert val.claims[0].verdict == "supported", "the embedding check's verdict stands"


def test_a_model_with_another_label_order_is_read_by_name():
    reordered = _Always("contradiction", labels=("contradiction", "entailment", "neutral"))
    claim = run("Each attempt has a default timeout of 15000 ms [1].", nli=reordered).claims[0]
    assert claim.nli_label == "contradiction" and claim.nli_probs[2] > 0.8


def test_a_model_without_an_nli_label_set_fails_cleanly():
    val = run("The default timeout is 15000 ms per attempt [1].", nli=_Always("entailment", labels=("yes", "no")))
    assert val.nli_status == "failed" and "neutral" in val.nli_reason


def test_the_claim_label_prefers_entailment_then_contradiction():
    rows = [(1, "a", np.array([0.1, 0.2, 0.7])), (2, "b", np.array([0.6, 0.3, 0.1]))]
    assert entailment.claim_label(rows)[:2] == ("entailment", 2)
    rows = [(1, "a", np.array([0.1, 0.2, 0.7])), (2, "b", np.array([0.2, 0.7, 0.1]))]
    assert entailment.claim_label(rows)[:2] == ("contradiction", 1)
    rows = [(1, "a", np.array([0.3, 0.6, 0.1])), (2, "b", np.array([0.4, 0.5, 0.1]))]
    assert entailment.claim_label(rows)[:2] == ("neutral", 2)


class _Always:
    def __init__(self, label: str, labels=("entailment", "neutral", "contradiction")) -> None:
        self.labels = labels
        self.label = label
        self.seen: list[tuple[str, str]] = []

    def predict(self, pairs):
        self.seen += list(pairs)
        out = np.full((len(pairs), len(self.labels)), 0.05, dtype=np.float32)
        if self.label in self.labels:
            out[:, self.labels.index(self.label)] = 0.9
        return out


class _Broken:
    labels = ("entailment", "neutral", "contradiction")

    def __init__(self, what) -> None:
        self.what = what

    def predict(self, pairs):
        if isinstance(self.what, Exception):
            raise self.what
        return self.what


@pytest.mark.parametrize("claim, restates", [
    ("Publishers calling the ingest API never receive this code.", True),    # reordered, same negation
    ("Publishers calling the ingest API receive this code.", False),          # negation dropped
    ("Publishers calling the ingest API never receive this code on Sundays.", False),  # a qualifier it lacks
    ("Subscribers calling the ingest API never receive this code.", False),  # a swapped name
])
def test_a_restatement_in_the_windows_own_words_and_negations(claim, restates):
    window = "This is a delivery-side code: publishers calling the ingest API never receive it."
    assert (entailment.restated(claim, [window]) is not None) is restates


@pytest.mark.parametrize("claim, is_structured", [
    ("Setting: delivery.max_retries; Default in 3.1: 8; Effect: retries before the DLQ", True),
    ("harborctl endpoints update ep_01 --signing-algorithm hmac-sha256", True),
    ('{"endpoint_id": "ep_01"}', True),
    ("WARN security: endpoint ep_01 uses a deprecated algorithm", True),
    ("The default timeout is 15000 ms per attempt.", False),
    ("Note: the retry limit is 8 in 3.1.", False),
    ("Version: 2.4; HMAC-SHA1: allowed; HMAC-SHA256 is the default", True),
    ("Note: retries back off; the cap is 300 s.", False),
])
def test_structured_claims_are_left_to_the_embedding_check(claim, is_structured):
    assert entailment.structured(claim) is is_structured


def test_a_table_row_claim_is_not_read_and_the_trace_says_so():
    contrarian = _Always("contradiction")
    val = run("Timeout: 15000 ms; Retries: 8 [1].", nli=contrarian,
              texts=("| Timeout | Retries |\n|---|---|\n| 15000 ms | 8 |", RETRIES))
    assert val.claims[0].nli_label == "" and not contrarian.seen
    assert "1 structured claim" in val.nli_reason
