"""The configuration sidebar: every tunable editable, the hash shown, reset, export and import."""

from __future__ import annotations

import json

from conftest import markdown_of, open_app

from pipeline.config import PipelineConfig, tunables
from workbench.app.sidebar import LABELS, widget_key


def _hash_line(at) -> str:
    return next(m.value for m in at.sidebar.markdown if "config hash" in m.value)


def _widget(at, key):
    for kind in ("number_input", "selectbox", "checkbox", "text_input"):
        found = [w for w in getattr(at.sidebar, kind) if w.key == widget_key(key)]
        if found:
            return found[0]
    raise AssertionError(f"no sidebar widget for {key}")


def test_every_tunable_has_a_widget_with_its_default(app_env):
    at = open_app(settings=None)
    for t in tunables():
        assert _widget(at, t.key).value == t.default, t.key
    assert PipelineConfig().config_hash() in _hash_line(at)
    labels = {w.label: w for w in at.sidebar.number_input}
    assert "Rerank threshold (provisional)" in labels and "Fused (RRF) threshold (provisional)" in labels
    assert "gate.confidence_threshold_fused" in labels["Fused (RRF) threshold (provisional)"].help, \
        "a human label, and the config key in the help"


def test_a_change_moves_the_hash_and_survives_a_page_switch_then_reset_restores(app_env):
    at = open_app(settings=None)
    _widget(at, "gate.signal").set_value("dense").run()
    expected = PipelineConfig().with_overrides({"gate.signal": "dense"}).config_hash()
    assert expected in _hash_line(at) and "1 setting(s) changed" in _hash_line(at)
    at.switch_page("workbench/app/pages/corpus.py").run()
    assert _widget(at, "gate.signal").value == "dense"
    assert expected in _hash_line(at)
    at.sidebar.button(key="sidebar.reset").click().run()
    assert _widget(at, "gate.signal").value == "auto"
    assert PipelineConfig().config_hash() in _hash_line(at)


def test_export_is_the_current_config_as_json(app_env):
    at = open_app(settings=None)
    _widget(at, "generate.extractive_sentences").set_value(5).run()
    exported = at.sidebar.get("download_button")[0]
    assert exported.proto.label == "Export the configuration (JSON)"
    assert PipelineConfig().with_overrides({"generate.extractive_sentences": 5}).config_hash() in _hash_line(at)


def test_import_applies_a_config_file(app_env):
    at = open_app(settings=None)
    cfg = PipelineConfig().with_overrides({"gate.signal": "fused", "rerank.top_k": 5})
    at.sidebar.file_uploader(key="sidebar.import").set_value(("mine.json", cfg.to_json().encode(), "application/json"))
    at.run()
    assert _widget(at, "gate.signal").value == "fused"
    assert _widget(at, "rerank.top_k").value == 5
    assert cfg.config_hash() in _hash_line(at)
    assert not at.sidebar.error


def test_a_bad_config_import_is_one_error_line_and_changes_nothing(app_env):
    at = open_app(settings=None)
    bad = json.dumps({"gate": {"treshold": 0.3}}).encode()
    at.sidebar.file_uploader(key="sidebar.import").set_value(("typo.json", bad, "application/json"))
    at.run()
    errors = [e for e in at.sidebar.error]
    assert len(errors) == 1
    assert "unknown config key gate.treshold" in markdown_of(at)[-1] or "treshold" in errors[0].value
    assert PipelineConfig().config_hash() in _hash_line(at)
    at.sidebar.file_uploader(key="sidebar.import").set_value(("broken.json", b"{not json", "application/json"))
    at.run()
    assert "not valid JSON" in at.sidebar.error[0].value


def test_an_invalid_combination_is_reported_and_the_last_valid_config_is_used(app_env):
    at = open_app(settings=None)
    _widget(at, "rerank.top_k").set_value(500).run()
    assert len(at.sidebar.error) == 1
    assert "top" in at.sidebar.error[0].value and "candidates" in at.sidebar.error[0].value
    assert PipelineConfig().config_hash() in _hash_line(at)


# -- threshold widgets: precision, step and range follow the signal's scale (issue 17, item 3) ---------------

def test_fused_threshold_shows_five_decimals_and_one_step_stays_on_the_scale(app_env):
    at = open_app(settings=None)
    fused = _widget(at, "gate.confidence_threshold_fused")
    default = PipelineConfig().gate.confidence_threshold_fused
    assert fused.proto.format == "%.5f", "0.03201 must not display as 0.0320"
    assert fused.step == 0.0001 and fused.max == 0.0328, "steps of 0.0001, ending just above 2/61"
    fused.increment().run()
    assert _widget(at, "gate.confidence_threshold_fused").value == round(default + 0.0001, 5)
    assert _widget(at, "gate.confidence_threshold_fused").value < 2 / 61, "one + never jumps above every score"


def test_dense_and_rerank_thresholds_step_at_their_precision(app_env):
    at = open_app(settings=None)
    dense = _widget(at, "gate.confidence_threshold_dense")
    assert dense.proto.format == "%.3f" and dense.step == 0.005 and (dense.min, dense.max) == (-1.0, 1.0)
    dense.increment().run()
    assert round(_widget(at, "gate.confidence_threshold_dense").value, 3) == round(
        PipelineConfig().gate.confidence_threshold_dense + 0.005, 3)
    rerank = _widget(at, "gate.confidence_threshold_rerank")
    assert rerank.proto.format == "%.3f" and rerank.step == 0.01 and (rerank.min, rerank.max) == (0.0, 1.0)


def test_a_fusion_setting_that_puts_the_fused_threshold_out_of_reach_is_warned(app_env):
    at = open_app(settings=None)
    _widget(at, "retrieve.rrf_k").set_value(100).run()
    warnings = [w.value for w in at.sidebar.warning]
    assert any("above the highest fused score" in w.replace("\\", "") and "abstains" in w for w in warnings), warnings
    fused = _widget(at, "gate.confidence_threshold_fused")
    assert fused.value == PipelineConfig().gate.confidence_threshold_fused, "the value is kept, not clamped"
    _widget(at, "retrieve.rrf_k").set_value(60).run()
    _widget(at, "retrieve.keyword_weight").set_value(2.0).run()
    assert any("Fusion settings changed" in w.value for w in at.sidebar.warning), "a changed scale is said too"


def test_the_reranker_note_appears_when_it_is_not_installed(offline_env):
    at = open_app(settings=None)
    notes = [c.value for c in at.sidebar.caption]
    assert any(n.startswith("Not available here") and "The gate answers" in n for n in notes)


def test_the_models_panel_says_which_models_are_here_and_what_a_missing_one_changes(app_env):
    at = open_app(settings=None)
    from pipeline.models.inventory import check
    from workbench.app.models_view import summary

    checks = check(PipelineConfig())
    panel = next(e for e in at.sidebar.expander if e.label.startswith("Models"))
    assert panel.label.replace("\\", "") == summary(checks)
    text = " ".join(m.value for m in panel.markdown) + " ".join(c.value for c in panel.caption)
    assert "embedder" in text
    for missing in (c for c in checks if c.status == "missing"):
        assert missing.without.split(":")[0].split(",")[0] in text.replace("\\", ""), missing.role


def test_every_tunable_has_a_human_label_and_no_label_is_stale():
    assert set(LABELS) == {t.key for t in tunables()}


def _in_advanced(at, key) -> bool:
    return any(w.key == widget_key(key) for e in at.sidebar.expander for w in e.number_input)


def test_a_single_signal_gate_rule_is_offered_and_brings_its_threshold_to_the_top(app_env):
    at = open_app(settings=None)
    signal = _widget(at, "gate.signal")
    assert {"window", "coverage", "critical", "bm25", "dense_margin", "fused_norm"} <= set(signal.options)
    assert _in_advanced(at, "gate.confidence_threshold_bm25"), "under Advanced while another rule is chosen"
    signal.set_value("bm25").run()
    assert not _in_advanced(at, "gate.confidence_threshold_bm25"), "next to the rule once it is chosen"
    bm25 = _widget(at, "gate.confidence_threshold_bm25")
    assert bm25.label == "Normalised BM25 threshold (provisional)" and "gate.confidence_threshold_bm25" in bm25.help
    assert bm25.proto.format == "%.3f" and bm25.step == 0.005
    bm25.set_value(0.5).run()
    expected = PipelineConfig().with_overrides({"gate.signal": "bm25", "gate.confidence_threshold_bm25": 0.5})
    assert expected.config_hash() in _hash_line(at)
    _widget(at, "gate.signal").set_value("auto").run()
    assert _in_advanced(at, "gate.confidence_threshold_bm25")
    assert _widget(at, "gate.confidence_threshold_bm25").value == 0.5, "the value is kept when it moves back"
