"""The helpers every results file and report uses: the paired test on the same cases, and the sentence naming the
models a configuration runs."""

from __future__ import annotations

import pytest

from benchmarks.results_io import configured_models, mcnemar
from pipeline.config import PipelineConfig
from pipeline.testing import fake_models


def test_mcnemar_reads_only_the_discordant_pairs():
    # 3 cases yes only before, none only after, 20 alike: p = 2 * 0.5**3 = 0.25 whatever the concordant ones are
    before = [True] * 3 + [True] * 10 + [False] * 10
    after = [False] * 3 + [True] * 10 + [False] * 10
    assert mcnemar(before, after, "documents").startswith("exact McNemar p = 0.25 (3 documents yes only in the first, "
                                                          "0 only in the second, of 23)")
    assert mcnemar([True, False], [True, False]).startswith("exact McNemar p = 1 (0 cases")
    with pytest.raises(ValueError):
        mcnemar([True], [True, False])


def test_the_models_sentence_follows_the_configuration():
    shipped = configured_models()
    assert "learned gate (`gate.signal=auto`" in shipped
    assert "`workbench/answerability-reader` (from project:" in shipped
    assert "NLI citation check `workbench/nli-check` (from project:" in shipped
    forced = configured_models(PipelineConfig().with_overrides(
        {"rerank.enabled": False, "gate.signal": "fused_and_dense", "validate.nli": "off"}))
    assert "no reader" in forced and "`gate.signal=fused_and_dense`" in forced
    assert "embedding citation check alone" in forced and "nli-check" not in forced


def test_injected_models_are_named_instead_of_the_configured_ones():
    sentence = configured_models(PipelineConfig(), fake_models())
    assert "`FakeEmbedder`" in sentence and "`FakeReranker`" in sentence and "`FakeNLI`" in sentence
    assert "all-MiniLM" not in sentence
    assert "reader none (" in configured_models(PipelineConfig(), fake_models(reranker=False))


def test_a_tree_is_dirty_for_changed_code_not_for_results_an_earlier_benchmark_wrote(tmp_path, monkeypatch):
    import subprocess

    from benchmarks import results_io

    def git(*args):
        subprocess.run(["git", *args], cwd=tmp_path, check=True, capture_output=True)

    (tmp_path / "benchmarks" / "results").mkdir(parents=True)
    (tmp_path / "benchmarks" / "results" / "a.json").write_text("{}")
    (tmp_path / "code.py").write_text("x = 1\n")
    git("init", "-q")
    git("add", ".")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "first")
    monkeypatch.setattr(results_io, "ROOT", tmp_path)
    (tmp_path / "benchmarks" / "results" / "a.json").write_text('{"measured": 1}')
    assert not results_io.git_commit().endswith("+dirty") and results_io.git_diff_sha1() is None
    (tmp_path / "code.py").write_text("x = 2\n")
    assert results_io.git_commit().endswith("+dirty") and results_io.git_diff_sha1() is not None
