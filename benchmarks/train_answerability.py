"""The answerability reader's training run, as a BENCHMARKS.md section: data, time, learning curve, validation.

``python -m benchmarks.train_answerability`` (``make train-models`` runs it after training) copies the shipped
model's provenance (``pipeline/models/weights/answerability/training.json``, written by ``workbench train
answerability --install``) into ``benchmarks/results/train_answerability.json`` with the usual meta block, so the
section is rendered from a results file like every other. The scores are on the held-apart pairs of the training
data (pool questions held apart by id, two whole SQuAD 2.0 *train* articles), which no training step saw; they
chose the checkpoint, so they are selection scores, not test scores: the reader's test scores are the SQuAD 2.0
dev, golden test part and SciFact sections.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from benchmarks.results_io import Depends, load_average, meta_line, run_meta, write_results
from pipeline.models.resolve import WEIGHTS_DIR

DEPENDS = Depends(("benchmarks/train_answerability.py", "workbench/training", "pipeline/models/weights/answerability",
                   "pipeline/models/rerank_onnx.py"), ())
NAME = "train_answerability"


def held_apart_scores(data_dir: Path, settings: dict, resamples: int = 2000) -> dict:
    """The shipped int8 graph on the held-apart pairs the checkpoint was chosen on, scored again here with 95 %
    bootstrap intervals: pool pair AUC and MRR resample whole questions (a question's sentences are not independent
    of each other), the SQuAD question AUC resamples questions within each class (:func:`roc_auc_ci`)."""
    from workbench.metrics import cluster_bootstrap, roc_auc, roc_auc_ci
    from workbench.training.data import load_split
    from workbench.training.export import int8_scores
    from workbench.training.loop import TrainSettings
    from workbench.training.tasks import pair_metrics, task

    train = TrainSettings(**settings)
    val = task("answerability").val_sets(load_split(data_dir, use_squad=train.use_squad), train)
    folder = WEIGHTS_DIR / "answerability"
    pool, squad = val["val_pool"], val["val_squad"]
    pool_probs, squad_probs = int8_scores(folder, pool, train.max_tokens), int8_scores(folder, squad, train.max_tokens)
    labels, groups = np.array([p.label == 1 for p in pool]), [p.group for p in pool]

    def pair_auc(idx: np.ndarray) -> float | None:
        return roc_auc(pool_probs[idx], labels[idx])

    def mrr(idx: np.ndarray) -> float | None:
        return pair_metrics([pool[i] for i in idx], pool_probs[idx])["mrr"]

    best: dict[str, list] = {}
    for pair, prob in zip(squad, squad_probs, strict=True):
        row = best.setdefault(pair.group, [0.0, False])
        row[0], row[1] = max(row[0], float(prob)), row[1] or pair.label == 1
    question_best, answerable = [r[0] for r in best.values()], [r[1] for r in best.values()]
    pool_point = pair_metrics(pool, pool_probs)
    return {"resamples": resamples, "seed": 0, "pool_pairs": len(pool), "pool_questions": len(set(groups)),
            "squad_pairs": len(squad), "squad_questions": len(best),
            "squad_answerable": sum(answerable),
            "pool_pair_auc": pool_point["pair_auc"],
            "pool_pair_auc_interval": list(cluster_bootstrap(groups, pair_auc, resamples)),
            "pool_mrr": pool_point["mrr"], "pool_mrr_interval": list(cluster_bootstrap(groups, mrr, resamples)),
            "squad_question_auc": roc_auc(question_best, answerable),
            "squad_question_auc_interval": _listed(roc_auc_ci(question_best, answerable, resamples))}


def _listed(interval: tuple[float, float] | None) -> list[float] | None:
    return None if interval is None else list(interval)


def measure(data_dir: Path | None = None) -> dict:
    from workbench.training.data import default_data_dir

    provenance = json.loads((WEIGHTS_DIR / "answerability" / "training.json").read_text(encoding="utf-8"))
    meta = run_meta(depends=DEPENDS, model="workbench/answerability-reader (int8 ONNX), trained from all-MiniLM-L6-v2",
                    trained_at_commit=provenance["commit"])
    scores = held_apart_scores(data_dir or default_data_dir(), provenance["settings"])
    meta["load_average_end"] = load_average()
    return {"meta": meta, **provenance, "held_apart": scores}


def _f(value) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def render(results: dict) -> str:
    s, c = results["settings"], results["counts"]
    fp32, int8 = results["validation_fp32"], results["validation_int8"]
    lines = ["## Reader training (answerability cross-encoder)", "",
             meta_line(results["meta"]) + f" Trained at commit `{results['commit']}`; written by "
             "`make train-models` (`workbench train answerability --install`, then "
             "`python -m benchmarks.train_answerability`).", "",
             f"{s['layers']} layers of all-MiniLM-L6-v2, at most {s['max_tokens']} tokens per (question, sentence) "
             f"pair, {s['epochs']} epochs of {c['pairs_per_epoch']:,} pairs (every positive, {s['neg_per_pos']:g} "
             f"negatives per positive drawn afresh each epoch) from {c['train_pairs']:,} training pairs: "
             f"{results['pairs_seen']:,} pairs in {results['training_seconds'] / 60:.0f} minutes on this 2-core "
             f"machine without an accelerator ({results['pairs_seen'] / max(results['training_seconds'], 1):.1f} "
             f"pairs/s, evaluation included). The int8 ONNX file is {results['onnx_bytes'] / 1e6:.1f} MB. "
             "No accelerator was lent to this task, so there is no full-pool run to compare.", "",
             "Learning curve on the held-apart subset (fp32 during training; selection = mean of the pool pair "
             "AUC and the SQuAD question AUC; these scores chose the checkpoint):", "",
             "| pairs seen | epoch | pool pair AUC | pool MRR | SQuAD question AUC | SQuAD pair AUC | selection |",
             "|---:|---:|---:|---:|---:|---:|---:|"]
    for p in results["learning_curve"]:
        lines.append(f"| {p['pairs_seen']:,} | {p['epoch']:.2f} | {_f(p['val_pool']['pair_auc'])} | "
                     f"{_f(p['val_pool']['mrr'])} | {_f(p['val_squad']['question_auc'])} | "
                     f"{_f(p['val_squad']['pair_auc'])} | {p['selection']:.3f} |")
    held = results.get("held_apart")
    lines += ["", f"Selected: step {results['selected_step']:,}. The shipped int8 graph on the same pairs: pool pair "
              f"AUC {_f(int8['val_pool']['pair_auc'])} (fp32 {_f(fp32['val_pool']['pair_auc'])}), SQuAD question "
              f"AUC {_f(int8['val_squad']['question_auc'])} (fp32 {_f(fp32['val_squad']['question_auc'])}).", ""]
    if held:
        a, m = held["pool_pair_auc_interval"], held["pool_mrr_interval"]
        q = held["squad_question_auc_interval"] or [None, None]   # None: the held-apart questions hold one class
        lines += [f"Scored again when this file was written, with 95 % bootstrap intervals ({held['resamples']:,} "
                  f"resamples): on {held['pool_pairs']:,} held-apart pool pairs of {held['pool_questions']:,} "
                  "questions, "
                  f"pair AUC {_f(held['pool_pair_auc'])} [{_f(a[0])}–{_f(a[1])}] and MRR {_f(held['pool_mrr'])} "
                  f"[{_f(m[0])}–{_f(m[1])}] (whole questions resampled); on {held['squad_questions']:,} held-apart "
                  f"SQuAD 2.0 train questions ({held['squad_answerable']:,} answerable), question AUC "
                  f"{_f(held['squad_question_auc'])} [{_f(q[0])}–{_f(q[1])}]. The curve's points are single "
                  "measurements on these same sets, without intervals of their own; these give their sampling error.",
                  ""]
    return "\n".join(lines)


def main() -> int:
    path = write_results(NAME, measure())
    print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
