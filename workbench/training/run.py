"""``workbench train <task>``: load the data, train (or resume), and on request export the selected checkpoint.

One function per task so the CLI, ``make train-models`` and a notebook run the same thing.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from workbench.training.data import input_files, load_split, sha256_of
from workbench.training.loop import Trainer, TrainSettings, fmt, write_state

TASKS = ("answerability", "nli")


def default_settings(task: str) -> TrainSettings:
    """Each task's shipped settings. NLI: a passage window and a claim are longer than a question and a sentence, so
    96 tokens (a sentence window and a claim fit; long HealthVer abstracts are cut); every pair once per epoch (no
    negatives to draw), no SQuAD; the schedule fitted to 64,000 pairs (about 1.3 epochs) and the run stopped at
    48,000 (where the learning rate has decayed to a quarter): what fits the 90-minute budget on a shared 2-core CPU
    at that length, evaluations included. ``stop_after_pairs`` does not change the schedule, so a longer run resumes
    from the same checkpoint."""
    if task == "nli":
        return TrainSettings(task="nli", max_tokens=96, learning_rate=3e-5, epochs=2, use_squad=False,
                             eval_every=16000, max_pairs=64000, stop_after_pairs=48000)
    return TrainSettings(task=task)


def default_out(task: str) -> Path:
    return Path(__file__).resolve().parents[2] / "build" / "train" / task


def train_answerability(data_dir: Path, out: Path, settings: TrainSettings, resume: bool = True,
                        report: Callable[[str], None] = print) -> Path:
    """Train the answerability reader; returns the ``train_result.json`` written beside the checkpoints."""
    started = time.monotonic()
    split = load_split(data_dir, use_squad=settings.use_squad)
    report(f"data: {len(split.train):,} training pairs ({sum(p.label for p in split.train):,} answering), "
           f"held apart {len(split.val_pool):,} pool pairs by question id and {len(split.val_squad):,} SQuAD pairs "
           f"by article")
    inputs = {str(p.relative_to(data_dir)): sha256_of(p) for p in input_files(data_dir, settings.use_squad)}
    trainer = Trainer(settings, split, out, report=report)
    state = trainer.run(resume=resume)
    counts = {"train_pairs": len(split.train), "train_positives": sum(p.label for p in split.train),
              "val_pool_pairs": len(split.val_pool), "val_squad_pairs": len(split.val_squad),
              "pairs_per_epoch": len(trainer.epochs[0]) if trainer.epochs else 0}
    return write_state(out, settings, state, {"inputs": inputs, "counts": counts,
                                              "wall_seconds_this_invocation": round(time.monotonic() - started, 1)})


def train_nli(data_dir: Path, out: Path, settings: TrainSettings, resume: bool = True,
              report: Callable[[str], None] = print) -> Path:
    """Train the NLI citation check; returns the ``train_result.json`` written beside the checkpoints."""
    from workbench.training.nli_data import load_nli_split, nli_input_files

    started = time.monotonic()
    split = load_nli_split(data_dir, seed=settings.seed)
    left = ", ".join(f"{source} {n:,}" for source, n in sorted(split.left_out.items())) or "none"
    report(f"data: {len(split.train):,} training pairs (perturbations included); held apart "
           f"{len(split.val_claims):,} claim-evidence pairs by claim, {len(split.val_general):,} other pairs by "
           f"premise, "
           f"{len(split.val_perturb):,} perturbations; left out (licence): {left}")
    inputs = {str(p.relative_to(data_dir)): sha256_of(p) for p in nli_input_files(data_dir)}
    trainer = Trainer(settings, split, out, report=report)
    state = trainer.run(resume=resume)
    sources: dict[str, int] = {}
    for pair in split.train:
        sources[pair.source] = sources.get(pair.source, 0) + 1
    counts = {"train_pairs": len(split.train), "train_by_source": dict(sorted(sources.items())),
              "train_by_label": {label: sum(p.label == i for p in split.train) for i, label in
                                 enumerate(trainer.task.labels)},
              "val_claims_pairs": len(split.val_claims), "val_claims_claims": len({p.group for p in split.val_claims}),
              "val_general_pairs": len(split.val_general), "val_perturb_pairs": len(split.val_perturb),
              "left_out": split.left_out, "pairs_per_epoch": len(trainer.epochs[0]) if trainer.epochs else 0}
    return write_state(out, settings, state, {"inputs": inputs, "counts": counts,
                                              "wall_seconds_this_invocation": round(time.monotonic() - started, 1)})


def _exported(out: Path, report: Callable[[str], None]) -> tuple[dict, TrainSettings, Path]:
    """A finished run's ``train_result.json`` and settings, and its ``best/`` checkpoint exported to int8 ONNX in
    ``out/export`` (the steps every task's export shares)."""
    import json

    from workbench.training.export import export

    result_path = out / "train_result.json"
    if not result_path.exists() or not (out / "best").is_dir():
        raise FileNotFoundError(f"{out} holds no finished training run (train_result.json and best/): train first")
    result = json.loads(result_path.read_text(encoding="utf-8"))
    settings = TrainSettings(**result["settings"])
    folder = out / "export"
    report(f"exporting {out / 'best'} to int8 ONNX in {folder}")
    export(out / "best", folder)
    return result, settings, folder


def export_nli(out: Path, data_dir: Path, commit: str, install_to_weights: bool = False,
               report: Callable[[str], None] = print) -> Path:
    """Export ``out/best`` of an NLI run to int8 ONNX, validate it on the held-apart sets through the validator's
    classifier, write provenance and card; with ``install_to_weights`` copy it to ``pipeline/models/weights/nli``."""
    from workbench.training.export import install, validate_int8_nli, write_provenance
    from workbench.training.nli_data import load_nli_split
    from workbench.training.tasks import task

    result, settings, folder = _exported(out, report)
    split = load_nli_split(data_dir, seed=settings.seed)
    int8 = validate_int8_nli(folder, task("nli").val_sets(split, settings), settings.max_tokens)
    report(f"int8 validation: {task('nli').summary(int8)}; selection {int8['selection']:.4f}")
    write_provenance(folder, result, int8, commit)
    return install(folder, settings.task, report) if install_to_weights else folder


def export_answerability(out: Path, data_dir: Path, commit: str, install_to_weights: bool = False,
                         report: Callable[[str], None] = print) -> Path:
    """Export ``out/best`` to int8 ONNX in ``out/export``, validate it on the held-apart pairs, write its
    provenance and model card; with ``install_to_weights``, copy it to ``pipeline/models/weights/answerability``."""
    from workbench.training.export import install, validate_int8, write_provenance
    from workbench.training.tasks import task

    result, settings, folder = _exported(out, report)
    split = load_split(data_dir, use_squad=settings.use_squad)
    val = task("answerability").val_sets(split, settings)
    val_pool, val_squad = val["val_pool"], val["val_squad"]
    int8 = validate_int8(folder, val_pool, val_squad, settings.max_tokens)
    report(f"int8 validation: selection {int8['selection']:.4f} (pool pair AUC {fmt(int8['val_pool']['pair_auc'])}, "
           f"SQuAD question AUC {fmt(int8['val_squad']['question_auc'])})")
    write_provenance(folder, result, int8, commit)
    return install(folder, settings.task, report) if install_to_weights else folder
