"""The Demo tour's claims hold with the real offline models (MiniLM, no cross-encoder, extractive
generator) on the demo corpus: each scenario's check finds nothing that differs from its description."""

from __future__ import annotations

import pytest

from pipeline.engine import Pipeline
from pipeline.models.registry import default_models
from pipeline.storage.store import Store
from workbench.app.scenarios import SCENARIOS, run_scenario

pytestmark = [pytest.mark.slow, pytest.mark.long]  # the browser tour test keeps these claims on the default path


def test_every_scenario_behaves_as_the_tour_says(real_demo_home):
    with Store.open(real_demo_home) as store:
        pipe = Pipeline(store, default_models(), log_runs=False)
        outcomes = {s.slug: run_scenario(pipe, s) for s in SCENARIOS}
    failures = {slug: problems for slug, (_, problems) in outcomes.items() if problems}
    assert not failures
    assert outcomes["out-of-scope"][0].llm_calls == 0 and outcomes["out-of-scope"][0].gate.closest_documents
    assert outcomes["provider-down"][0].generation.requested_backend == "litellm"
    assert outcomes["follow-up"][0].rewrite.status == "expanded"
