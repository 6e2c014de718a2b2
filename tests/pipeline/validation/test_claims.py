"""Claim splitting: the sentences a reader would count, each with the markers it carries."""

from __future__ import annotations

import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.text.sentences import LIST_ITEM, MARKER, TABLE_RULE
from pipeline.validation.claims import marker_numbers, split_claims


def claims(answer: str) -> list[tuple[str, tuple[int, ...]]]:
    return [(s.text, s.markers) for s in split_claims(answer) if s.is_claim]


def test_markers_at_sentence_end_are_removed_from_the_text_and_kept_as_markers():
    assert claims("The default timeout is 15000 ms [1]. Retries back off exponentially [2].") == [
        ("The default timeout is 15000 ms.", (1,)),
        ("Retries back off exponentially.", (2,)),
    ]


@pytest.mark.parametrize("answer, expected", [
    ("Set it to 0.5 seconds [1]. It applies per attempt [1].", ["Set it to 0.5 seconds.", "It applies per attempt."]),
    ("Version v2.3 changed it [2]. Version 3.1.1 did not [3].", ["Version v2.3 changed it.", "Version 3.1.1 did not."]),
    ("Some brokers, e.g. Kafka, do this [1]. Others, i.e. Redis, do not [2].",
     ["Some brokers, e.g. Kafka, do this.", "Others, i.e. Redis, do not."]),
    ("Use a queue (e.g. RabbitMQ) [1]. It helps [1].", ["Use a queue (e.g. RabbitMQ).", "It helps."]),
    ("The error ERR_TIMEOUT_502 means the endpoint was slow [1]. ERR_QUEUE_FULL means the queue is full [2].",
     ["The error ERR_TIMEOUT_502 means the endpoint was slow.", "ERR_QUEUE_FULL means the queue is full."]),
    ("Raise delivery.timeout_ms to 30000 [1]. Then restart harbord.service [2].",
     ["Raise delivery.timeout_ms to 30000.", "Then restart harbord.service."]),
    ("Redis vs. Kafka is a common choice [1]. Both work [2].", ["Redis vs. Kafka is a common choice.", "Both work."]),
])
def test_dots_that_do_not_end_a_sentence_do_not_split_it(answer, expected):
    assert [text for text, _ in claims(answer)] == expected


def test_grouped_and_listed_markers_are_all_read():
    assert claims("Retries are capped at 8 [1][2]. The cap is 300000 ms [1, 3]. Jitter is full [Source 4].") == [
        ("Retries are capped at 8.", (1, 2)),
        ("The cap is 300000 ms.", (1, 3)),
        ("Jitter is full.", (4,)),
    ]


def test_a_range_marker_cites_every_source_in_it():
    assert claims("All three versions agree on this [2-4].") == [("All three versions agree on this.", (2, 3, 4))]


def test_a_mid_sentence_marker_belongs_to_its_sentence():
    assert claims("Retries use backoff [2] and stop after 9 attempts [3]. The DLQ keeps them 14 days [4].") == [
        ("Retries use backoff and stop after 9 attempts.", (2, 3)),
        ("The DLQ keeps them 14 days.", (4,)),
    ]


def test_a_marker_after_the_full_stop_belongs_to_the_sentence_before_it():
    assert claims("The timeout is 15 s. [1] Retries are 8.[2] The cap is 300 s.") == [
        ("The timeout is 15 s.", (1,)),
        ("Retries are 8.", (2,)),
        ("The cap is 300 s.", ()),
    ]


def test_a_line_holding_only_markers_cites_for_the_claim_above():
    answer = "- The timeout is 15 s\n  [1]\n\n- Retries are 8\n\n[2]"
    assert claims(answer) == [("The timeout is 15 s", (1,)), ("Retries are 8", (2,))]


def test_bullet_and_numbered_items_are_one_claim_each_even_without_a_full_stop():
    answer = ("Here is what the sources say:\n\n"
              "- Default timeout: 15000 ms [1]\n"
              "* Retries: 8 [2]\n"
              "1. Acknowledge first, process later [3]\n"
              "2) Raise the timeout for one endpoint only [3]\n")
    assert claims(answer) == [
        ("Default timeout: 15000 ms", (1,)),
        ("Retries: 8", (2,)),
        ("Acknowledge first, process later", (3,)),
        ("Raise the timeout for one endpoint only", (3,)),
    ]


def test_a_list_item_wrapped_over_two_lines_is_one_claim():
    answer = "- The delay before retry n is random between 0 and the\n  backoff cap [1].\n- Next item here [2]."
    assert claims(answer) == [("The delay before retry n is random between 0 and the backoff cap.", (1,)),
                              ("Next item here.", (2,))]


def test_headings_lead_ins_questions_and_remarks_about_the_sources_are_not_claims():
    answer = ("## Retry behaviour\n\n**Summary**\n\nHere is what the sources say:\n\n"
              "Retries are capped at 8 [1]. Is that configurable? Yes. The sources do not say whether it can be "
              "set per endpoint.")
    sentences = split_claims(answer)
    assert claims(answer) == [("Retries are capped at 8.", (1,))]
    reasons = {s.text: s.why_not for s in sentences if not s.is_claim}
    assert reasons == {
        "Retry behaviour": "heading",
        "Summary": "heading",
        "Here is what the sources say:": "lead-in",
        "Is that configurable?": "question",
        "Yes.": "fragment",
        "The sources do not say whether it can be set per endpoint.": "about the sources",
    }


def test_an_unmarked_factual_sentence_is_a_claim_with_no_markers():
    assert claims("The default is 15000 ms [1]. Most receivers answer in under a second.") == [
        ("The default is 15000 ms.", (1,)), ("Most receivers answer in under a second.", ())]


def test_a_marked_sentence_is_always_a_claim_even_if_it_looks_like_a_lead_in():
    assert claims("The sources say [9]:") == [("The sources say:", (9,))]


def test_code_is_neither_split_nor_read_as_a_citation():
    answer = ("Run `harborctl get items[0]. Then` to see it [1].\n\n```toml\n[delivery]\ntimeout_ms = 20000. [5]\n```\n"
              "That sets the default [2].")
    assert claims(answer) == [("Run harborctl get items[0]. Then to see it.", (1,)), ("That sets the default.", (2,))]


def test_table_rows_are_one_claim_each_and_the_rule_line_is_skipped():
    answer = "| Setting | Default |\n|---|---|\n| delivery.timeout_ms | 15000 [1] |\n| delivery.max_retries | 8 [1] |"
    assert claims(answer) == [("delivery.timeout_ms 15000", (1,)), ("delivery.max_retries 8", (1,))]
    assert [s.why_not for s in split_claims(answer) if not s.is_claim] == ["heading"]


def test_spans_point_at_the_sentence_in_the_answer_markers_included():
    answer = "First claim here [1]. Second claim here [2][3]."
    spans = [answer[s.start:s.end] for s in split_claims(answer)]
    assert spans == ["First claim here [1].", "Second claim here [2][3]."]


def test_a_lower_case_word_after_a_full_stop_does_not_start_a_new_claim():
    assert claims("It supports approx. three retries per minute [1].") == [
        ("It supports approx. three retries per minute.", (1,))]


def test_empty_and_whitespace_answers_have_no_claims():
    assert split_claims("") == []
    assert split_claims("  \n\n ") == []


def test_the_abstention_sentence_inside_a_longer_answer_is_not_a_claim():
    from pipeline.generation.prompts import ABSTENTION_MESSAGE

    answer = f"Retries are capped at 8 [1]. {ABSTENTION_MESSAGE}"
    assert claims(answer) == [("Retries are capped at 8.", (1,))]


def test_a_sentence_may_start_with_a_lower_case_config_key():
    assert claims("Retries back off [1]. delivery.max_retries defaults to 8 [2]. queue_capacity is 100000 [2].") == [
        ("Retries back off.", (1,)), ("delivery.max_retries defaults to 8.", (2,)),
        ("queue_capacity is 100000.", (2,))]


def test_double_underscores_inside_identifiers_survive_and_paired_bold_is_unwrapped():
    # The app shows the claim next to the answer: "window.__pwned" must not turn into "window.pwned".
    assert claims("The widget renders window.__pwned=1 in the header [1]. Call `__init__` once [2]. "
                  "This is __important__ [3].") == [
        ("The widget renders window.__pwned=1 in the header.", (1,)),
        ("Call __init__ once.", (2,)),
        ("This is important.", (3,)),
    ]


# -- properties (hypothesis): any string, no traceback, no hang, nothing dropped -----------------------------

_PIECES = st.sampled_from(["[1]", "[2, 3]", "[1-3]", "[Source 4]", "[99999]", "[1-100000]", "`", "``", "```", "~~~",
                           "\n", "\n\n", "- ", "* ", "1. ", "# ", "| a | b |", "|---|---|", "**", "__", ". ", "? ",
                           "e.g. ", "v2.3", "ERR_TIMEOUT_502", "delivery.timeout_ms", "...", ":", "> ", "\u2028",
                           "\r\n", "\t", " ", "Yes.", "Here is what the sources say:"])
ANSWERS = st.one_of(st.text(max_size=400), st.lists(st.one_of(_PIECES, st.text(max_size=12)), max_size=40).map("".join))


def _uncovered(answer: str, sentences) -> list[int]:
    """Positions of non-blank characters no sentence span covers, other than what is layout, not words: a
    table rule line, a list item's bullet."""
    spans = [(s.start, s.end) for s in sentences]
    out = []
    pos = 0
    for line in answer.splitlines(keepends=True):
        body = line.rstrip("\r\n")
        layout = len(LIST_ITEM.match(body).group()) if LIST_ITEM.match(body) else 0
        if TABLE_RULE.match(body):
            layout = len(body)
        for i, ch in enumerate(body):
            if not ch.isspace() and i >= layout and not any(a <= pos + i < b for a, b in spans):
                out.append(pos + i)
        pos += len(line)
    return out


@settings(max_examples=400, deadline=None)
@given(ANSWERS)
def test_any_string_splits_without_error_and_every_non_blank_character_is_in_a_sentence(answer):
    sentences = split_claims(answer)
    assert _uncovered(answer, sentences) == []
    previous_end = 0
    for s in sentences:
        assert 0 <= s.start <= s.end <= len(answer)
        assert s.start >= previous_end, "sentences are in order and do not overlap"
        previous_end = s.end
        assert s.is_claim == (not s.why_not)
        assert all(isinstance(n, int) and n >= 0 for n in s.markers)
        if s.markers:
            assert s.is_claim or s.why_not in ("heading", "code"), "a marked sentence is always checked"


@settings(max_examples=200, deadline=None)
@given(ANSWERS)
def test_every_marker_of_a_claim_is_written_in_its_span(answer):
    for s in split_claims(answer):
        written = {n for m in MARKER.finditer(answer, s.start, s.end) for n in marker_numbers(m.group(1))}
        assert set(s.markers) <= written


# Inputs the size of the longest answer the generator accepts (generate.check_reply caps a reply at
# max_output_tokens * 8 characters) and beyond. "e.g. e.g. ..." stays one sentence to the end; the sentence rule
# (pipeline/text/sentences.py) reads only the word before each full stop and the character after it, so such a
# run costs its length, not its square.
@pytest.mark.parametrize("answer", [
    "[" * 20000 + "1" + "]" * 20000,
    "a. " * 3000,
    "`" * 30001,
    "e.g. " * 10000 + "Kafka.",
    ("- item [1]\n" * 5000),
    "|" * 50000,
    "[1, " * 5000 + "2]",
    "x" * 300000,
])
def test_pathological_answers_finish(answer):
    # A hang guard, not a speed check: run in a thread and give it far longer than any real answer needs.
    result: list = []
    worker = threading.Thread(target=lambda: result.append(split_claims(answer)), daemon=True)
    worker.start()
    worker.join(120)
    assert result, "split_claims did not return"
