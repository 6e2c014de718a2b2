"""Which models a configuration names and whether each is here (`workbench models`, `make models`)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipeline.config import PipelineConfig
from pipeline.models import inventory
from workbench.cli import main


@pytest.fixture
def hub(monkeypatch):
    """huggingface_hub.snapshot_download, recorded: the local cache is empty; a download returns a folder or
    fails as the test says."""
    import huggingface_hub
    from huggingface_hub.errors import LocalEntryNotFoundError

    calls: list[tuple[str, bool]] = []
    state = {"download": "fail"}

    def snapshot_download(name, local_files_only=False, **kwargs):
        calls.append((name, local_files_only))
        if local_files_only or state["download"] == "fail":
            raise LocalEntryNotFoundError(f"{name} not cached")
        return str(Path(state["download"]))

    monkeypatch.setattr(huggingface_hub, "snapshot_download", snapshot_download)
    return calls, state


def _by_key(checks) -> dict[str, inventory.ModelCheck]:
    return {c.key: c for c in checks}


HUB_RERANKER = PipelineConfig().with_overrides(["rerank.model=cross-encoder/ms-marco-MiniLM-L-6-v2",
                                                "rerank.granularity=passage",
                                                "validate.nli_model=cross-encoder/nli-deberta-v3-small"])


def test_the_default_reader_is_committed_here_and_needs_no_download(hub):
    calls, _ = hub
    reader = _by_key(inventory.check(PipelineConfig()))["rerank.model"]
    assert reader.status == "here" and reader.available
    assert reader.name == "workbench/answerability-reader"
    assert reader.source.startswith("project:pipeline/models/weights/answerability") and "MODEL_CARD.md" in reader.source
    assert not any(name == reader.name for name, _ in calls), "a committed model never asks the hub"


def test_a_reader_missing_from_the_checkout_says_how_to_get_it_back(monkeypatch, tmp_path):
    from pipeline.models import resolve

    monkeypatch.setattr(resolve, "WEIGHTS_DIR", tmp_path)
    reader = _by_key(inventory.check(PipelineConfig()))["rerank.model"]
    assert reader.status == "missing" and "make train-models" in reader.detail and "git checkout" in reader.detail
    assert "learned rule" in reader.without


def test_check_reports_the_packaged_embedder_and_downloads_nothing(hub, monkeypatch):
    calls, _ = hub
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)  # even where the hub is allowed, a check never downloads
    checks = _by_key(inventory.check(HUB_RERANKER))
    assert checks["embedding.model"].status == "here"
    assert checks["embedding.model"].source.startswith("package:")
    rerank = checks["rerank.model"]
    assert rerank.status == "missing" and not rerank.available
    assert "make models" in rerank.detail and "learned rule" in rerank.without
    assert all(local_only for _, local_only in calls), "check must never ask the hub for a download"


def test_fetch_offline_says_why_nothing_was_downloaded(hub, monkeypatch):
    calls, _ = hub
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    checks = _by_key(inventory.fetch(HUB_RERANKER))
    for key in ("rerank.model", "validate.nli_model"):
        assert checks[key].status == "not downloaded"
        assert "HF_HUB_OFFLINE is set" in checks[key].detail


def test_fetch_without_network_names_the_failure_once_per_model(hub, monkeypatch):
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    checks = _by_key(inventory.fetch(HUB_RERANKER))
    line = checks["validate.nli_model"].line()
    assert "could not be reached" in line and "validate.nli_model" in line and "\n" not in line


def test_fetch_downloads_what_is_missing(hub, monkeypatch, tmp_path):
    calls, state = hub
    state["download"] = tmp_path
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    checks = _by_key(inventory.fetch(HUB_RERANKER))
    assert checks["rerank.model"].status == "downloaded" and checks["rerank.model"].available
    assert ("cross-encoder/ms-marco-MiniLM-L-6-v2", False) in calls
    assert checks["embedding.model"].status == "here", "the packaged embedder is not downloaded again"


def test_a_local_model_directory_is_here(tmp_path):
    cfg = PipelineConfig().with_overrides([f"rerank.model={tmp_path}"])
    assert _by_key(inventory.check(cfg))["rerank.model"].source == "path"


def test_the_local_llm_is_missing_only_when_the_config_uses_it(monkeypatch):
    monkeypatch.setattr(inventory.local_llm, "is_installed", lambda: False)
    default = _by_key(inventory.check(PipelineConfig()))["generate.model"]
    assert default.status == "not used"
    local = _by_key(inventory.check(PipelineConfig().with_overrides(["generate.backend=local"])))["generate.model"]
    assert local.status == "missing" and "pip install" in local.detail and "extractive" in local.without


def test_cli_models_lists_every_role_as_json(hub, capsys, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert main(["models", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["key"] for r in rows] == [r.key for r in inventory.ROLES]
    assert rows[0]["available"] is True and rows[1]["available"] is True, "the embedder and the committed reader"
    assert rows[2]["key"] == "validate.nli_model" and rows[2]["available"] is True, "the committed NLI check"
    assert rows[2]["source"].startswith("project:")


def test_cli_models_with_a_bad_setting_is_one_line(capsys):
    assert main(["models", "--set", "rerank.modle=x"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error:") and err.count("\n") == 1
