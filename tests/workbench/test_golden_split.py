"""The golden set's tune / test split (golden/golden.split.json): fixed, reproducible, disjoint, complete, balanced,
and never cuts a conversation or a pair of near-duplicate questions in two."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest

from workbench.golden import (
    GoldenError,
    find_split,
    link_groups,
    linked,
    load_golden,
    load_split,
    make_split,
    select,
    split_path,
    split_table,
    split_to_dict,
    write_split,
)

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "golden" / "golden.jsonl"
SPLIT = ROOT / "golden" / "golden.split.json"


@pytest.fixture(scope="module")
def golden():
    return load_golden(GOLDEN)


@pytest.fixture(scope="module")
def split():
    return load_split(SPLIT)


def test_the_committed_split_is_what_the_documented_method_writes(golden):
    """Regenerating with the recorded seed reproduces the file byte for byte: nobody picked cases by hand."""
    committed = json.loads(SPLIT.read_text(encoding="utf-8"))
    again = make_split(golden, seed=committed["seed"], test_fraction=committed["test_fraction"])
    assert split_to_dict(again, "golden.jsonl") == committed
    assert make_split(golden, seed=committed["seed"]).parts == again.parts, "deterministic"
    assert find_split(GOLDEN).parts == again.parts and split_path(GOLDEN) == SPLIT


def test_every_case_is_in_exactly_one_part(golden, split):
    tune, test = set(split.parts["tune"]), set(split.parts["test"])
    assert not tune & test
    assert tune | test == {c.id for c in golden.cases}
    assert len(split.parts["tune"]) + len(split.parts["test"]) == len(golden.cases)


def test_both_parts_are_stratified_by_answerable_and_tag(golden, split):
    for part in ("tune", "test"):
        cases = select(golden, split, part).cases
        assert abs(len(cases) - len(golden.cases) / 2) <= 5
        assert abs(sum(not c.answerable for c in cases) - 50) <= 3
    for tag in golden.tags:
        tagged = [c for c in golden.cases if tag in c.tags]
        if len(tagged) >= 4:
            in_test = sum(split.part_of(c.id) == "test" for c in tagged)
            assert 0 < in_test < len(tagged), f"{tag} is all on one side"


def test_a_conversation_or_a_near_duplicate_never_straddles_the_split(golden, split):
    by_id = {c.id: c for c in golden.cases}
    for a, b in itertools.combinations(golden.cases, 2):
        if linked(a, b):
            assert split.part_of(a.id) == split.part_of(b.id), (a.id, b.id)
    # two follow-ups on the default rate limit (g106, g293) and the question they open with (g282) are one group
    assert "rate limit" in by_id["g106"].history[0].content and "rate limit" in by_id["g293"].history[0].content
    assert "rate limit" in by_id["g282"].question
    assert len({split.part_of(i) for i in ("g106", "g282", "g293")}) == 1
    assert all(set(g) <= set(split.parts["tune"]) or set(g) <= set(split.parts["test"]) for g in split.groups)
    assert any(by_id[i].history for g in split.groups for i in g)


def test_linking_joins_a_follow_up_with_the_case_that_asks_its_opening_question():
    cases, _ = _cases([
        {"id": "a", "question": "What is the default rate limit per endpoint?"},
        {"id": "b", "question": "and in 2.4?", "history": [
            {"role": "user", "content": "what's the default rate limit per endpoint?"},
            {"role": "assistant", "content": "600 per minute."}]},
        {"id": "c", "question": "How do I rotate a signing secret?"}])
    assert sorted(map(sorted, link_groups(cases))) == [["a", "b"], ["c"]]


def _cases(records):
    from workbench.golden import parse_case

    full = [parse_case({"answerable": False, "history": [], **r}, n) for n, r in enumerate(records, 1)]
    return full, None


def test_a_part_is_selected_and_a_stale_or_missing_split_is_one_clear_error(golden, split, tmp_path):
    test = select(golden, split, "test")
    assert [c.id for c in test.cases] == list(split.parts["test"])
    assert select(golden, split, "all") is golden
    extra = tmp_path / "golden.jsonl"
    extra.write_text(GOLDEN.read_text(encoding="utf-8") + json.dumps(
        {"id": "g999", "question": "brand new question?", "answerable": False}) + "\n", encoding="utf-8")
    (tmp_path / "golden.split.json").write_text(SPLIT.read_text(encoding="utf-8"), encoding="utf-8")
    with pytest.raises(GoldenError, match="does not assign 1 cases .*python -m workbench.golden split"):
        select(load_golden(extra), find_split(extra), "test")
    alone = tmp_path / "alone.jsonl"
    alone.write_text(GOLDEN.read_text(encoding="utf-8"), encoding="utf-8")
    assert find_split(alone) is None
    with pytest.raises(GoldenError, match="needs a split file"):
        select(load_golden(alone), None, "test")
    assert write_split(alone) == tmp_path / "alone.split.json"
    assert find_split(alone).parts == split.parts


def test_the_readme_shows_the_split_as_the_file_has_it(golden, split):
    readme = (ROOT / "golden" / "README.md").read_text(encoding="utf-8")
    assert split_table(golden, split) in readme
