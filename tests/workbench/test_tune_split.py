"""Out of sample by construction: `workbench tune` fits on the tune part only and reports on the test part,
`workbench eval --split` measures one part, and the deploy gate bounds the part its floors file names."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

import pytest

from pipeline.config import PipelineConfig
from pipeline.gate import rule as gate_rule
from pipeline.testing import fake_models
from workbench import evaluate, tune
from workbench.floors import FloorsError, Gate, check, load_floors, report_lines
from workbench.golden import load_golden, load_split, write_split

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "golden" / "golden.jsonl"
OFF_TOPIC = ["What is the capital of France?", "How do I bake sourdough bread?", "Who won the 1998 World Cup?",
             "What is the boiling point of ethanol?", "How tall is Mount Kilimanjaro?"]


@pytest.fixture
def split_golden(tmp_path):
    """48 golden cases with their own split file beside them."""
    path = tmp_path / "golden.jsonl"
    path.write_text("\n".join(GOLDEN.read_text(encoding="utf-8").splitlines()[:48]) + "\n", encoding="utf-8")
    write_split(path)
    return path


def _tune(store, golden, out, **kw):
    return tune.run_tune(golden, PipelineConfig(), out=out, grid=5, json_output=True, max_false_answer_rate=0.2,
                         open_store=lambda: contextlib.nullcontext(store), models=fake_models(reranker=False), **kw)


def test_tune_fits_on_the_tune_part_and_changing_test_cases_leaves_the_recommendation_alone(
        demo_store_fake, split_golden, tmp_path, capsys):
    split = load_split(split_golden.with_name("golden.split.json"))
    assert _tune(demo_store_fake, split_golden, tmp_path / "a") == 0
    first = json.loads(capsys.readouterr().out)
    assert first["split"]["fitted_on"] == "tune" and first["cases"] == len(split.parts["tune"])
    assert first["held_out"]["cases"] == len(split.parts["test"])
    assert first["recommendation"]["signal"] and first["recommendation"]["test"]["cases"] == len(split.parts["test"])
    markdown = (tmp_path / "a" / "report.md").read_text(encoding="utf-8")
    assert "Fitted on the **tune** part only" in markdown and "on the held-out **test** part it answers" in markdown

    # every test-part question becomes an off-topic one: its traces, and so the held-out rates, change...
    test_ids = set(split.parts["test"])
    lines = []
    for n, line in enumerate(split_golden.read_text(encoding="utf-8").splitlines()):
        record = json.loads(line)
        if record["id"] in test_ids:
            record.update(question=OFF_TOPIC[n % len(OFF_TOPIC)], history=[])
        lines.append(json.dumps(record))
    split_golden.write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert _tune(demo_store_fake, split_golden, tmp_path / "b") == 0
    second = json.loads(capsys.readouterr().out)
    assert second["held_out"] != first["held_out"]
    # ...and what was fitted does not move
    for key in ("settings", "rule", "answer_rate_answerable", "false_answer_rate_unanswerable", "cross_validated"):
        assert second["recommendation"][key] == first["recommendation"][key], key
    assert second["rules"] == first["rules"]


def test_tune_reports_each_single_evidence_signal_as_a_rule_with_its_held_out_rates(
        demo_store_fake, split_golden, tmp_path, capsys):
    assert _tune(demo_store_fake, split_golden, tmp_path / "t") == 0
    report = json.loads(capsys.readouterr().out)
    rows: dict[str, str] = {}
    for line in (tmp_path / "t" / "report.md").read_text(encoding="utf-8").splitlines():
        if line.startswith("| "):
            rows.setdefault(line.split("|")[1].strip(), line)  # the per-rule table comes first
    for name in gate_rule.EVIDENCE:
        fitted, held = report["rules"][name], report["held_out"]["rules"][name]
        assert 0.0 <= fitted["roc_auc"] <= 1.0 and fitted["best"]["false_answer_rate_unanswerable"] <= 0.2
        assert held["cases"] == report["held_out"]["cases"], "the rule's best point measured on the test part"
        # its row in the same table as rerank/fused/dense/learned: AUC, best threshold, test-part rates
        assert f"| {fitted['roc_auc']:.3f} |" in rows[name] and f"{name} ≥ " in rows[name]
        assert rows[name].endswith(f"| {tune._rates_ci(held, held['answerable'], held['unanswerable'])} | "
                                   f"{tune.paired_line(report['held_out']['vs_current'][name])} |")


def test_each_rule_is_tested_paired_against_the_current_gate_on_the_test_cases(
        demo_store_fake, split_golden, tmp_path, capsys):
    """Answered-on-answerable and false-answer-on-unanswerable separately: the two arms' rates are the ones the
    table shows for the rule and for the current gate, and the McNemar p reads only the cases they disagree on."""
    assert _tune(demo_store_fake, split_golden, tmp_path / "p") == 0
    report = json.loads(capsys.readouterr().out)
    held = report["held_out"]
    current = held["current_gate"]
    compared = 0
    for name, pair in held["vs_current"].items():
        if pair is None:
            assert report["rules"][name]["best"] is None
            continue
        compared += 1
        answered, false = pair["answered"], pair["false_answers"]
        assert answered["n"] == held["answerable"] and false["n"] == held["unanswerable"]
        assert answered["rate_a"] == pytest.approx(held["rules"][name]["answer_rate_answerable"])
        assert answered["rate_b"] == pytest.approx(current["answer_rate_answerable"])
        assert false["rate_a"] == pytest.approx(held["rules"][name]["false_answer_rate_unanswerable"])
        assert false["rate_b"] == pytest.approx(current["false_answer_rate_unanswerable"])
        low, high = answered["difference_ci95"]
        assert low <= answered["difference"] <= high
        if answered["a_only"] + answered["b_only"] == 0:
            assert answered["mcnemar_p"] == 1.0
    assert compared >= 2
    rec = report["recommendation"]
    assert rec["test_vs_current"]["answered"]["rate_a"] == pytest.approx(rec["test"]["answer_rate_answerable"])
    markdown = (tmp_path / "p" / "report.md").read_text(encoding="utf-8")
    assert "exact McNemar p" in markdown and "against the current gate on the same test cases: answered " in markdown


def test_without_a_split_file_tune_says_its_figures_are_in_sample(demo_store_fake, tmp_path, capsys):
    path = tmp_path / "nosplit.jsonl"
    path.write_text("\n".join(GOLDEN.read_text(encoding="utf-8").splitlines()[:20]) + "\n", encoding="utf-8")
    assert _tune(demo_store_fake, path, tmp_path / "t") == 0
    report = json.loads(capsys.readouterr().out)
    assert report["split"]["fitted_on"] == "all" and "held_out" not in report and report["cases"] == 20
    assert "every figure below is in-sample" in (tmp_path / "t" / "report.md").read_text(encoding="utf-8")


def _eval(store, golden, capsys, **kw):
    code = evaluate.run_eval(golden, PipelineConfig(), open_store=lambda: contextlib.nullcontext(store),
                             models=fake_models(reranker=False), nli=False, json_output=True, **kw)
    captured = capsys.readouterr()
    return code, json.loads(captured.out), captured.err


def test_eval_measures_one_part_and_labels_every_figure_with_it(demo_store_fake, split_golden, capsys):
    split = load_split(split_golden.with_name("golden.split.json"))
    code, data, err = _eval(demo_store_fake, split_golden, capsys, split="test")
    assert code == 0 and [r["id"] for r in data["rows"]] == list(split.parts["test"])
    assert data["summary"]["split"]["part"] == "test" and data["summary"]["split"]["cases"] == len(split.parts["test"])
    assert "of the test part" in err
    code, data, _ = _eval(demo_store_fake, split_golden, capsys)
    assert data["summary"]["split"]["part"] == "all" and len(data["rows"]) == 48
    parts = data["summary"]["per_split"]
    assert parts["tune"]["cases"] + parts["test"]["cases"] == 48
    held = [r for r in data["rows"] if r["id"] in split.parts["test"] and not r["answerable"]]
    assert parts["test"]["false_answer_rate_unanswerable"] == round(sum(not r["abstained"] for r in held)
                                                                     / len(held), 4)


def test_the_gate_checks_the_part_its_floors_file_names(demo_store_fake, split_golden, tmp_path, capsys):
    floors = tmp_path / "floors.json"
    floors.write_text(json.dumps({"split": "test", "floors": {"recall_at_10": 0.0}}), encoding="utf-8")
    code, data, err = _eval(demo_store_fake, split_golden, capsys, check=floors)
    assert code == 0 and data["summary"]["split"]["part"] == "test", "no --split: the floors' part is evaluated"
    assert "hold on the test part" in err
    with pytest.raises(FloorsError, match="bounds the 'test' part.*--split tune evaluates another part"):
        _eval(demo_store_fake, split_golden, capsys, check=floors, split="tune")
    # a summary of another part never passes a gate set on the test part
    gate = Gate(floors={"recall_at_10": 0.0}, ceilings={}, split="test")
    failures = check({"recall_at_10": 1.0, "split": {"part": "all"}}, gate)
    assert [f.kind for f in failures] == ["split"]
    assert "bounds apply to the 'test' part; this run measured 'all'" in report_lines(failures, gate, "f")[1]


def test_the_bundled_floors_gate_the_held_out_test_part_and_hold_on_the_committed_run():
    golden = load_golden(GOLDEN)
    gate = load_floors(ROOT / "golden" / "floors.json", golden.tags)
    data = json.loads((ROOT / "golden" / "floors.json").read_text(encoding="utf-8"))
    assert gate.split == "test"
    measured = data["_measured"]
    assert data["_measured_on"]["part"] == "test"
    for key, bound in gate.floors.items():
        assert measured[key] >= bound, f"floor {key} {bound} is above the measured {measured[key]}"
    for key, bound in gate.ceilings.items():
        assert measured[key] <= bound, f"ceiling {key} {bound} is below the measured {measured[key]}"


def test_tune_fit_reports_the_learned_rule_held_out_and_its_settings_reproduce_it(
        demo_store_fake, split_golden, tmp_path, capsys):
    assert _tune(demo_store_fake, split_golden, tmp_path / "f", fit=True) == 0
    report = json.loads(capsys.readouterr().out)
    fit = report["fit"]
    assert fit["cases"] == report["cases"] and fit["folds"] == 5
    assert set(fit["coefficients"]) == {"learned_intercept", "learned_window", "learned_coverage", "learned_critical",
                                        "learned_bm25", "learned_dense", "learned_dense_margin", "learned_fused_norm"}
    assert fit["coefficients"]["learned_fused_norm"] == 0.0  # left out of fitting: it moves with rrf_k
    curve = fit["held_out_curve"]
    assert len(curve["threshold"]) == len(curve["answer_rate_answerable"]) >= 2
    assert fit["test"]["cases"] == report["held_out"]["cases"]
    assert "## Learned rule (`--fit`)" in (tmp_path / "f" / "report.md").read_text(encoding="utf-8")
    # the printed settings are a config: the gate under them answers the test part at the reported rates
    cfg = PipelineConfig().with_overrides(["gate.signal=learned", *fit["settings"]])
    traces = evaluate.read_traces(tmp_path / "f" / "traces.jsonl")
    split = load_split(split_golden.with_name("golden.split.json"))
    cases = [c for c in load_golden(split_golden).cases if c.id in set(split.parts["test"])]
    from pipeline.gate.stage import replay

    answered = [replay(traces[c.id], cfg.gate).decision == "answer" for c in cases]
    ar = sum(a for a, c in zip(answered, cases, strict=True) if c.answerable) / sum(c.answerable for c in cases)
    assert ar == pytest.approx(fit["test"]["answer_rate_answerable"], abs=1e-9)
