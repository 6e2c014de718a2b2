"""Does ``make train-models`` give back the shipped model? Retrain to the selected checkpoint and compare.

The shipped model's ``training.json`` holds everything a re-run needs: the settings, the data files' SHA-256, the
learning curve and the step the curve selected. :func:`reproduce` trains a fresh run with the same settings into
its own folder (``build/train/<task>-reproduce/`` by default; resumable like any run), stopping once the selected
point's pairs are seen — the schedule is unchanged by where a run stops, so the shipped run and this one agree up
to there — then exports that checkpoint to int8 exactly as the shipped one was and scores it on the same
held-apart pairs. The verdict compares every curve point both runs have and the int8 selection score with the
card's tolerance (:data:`workbench.training.export.REPRODUCE_TOLERANCE`).

Training past the selected point could only matter if a later point beat it; on the shipped curve none does, and
a run to the end (``make train-models``) is the same code with no stop.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from workbench.training.data import input_files, sha256_of
from workbench.training.loop import TrainSettings


@dataclass(frozen=True)
class CurveMatch:
    pairs_seen: int
    shipped: float
    reproduced: float

    @property
    def difference(self) -> float:
        return self.reproduced - self.shipped


@dataclass(frozen=True)
class Reproduction:
    task: str
    shipped_commit: str
    tolerance: float
    data_matches: bool               # the data files hash to what the shipped model was trained on
    data_differences: tuple[str, ...]
    points: tuple[CurveMatch, ...]   # every learning-curve point both runs have (fp32, selection score)
    shipped_int8: float              # selection score of the shipped int8 graph on the held-apart pairs
    reproduced_int8: float           # the same for the re-run's selected checkpoint, exported the same way
    stopped_after_pairs: int
    training_seconds: float

    @property
    def largest_difference(self) -> float:
        diffs = [abs(p.difference) for p in self.points] + [abs(self.reproduced_int8 - self.shipped_int8)]
        return max(diffs)

    @property
    def within_tolerance(self) -> bool:
        return self.data_matches and self.largest_difference <= self.tolerance

    def lines(self) -> list[str]:
        out = [f"reproducing the {self.task} reader trained at {self.shipped_commit} "
               f"(to {self.stopped_after_pairs:,} pairs, the selected point; tolerance ±{self.tolerance:g}):"]
        if not self.data_matches:
            out.append("  training data differs from the shipped model's: " + "; ".join(self.data_differences))
        for p in self.points:
            out.append(f"  curve at {p.pairs_seen:>7,} pairs: shipped {p.shipped:.4f}, re-run {p.reproduced:.4f} "
                       f"({p.difference:+.4f})")
        out.append(f"  int8 selection: shipped {self.shipped_int8:.4f}, re-run {self.reproduced_int8:.4f} "
                   f"({self.reproduced_int8 - self.shipped_int8:+.4f})")
        out.append(("reproduced" if self.within_tolerance else "NOT reproduced")
                   + f": largest difference {self.largest_difference:.4f}")
        return out

    def to_dict(self) -> dict:
        data = dataclasses.asdict(self)
        data["largest_difference"] = self.largest_difference
        data["within_tolerance"] = self.within_tolerance
        return data


def compare(shipped: dict, rerun: dict, rerun_int8: float, data_differences: list[str]) -> Reproduction:
    """The verdict from the shipped ``training.json`` and a re-run's ``train_result.json`` (pure)."""
    shipped_curve = {p["pairs_seen"]: p["selection"] for p in shipped["learning_curve"]}
    points = tuple(CurveMatch(p["pairs_seen"], shipped_curve[p["pairs_seen"]], p["selection"])
                   for p in rerun["state"]["curve"] if p["pairs_seen"] in shipped_curve)
    if not points:
        raise ValueError("the re-run has no learning-curve point in common with the shipped model")
    return Reproduction(task=shipped["task"], shipped_commit=shipped["commit"],
                        tolerance=float(shipped["reproduce_tolerance"]), data_matches=not data_differences,
                        data_differences=tuple(data_differences), points=points,
                        shipped_int8=float(shipped["validation_int8"]["selection"]), reproduced_int8=rerun_int8,
                        stopped_after_pairs=int(rerun["state"]["pairs_seen"]),
                        training_seconds=float(rerun["state"]["seconds"]))


def data_differences(shipped: dict, data_dir: Path, use_squad: bool) -> list[str]:
    """The data files whose SHA-256 differs from the shipped model's record (missing ones included)."""
    now = {str(p.relative_to(data_dir)): sha256_of(p) for p in input_files(data_dir, use_squad)}
    recorded = shipped["inputs_sha256"]
    return [f"{name}: {'missing' if name not in now else 'changed'}" for name in sorted(recorded)
            if now.get(name) != recorded[name]] + [f"{name}: not in the shipped record" for name in sorted(now)
                                                   if name not in recorded]


def reproduce(shipped_dir: Path, data_dir: Path, out: Path, report: Callable[[str], None] = print) -> Reproduction:
    """Retrain the model in ``shipped_dir`` to its selected point under ``out``, export it, and compare."""
    from workbench.training.export import source_commit
    from workbench.training.run import export_answerability, train_answerability

    path = shipped_dir / "training.json"
    if not path.exists():
        raise FileNotFoundError(f"{path} is missing: no shipped model to reproduce")
    shipped = json.loads(path.read_text(encoding="utf-8"))
    selected = next(p for p in shipped["learning_curve"] if p["step"] == shipped["selected_step"])
    settings = dataclasses.replace(TrainSettings(**shipped["settings"]), stop_after_pairs=selected["pairs_seen"])
    differences = data_differences(shipped, data_dir, settings.use_squad)
    for line in differences:
        report(f"warning: {line}")
    result_path = train_answerability(data_dir, out, settings, resume=True, report=report)
    rerun = json.loads(result_path.read_text(encoding="utf-8"))
    folder = export_answerability(out, data_dir, source_commit(), install_to_weights=False, report=report)
    int8 = json.loads((folder / "training.json").read_text(encoding="utf-8"))["validation_int8"]["selection"]
    return compare(shipped, rerun, float(int8), differences)
