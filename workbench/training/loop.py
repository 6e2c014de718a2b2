"""Fine-tuning a sentence-pair cross-encoder from the packaged all-MiniLM-L6-v2 weights.

The model is BERT-style sequence classification with one logit (``num_labels=1``) read as "this sentence answers
this question"; the loss is binary cross-entropy on that logit (the monoBERT set-up, Nogueira & Cho 2019, on
answer-sentence selection data as in Garg et al., "TANDA", AAAI 2020). The encoder starts from the bi-encoder's
weights (optionally its first ``layers`` layers only); the classification head starts fresh.

What makes a run reproducible and survivable:

- **Deterministic**: one seed sets torch's generator (initialisation, dropout) and the per-epoch sample and order
  (:func:`workbench.training.data.epoch_sample`); batches are a pure function of (seed, epoch, step).
- **Progress**: one line per ``progress_every`` steps with pairs/s and the time left, in the format of
  :class:`pipeline.ingestion.progress.Progress`.
- **Resumable**: every evaluation writes ``checkpoint.pt`` (weights, optimiser, schedule, torch generator, the
  learning curve) atomically; a run started again with the same settings continues from it and skips the batches
  already trained, so an interrupted run ends with the same model as an uninterrupted one.
- **Learning curve**: every ``eval_every`` pairs the model scores a fixed held-apart subset (pool questions held
  apart by id, and two whole SQuAD articles held apart by source): pair ROC-AUC and MRR on the pool part, and on the
  SQuAD part the question-level answerability AUC (a question's best sentence probability, answerable vs not).
  The checkpoint with the best ``selection`` (the mean of the pool pair AUC and the SQuAD question AUC) is kept in
  ``best/``; nothing else chooses the model.
"""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from pipeline.ingestion.progress import Progress
from workbench.training.data import Pair
from workbench.training.tasks import task


@dataclass(frozen=True)
class TrainSettings:
    task: str = "answerability"
    base_model: str = "all-MiniLM-L6-v2"
    layers: int = 6               # encoder layers kept from the base model (a cut trains faster, reads worse)
    max_tokens: int = 64          # (question, sentence) truncated to this many tokens, longest first
    batch_size: int = 32
    learning_rate: float = 4e-5
    warmup: float = 0.06          # fraction of the steps with a linear warm-up
    epochs: int = 2
    neg_per_pos: float = 2.0      # negatives drawn per positive, afresh each epoch
    use_squad: bool = True        # add the SQuAD 2.0 train subset's sentences (positives, same-paragraph negatives)
    seed: int = 13
    eval_every: int = 10000       # pairs between learning-curve points (and checkpoints)
    val_questions: int = 120      # held-apart pool questions in the fixed evaluation subset
    val_squad_questions: int = 0  # held-apart SQuAD questions in it (0: every question of the two articles)
    threads: int = 2
    max_pairs: int = 0            # train this many pairs (0: every epoch): the schedule is fitted to it
    # Stop once this many pairs are seen (0: never), WITHOUT changing the schedule: the learning rate still decays
    # over every epoch, so a run stopped here and a longer run agree up to this point, and a run can be resumed
    # past it (a time budget that keeps the run comparable).
    stop_after_pairs: int = 0


@dataclass
class TrainState:
    step: int = 0
    pairs_seen: int = 0
    seconds: float = 0.0
    curve: list[dict] = field(default_factory=list)
    best_selection: float = -1.0
    best_step: int = -1


class Trainer:
    """One training run of ``settings`` on ``split``, writing under ``out``."""

    def __init__(self, settings: TrainSettings, split, out: Path,
                 report: Callable[[str], None] = print) -> None:
        import torch
        from transformers import AutoConfig, AutoModelForSequenceClassification, AutoTokenizer

        from pipeline.models.resolve import quiet_transformers, resolve_model

        quiet_transformers()
        self.settings = settings
        self.split = split
        self.out = out
        self.report = report
        torch.set_num_threads(max(1, settings.threads))
        torch.manual_seed(settings.seed)
        base = resolve_model(settings.base_model).path
        self.task = task(settings.task)
        labels = {} if self.task.num_labels == 1 else {
            "id2label": dict(enumerate(self.task.labels)), "label2id": {n: i for i, n in enumerate(self.task.labels)}}
        config = AutoConfig.from_pretrained(str(base), num_labels=self.task.num_labels, **labels)
        config.num_hidden_layers = settings.layers
        self.tokenizer = AutoTokenizer.from_pretrained(str(base))
        self.model = AutoModelForSequenceClassification.from_pretrained(str(base), config=config)
        self.val = self.task.val_sets(split, settings)
        self.epochs = [self.task.sample(split.train, e, settings) for e in range(settings.epochs)]
        per_epoch = math.ceil(len(self.epochs[0]) / settings.batch_size) if self.epochs else 0
        self.total_steps = per_epoch * settings.epochs
        if settings.max_pairs:
            self.total_steps = min(self.total_steps, math.ceil(settings.max_pairs / settings.batch_size))
        self.per_epoch = per_epoch
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=settings.learning_rate, weight_decay=0.01)
        warm = max(1, int(self.total_steps * settings.warmup))
        total = max(self.total_steps, 1)
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(
            self.optimizer, lambda s: min((s + 1) / warm, max(0.0, (total - s) / max(1, total - warm))))
        self.state = TrainState()

    # -- batches ------------------------------------------------------------------------------------------------

    def batch(self, step: int) -> list[Pair]:
        epoch, index = divmod(step, self.per_epoch)
        size = self.settings.batch_size
        return self.epochs[epoch][index * size:(index + 1) * size]

    def encode(self, pairs: Sequence[Pair]):
        return self.tokenizer([p.question for p in pairs], [p.sentence for p in pairs], truncation="longest_first",
                              max_length=self.settings.max_tokens, padding=True, return_tensors="pt")

    def scores(self, pairs: Sequence[Pair], batch_size: int = 128) -> np.ndarray:
        """The task's probabilities for ``pairs`` (eval mode, no gradient): answerability (n,), NLI (n, 3)."""
        import torch

        self.model.eval()
        order = sorted(range(len(pairs)), key=lambda i: len(pairs[i].question) + len(pairs[i].sentence))
        width = self.task.num_labels
        out = np.empty((len(pairs),) if width == 1 else (len(pairs), width), dtype=np.float64)
        with torch.no_grad():
            for start in range(0, len(order), batch_size):
                idx = order[start:start + batch_size]
                logits = self.model(**self.encode([pairs[i] for i in idx])).logits.numpy()
                out[idx] = self.task.probs(logits.astype(np.float64))
        self.model.train()
        return out

    # -- checkpoints --------------------------------------------------------------------------------------------

    @property
    def checkpoint_path(self) -> Path:
        return self.out / "checkpoint.pt"

    def save_checkpoint(self) -> None:
        import torch

        self.out.mkdir(parents=True, exist_ok=True)
        tmp = self.out / f"checkpoint.{os.getpid()}.tmp"
        torch.save({"settings": asdict(self.settings), "state": asdict(self.state),
                    "model": self.model.state_dict(), "optimizer": self.optimizer.state_dict(),
                    "scheduler": self.scheduler.state_dict(), "rng": torch.get_rng_state()}, tmp)
        os.replace(tmp, self.checkpoint_path)

    def try_resume(self) -> bool:
        """Continue from ``checkpoint.pt`` when it was written by a run of the same settings."""
        import torch

        if not self.checkpoint_path.exists():
            return False
        try:
            saved = torch.load(self.checkpoint_path, map_location="cpu", weights_only=False)
        except Exception as exc:  # a truncated or foreign file: start afresh, say so
            self.report(f"checkpoint {self.checkpoint_path} unreadable ({type(exc).__name__}); starting afresh")
            return False
        if _trajectory(saved.get("settings") or {}) != _trajectory(asdict(self.settings)):
            self.report(f"checkpoint {self.checkpoint_path} has other settings; starting afresh")
            return False
        self.model.load_state_dict(saved["model"])
        self.optimizer.load_state_dict(saved["optimizer"])
        self.scheduler.load_state_dict(saved["scheduler"])
        torch.set_rng_state(saved["rng"])
        self.state = TrainState(**saved["state"])
        self.report(f"resumed at step {self.state.step:,} ({self.state.pairs_seen:,} pairs seen)")
        return True

    # -- evaluation ---------------------------------------------------------------------------------------------

    def evaluate(self) -> dict:
        point = {"step": self.state.step, "pairs_seen": self.state.pairs_seen,
                 "epoch": round(self.state.step / max(self.per_epoch, 1), 3),
                 "seconds": round(self.state.seconds, 1),
                 **{name: self.task.metrics(pairs, self.scores(pairs)) for name, pairs in self.val.items()}}
        point["selection"] = self.task.selection(point)
        self.state.curve.append(point)
        if point["selection"] > self.state.best_selection:
            self.state.best_selection = point["selection"]
            self.state.best_step = self.state.step
            best = self.out / "best"
            self.model.save_pretrained(str(best))
            self.tokenizer.save_pretrained(str(best))
        self.report(f"eval at {self.state.pairs_seen:,} pairs: {self.task.summary(point)}; selection "
                    f"{point['selection']:.4f}{' (best)' if self.state.best_step == self.state.step else ''}")
        return point

    # -- the loop -----------------------------------------------------------------------------------------------

    def run(self, resume: bool = True, progress_every: int = 20) -> TrainState:
        import torch

        if not (resume and self.try_resume()):
            self.state = TrainState()
            self.evaluate()  # the curve starts at 0 pairs: the untrained head
            self.save_checkpoint()
        self.model.train()
        started = time.monotonic() - self.state.seconds
        resumed_at, resumed_pairs = time.monotonic(), self.state.pairs_seen
        next_eval = (self.state.pairs_seen // self.settings.eval_every + 1) * self.settings.eval_every
        total_pairs = min(self.total_steps * self.settings.batch_size,
                          self.settings.max_pairs or self.total_steps * self.settings.batch_size)
        stop = self.settings.stop_after_pairs
        while self.state.step < self.total_steps and not (stop and self.state.pairs_seen >= stop):
            pairs = self.batch(self.state.step)
            loss = self.task.loss(self.model(**self.encode(pairs)).logits, pairs)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
            self.optimizer.step()
            self.scheduler.step()
            self.optimizer.zero_grad(set_to_none=True)
            self.state.step += 1
            self.state.pairs_seen += len(pairs)
            self.state.seconds = time.monotonic() - started
            if self.state.step % progress_every == 0:
                rate_elapsed = time.monotonic() - resumed_at
                line = Progress(self.state.pairs_seen - resumed_pairs, total_pairs - resumed_pairs, rate_elapsed,
                                unit="pairs").text()
                self.report(f"step {self.state.step:,}/{self.total_steps:,} · {line} · loss {float(loss.detach()):.3f}")
            stopping = bool(stop) and self.state.pairs_seen >= stop
            if self.state.pairs_seen >= next_eval or self.state.step == self.total_steps or stopping:
                self.evaluate()
                self.save_checkpoint()
                next_eval += self.settings.eval_every
        return self.state


def _trajectory(settings: dict) -> dict:
    """The settings that decide the weights at every step (where a run stops does not)."""
    return {k: v for k, v in settings.items() if k != "stop_after_pairs"}


def fmt(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.4f}"


def write_state(out: Path, settings: TrainSettings, state: TrainState, extra: dict) -> Path:
    path = out / "train_result.json"
    out.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"settings": asdict(settings), "state": asdict(state), **extra}, indent=1) + "\n",
                    encoding="utf-8")
    return path
