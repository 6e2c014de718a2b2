"""The toy training data and settings the training tests share: 40 pool questions, ten one-paragraph SQuAD
articles and a 200-pair NLI pool, trained with one layer in seconds."""

import gzip
import json

import pytest

from workbench.training.loop import TrainSettings


@pytest.fixture(scope="session")
def toy_settings() -> TrainSettings:
    return TrainSettings(layers=1, max_tokens=32, batch_size=4, epochs=2, neg_per_pos=1.0, eval_every=8,
                         val_questions=10, threads=1)


@pytest.fixture(scope="session")
def data_dir(tmp_path_factory):
    home = tmp_path_factory.mktemp("traindata")
    rows = ["source\tqid\tquestion\tsentence\tlabel"]
    for q in range(40):
        rows.append(f"toy\t{q}\thow many retries for job {q} ?\tjob {q} is retried {q % 7 + 2} times .\t1")
        rows.append(f"toy\t{q}\thow many retries for job {q} ?\tjob {q} writes its log to disk .\t0")
        rows.append(f"toy\t{q}\thow many retries for job {q} ?\tthe weather was mild that day .\t0")
    with gzip.open(home / "answerability_pool.tsv.gz", "wt", encoding="utf-8") as fh:
        fh.write("\n".join(rows) + "\n")
    articles = [{"title": f"A{i}", "paragraphs": [{"context": f"The tower {i} is {i + 10} metres tall. It is red.",
                                                   "qas": [{"id": f"q{i}", "question": f"How tall is tower {i}?",
                                                            "is_impossible": i % 2 == 0,
                                                            "answers": [] if i % 2 == 0 else
                                                            [{"text": "tall", "answer_start": 4}]}]}]}
                for i in range(10)]
    (home / "squad2_train_subset").mkdir()
    (home / "squad2_train_subset" / "train-v2.0.first10articles.json").write_text(json.dumps({"data": articles}))
    rows = ["source\tpremise\thypothesis\tlabel"]
    for i in range(40):
        premise = f"The job {i} is retried {i % 7 + 2} times before it fails ."
        rows += [f"snli_dev\t{premise}\tThe job {i} is retried .\tentailment",
                 f"snli_dev\t{premise}\tThe job {i} writes a log .\tneutral",
                 f"snli_dev\t{premise}\tThe job {i} is never retried .\tcontradiction",
                 f"climate_fever\tSea level rose {i} cm last century .\tClaim {i} about the sea .\t"
                 f"{('entailment', 'neutral', 'contradiction')[i % 3]}",
                 f"sick\tA man plays {i} guitars .\tA man plays .\tentailment"]
    with gzip.open(home / "nli_pool.tsv.gz", "wt", encoding="utf-8") as fh:
        fh.write("\n".join(rows) + "\n")
    return home
