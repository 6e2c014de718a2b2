"""The "Week-one citation errors" section (benchmarks/results/week_one.json): rendered from its file alone,
deterministic, showing the file's numbers, measured with the shipped defaults, and escaping the corpus text of
its examples."""

from __future__ import annotations

import copy

from benchmarks import week_one
from benchmarks.results_io import load_results, meta_line
from pipeline.config import PipelineConfig


def test_the_section_is_deterministic_and_shows_its_files_numbers():
    results = load_results(week_one.NAME)
    text = week_one.render(results)
    assert text == week_one.render(copy.deepcopy(results))
    assert text.startswith("## Week-one citation errors") and meta_line(results["meta"]) in text
    off = results["extractive"]["arms"]["off"]
    assert f"| off | {off['answered']} of {off['cases']} | {off['citations']} | {off['wrong']['k']} of " in text
    changed = copy.deepcopy(results)
    changed["extractive"]["arms"]["off"]["wrong"] = {"k": 7, "n": 99, "rate": 0.0707, "ci95": [0.0347, 0.1388]}
    assert "7 of 99 = 7.1 % (3.5–13.9 %)" in week_one.render(changed)
    changed["extractive"]["difference"]["points"] = 12.34
    assert "12.3 points" in week_one.render(changed)


def test_it_was_measured_on_the_whole_golden_set_with_the_shipped_defaults():
    results = load_results(week_one.NAME)
    ext = results["extractive"]
    defaults = PipelineConfig()
    assert ext["cases"] == 300 and ext["judge"]["threshold"] == defaults.validate.claim_threshold
    assert ext["arms"]["off"]["generators"] == [defaults.generate.backend] == ["extractive"]
    assert ext["arms"]["off"]["validation"] == ["skipped"] and ext["arms"]["on"]["validation"] == ["ran"]
    assert ext["arms"]["off"]["citations"] == ext["arms"]["on"]["citations"], "the validator never rewrites an answer"


def test_the_smollm2_block_appears_only_when_measured_and_examples_are_escaped():
    results = copy.deepcopy(load_results(week_one.NAME))
    results.pop("smollm2", None)
    assert "was not measured for this section" in week_one.render(results)
    local = copy.deepcopy(results["extractive"])
    local |= {"model": "SmolLM2 test", "subset": "the first 2 answerable cases", "cases": 2, "seconds": 90.0}
    local["examples"] = [{"case_id": "g1", "claim": "<script>alert(1)</script>", "marker": 1, "doc_id": "d",
                          "why": "[x](javascript:alert(1))", "flagged_with_validation_on": False}]
    text = week_one.render(results | {"smollm2": local})
    assert "### SmolLM2 test: the first 2 answerable cases" in text and "was not measured" not in text
    assert "<script>" not in text and "](javascript" not in text and "&lt;script&gt;" in text


def test_the_smollm2_subset_is_answerable_cases_the_gate_lets_through_in_golden_order(demo_store_fake):
    from pipeline.engine import Pipeline
    from pipeline.testing import fake_models
    from workbench.golden import load_golden

    golden, cfg, models = load_golden(week_one.GOLDEN), PipelineConfig(), fake_models(reranker=False)
    picked = week_one._local_cases(golden, demo_store_fake, models, cfg, 3)
    assert len(picked.cases) == 3 and all(c.answerable for c in picked.cases)
    order = [c.id for c in golden.cases]
    assert [c.id for c in picked.cases] == sorted((c.id for c in picked.cases), key=order.index)
    asker = Pipeline(demo_store_fake, models, cfg, log_runs=False)
    assert all(asker.search(c.question, history=[{"role": m.role, "content": m.content} for m in c.history])
               .gate.decision == "answer" for c in picked.cases)
