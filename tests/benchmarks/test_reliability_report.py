"""RELIABILITY.md is generated from benchmarks/results/reliability.json: ``--check`` says whether the committed file is
what the results render, like ``benchmarks.report --check`` does for BENCHMARKS.md."""

from __future__ import annotations

from benchmarks import reliability_report as rr


def test_the_committed_reliability_md_is_current():
    assert rr.main(["--check"]) == 0, "RELIABILITY.md is stale: python -m benchmarks.reliability_report --render"


def test_check_exits_1_on_a_stale_file(tmp_path, monkeypatch, capsys):
    stale = tmp_path / "RELIABILITY.md"
    stale.write_text(rr.OUT.read_text(encoding="utf-8").replace("|", "¦", 1), encoding="utf-8")
    monkeypatch.setattr(rr, "OUT", stale)
    assert rr.main(["--check"]) == 1
    assert "stale" in capsys.readouterr().err
