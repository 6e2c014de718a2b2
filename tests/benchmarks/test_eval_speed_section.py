"""The "Evaluation speed" section (benchmarks/results/eval_speed.json): rendered from its file alone, deterministic,
every number the file holds, measured on the whole golden set with the shipped defaults, and the rows the same."""

from __future__ import annotations

import copy

from benchmarks import eval_speed
from benchmarks.results_io import load_results, meta_line
from workbench.walk import BATCH_CASES


def test_the_section_is_deterministic_and_shows_its_files_numbers():
    results = load_results(eval_speed.NAME)
    text = eval_speed.render(results)
    assert text == eval_speed.render(copy.deepcopy(results))
    assert text.startswith("## Evaluation speed") and meta_line(results["meta"]) in text
    assert "all-MiniLM-L6-v2" in results["meta"]["model"] and results["meta"]["model"] in text
    cli, rerun = results["cli"], results["rerun"]
    assert f"**{cli['speedup_best']:.2f}×** on the best runs ({cli['speedup_median']:.2f}× on the medians" in text
    for runs in (cli["before"], cli["after"], rerun["fresh"], rerun["reused"]):
        best = min(runs, key=lambda r: r["seconds"])
        assert (f"| {best['seconds']:.1f} | {eval_speed._median(runs):.1f} | {best['cases_per_s']:.1f} | "
                f"{best['cpu_seconds']:.1f} | {best['encoder_calls']} | {best['texts_encoded']} |") in text
    assert f"**{rerun['speedup_vs_before']:.2f}×** the one-at-a-time run" in text
    rows = results["rows"]
    assert f"{rows['compared']} rows compared; {rows['identical']} identical, {rows['float_noise']} identical" in text
    app = results["app"]
    if app:
        for key in ("before", "after", "rerun"):
            assert f"| {app[key]['seconds']:.1f} | {app[key]['cases_per_s']:.1f} |" in text
        assert f"batched **{app['speedup']:.2f}×** one at a time" in text


def test_the_verdict_on_the_target_follows_the_numbers():
    results = copy.deepcopy(load_results(eval_speed.NAME))
    results["cli"]["speedup_best"] = 3.2
    assert "**3.20×** on the best runs" in eval_speed.render(results) and "target 3×: met)" in eval_speed.render(results)
    results["cli"]["speedup_best"] = 1.5
    assert "target 3×: not met)" in eval_speed.render(results)
    results["app"] = None
    assert "The app path was not measured in this run" in eval_speed.render(results)


def test_it_was_measured_on_the_whole_golden_set_and_the_rows_are_the_same():
    results = load_results(eval_speed.NAME)
    assert results["cases"] == 300 and results["batch_cases"] == BATCH_CASES and results["threads"] == 1
    assert results["rows"]["compared"] == 300 and results["rows"]["different"] == 0, \
        "batching changes no decision, hit or verdict"
    assert results["rerun"]["rows"]["different"] == 0 and results["rerun"]["reused_retrieval"] == 300
    assert all(r["encoder_calls"] < b["encoder_calls"] for r, b in zip(results["cli"]["after"],
                                                                       results["cli"]["before"], strict=True))


def test_rows_are_compared_by_what_a_user_reads():
    row = {"id": "g1", "abstained": False, "gate_score": 0.5, "best_fused_score": 0.03, "best_dense_cosine": 0.4,
           "top_rerank_score": None, "latency_ms": 3.0, "supported": True}
    noise = dict(row, gate_score=0.500001, latency_ms=9.0)
    flipped = dict(row, abstained=True)
    far = dict(row, best_dense_cosine=0.41)
    got = eval_speed.compare_rows([row, row, row, row], [row, noise, flipped, far])
    assert (got["identical"], got["float_noise"], got["different"]) == (1, 1, 2)
    assert got["different_ids"] == ["g1", "g1"] and got["max_score_difference"] < eval_speed.TOLERANCE


def test_the_comparison_with_the_code_when_the_issue_was_filed_shows_its_numbers():
    results = copy.deepcopy(load_results(eval_speed.NAME))
    base = results["baseline"]
    assert base["repeats"] >= 2 and len(base["baseline"]) == len(base["current"]) == base["repeats"]
    text = eval_speed.render(results)
    assert f"commit `{base['commit'][:7]}`" in text
    for key, label in (("baseline", f"`{base['commit'][:7]}` (issue filed)"), ("current", "this commit")):
        runs = base[key]
        assert (f"| {label} | {min(r['process_s'] for r in runs):.1f} | ") in text
        assert f" | {min(r['walk_s'] for r in runs):.1f} |" in text
    assert f"**{base['speedup_process']:.2f}×** on the whole command" in text
    assert f"{base['speedup_walk']:.2f}× on the walk" in text
    assert ("target 3×: met" in text.split("issue was filed:")[1]) == (base["speedup_process"] >= 3)
    results["baseline"] = dict(base, speedup_process=3.1)
    assert "**3.10×** on the whole command (best runs; target 3×: met)" in eval_speed.render(results)
    results["baseline"] = None
    assert "issue 19 was filed" not in eval_speed.render(results)


def test_the_walk_seconds_are_read_from_the_cli_json_and_garbage_is_one_line():
    import json

    import pytest

    assert eval_speed.walk_seconds(json.dumps({"summary": {"run": {"seconds": 14.4}}, "rows": []})) == 14.4
    for garbage in ("", "Traceback ...", "{}", json.dumps({"summary": {"run": {}}})):
        with pytest.raises(RuntimeError, match="no summary.run.seconds"):
            eval_speed.walk_seconds(garbage)
