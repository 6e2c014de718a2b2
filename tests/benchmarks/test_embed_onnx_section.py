"""The int8-embedder section (benchmarks/results/embed_onnx.json): rendered from its file alone and deterministic,
every number it shows is the file's, and the verdicts (ingestion target, default rule) follow from the numbers."""

from __future__ import annotations

import copy

from benchmarks import embed_onnx
from benchmarks.results_io import load_results, meta_line


def test_the_section_is_deterministic_names_the_model_and_shows_the_files_numbers():
    results = load_results(embed_onnx.NAME)
    text = embed_onnx.render(results)
    assert text == embed_onnx.render(copy.deepcopy(results))
    assert text.startswith("## Embedder precision: int8 ONNX vs fp32") and meta_line(results["meta"]) in text
    assert results["model"] in text and results["recipe"] in text
    for p in embed_onnx.PRECISIONS:
        assert f"{results['raw'][p]['chunks_per_s']:.1f}" in text
        assert f"{results['ingestion'][p]['chunks_per_s']:.1f}" in text
        assert f"{results['latency'][p]['p50_ms']:.1f} ms" in text and f"{results['latency'][p]['p95_ms']:.1f} ms" in text
        if results.get("scifact"):
            assert f"{results['scifact'][p]['fused']['ndcg10']:.3f}" in text
    ratio = results["ingestion"]["int8"]["chunks_per_s"] / results["ingestion"]["fp32"]["chunks_per_s"]
    assert f"{ratio:.2f}×" in text


def test_changing_a_number_in_the_file_changes_the_section():
    results = copy.deepcopy(load_results(embed_onnx.NAME))
    results["ingestion"]["int8"]["chunks_per_s"] = 4321.0
    assert "4321.0" in embed_onnx.render(results)


def test_the_verdicts_follow_from_the_numbers():
    results = copy.deepcopy(load_results(embed_onnx.NAME))
    fp32 = results["ingestion"]["fp32"]["chunks_per_s"]
    results["ingestion"]["int8"]["chunks_per_s"] = 2 * fp32
    assert "— **met**" in embed_onnx.render(results)
    results["ingestion"]["int8"]["chunks_per_s"] = 1.2 * fp32
    assert "— **not met**" in embed_onnx.render(results)
    if results.get("scifact"):
        fused = results["scifact"]["fp32"]["fused"]["ndcg10"]
        results["scifact"]["int8"]["fused"]["ndcg10"] = fused - 0.002
        assert "could become the default" in embed_onnx.render(results)
        results["scifact"]["int8"]["fused"]["ndcg10"] = fused - 0.02
        assert "stays opt-in" in embed_onnx.render(results)


def test_the_recorded_runs_are_comparable():
    results = load_results(embed_onnx.NAME)
    assert results["raw"]["fp32"]["chunks"] == results["raw"]["int8"]["chunks"]
    assert results["ingestion"]["fp32"]["chunks"] == results["ingestion"]["int8"]["chunks"]
    assert results["latency"]["fp32"]["queries"] == results["latency"]["int8"]["queries"]
    assert results["agreement"]["int8_norm_max_error"] < 1e-4          # int8 vectors are unit length
