"""workbench.correctness: an answer is scored against the golden expected answer; numbers and identifiers match exactly."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.testing import FakeEmbedder
from workbench.correctness import (
    VERDICTS,
    combine_nli,
    decide,
    fact_check,
    key_facts,
    nli_labels,
    score,
    score_case,
    semantic_match,
)
from workbench.golden import GoldenCase

EXPECTED = "In 3.1 the default delivery.max_retries is 8."


def test_a_different_number_is_wrong_even_when_the_words_match():
    result = score(EXPECTED, "In 3.1 the default delivery.max_retries is 5 [1].")
    assert result.verdict == "wrong"
    assert result.missing_facts == ("8",) and result.contradicted_facts == ("8 -> 5",)
    assert result.token_recall > 0.7, "the words alone would have passed"


def test_the_issue_examples_are_wrong():
    assert score("delivery.max_retries is 8 in 3.1.", "3.1 still uses 5 [2].").verdict == "wrong"
    wrong_page = score("ERR_TIMEOUT_502 means the endpoint's upstream returned 502 Bad Gateway.",
                       "ERR_TIMEOUT_504 means the endpoint did not answer within delivery.timeout_ms [1].")
    assert wrong_page.verdict == "wrong" and "err_timeout_502 -> err_timeout_504" in wrong_page.contradicted_facts


def test_a_paraphrase_with_every_key_fact_is_correct():
    result = score(EXPECTED, "Harbor Relay 3.1 retries a failed delivery up to 8 times by default "
                             "(delivery.max_retries) [1].")
    assert result.verdict == "correct" and result.missing_facts == ()


def test_versions_and_numbers_match_only_whole():
    assert key_facts("Since v3.1, up to 10000 ms") == ("3.1", "10000")
    facts, missing, _ = fact_check("since 3.1", "in 3.10 and 1.3 [1]")
    assert missing == ("3.1",)
    assert fact_check("3.1", "v3.1 [1]")[1] == (), "a leading v does not make another version"
    assert fact_check("status 502", "ERR_TIMEOUT_502 [1]")[1] == (), "a number inside an identifier is stated"


def test_nli_contradiction_is_wrong_and_entailment_can_carry_a_paraphrase():
    paraphrase = "Failed deliveries are retried eight times in 3.1 [1]."
    assert score(EXPECTED, paraphrase, nli="contradiction", nli_decides=True).verdict == "wrong"
    stated = "In 3.1 the default delivery.max_retries is 8 [1]."
    assert score(EXPECTED, stated, nli="contradiction").verdict == "correct", "by default NLI is recorded only"
    assert decide(0.3, ("3.1",), (), (), None, "entailment")[0] == "correct"
    assert decide(0.3, ("3.1",), (), (), None, "neutral")[0] == "partly"


def test_semantic_match_is_the_best_of_the_answer_and_its_sentences():
    embedder = FakeEmbedder()
    value = semantic_match(EXPECTED, f"Unrelated words here. {EXPECTED} [1]", embedder)
    assert value is not None and np.isclose(value, 1.0, atol=1e-5)


class _LabelNLI:
    labels = ("contradiction", "entailment", "neutral")

    def predict(self, pairs):
        return np.array([[0.1, 0.7, 0.2]] * len(pairs))


def test_score_case_gives_abstentions_no_verdict_and_answered_unanswerable_a_wrong_one():
    from pipeline.trace import Trace

    trace = Trace(question="q", answer="Up to 8 retries in 3.1 via delivery.max_retries [1].")
    case = GoldenCase(id="c", question="q", answerable=True, expected_answer=EXPECTED)
    assert score_case(case, trace, abstained=True) is None
    scored = score_case(case, trace, abstained=False, embedder=FakeEmbedder(), nli_model=_LabelNLI())
    assert scored.nli == "entailment" and scored.semantic is not None and scored.verdict == "correct"
    assert score_case(case, trace, abstained=False, nli_status="unavailable").nli == "unavailable"
    off_topic = GoldenCase(id="u", question="q", answerable=False)
    assert score_case(off_topic, trace, abstained=False).verdict == "wrong"
    assert scored.nli_forward == scored.nli_backward == "entailment"


class _DirectionalNLI:
    """Entails when the premise holds every word of the hypothesis; contradicts when a number differs."""
    labels = ("entailment", "neutral", "contradiction")

    def predict(self, pairs):
        import re
        out = []
        for premise, hypothesis in pairs:
            numbers = set(re.findall(r"\d+", premise)), set(re.findall(r"\d+", hypothesis))
            if numbers[0] and numbers[1] and not numbers[0] & numbers[1]:
                out.append([0.1, 0.1, 0.8])
            elif set(re.findall(r"\w+", hypothesis.lower())) <= set(re.findall(r"\w+", premise.lower())):
                out.append([0.8, 0.1, 0.1])
            else:
                out.append([0.1, 0.8, 0.1])
        return np.array(out)


class _ContradictingNLI:
    labels = ("entailment", "neutral", "contradiction")

    def predict(self, pairs):
        return np.array([[0.1, 0.1, 0.8]] * len(pairs))


def test_nli_reads_both_directions_so_a_short_correct_answer_counts():
    expected = "Deliveries are retried 8 times by default in 3.1, then dead-lettered and kept 14 days"
    short = "Deliveries are retried 8 times by default in 3.1"
    forward, backward = nli_labels(expected, short, _DirectionalNLI())
    assert (forward, backward) == ("neutral", "entailment"), "the short answer says less, and nothing else"
    assert combine_nli(forward, backward) == "entailment"
    case = GoldenCase(id="c", question="How often are deliveries retried?", answerable=True, expected_answer=expected)
    from pipeline.trace import Trace

    scored = score_case(case, Trace(question=case.question, answer=short + " [1]."), abstained=False,
                        nli_model=_DirectionalNLI(), nli_decides=True)
    assert (scored.nli, scored.nli_forward, scored.nli_backward) == ("entailment", "neutral", "entailment")
    answer = Trace(question=case.question, answer=short + " [1].")
    wrong = score_case(case, answer, abstained=False, nli_model=_ContradictingNLI(), nli_decides=True)
    assert wrong.nli == "contradiction" and wrong.verdict == "wrong"
    recorded = score_case(case, answer, abstained=False, nli_model=_ContradictingNLI())
    assert recorded.nli == "contradiction" and recorded.verdict != "wrong", \
        "the shipped scorer records the NLI labels beside its verdict without letting them decide"
    assert "NLI answer⇒expected neutral, expected⇒answer entailment" in scored.signals()
    assert "key facts 2/3 stated" in scored.signals()
    assert combine_nli("neutral", "neutral") == "neutral"
    assert combine_nli("entailment", "contradiction") == "contradiction", "a contradiction either way wins"


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=200), st.text(max_size=300),
       st.one_of(st.none(), st.floats(-1, 1)),
       st.sampled_from(("off", "unavailable", "entailment", "neutral", "contradiction")))
def test_scoring_arbitrary_strings_never_raises_and_gives_one_verdict(expected, answer, semantic, nli):
    result = score(expected, answer, semantic=semantic, nli=nli)
    assert result.verdict in VERDICTS
    assert 0.0 <= result.token_recall <= 1.0 and 0.0 <= result.token_f1 <= 1.0
    assert set(result.missing_facts) <= set(result.key_facts)


def test_restating_the_question_earns_nothing():
    question = "After going from 2.4 to 2.5 we see 503 ERR_QUEUE_FULL during nightly batch jobs. Bug?"
    expected = "Not a defect: 2.5 raised delivery.timeout_ms from 10000 to 15000 ms, so bursts fill the queue sooner."
    echo = "After upgrading from 2.4 to 2.5, some installations return 503 ERR_QUEUE_FULL during batch jobs [1]."
    assert score(expected, echo, question=question).verdict == "wrong"
    assert "2.5" not in score(expected, echo, question=question).key_facts
    assert score(expected, echo).token_recall > score(expected, echo, question=question).token_recall
