"""Does the shipped reader reproduce? ``make reproduce-models`` retrains it to its selected point and compares.

``python -m benchmarks.train_reproduce`` runs :func:`workbench.training.reproduce.reproduce` on the shipped
answerability reader (a fresh, resumable run under ``build/train/answerability-reproduce/``, stopped at the
checkpoint the shipped curve selected, exported to int8 the same way) and writes
``benchmarks/results/train_reproduce.json``: every learning-curve point both runs have, the int8 selection score of
each, and the verdict against the tolerance the model card states.
"""

from __future__ import annotations

import sys

from benchmarks.results_io import Depends, meta_line, run_meta, write_results
from pipeline.models.resolve import WEIGHTS_DIR

DEPENDS = Depends(("benchmarks/train_reproduce.py", "workbench/training", "pipeline/models/weights/answerability"), ())
NAME = "train_reproduce"


def measure(report=print) -> dict:
    from workbench.training.data import default_data_dir
    from workbench.training.reproduce import reproduce
    from workbench.training.run import default_out

    meta = run_meta(depends=DEPENDS,
                    model="workbench/answerability-reader (int8 ONNX), retrained from all-MiniLM-L6-v2")
    out = default_out("answerability").with_name("answerability-reproduce")
    result = reproduce(WEIGHTS_DIR / "answerability", default_data_dir(), out, report=report)
    return {"meta": meta, **result.to_dict()}


def render(results: dict) -> str:
    verdict = ("within" if results["within_tolerance"] else "**outside**")
    lines = ["## Reproducing the reader", "",
             meta_line(results["meta"]) + " Written by `make reproduce-models` "
             "(`python -m benchmarks.train_reproduce`).", "",
             f"A fresh run with the shipped model's settings, seed and data (trained at commit "
             f"`{results['shipped_commit']}`), stopped at the checkpoint the shipped learning curve selected "
             f"({results['stopped_after_pairs']:,} pairs, {results['training_seconds'] / 60:.0f} minutes of training "
             f"here), exported to int8 the same way and scored on the same held-apart pairs. The largest difference "
             f"in selection score is {results['largest_difference']:.4f}, {verdict} the model card's tolerance of "
             f"±{results['tolerance']:g}."
             + ("" if results["data_matches"] else " The training data differed from the shipped model's: "
                + "; ".join(results["data_differences"]) + "."), "",
             "| point | shipped selection | re-run selection | difference |", "|---|---:|---:|---:|"]
    for p in results["points"]:
        lines.append(f"| fp32, {p['pairs_seen']:,} pairs | {p['shipped']:.4f} | {p['reproduced']:.4f} | "
                     f"{p['reproduced'] - p['shipped']:+.4f} |")
    lines += [f"| int8 ONNX, selected | {results['shipped_int8']:.4f} | {results['reproduced_int8']:.4f} | "
              f"{results['reproduced_int8'] - results['shipped_int8']:+.4f} |", ""]
    return "\n".join(lines)


def main() -> int:
    from workbench.training.data import TrainDataError

    try:
        data = measure(report=lambda line: print(line, file=sys.stderr, flush=True))
    except (FileNotFoundError, TrainDataError, ValueError) as exc:
        print(f"reproduce-models: {exc}", file=sys.stderr)
        return 2
    print(write_results(NAME, data))
    return 0 if data["within_tolerance"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
