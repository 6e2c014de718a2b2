"""pipeline.text.sentences: one sentence rule for the extractive generator and the claim validator."""

from __future__ import annotations

from hypothesis import example, given, settings
from hypothesis import strategies as st

from pipeline.generation.extractive import render, split_units
from pipeline.text.sentences import sentence_spans, split_sentences
from pipeline.validation.claims import split_claims

WORDS = ["Retries", "back", "off", "for", "30", "s", "ERR_TIMEOUT_502", "delivery.max_retries", "v3.1", "0.5",
         "e.g.", "vs.", "Kafka", "the", "webhook", "`items[0]`", "fails", "(see", "notes)", "\"quoted\"", "etc."]
sentence_text = st.lists(st.sampled_from(WORDS), min_size=1, max_size=12).map(" ".join)
paragraph = st.lists(st.tuples(sentence_text, st.sampled_from([".", "!", "?", ""])), min_size=1, max_size=6).map(
    lambda parts: " ".join(s + end for s, end in parts))


@given(st.text(max_size=300))
@settings(max_examples=300, deadline=None)
def test_spans_are_ordered_disjoint_trimmed_and_lose_no_text(text):
    spans = sentence_spans(text)
    pos = 0
    for start, end in spans:
        assert pos <= start < end <= len(text)
        assert not text[pos:start].strip(), "only whitespace falls between sentences"
        assert text[start:end] == text[start:end].strip()
        pos = end
    assert not text[pos:].strip()


def test_identifiers_versions_decimals_and_abbreviations_stay_whole():
    text = ("Set delivery.max_retries to 8 in v3.1. It backs off 0.5 s, e.g. Kafka does too. "
            "delivery.timeout_ms is separate. Done!")
    assert split_sentences(text) == ["Set delivery.max_retries to 8 in v3.1.",
                                     "It backs off 0.5 s, e.g. Kafka does too.",
                                     "delivery.timeout_ms is separate.", "Done!"]


@given(paragraph)
@example("e.g.. Retries. delivery.max_retries.")   # a dropped sentence had kept "e.g.." apart from the next one
@settings(max_examples=200, deadline=None)
def test_every_sentence_the_extractive_generator_quotes_is_one_claim_for_the_validator(text):
    units = split_units(text, source=1)
    answer = render(units)
    claims = [c for c in split_claims(answer) if c.markers]
    # the generator cites each prose sentence, and each sentence of a list item ("30. Retries."), with its own
    # [1]; the validator sees exactly those sentences
    quoted = sum(len(split_sentences(u.text)) if u.kind == "item" else 1 for u in units)
    assert len(claims) == quoted
    assert all(c.markers == (1,) for c in claims)
