"""Which chunks answer a golden case: the labels passage-level recall and nDCG are scored against."""

from __future__ import annotations

from workbench.relevance import Passage, relevant_chunks

ANSWER = "Retries back off exponentially, up to 8 attempts over 24 hours."
QUESTION = "How many times does harbor relay retry a delivery?"


def test_a_chunk_of_an_expected_document_that_states_the_answer_is_relevant_and_others_are_not():
    passages = [Passage("d#0", "d", "Deliveries are retried with exponential backoff: up to 8 attempts over 24 hours."),
                Passage("d#1", "d", "Endpoints must answer within 10 seconds."),
                Passage("other#0", "other", "Retries back off exponentially, up to 8 attempts over 24 hours.")]
    assert relevant_chunks(("d",), ANSWER, QUESTION, passages) == ("d#0",)


def test_a_chunk_with_a_different_number_does_not_state_the_answer():
    passages = [Passage("d#0", "d", "Retries back off exponentially, up to 5 attempts over 24 hours."),
                Passage("d#1", "d", "Retries back off exponentially, up to 8 attempts over 24 hours.")]
    assert relevant_chunks(("d",), ANSWER, QUESTION, passages) == ("d#1",)


def test_an_expected_document_with_no_stating_chunk_contributes_its_closest_chunks():
    passages = [Passage("d#0", "d", "Deliveries back off exponentially."),
                Passage("d#1", "d", "The limit is 8 attempts."),
                Passage("d#2", "d", "Unrelated: rotate the signing secret."),
                Passage("e#0", "e", "Up to 8 attempts over 24 hours, backing off exponentially.")]
    relevant = relevant_chunks(("d", "e"), ANSWER, QUESTION, passages)
    assert relevant == ("d#1", "e#0"), "d#1 holds the key fact 8; e#0 states the answer"


def test_a_case_without_expected_documents_or_answer_is_unlabelled():
    passages = [Passage("d#0", "d", ANSWER)]
    assert relevant_chunks((), ANSWER, QUESTION, passages) is None
    assert relevant_chunks(("d",), None, QUESTION, passages) is None
