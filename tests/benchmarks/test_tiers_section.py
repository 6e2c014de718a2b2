"""The tiered-generation section (benchmarks/results/tiers.json): rendered from its file alone, showing the file's
numbers and saying the replies are scripted; the scripted models do what the section says they do; the prompt
parser reads back every source the prompt builder fenced."""

from __future__ import annotations

import copy
import json

from hypothesis import given, settings
from hypothesis import strategies as st

from benchmarks import tiers
from benchmarks.results_io import load_results, meta_line
from pipeline.generation.prompts import ABSTENTION_MESSAGE, PromptSource, fence_sources, neutralise
from workbench.golden import GoldenCase


def test_the_section_is_deterministic_shows_every_arms_numbers_and_says_the_replies_are_scripted():
    results = load_results(tiers.NAME)
    text = tiers.render(results)
    assert text == tiers.render(copy.deepcopy(results))
    assert text.startswith("## Tiered generation") and meta_line(results["meta"]) in text
    assert "stub with scripted replies" in text and "list prices" in text
    for row in results["arms"]:
        line = next(ln for ln in text.splitlines() if ln.startswith(f"| {row['arm']} |"))
        assert f"| {row['llm_calls']} | {row['expensive_calls']} |" in line
        if row["correct_answer_rate"] is not None:
            assert f"| {100 * row['correct_answer_rate']:.1f} % [" in line, "a rate and its Wilson interval"
    changed = copy.deepcopy(results)
    changed["arms"][2]["expensive_calls"] = 4321
    assert "| 4321 |" in tiers.render(changed)


def test_the_recorded_arms_are_the_same_cases_and_the_verdict_follows_from_the_rows():
    results = load_results(tiers.NAME)
    by = {r["arm"]: r for r in results["arms"]}
    assert set(by) == {"cheap only", "expensive only", "tiered"}
    assert len({r["cases"] for r in results["arms"]}) == 1
    assert by["cheap only"]["expensive_calls"] == 0
    assert results["verdict"]["fewer_expensive_calls"] == (
        by["tiered"]["expensive_calls"] < by["expensive only"]["expensive_calls"])


def test_tiered_is_tested_paired_against_each_single_model_arm_on_the_same_cases():
    """The paired tests are the recorded per-case outcomes' (recomputed here), the arms' rates are the table's, and
    the section shows each test."""
    import pytest

    from workbench.compare import paired_rates

    results = load_results(tiers.NAME)
    outcomes, by_arm = results["outcomes"], {r["arm"]: r for r in results["arms"]}
    assert len({frozenset(o) for o in outcomes.values()}) == 1, "every arm answered the same case ids"
    text = tiers.render(results)
    assert set(results["paired"]) == {"tiered vs expensive only", "tiered vs cheap only"}
    for pair, rates in results["paired"].items():
        first, second = pair.split(" vs ")
        recorded = {r["name"]: {k: v for k, v in r.items() if k not in ("name", "label")} for r in rates}
        assert recorded == {r.name: r.test.to_dict() for r in paired_rates(outcomes[first], outcomes[second])}
        assert {"answered", "correct", "false_answers"} <= set(recorded)
        answered = recorded["answered"]
        assert answered["rate_a"] == pytest.approx(by_arm[first]["answer_rate_answerable"], abs=1e-4)
        assert answered["rate_b"] == pytest.approx(by_arm[second]["answer_rate_answerable"], abs=1e-4)
        correct = recorded["correct"]
        assert f"McNemar p {correct['mcnemar_p']:.2g} ({correct['a_only']} vs {correct['b_only']} discordant)" in text


def _case(case_id: str, answerable: bool = True) -> GoldenCase:
    return GoldenCase(id=case_id, question="How long are dead letters kept?", answerable=answerable,
                      expected_answer="Dead letters are kept for 14 days by default." if answerable else None)


PROMPT = fence_sources([
    PromptSource(1, "TLS", "Certificates rotate every ninety days."),
    PromptSource(2, "Dead letters", "Dead-letter entries are kept for 14 days by default. They can be replayed."),
    PromptSource(3, "Quotas", "Each tenant may create 50 endpoints.")], "n0nce")


def test_the_scripted_expensive_model_cites_the_best_source_and_the_cheap_one_is_wrong_on_its_share():
    wrong = next(f"g{i:03d}" for i in range(1000) if tiers.cheap_is_wrong(f"g{i:03d}"))
    right = next(f"g{i:03d}" for i in range(1000) if not tiers.cheap_is_wrong(f"g{i:03d}"))
    expensive = json.loads(tiers.scripted_reply(_case(wrong), PROMPT, cheap=False))
    assert expensive["used_source_ids"] == [2] and expensive["answer"].startswith("Dead letters are kept for 14")
    cheap_wrong = json.loads(tiers.scripted_reply(_case(wrong), PROMPT, cheap=True))
    assert cheap_wrong["used_source_ids"] == [2] and "14 days" not in cheap_wrong["answer"]
    assert json.loads(tiers.scripted_reply(_case(right), PROMPT, cheap=True)) == json.loads(
        tiers.scripted_reply(_case(right), PROMPT, cheap=False))
    assert json.loads(tiers.scripted_reply(_case(right, answerable=False), PROMPT, cheap=True))["answer"] == \
        ABSTENTION_MESSAGE
    share = sum(tiers.cheap_is_wrong(f"g{i:04d}") for i in range(2000)) / 2000
    assert abs(share - tiers.CHEAP_WRONG_SHARE) < 0.05


@given(st.lists(st.tuples(st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\n\r"),
                                  max_size=20),
                          st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=200)),
                min_size=1, max_size=6))
@settings(max_examples=200, deadline=None)
def test_the_prompt_parser_reads_back_every_fenced_source(items):
    nonce = "f3nc3"
    sources = [PromptSource(i, title, body) for i, (title, body) in enumerate(items, start=1)]
    parsed = tiers.offered_sources("Sources:\n\n" + fence_sources(sources, nonce) + "\n\nQuestion: q")
    assert parsed == {s.number: neutralise(s.text, nonce) for s in sources}
