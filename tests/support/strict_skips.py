"""Under ``CI=true`` a skipped test is a failed test, unless ``tests/skip_allowlist.txt`` names it with a reason.

A test that cannot run (no browser, no model, no tool) must not let CI go green without it: the browser
module's XSS check or the SmolLM2 tests would otherwise vanish silently when an install step breaks. Locally
(``CI`` unset) skips stay skips, so a developer without Chromium can still run the suite.

The allow-list: one entry a line, ``<node id or prefix> | <reason>``; ``#`` starts a comment. The file can be
moved with ``WORKBENCH_SKIP_ALLOWLIST`` (the plugin's own tests do).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

DEFAULT_ALLOWLIST = Path(__file__).resolve().parents[1] / "skip_allowlist.txt"


def strict() -> bool:
    return os.environ.get("CI", "").strip().lower() in ("true", "1", "yes")


def allowlist() -> dict[str, str]:
    path = Path(os.environ.get("WORKBENCH_SKIP_ALLOWLIST") or DEFAULT_ALLOWLIST)
    entries: dict[str, str] = {}
    if not path.is_file():
        return entries
    for number, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        node, sep, reason = (part.strip() for part in line.partition("|"))
        if not sep or not node or not reason:
            raise pytest.UsageError(f"{path}:{number}: expected '<test id> | <reason>', got {raw.strip()!r}")
        entries[node] = reason
    return entries


def allowed(nodeid: str) -> bool:
    return any(nodeid == node or nodeid.startswith(node.rstrip(":") + "::") or nodeid.startswith(node + "[")
               for node in allowlist())


def _reason(longrepr) -> str:
    text = str(longrepr[2] if isinstance(longrepr, tuple) and len(longrepr) == 3 else longrepr)
    return text.removeprefix("Skipped: ")


def _fail(report, what: str) -> None:
    report.outcome = "failed"
    report.longrepr = (f"{what} was skipped under CI=true ({_reason(report.longrepr)}); CI does not allow skips: "
                       "install what it needs in .ci/run, or list it in tests/skip_allowlist.txt with a reason")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if strict() and report.skipped and not hasattr(report, "wasxfail") and not allowed(item.nodeid):
        _fail(report, item.nodeid)


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector):
    outcome = yield
    report = outcome.get_result()
    if strict() and report.outcome == "skipped" and not allowed(report.nodeid):
        _fail(report, report.nodeid or "a module")


def pytest_report_header(config):
    entries = allowlist()
    mode = "CI=true: skips fail" if strict() else "skips allowed (CI unset)"
    listed = "; ".join(f"{node} ({reason})" for node, reason in entries.items()) or "none"
    return f"skip policy: {mode}; allow-listed: {listed}"
