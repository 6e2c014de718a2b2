"""The Compare page's presets under a single-signal gate rule: stricter and looser move that rule's own
threshold along its scale."""

from __future__ import annotations

from pipeline.config import PipelineConfig
from workbench.app.compare_view import presets


def test_stricter_and_looser_presets_move_the_single_signal_rules_threshold():
    cfg = PipelineConfig().with_overrides({"gate.signal": "bm25", "gate.confidence_threshold_bm25": 0.5})
    found = presets(cfg, reranker_available=False)
    stricter = next(v for k, v in found.items() if k.startswith("stricter"))
    looser = next(v for k, v in found.items() if k.startswith("looser"))
    assert stricter == {"gate.confidence_threshold_bm25": 0.55} and looser == {"gate.confidence_threshold_bm25": 0.45}
    assert any("bm25 0.500 → 0.550" in k for k in found), "the label says what moves"
    # at the end of its range the preset stays on the scale
    top = PipelineConfig().with_overrides({"gate.signal": "critical", "gate.confidence_threshold_critical": 1.0})
    stricter = next(v for k, v in presets(top, False).items() if k.startswith("stricter"))
    assert stricter == {"gate.confidence_threshold_critical": 1.0}
