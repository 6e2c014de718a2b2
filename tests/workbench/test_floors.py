"""The deploy gate: golden/floors.json bounds the summary; `eval --check` fails, listing each metric out of
bounds, when a floor is raised above what the pipeline measures."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.config import PipelineConfig
from pipeline.testing import fake_models
from workbench import evaluate
from workbench.floors import FloorsError, Gate, check, load_floors, parse_floors, report_lines
from workbench.golden import load_golden
from workbench.summary import SUMMARY_METRICS

ROOT = Path(__file__).resolve().parents[2]
FLOORS = ROOT / "golden" / "floors.json"
SUMMARY = {"recall_at_10": 0.9, "mrr": 0.8, "false_answer_rate_unanswerable": 0.3, "abstention_precision": None,
           "nli": {"agreement": None}, "per_tag": {"off-topic": {"false_answer_rate_unanswerable": 0.1}}}


def test_floors_and_ceilings_are_checked_in_their_own_direction():
    gate = Gate(floors={"recall_at_10": 0.95, "mrr": 0.8},
                ceilings={"false_answer_rate_unanswerable": 0.2,
                          "per_tag.off-topic.false_answer_rate_unanswerable": 0.1})
    failures = check(SUMMARY, gate)
    assert [(f.metric, f.kind) for f in failures] == [("recall_at_10", "floor"),
                                                      ("false_answer_rate_unanswerable", "ceiling")]
    lines = report_lines(failures, gate, "f.json")
    assert lines[0].startswith("deploy gate FAILED: 2 of 4 bounds")
    assert "recall_at_10 0.9000 < floor 0.95" in lines[1]
    assert "false_answer_rate_unanswerable 0.3000 > ceiling 0.2" in lines[2]
    assert report_lines([], gate, "f.json") == ["deploy gate passed: 2 floors and 2 ceilings in f.json hold"]


def test_an_unmeasured_metric_fails_its_bound():
    failures = check(SUMMARY, Gate(floors={"nli.agreement": 0.5, "abstention_precision": 0.5}, ceilings={}))
    assert [f.metric for f in failures] == ["nli.agreement", "abstention_precision"]
    assert "not measured in this run" in report_lines(failures, Gate({"nli.agreement": 0.5}, {}), "f")[1]


@pytest.mark.parametrize("data, message", [
    ({"floors": {"recal_at_10": 0.9}}, "unknown metric 'recal_at_10' (did you mean 'recall_at_10'?)"),
    ({"floor": {"recall_at_10": 0.9}}, "unknown top-level key 'floor'"),
    ({"floors": {"recall_at_10": "high"}}, "floors.recall_at_10 must be a number"),
    ({"floors": {"recall_at_10": True}}, "floors.recall_at_10 must be a number"),
    ({"ceilings": {"per_tag.no-such-tag.false_answer_rate_unanswerable": 0.1}},
     "no case in the golden set has the tag"),
    ({"_about": "nothing"}, "sets no floor and no ceiling"),
    ([1, 2], "must be a JSON object"),
])
def test_bad_floors_files_are_one_clear_error(data, message):
    with pytest.raises(FloorsError) as info:
        parse_floors(data, "f.json", tags=("off-topic",))
    assert message in str(info.value) and "\n" not in str(info.value)


def test_missing_and_malformed_files(tmp_path):
    with pytest.raises(FloorsError, match="not found"):
        load_floors(tmp_path / "none.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{", encoding="utf-8")
    with pytest.raises(FloorsError, match="not valid JSON"):
        load_floors(bad)


def test_the_bundled_floors_file_bounds_the_design_metrics_and_says_how_it_was_set():
    golden = load_golden(ROOT / "golden" / "golden.jsonl")
    gate = load_floors(FLOORS, golden.tags)
    data = json.loads(FLOORS.read_text(encoding="utf-8"))
    assert "_about" in data and "95 % interval" in data["_about"]
    derived = data["_interval"]
    for table in ("floors", "ceilings"):   # every bound with a measured interval is that interval's end
        for key, bound in data[table].items():
            if key in derived[table]:
                assert bound == derived[table][key], f"{table}.{key} is not its interval end"
    assert all(data["floors"][k] <= data["_measured"][k] for k in derived["floors"]), "a floor above its measurement"
    assert all(data["ceilings"][k] >= data["_measured"][k] for k in derived["ceilings"])
    assert {"recall_at_10", "mrr", "answer_rate_answerable", "citation_support_rate"} <= set(gate.floors)
    assert "false_answer_rate_unanswerable" in gate.ceilings
    assert set(gate.floors) | set(gate.ceilings) <= set(SUMMARY_METRICS) | {
        k for k in list(gate.floors) + list(gate.ceilings) if k.startswith("per_tag.")}
    assert all(0.0 <= v <= 1.0 for k, v in gate.floors.items() if k not in ("cases", "claims"))


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "workbench.cli", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=300, env={"HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin"})


def test_cli_missing_floors_file_or_unknown_key_is_one_line_and_exit_2(tmp_path):
    missing = _cli("eval", "golden/golden.jsonl", "--check", str(tmp_path / "nope.json"), "--store", str(tmp_path))
    assert missing.returncode == 2 and "Traceback" not in missing.stderr
    assert [ln for ln in missing.stderr.splitlines() if ln.strip()] == [
        f"error: floors file {tmp_path / 'nope.json'} not found"]
    typo = tmp_path / "typo.json"
    typo.write_text(json.dumps({"floors": {"mrr@10": 0.5}}), encoding="utf-8")
    bad = _cli("eval", "golden/golden.jsonl", "--check", str(typo), "--store", str(tmp_path))
    lines = [ln for ln in bad.stderr.splitlines() if ln.strip()]
    assert bad.returncode == 2 and len(lines) == 1 and "unknown metric 'mrr@10'" in lines[0]


# -- the gate end to end over the fake demo store ------------------------------------------------------------

def _run_main(monkeypatch, store, golden, check=None, out=None):
    return evaluate.run_eval(golden, PipelineConfig(), open_store=lambda: contextlib.nullcontext(store),
                             models=fake_models(reranker=False), check=check, out=out, nli=False, json_output=True)


@pytest.fixture(scope="module")
def small_golden(tmp_path_factory):
    lines = (ROOT / "golden" / "golden.jsonl").read_text(encoding="utf-8").splitlines()
    path = tmp_path_factory.mktemp("golden") / "small.jsonl"
    path.write_text("\n".join(lines[:24]) + "\n", encoding="utf-8")
    return path


def test_the_gate_fails_when_a_floor_is_raised_above_the_measured_value(demo_store_fake, small_golden, tmp_path,
                                                                       monkeypatch, capsys):
    assert _run_main(monkeypatch, demo_store_fake, small_golden) == 0
    summary = json.loads(capsys.readouterr().out)["summary"]
    at_measured = tmp_path / "at.json"
    at_measured.write_text(json.dumps({"floors": {"mrr": summary["mrr"], "recall_at_10": summary["recall_at_10"]},
                                       "ceilings": {"false_answer_rate_unanswerable":
                                                    summary["false_answer_rate_unanswerable"]}}), encoding="utf-8")
    assert _run_main(monkeypatch, demo_store_fake, small_golden, check=at_measured) == 0
    assert "deploy gate passed: 2 floors and 1 ceilings" in capsys.readouterr().err

    raised = tmp_path / "raised.json"
    raised.write_text(json.dumps({"floors": {"mrr": summary["mrr"] + 0.01, "recall_at_10": summary["recall_at_10"]},
                                  "ceilings": {"false_answer_rate_unanswerable":
                                               summary["false_answer_rate_unanswerable"] - 0.01}}), encoding="utf-8")
    assert _run_main(monkeypatch, demo_store_fake, small_golden, check=raised) == 1
    err = capsys.readouterr().err
    assert "deploy gate FAILED: 2 of 3 bounds" in err
    assert f"mrr {summary['mrr']:.4f} < floor" in err
    assert "false_answer_rate_unanswerable" in err and "> ceiling" in err
    assert "recall_at_10" not in err.split("FAILED")[1]
