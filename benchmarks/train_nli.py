"""The NLI citation check's training run, as a BENCHMARKS.md section: data, time, learning curve, held-apart scores.

``python -m benchmarks.train_nli`` (``make train-models`` runs it after training) copies the shipped model's
provenance (``pipeline/models/weights/nli/training.json``, written by ``workbench train nli --install``) into
``benchmarks/results/train_nli.json`` with the usual meta block, and scores the held-apart Climate-FEVER and
HealthVer claims again with the shipped int8 graph through the validator's classifier, keeping per-pair labels so
every figure gets an interval: 3-way macro-F1 and supported-vs-not accuracy (entailment predicted vs entailment
gold), each with a 95 % bootstrap interval that resamples whole claims (a claim's evidence pairs are not
independent). These claims were never trained on; they did choose the checkpoint (with the held-apart
perturbations), so they are selection scores, not test scores: the perturbation benchmark on the demo corpus
("Citation check: perturbed claims") is the test.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from benchmarks.results_io import Depends, load_average, meta_line, run_meta, write_results
from pipeline.models.resolve import WEIGHTS_DIR

DEPENDS = Depends(("benchmarks/train_nli.py", "workbench/training", "pipeline/models/weights/nli"), ())
NAME = "train_nli"
MODEL = "workbench/nli-check (int8 ONNX), trained from all-MiniLM-L6-v2"


def held_apart_scores(data_dir: Path, settings: dict, resamples: int = 2000) -> dict:
    """The shipped int8 model on the held-apart claim-evidence pairs: point values and claim-bootstrap intervals."""
    from sklearn.metrics import accuracy_score, f1_score

    from pipeline.models.encoders import NLIClassifier
    from pipeline.validation.entailment import ordered_probs
    from workbench.metrics import cluster_bootstrap
    from workbench.training.nli_data import LABELS, load_nli_split

    split = load_nli_split(data_dir, seed=settings["seed"])
    pairs = split.val_claims
    model = NLIClassifier(str(WEIGHTS_DIR / "nli"), max_tokens=settings["max_tokens"], batch_size=32)
    probs = ordered_probs(model.predict([(p.question, p.sentence) for p in pairs]), model.labels)
    gold = np.array([p.label for p in pairs])
    pred = probs.argmax(axis=1)
    groups = [p.group for p in pairs]

    def macro_f1(idx: np.ndarray) -> float:
        return float(f1_score(gold[idx], pred[idx], labels=[0, 1, 2], average="macro", zero_division=0))

    def supported_accuracy(idx: np.ndarray) -> float:
        return float(accuracy_score(gold[idx] == 0, pred[idx] == 0))

    every = np.arange(len(pairs))
    confusion = {LABELS[g]: {LABELS[q]: int(((gold == g) & (pred == q)).sum()) for q in range(3)} for g in range(3)}
    return {"pairs": len(pairs), "claims": len(set(groups)), "resamples": resamples, "seed": 0,
            "macro_f1": macro_f1(every), "macro_f1_interval": list(cluster_bootstrap(groups, macro_f1, resamples)),
            "supported_accuracy": supported_accuracy(every),
            "supported_accuracy_interval": list(cluster_bootstrap(groups, supported_accuracy, resamples)),
            "accuracy": float(accuracy_score(gold, pred)), "confusion": confusion}


def measure(data_dir: Path | None = None) -> dict:
    from workbench.training.data import default_data_dir

    provenance = json.loads((WEIGHTS_DIR / "nli" / "training.json").read_text(encoding="utf-8"))
    meta = run_meta(depends=DEPENDS, model=MODEL, trained_at_commit=provenance["commit"])
    scores = held_apart_scores(data_dir or default_data_dir(), provenance["settings"])
    meta["load_average_end"] = load_average()
    return {"meta": meta, **provenance, "held_apart_claims": scores}


def _f(value) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def render(results: dict) -> str:
    s, c = results["settings"], results["counts"]
    fp32, int8, held = results["validation_fp32"], results["validation_int8"], results["held_apart_claims"]
    sources = ", ".join(f"{name} {n:,}" for name, n in c["train_by_source"].items())
    left = ", ".join(f"{name} ({n:,} pairs)" for name, n in c["left_out"].items()) or "nothing"
    lines = ["## NLI citation check training", "",
             meta_line(results["meta"]) + f" Trained at commit `{results['commit']}`; written by "
             "`make train-models` (`workbench train nli --install`, then `python -m benchmarks.train_nli`).", "",
             f"{s['layers']} layers of all-MiniLM-L6-v2, three labels, at most {s['max_tokens']} tokens per (premise, "
             f"hypothesis) pair; {c['train_pairs']:,} training pairs ({sources}); left out for its licence: {left}. "
             f"{results['pairs_seen']:,} pairs seen in {results['training_seconds'] / 60:.0f} minutes on this "
             f"2-core machine without an accelerator "
             f"({results['pairs_seen'] / max(results['training_seconds'], 1):.1f} pairs/s, evaluation included); "
             f"the int8 ONNX file is {results['onnx_bytes'] / 1e6:.1f} MB. No accelerator was lent to this task, so "
             "there is no full-pool run to compare.", "",
             "Learning curve on the held-apart sets (fp32 during training; selection = mean of the held-apart claims' "
             "macro-F1 and the held-apart perturbations' accuracy; these scores chose the checkpoint):", "",
             "| pairs seen | epoch | claims accuracy | claims macro-F1 | claims entailed AUC | other sources accuracy "
             "| perturbations accuracy | selection |",
             "|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for p in results["learning_curve"]:
        lines.append(f"| {p['pairs_seen']:,} | {p['epoch']:.2f} | {_f(p['val_claims']['accuracy'])} | "
                     f"{_f(p['val_claims']['macro_f1'])} | {_f(p['val_claims']['entail_auc'])} | "
                     f"{_f(p['val_general']['accuracy'])} | {_f(p['val_perturb']['accuracy'])} | "
                     f"{p['selection']:.3f} |")
    mf, sa = held["macro_f1_interval"], held["supported_accuracy_interval"]
    lines += ["", f"Selected: step {results['selected_step']:,}. The shipped int8 graph on the {held['pairs']:,} "
              f"held-apart claim-evidence pairs ({held['claims']:,} Climate-FEVER and HealthVer claims never trained "
              f"on): 3-way macro-F1 {held['macro_f1']:.3f} [{mf[0]:.3f}–{mf[1]:.3f}], supported-vs-not accuracy "
              f"{held['supported_accuracy']:.3f} [{sa[0]:.3f}–{sa[1]:.3f}] (95 % bootstrap intervals, "
              f"{held['resamples']:,} resamples of whole claims); fp32 macro-F1 {_f(fp32['val_claims']['macro_f1'])}, "
              f"int8 {_f(int8['val_claims']['macro_f1'])}.", "",
              "Confusion on those pairs (rows: gold label; columns: predicted):", "",
              "| gold \\ predicted | entailment | neutral | contradiction |", "|---|---:|---:|---:|"]
    for gold, row in held["confusion"].items():
        lines.append(f"| {gold} | {row['entailment']:,} | {row['neutral']:,} | {row['contradiction']:,} |")
    lines.append("")
    return "\n".join(lines)


def main() -> int:
    path = write_results(NAME, measure())
    print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
