"""The configuration sidebar: every tunable editable, the hash shown, reset, export and import."""

from __future__ import annotations

import json

from conftest import markdown_of, open_app

from pipeline.config import PipelineConfig, tunables
from workbench.app.sidebar import widget_key


def _hash_line(at) -> str:
    return next(m.value for m in at.sidebar.markdown if "config hash" in m.value)


def _widget(at, key):
    for kind in ("number_input", "selectbox", "checkbox", "text_input"):
        found = [w for w in getattr(at.sidebar, kind) if w.key == widget_key(key)]
        if found:
            return found[0]
    raise AssertionError(f"no sidebar widget for {key}")


def test_every_tunable_has_a_widget_with_its_default(app_env):
    at = open_app()
    for t in tunables():
        assert _widget(at, t.key).value == t.default, t.key
    assert PipelineConfig().config_hash() in _hash_line(at)
    labels = [w.label for w in at.sidebar.number_input]
    assert "confidence_threshold_rerank (provisional)" in labels
    assert "confidence_threshold_fused (provisional)" in labels


def test_a_change_moves_the_hash_and_survives_a_page_switch_then_reset_restores(app_env):
    at = open_app()
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
    at = open_app()
    _widget(at, "generate.extractive_sentences").set_value(5).run()
    exported = at.sidebar.get("download_button")[0]
    assert exported.proto.label == "Export JSON"
    assert PipelineConfig().with_overrides({"generate.extractive_sentences": 5}).config_hash() in _hash_line(at)


def test_import_applies_a_config_file(app_env):
    at = open_app()
    cfg = PipelineConfig().with_overrides({"gate.signal": "fused", "rerank.top_k": 5})
    at.sidebar.file_uploader(key="sidebar.import").set_value(("mine.json", cfg.to_json().encode(), "application/json"))
    at.run()
    assert _widget(at, "gate.signal").value == "fused"
    assert _widget(at, "rerank.top_k").value == 5
    assert cfg.config_hash() in _hash_line(at)
    assert not at.sidebar.error


def test_a_bad_config_import_is_one_error_line_and_changes_nothing(app_env):
    at = open_app()
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
    at = open_app()
    _widget(at, "rerank.top_k").set_value(500).run()
    assert len(at.sidebar.error) == 1
    assert "top" in at.sidebar.error[0].value and "candidates" in at.sidebar.error[0].value
    assert PipelineConfig().config_hash() in _hash_line(at)
