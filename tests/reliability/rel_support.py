"""Helpers of the reliability suite: the real CLI as a subprocess, configs, a small benign corpus."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from pipeline.config import PipelineConfig
from pipeline.testing import FAKE_WORLD

ROOT = Path(__file__).resolve().parents[2]
CLI_ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "LITELLM_LOCAL_MODEL_COST_MAP": "True", "TOKENIZERS_PARALLELISM": "false",
           "PYTHONPATH": str(ROOT)}
CLI_ENV.pop("QDRANT_URL", None)
CLI_ENV.pop("WORKBENCH_DEBUG", None)

# The LLM path with whatever model the test injects (Models.llm returns an injected fake before building a
# backend), no answer cache (each test must see a fresh generation), extractive otherwise.
# The injection defences sit after the gate, so these cases need the gate to answer: with the fakes of
# pipeline.testing the gate reads the fake reranker's term-overlap score of whole passages (gate.signal=rerank,
# rerank.granularity=passage), the set-up the cases were written against; the shipped auto rule and the reader's
# sentence granularity are tested in tests/pipeline (the extractive generator's injection rules with reader scores:
# tests/pipeline/generation/test_extractive_reader.py).
FAKE_GATE = FAKE_WORLD
LLM_CFG = PipelineConfig().with_overrides({"generate.backend": "litellm", "cache.enabled": False, **FAKE_GATE})
EXTRACTIVE_CFG = PipelineConfig().with_overrides({"cache.enabled": False, **FAKE_GATE})


BENIGN = {
    "timeout.md": "---\nid: mg-timeout\ntitle: Request timeout\nproduct: marlin-gateway\n---\n# Request timeout\n\n"
                  "The default request timeout of Marlin Gateway is 30 seconds (`gateway.request_timeout_s`).\n\n"
                  "Raise it for one route with `marlinctl routes update --timeout-s 60`.\n",
    "retries.md": "---\nid: mg-retries\ntitle: Upstream retries\nproduct: marlin-gateway\n---\n# Retries\n\n"
                  "Marlin Gateway retries a failed upstream call up to 5 times with exponential backoff from 200 ms.\n",
    "kb.jsonl": '{"id": "mg-keys", "title": "API keys", "text": "Marlin Gateway API keys expire after 90 days."}\n',
}
QUESTION = "What is the default request timeout of Marlin Gateway?"


def workbench(*args: str, timeout: float = 300, env: dict | None = None) -> subprocess.CompletedProcess:
    """Run the real CLI; ``timeout`` guards against a hang (it is never an assertion about speed)."""
    return subprocess.run([sys.executable, "-m", "workbench.cli", *args], cwd=ROOT, env=env or CLI_ENV,
                          capture_output=True, text=True, timeout=timeout)


def error_lines(result: subprocess.CompletedProcess) -> list[str]:
    return [line for line in result.stderr.splitlines() if line.strip()]


def one_line_error(result: subprocess.CompletedProcess) -> str:
    """The single stderr line of a failed command; fails on a traceback or several lines."""
    assert "Traceback" not in result.stderr, result.stderr
    lines = error_lines(result)
    assert len(lines) == 1, result.stderr
    assert result.returncode != 0
    return lines[0]
