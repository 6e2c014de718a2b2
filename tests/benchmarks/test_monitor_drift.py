"""The drift-alarm section (benchmarks/results/monitor_drift.json): the degradation fired the alarm in every trial,
the section is rendered from the file alone and shows its numbers, and the summary counts what it says."""

from __future__ import annotations

import copy
import re

from benchmarks import monitor_drift
from benchmarks.results_io import load_results, meta_line
from workbench import monitor


def test_the_broken_embedder_fired_the_alarm_in_every_trial_with_the_monitors_defaults():
    results = load_results(monitor_drift.NAME)
    assert results["windows"] == {"baseline": monitor.DEFAULT_BASELINE, "recent": monitor.DEFAULT_RECENT,
                                  "alpha": monitor.DEFAULT_ALPHA}, "the monitor's defaults changed: rerun the benchmark"
    broken = [t for t in results["trials"] if t["degradation"] == "broken-embedder"]
    assert broken and all(t["runs_to_alarm"] is not None for t in broken)
    for trial in results["trials"]:
        assert trial["baseline_checks"] > 0
        if trial["runs_to_alarm"] is not None:
            assert 1 <= trial["runs_to_alarm"] <= results["max_after"] and trial["alarm"]["metrics"]
            assert trial["runs_after"] == trial["runs_to_alarm"]
        else:
            assert trial["runs_after"] == results["max_after"] and trial["alarm"] is None
        if trial["degradation"] == "delete-third":
            assert len(trial["deleted"]) == round(trial["documents"] / 3)


def test_the_section_is_deterministic_and_shows_the_files_numbers():
    results = load_results(monitor_drift.NAME)
    text = monitor_drift.render(results)
    assert text == monitor_drift.render(copy.deepcopy(results))
    assert text.startswith("## Drift alarm") and meta_line(results["meta"]) in text
    for trial in results["trials"]:
        row = next(ln for ln in text.splitlines() if ln.startswith(f"| {trial['degradation']} | {trial['seed']} |"))
        after = trial["runs_to_alarm"] if trial["runs_to_alarm"] is not None else f"no alarm in {trial['runs_after']}"
        assert f"| {after} |" in row
        assert f"| {trial['false_alarms']} ({trial['baseline_checks']}) |" in row
        abstention = trial["rates"]["abstention"]
        assert re.search(rf"{100 * abstention['before']:.1f} % \[[0-9.]+–[0-9.]+\] → {100 * abstention['after']:.1f} % \[", row)
    for name, summary in results["summary"].items():
        assert f"`{name}`: the alarm fired in {summary['fired']} of {summary['trials']} trials" in text
    changed = copy.deepcopy(results)
    changed["trials"][0]["runs_to_alarm"] = 987
    assert "| 987 |" in monitor_drift.render(changed)


def test_the_summary_counts_alarms_and_false_alarms():
    trials = [{"runs_to_alarm": 12, "false_alarms": 0, "baseline_checks": 26},
              {"runs_to_alarm": None, "false_alarms": 1, "baseline_checks": 26},
              {"runs_to_alarm": 7, "false_alarms": 0, "baseline_checks": 26}]
    s = monitor_drift.summarise(trials)
    assert (s["fired"], s["runs_to_alarm"], s["median_runs_to_alarm"]) == (2, [7, 12], 9.5)
    assert (s["false_alarms"], s["baseline_checks"], s["runs_to_alarm_text"]) == (1, 78, "7 to 12")
