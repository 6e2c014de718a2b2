"""Under CI=true a skip fails the run unless tests/skip_allowlist.txt names the test with a reason."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

SAMPLE = '''
import pytest

def test_runs():
    assert True

def test_needs_a_browser():
    pytest.skip("no browser here")

@pytest.mark.xfail(reason="a known gap", strict=True)
def test_known_gap():
    assert False
'''


def run(tmp_path: Path, ci: bool, allow: str = "") -> subprocess.CompletedProcess:
    (tmp_path / "test_sample.py").write_text(SAMPLE, encoding="utf-8")
    (tmp_path / "allow.txt").write_text(allow, encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "WORKBENCH_SKIP_ALLOWLIST": str(tmp_path / "allow.txt")}
    env.pop("CI", None)
    if ci:
        env["CI"] = "true"
    return subprocess.run([sys.executable, "-m", "pytest", "-rs", "-p", "tests.support.strict_skips", "-p",
                           "no:cacheprovider", "test_sample.py"], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=120)


def test_a_skip_fails_under_ci(tmp_path):
    result = run(tmp_path, ci=True)
    assert result.returncode == 1, result.stdout
    assert "1 failed, 1 passed, 1 xfailed" in result.stdout
    assert "skipped under CI=true (no browser here)" in result.stdout


def test_an_allow_listed_skip_stays_a_skip_and_the_header_names_it(tmp_path):
    result = run(tmp_path, ci=True, allow="test_sample.py::test_needs_a_browser | the sample has no browser\n")
    assert result.returncode == 0, result.stdout
    assert "1 passed, 1 skipped, 1 xfailed" in result.stdout
    assert "allow-listed: test_sample.py::test_needs_a_browser (the sample has no browser)" in result.stdout


def test_outside_ci_a_skip_is_a_skip(tmp_path):
    result = run(tmp_path, ci=False)
    assert result.returncode == 0 and "1 skipped" in result.stdout


def test_a_malformed_allow_list_line_is_a_clear_error(tmp_path):
    result = run(tmp_path, ci=True, allow="test_sample.py::test_needs_a_browser\n")
    assert result.returncode != 0
    assert "expected '<test id> | <reason>'" in result.stdout + result.stderr
