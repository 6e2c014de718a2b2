"""RELIABILITY.md is generated from benchmarks/results/reliability.json: ``--check`` says whether the committed file is
what the results render, like ``benchmarks.report --check`` does for BENCHMARKS.md."""

from __future__ import annotations

import dataclasses
import re

import pytest

from benchmarks import reliability_report as rr
from benchmarks import results_io
from benchmarks.results_io import configured_models, load_results
from workbench.metrics import wilson


def test_the_committed_reliability_md_is_current():
    assert rr.main(["--check"]) == 0, "RELIABILITY.md is stale: python -m benchmarks.reliability_report --render"


def test_check_exits_1_on_a_stale_file(tmp_path, monkeypatch, capsys):
    stale = tmp_path / "RELIABILITY.md"
    stale.write_text(rr.OUT.read_text(encoding="utf-8").replace("|", "¦", 1), encoding="utf-8")
    monkeypatch.setattr(rr, "OUT", stale)
    assert rr.main(["--check"]) == 1
    assert "stale" in capsys.readouterr().err


def test_every_count_of_a_total_carries_its_wilson_interval():
    text = rr.OUT.read_text(encoding="utf-8")
    counts = re.findall(r"\b(\d+) / (\d+)\b( \(\d+\.\d+ % \[\d+\.\d+–\d+\.\d+\]\))?", text)
    assert counts, "RELIABILITY.md shows no count of a total"
    bare = [f"{k} / {n}" for k, n, ci in counts if not ci and n != "0"]
    assert not bare, f"counts without an interval: {bare[:5]}"
    k, n, ci = counts[0]
    low, high = wilson(int(k), int(n))
    assert f"[{rr._pct(low)}–{rr._pct(high)}]" in ci


def test_the_models_named_are_what_the_shipped_default_runs_now():
    # the local-model section quotes its own results file's measurement line, whatever that file recorded
    text = rr.OUT.read_text(encoding="utf-8").split("### Against a real (tiny) model")[0]
    assert configured_models() in text, "RELIABILITY.md names other models than PipelineConfig() runs: re-measure"
    assert "fused AND dense" not in text and "no cross-encoder" not in text


def test_check_fails_once_a_configuration_section_the_suite_reads_changed(monkeypatch, capsys):
    from pipeline import config

    changed = dataclasses.replace(config.GateConfig(), signal="dense")
    init = config.PipelineConfig.__init__

    def patched(self, *args, **kwargs):
        init(self, *args, **kwargs)
        object.__setattr__(self, "gate", changed)

    monkeypatch.setattr(config.PipelineConfig, "__init__", patched)
    assert rr.check() == 1
    assert "reliability.json is stale" in capsys.readouterr().err


def test_check_fails_once_code_or_weights_the_suite_depends_on_changed(monkeypatch, capsys):
    data = load_results(rr.RESULTS)
    files = data["meta"]["depends"]["files"]
    for path in ("pipeline/validation/entailment.py", "pipeline/config.py", "tests/reliability/test_injection.py"):
        assert path in files, f"reliability.json does not depend on {path}"
    assert any(p.startswith("pipeline/models/weights/answerability/") for p in files)
    assert any(p.startswith("pipeline/models/weights/nli/") for p in files)
    files["pipeline/validation/entailment.py"] = "0" * 12      # as if measured before the file changed
    monkeypatch.setattr(results_io, "load_results", lambda name: data)
    assert rr.check() == 1
    assert "file pipeline/validation/entailment.py" in capsys.readouterr().err


def test_the_local_model_comparison_is_paired_on_the_same_documents():
    text = rr.OUT.read_text(encoding="utf-8")
    if not rr.LOCAL.exists():
        pytest.skip("injection_local.json not measured on this checkout")
    assert "followed by the model against reached the user unflagged): exact McNemar p = " in text
