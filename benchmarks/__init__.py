"""Benchmarks (``make bench``, ``make bench-quality``): measured, written to BENCHMARKS.md, never unit tests."""
