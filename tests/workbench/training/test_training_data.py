"""The training pairs: the pool parser, SQuAD sentence labels, the held-apart split and the per-epoch sample."""

import gzip
import json

from hypothesis import given
from hypothesis import strategies as st

from workbench.training.data import (
    Pair,
    epoch_sample,
    held_apart,
    load_split,
    paragraph_pairs,
    parse_pool_row,
    read_pool,
)


@given(st.lists(st.text(max_size=30), max_size=7))
def test_a_pool_row_is_a_labelled_pair_or_nothing(row):
    pair = parse_pool_row(row)
    if pair is not None:
        assert len(row) == 5 and row[4] in ("0", "1")
        assert pair.label == int(row[4]) and pair.question and pair.sentence
        assert pair.group == f"{row[0]}:{row[1]}"


def test_malformed_pool_rows_are_skipped_not_fatal(tmp_path):
    path = tmp_path / "answerability_pool.tsv.gz"
    with gzip.open(path, "wt", encoding="utf-8") as fh:
        fh.write("source\tqid\tquestion\tsentence\tlabel\n")
        fh.write('wikiqa\tQ1\twho wrote "it"?\tHe wrote "it" in 1990 .\t1\n')  # quotes are data, not quoting
        fh.write("wikiqa\tQ1\tonly three\tfields\n")
        fh.write("wikiqa\tQ1\tq\ts\tmaybe\n")
    pairs = read_pool(path)
    assert pairs == [Pair("wikiqa:Q1", "wikiqa", 'who wrote "it"?', 'He wrote "it" in 1990 .', 1)]


def test_squad_sentences_are_labelled_by_where_the_answer_starts():
    context = "Beyonce was born in Houston. She rose to fame in the late 1990s. She sang."
    qas = [{"id": "a", "question": "When did she become famous?", "is_impossible": False,
            "answers": [{"text": "late 1990s", "answer_start": context.index("late 1990s")}]},
           {"id": "b", "question": "When did she retire?", "is_impossible": True, "answers": []}]
    pairs = list(paragraph_pairs(context, qas))
    answered = [(p.sentence, p.label) for p in pairs if p.group.endswith(":a")]
    assert answered == [("Beyonce was born in Houston.", 0), ("She rose to fame in the late 1990s.", 1),
                        ("She sang.", 0)]
    assert all(p.label == 0 for p in pairs if p.group.endswith(":b")), "an impossible question has no answer"


def test_the_held_apart_part_depends_only_on_the_question():
    a = Pair("wikiqa:Q7", "wikiqa", "q", "s1", 1)
    b = Pair("wikiqa:Q7", "wikiqa", "other question text", "s2", 0)
    assert held_apart(a) == held_apart(b), "all sentences of one question are on one side"
    many = [Pair(f"trecqa:{i}", "trecqa", "q", "s", 0) for i in range(4000)]
    share = sum(held_apart(p) for p in many) / len(many)
    assert 0.03 < share < 0.07


def test_the_epoch_sample_is_seeded_balanced_and_differs_per_epoch():
    train = tuple(Pair(f"s:{i}", "s", "q", f"sent {i}", int(i % 10 == 0)) for i in range(1000))
    first = epoch_sample(train, 0, seed=13, neg_per_pos=2.0)
    assert first == epoch_sample(train, 0, seed=13, neg_per_pos=2.0)
    assert sum(p.label for p in first) == 100 and len(first) == 300
    assert {p.sentence for p in first if not p.label} != {p.sentence for p in epoch_sample(train, 1, 13, 2.0)
                                                        if not p.label}


def test_two_squad_articles_are_held_apart_whole(tmp_path):
    with gzip.open(tmp_path / "answerability_pool.tsv.gz", "wt", encoding="utf-8") as fh:
        fh.write("source\tqid\tquestion\tsentence\tlabel\n")
    articles = [{"title": f"A{i}", "paragraphs": [{"context": f"Fact {i} is true. Other {i} is false.", "qas": [
        {"id": f"q{i}", "question": f"What is fact {i}?", "is_impossible": False,
         "answers": [{"text": "true", "answer_start": 0}]}]}]} for i in range(10)]
    (tmp_path / "squad2_train_subset").mkdir()
    (tmp_path / "squad2_train_subset" / "train-v2.0.first10articles.json").write_text(json.dumps({"data": articles}))
    split = load_split(tmp_path)
    held = {p.question for p in split.val_squad}
    assert held == {"What is fact 5?", "What is fact 9?"}
    assert not held & {p.question for p in split.train}
