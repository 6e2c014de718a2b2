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

from benchmarks.results_io import Depends, load_average, meta_line, run_meta, write_results
from pipeline.models.resolve import WEIGHTS_DIR

DEPENDS = Depends(("benchmarks/train_answerability.py", "pipeline/models/weights/answerability"), ())
NAME = "train_answerability"


def measure() -> dict:
    provenance = json.loads((WEIGHTS_DIR / "answerability" / "training.json").read_text(encoding="utf-8"))
    meta = run_meta(depends=DEPENDS, model="workbench/answerability-reader (int8 ONNX), trained from all-MiniLM-L6-v2",
                    trained_at_commit=provenance["commit"])
    meta["load_average_end"] = load_average()
    return {"meta": meta, **provenance}


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
    lines += ["", f"Selected: step {results['selected_step']:,}. The shipped int8 graph on the same pairs: pool pair "
              f"AUC {_f(int8['val_pool']['pair_auc'])} (fp32 {_f(fp32['val_pool']['pair_auc'])}), SQuAD question "
              f"AUC {_f(int8['val_squad']['question_auc'])} (fp32 {_f(fp32['val_squad']['question_auc'])}).", ""]
    return "\n".join(lines)


def main() -> int:
    path = write_results(NAME, measure())
    print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
