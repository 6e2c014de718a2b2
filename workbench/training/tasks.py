"""What differs between the reading models the training loop fits: head, loss, sample, validation, selection.

- ``answerability``: one logit, binary cross-entropy, sigmoid probability that the sentence answers the question;
  per epoch every positive and ``neg_per_pos`` negatives (:func:`workbench.training.data.epoch_sample`); validated
  on the held-apart pool questions (pair AUC, MRR) and the two held-apart SQuAD articles (question AUC).
- ``nli``: three logits in the order of :data:`workbench.training.nli_data.LABELS` (entailment, neutral,
  contradiction), cross-entropy, softmax probabilities; every training pair once per epoch; validated on the
  held-apart claims of the claim-evidence sets (3-way accuracy, macro-F1, entailed-vs-not AUC), the other sources'
  held-apart premises and the held-apart perturbations (accuracy). Selection: the mean of the claims' macro-F1 and
  the perturbations' accuracy (what a citation check must get right: real claim-evidence pairs, and a quoted
  sentence with a number or a negation changed).

Metrics come from scikit-learn (accuracy, macro-F1) and :func:`workbench.metrics.roc_auc`.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from workbench.metrics import roc_auc
from workbench.training.data import Pair


@dataclass(frozen=True)
class Task:
    name: str
    num_labels: int
    labels: tuple[str, ...]                             # id2label, in logit order ("answers" for answerability)
    probs: Callable[[np.ndarray], np.ndarray]           # logits (n, num_labels) -> probabilities
    metrics: Callable[[Sequence[Pair], np.ndarray], dict]
    selection: Callable[[dict], float]
    summary: Callable[[dict], str]                      # one curve point in a progress line
    val_sets: Callable[[Any, Any], dict[str, list[Pair]]]   # (split, settings) -> named held-apart sets
    sample: Callable[[tuple[Pair, ...], int, Any], list[Pair]]  # (train, epoch, settings) -> the epoch's pairs
    loss: Callable[[Any, Sequence[Pair]], Any]          # (logits tensor, pairs) -> loss tensor


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


def _softmax(x: np.ndarray) -> np.ndarray:
    shifted = np.exp(x - x.max(axis=1, keepdims=True))
    return shifted / shifted.sum(axis=1, keepdims=True)


def pair_metrics(pairs: Sequence[Pair], probs: np.ndarray) -> dict:
    """Pair ROC-AUC, MRR over questions with an answer, and question-level answerability AUC (best sentence)."""
    by_q: dict[str, list[tuple[float, int]]] = defaultdict(list)
    for pair, prob in zip(pairs, probs, strict=True):
        by_q[pair.group].append((float(prob), pair.label))
    reciprocal = []
    best, answerable = [], []
    for rows in by_q.values():
        best.append(max(p for p, _ in rows))
        answerable.append(any(label for _, label in rows))
        if any(label for _, label in rows):
            ranked = sorted(rows, key=lambda r: -r[0])
            reciprocal.append(1.0 / (1 + next(i for i, (_, label) in enumerate(ranked) if label)))
    return {
        "pairs": len(pairs), "questions": len(by_q),
        "pair_auc": roc_auc(list(map(float, probs)), [p.label == 1 for p in pairs]),
        "mrr": float(np.mean(reciprocal)) if reciprocal else None,
        "question_auc": roc_auc(best, answerable),
    }


def selection_score(point: dict) -> float:
    parts = [point["val_pool"]["pair_auc"], point["val_squad"]["question_auc"]]
    known = [p for p in parts if p is not None]
    return float(np.mean(known)) if known else 0.0



def nli_metrics(pairs: Sequence[Pair], probs: np.ndarray) -> dict:
    """3-way accuracy, macro-F1, supported-vs-not accuracy (entailment predicted vs entailment gold), per-label
    recall, and the entailed-vs-not AUC of P(entailment)."""
    from sklearn.metrics import accuracy_score, f1_score, recall_score

    from workbench.training.nli_data import LABELS

    if not len(pairs):
        return {"pairs": 0, "accuracy": None, "macro_f1": None, "supported_accuracy": None, "entail_auc": None,
                "recall": {}}
    gold = np.array([p.label for p in pairs])
    pred = np.asarray(probs).argmax(axis=1)
    present = sorted(set(gold.tolist()))
    recall = recall_score(gold, pred, labels=present, average=None, zero_division=0)
    return {"pairs": len(pairs), "accuracy": float(accuracy_score(gold, pred)),
            "macro_f1": float(f1_score(gold, pred, labels=present, average="macro", zero_division=0)),
            "supported_accuracy": float(accuracy_score(gold == 0, pred == 0)),
            "entail_auc": roc_auc(list(map(float, probs[:, 0])), (gold == 0).tolist()),
            "recall": {LABELS[label]: float(r) for label, r in zip(present, recall, strict=True)}}


def nli_selection(point: dict) -> float:
    parts = [point["val_claims"]["macro_f1"], point["val_perturb"]["accuracy"]]
    known = [p for p in parts if p is not None]
    return float(np.mean(known)) if known else 0.0


def _f(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.4f}"


def _answerability_summary(point: dict) -> str:
    return (f"pool pair AUC {_f(point['val_pool']['pair_auc'])}, MRR {_f(point['val_pool']['mrr'])}; "
            f"SQuAD question AUC {_f(point['val_squad']['question_auc'])}")


def _nli_summary(point: dict) -> str:
    claims = point["val_claims"]
    return (f"held-apart claims accuracy {_f(claims['accuracy'])}, macro-F1 {_f(claims['macro_f1'])}, entailed AUC "
            f"{_f(claims['entail_auc'])}; other sources accuracy {_f(point['val_general']['accuracy'])}; "
            f"perturbations accuracy {_f(point['val_perturb']['accuracy'])}")


def _answerability_val(split, settings) -> dict[str, list[Pair]]:
    from workbench.training.data import val_subset

    return {"val_pool": val_subset(split.val_pool, settings.val_questions, settings.seed),
            "val_squad": (val_subset(split.val_squad, settings.val_squad_questions, settings.seed)
                          if settings.val_squad_questions else list(split.val_squad))}


def _nli_val(split, settings) -> dict[str, list[Pair]]:
    return {"val_claims": list(split.val_claims), "val_general": list(split.val_general),
            "val_perturb": list(split.val_perturb)}


def _answerability_sample(train: tuple[Pair, ...], epoch: int, settings) -> list[Pair]:
    from workbench.training.data import epoch_sample

    return epoch_sample(train, epoch, settings.seed, settings.neg_per_pos)


def _nli_sample(train: tuple[Pair, ...], epoch: int, settings) -> list[Pair]:
    from workbench.training.nli_data import nli_epoch_sample

    return nli_epoch_sample(train, epoch, settings.seed)


def _bce(logits, pairs: Sequence[Pair]):
    import torch

    return torch.nn.functional.binary_cross_entropy_with_logits(
        logits[:, 0], torch.tensor([float(p.label) for p in pairs]))


def _cross_entropy(logits, pairs: Sequence[Pair]):
    import torch

    return torch.nn.functional.cross_entropy(logits, torch.tensor([p.label for p in pairs], dtype=torch.long))


def _answerability() -> Task:
    return Task("answerability", 1, ("answers",), lambda logits: _sigmoid(logits[:, 0]), pair_metrics,
                selection_score, _answerability_summary, _answerability_val, _answerability_sample, _bce)


def _nli() -> Task:
    from workbench.training.nli_data import LABELS

    return Task("nli", 3, LABELS, _softmax, nli_metrics, nli_selection, _nli_summary, _nli_val, _nli_sample,
                _cross_entropy)


def task(name: str) -> Task:
    makers = {"answerability": _answerability, "nli": _nli}
    if name not in makers:
        raise ValueError(f"unknown training task {name!r}: choose one of {', '.join(makers)}")
    return makers[name]()
