"""The store-sharing section (benchmarks/store_sharing.py): each leg's own and served latency and their ratio."""

from __future__ import annotations

from benchmarks.store_sharing import render


def _results(own: float, served: float) -> dict:
    stats = lambda p50: {"p50": p50, "p95": p50 * 2, "n": 200}  # noqa: E731
    return {"meta": {"date": "2026-12-07 10:00 UTC", "machine": "test", "git_commit": "abc", "model": "fake"},
            "chunks": 650, "queries": 200, "processes": 10, "many_wall_s": 12.34,
            "own": {"dense": stats(own), "keyword": stats(own)},
            "served": {"dense": stats(served), "keyword": stats(served)},
            "many": {"dense": stats(served * 3), "keyword": stats(served * 3)}}


def test_the_section_shows_each_legs_latencies_and_the_served_to_own_ratio():
    text = render(_results(0.5, 1.5))
    assert text.startswith("## Store sharing") and "650 chunks" in text
    assert "| dense | 0.50 / 1.00 | 1.50 / 3.00 | **3.0×** | 4.50 / 9.00 |" in text
    assert "4,000 searches in 12.3 s" in text
    assert "**2.0×**" in render(_results(0.5, 1.0))
