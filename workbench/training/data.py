"""The training pairs: (question, sentence, does the sentence answer the question).

Two sources, both read where they lie in ``../shared/traindata/`` (``TRAINDATA`` or ``--data`` elsewhere):

- ``answerability_pool.tsv.gz``: TREC-QA (train-all), WikiQA and SelQA answer-sentence selection, every candidate
  sentence of a question labelled 1 (answers) or 0. The file quotes nothing, so it is read with quoting off.
- ``squad2_train_subset/``: ten SQuAD 2.0 *train* articles (disjoint from SQuAD 2.0 dev). Each paragraph is split
  with the project's sentence rule (:func:`pipeline.text.sentences.sentence_spans`); a sentence holding the start
  of a given answer is a positive, every other sentence of the paragraph a same-paragraph negative, and every
  sentence is a negative for a question marked impossible: the on-topic unanswerable kind the pool lacks.

Held apart for model selection, never trained on (:func:`held_apart`): questions whose ``source:qid`` hashes into
the first ``1/VAL_BUCKETS`` of SHA-1 space, and two whole SQuAD articles (held apart by source document, so a
score on them is a score on text the model never read). The split is a pure function of the ids: the same on
every machine and every run.

Per epoch (:func:`epoch_sample`): every training positive and ``neg_per_pos`` times as many negatives drawn without
replacement with ``random.Random(seed + epoch)``, shuffled with the same generator. Every negative in these
sources is a candidate sentence for its own question (same article, same section, or the same retrieval), so a
uniform draw is already a draw of same-topic negatives.
"""

from __future__ import annotations

import csv
import gzip
import hashlib
import json
import random
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from pipeline.text.sentences import sentence_spans

POOL_FILE = "answerability_pool.tsv.gz"
SQUAD_FILE = "squad2_train_subset/train-v2.0.first10articles.json"
VAL_BUCKETS = 20                      # 1 in 20 pool questions held apart
HELD_SQUAD_ARTICLES = frozenset({5, 9})  # SQuAD subset articles held apart (0-based); 5 has impossible questions


class TrainDataError(ValueError):
    """A training file is missing or unreadable; the message names it."""


@dataclass(frozen=True)
class Pair:
    group: str      # "source:question id": the question the pair belongs to
    source: str
    question: str
    sentence: str
    label: int      # 1: the sentence answers the question


def default_data_dir() -> Path:
    return Path(__file__).resolve().parents[2].parent / "shared" / "traindata"


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def read_pairs(path: Path, header: list[str], parse: Callable[[list[str]], Pair | None], what: str) -> list[Pair]:
    """A gzip TSV pool (quoting off: its fields hold quote characters) as pairs: ``header`` must match, each row goes
    through ``parse``, and a malformed row (``parse`` gives None) is skipped, never fatal. A missing or unreadable
    file is one :class:`TrainDataError` naming it."""
    if not path.is_file():
        raise TrainDataError(f"{what} not found: {path} (see ../shared/traindata/README.md)")
    pairs: list[Pair] = []
    try:
        with gzip.open(path, "rt", encoding="utf-8", newline="") as fh:
            reader = csv.reader(fh, delimiter="\t", quoting=csv.QUOTE_NONE)
            found = next(reader, None)
            if found != header:
                raise TrainDataError(f"{path}: unexpected header {found!r}")
            for row in reader:
                parsed = parse(row)
                if parsed is not None:
                    pairs.append(parsed)
    except (OSError, EOFError, UnicodeDecodeError) as exc:
        raise TrainDataError(f"{path}: cannot read ({type(exc).__name__}: {exc})") from None
    return pairs


def read_pool(path: Path) -> list[Pair]:
    """The answerability pool's rows as pairs; a malformed row is skipped, never fatal."""
    return read_pairs(path, ["source", "qid", "question", "sentence", "label"], parse_pool_row, "training pool")


def parse_pool_row(row: list[str]) -> Pair | None:
    """One TSV row -> Pair, or None when it is not a well-formed labelled pair."""
    if len(row) != 5:
        return None
    source, qid, question, sentence, label = row
    if label not in ("0", "1") or not question.strip() or not sentence.strip():
        return None
    return Pair(f"{source}:{qid}", source, question.strip(), sentence.strip(), int(label))


def squad_pairs(path: Path) -> tuple[list[Pair], list[Pair]]:
    """(training pairs, held-apart pairs) from the SQuAD 2.0 train subset, split by article."""
    if not path.is_file():
        raise TrainDataError(f"SQuAD subset not found: {path}")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))["data"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise TrainDataError(f"{path}: not a SQuAD JSON file ({type(exc).__name__})") from None
    train: list[Pair] = []
    held: list[Pair] = []
    for index, article in enumerate(data):
        target = held if index in HELD_SQUAD_ARTICLES else train
        for paragraph in article.get("paragraphs", []):
            target.extend(paragraph_pairs(paragraph.get("context", ""), paragraph.get("qas", [])))
    return train, held


def paragraph_pairs(context: str, qas: Iterable[dict]) -> Iterator[Pair]:
    """Every (question, sentence) pair of one SQuAD paragraph, labelled by where the answers start."""
    spans = sentence_spans(context)
    for qa in qas:
        starts = [a.get("answer_start", -1) for a in qa.get("answers", [])] if not qa.get("is_impossible") else []
        question = str(qa.get("question", "")).strip()
        if not question:
            continue
        for s, e in spans:
            label = int(any(s <= int(start) < e for start in starts))
            yield Pair(f"squad2_train:{qa.get('id', '')}", "squad2_train", question, context[s:e], label)


def held_apart(pair: Pair) -> bool:
    """Is this pool pair's question in the held-apart part? A pure function of its ``source:qid``."""
    bucket = int(hashlib.sha1(pair.group.encode("utf-8")).hexdigest()[:8], 16) % VAL_BUCKETS
    return bucket == 0


@dataclass(frozen=True)
class Split:
    train: tuple[Pair, ...]
    val_pool: tuple[Pair, ...]     # pool questions held apart by id
    val_squad: tuple[Pair, ...]    # whole SQuAD articles held apart


def load_split(data_dir: Path, use_squad: bool = True) -> Split:
    pool = read_pool(data_dir / POOL_FILE)
    train = [p for p in pool if not held_apart(p)]
    val_pool = [p for p in pool if held_apart(p)]
    val_squad: list[Pair] = []
    if use_squad:
        squad_train, val_squad = squad_pairs(data_dir / SQUAD_FILE)
        train.extend(squad_train)
    return Split(tuple(train), tuple(val_pool), tuple(val_squad))


def input_files(data_dir: Path, use_squad: bool = True) -> list[Path]:
    return [data_dir / POOL_FILE] + ([data_dir / SQUAD_FILE] if use_squad else [])


def epoch_sample(train: tuple[Pair, ...], epoch: int, seed: int, neg_per_pos: float) -> list[Pair]:
    """Every positive and ``neg_per_pos`` times as many negatives, drawn and shuffled by ``seed + epoch``."""
    rng = random.Random(seed * 1000 + epoch)
    positives = [p for p in train if p.label == 1]
    negatives = [p for p in train if p.label == 0]
    take = min(len(negatives), int(round(len(positives) * neg_per_pos)))
    sample = positives + rng.sample(negatives, take)
    rng.shuffle(sample)
    return sample


def val_subset(pairs: tuple[Pair, ...], questions: int, seed: int) -> list[Pair]:
    """All pairs of ``questions`` held-apart questions drawn by ``seed`` (a fixed evaluation set per run)."""
    groups = sorted({p.group for p in pairs})
    keep = set(random.Random(seed).sample(groups, min(questions, len(groups))))
    return [p for p in pairs if p.group in keep]
