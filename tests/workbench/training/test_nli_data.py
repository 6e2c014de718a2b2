"""The NLI pairs: the pool parser, SICK left out, claims held apart by claim, and the perturbation writers."""

import gzip
import random

from hypothesis import given
from hypothesis import strategies as st

from workbench.training.nli_data import (
    LABELS,
    change_number,
    flip_negation,
    load_nli_split,
    nli_epoch_sample,
    nli_held_apart,
    parse_nli_row,
    perturb,
    read_nli_pool,
)


@given(st.lists(st.text(max_size=30), max_size=6))
def test_a_pool_row_is_a_labelled_pair_or_nothing(row):
    pair = parse_nli_row(row)
    if pair is not None:
        assert len(row) == 4 and row[3].strip() in LABELS
        assert LABELS[pair.label] == row[3].strip() and pair.question and pair.sentence


def test_malformed_rows_are_skipped_and_quotes_are_data(tmp_path):
    path = tmp_path / "nli_pool.tsv.gz"
    with gzip.open(path, "wt", encoding="utf-8") as fh:
        fh.write("source\tpremise\thypothesis\tlabel\n")
        fh.write('snli_dev\tA man says "hi" .\tA man speaks .\tentailment\n')
        fh.write("snli_dev\tonly\tthree\n")
        fh.write("snli_dev\tp\th\tmaybe\n")
    pairs = read_nli_pool(path)
    assert [(p.question, p.sentence, p.label) for p in pairs] == [('A man says "hi" .', "A man speaks .", 0)]


def test_every_evidence_pair_of_a_claim_is_on_one_side():
    claim = "Sea levels rose by 20 cm."
    pairs = [parse_nli_row([source, f"Evidence {i}.", claim, "neutral"])
             for i, source in enumerate(["climate_fever", "healthver_dev", "healthver_test", "climate_fever"])]
    assert len({p.group for p in pairs}) == 1, "a claim's id is its text, across the claim-evidence sets"
    assert len({nli_held_apart(p) for p in pairs}) == 1


def _pool(tmp_path, claims=200):
    path = tmp_path / "nli_pool.tsv.gz"
    rows = ["source\tpremise\thypothesis\tlabel"]
    for i in range(claims):
        rows.append(f"climate_fever\tThe glacier {i} lost 12 metres of ice in 2019 .\tGlacier {i} shrank .\tentailment")
        rows.append(f"snli_dev\tA dog {i} is running in the park and it is happy .\tA dog {i} sleeps .\tcontradiction")
        rows.append(f"sick\tA man {i} plays a guitar .\tA man plays .\tentailment")
    with gzip.open(path, "wt", encoding="utf-8") as fh:
        fh.write("\n".join(rows) + "\n")
    return tmp_path


def test_the_split_leaves_sick_out_and_never_trains_on_a_held_apart_claim(tmp_path):
    split = load_nli_split(_pool(tmp_path), seed=3, perturb_per_kind=20)
    assert split.left_out == {"sick": 200}
    assert not any(p.source == "sick" for p in split.train + split.val_claims + split.val_general)
    held = {p.group for p in split.val_claims + split.val_general}
    assert split.val_claims and not held & {p.group for p in split.train}
    assert {p.source for p in split.train} >= {"perturb_identity", "perturb_number", "perturb_negation"}
    assert not {p.question for p in split.val_perturb} & {p.question for p in split.train if
                                                           p.source.startswith("perturb")}, \
        "validation perturbations come from held-apart premises only"


def test_the_split_and_the_epoch_order_are_pure_functions_of_the_seed(tmp_path):
    data = _pool(tmp_path)
    a, b = load_nli_split(data, seed=3, perturb_per_kind=20), load_nli_split(data, seed=3, perturb_per_kind=20)
    assert a == b
    assert nli_epoch_sample(a.train, 1, 3) == nli_epoch_sample(b.train, 1, 3) != nli_epoch_sample(a.train, 2, 3)
    assert sorted(nli_epoch_sample(a.train, 1, 3), key=repr) == sorted(a.train, key=repr)


def test_a_changed_number_differs_only_in_that_number():
    rng = random.Random(0)
    for sentence in ["Deliveries are retried 8 times.", "The limit is 1.5 MB per request and 30 per minute."]:
        changed = change_number(sentence, rng)
        assert changed is not None and changed != sentence
        assert [w for w in changed.split() if not any(ch.isdigit() for ch in w)] == \
            [w for w in sentence.split() if not any(ch.isdigit() for ch in w)]
    assert change_number("COVID-19 spread fast.", rng) is None, "a number inside a name is not a quantity"
    assert change_number("No numbers here.", rng) is None


def test_negation_is_added_or_removed():
    assert flip_negation("The queue is drained nightly.") == "The queue is not drained nightly."
    assert flip_negation("The queue is not drained nightly.") == "The queue is drained nightly."
    assert flip_negation("Retries cannot be disabled.") == "Retries can be disabled."
    assert flip_negation("Dogs bark loudly.") is None


@given(st.lists(st.text(min_size=1, max_size=80), max_size=8), st.integers(0, 50))
def test_perturbations_are_labelled_and_never_identical_when_altered(premises, seed):
    for pair in perturb([(f"g{i}", p) for i, p in enumerate(premises)], per_kind=5, seed=seed):
        assert pair.source in ("perturb_identity", "perturb_number", "perturb_negation")
        if pair.source == "perturb_identity":
            assert pair.label == LABELS.index("entailment") and pair.sentence in pair.question
        else:
            assert pair.label == LABELS.index("contradiction") and pair.sentence not in pair.question
