"""What two runs of one question must share: the trace without when it ran, its id and its wall-clock times."""

from __future__ import annotations

STAGES = ("rewrite", "retrieval", "rerank", "gate", "generation", "validation", "trust")


def timeless(trace) -> dict:
    """``trace.to_dict()`` without its run id, creation time and every latency or timing field."""
    d = trace.to_dict()
    for key in ("run_id", "created_at", "timings_ms"):
        d.pop(key)
    for stage in STAGES:
        d[stage].pop("latency_ms", None)
    d["retrieval"].pop("timings_ms", None)
    return d
