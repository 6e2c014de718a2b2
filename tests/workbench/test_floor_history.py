"""golden/FLOORS.md and golden/floors_history.json: every move of a deploy-gate bound or a shipped threshold has an
entry with its reason, and the markdown is generated from the entries."""

from __future__ import annotations

import dataclasses
import json
import shutil

import pytest

from pipeline.config import PipelineConfig
from workbench import floor_history as fh


def test_every_bound_and_threshold_that_ships_has_an_entry_with_its_reason():
    history = fh.load_history()
    missing = fh.unrecorded(history, fh.snapshot())
    assert not missing, ("moved without an entry in golden/floors_history.json (python -m workbench.floor_history "
                         f"record --reason ...): {missing}")
    assert history[-1]["thresholds"] == fh.thresholds(), "the last entry records the shipped thresholds"


def test_floors_md_is_generated_from_the_history():
    assert fh.MARKDOWN.read_text(encoding="utf-8") == fh.render(fh.load_history()), \
        "golden/FLOORS.md is stale: python -m workbench.floor_history render"


def test_a_moved_floor_or_threshold_is_caught_until_recorded_and_then_shown(tmp_path):
    history, floors = tmp_path / "history.json", tmp_path / "floors.json"
    shutil.copy(fh.HISTORY, history)
    data = json.loads(fh.FLOORS.read_text(encoding="utf-8"))
    data["floors"]["answer_rate_answerable"] = 0.4242
    floors.write_text(json.dumps(data), encoding="utf-8")
    cfg = PipelineConfig()
    cfg = dataclasses.replace(cfg, gate=dataclasses.replace(cfg.gate, confidence_threshold_learned=0.777))
    moved = fh.unrecorded(fh.load_history(history), fh.snapshot(floors, cfg))
    assert ("floors", "answer_rate_answerable", fh.load_history()[-1]["floors"]["answer_rate_answerable"], 0.4242) \
        in moved
    assert any(m[:2] == ("thresholds", "gate.confidence_threshold_learned") and m[3] == 0.777 for m in moved)
    with pytest.raises(ValueError, match="reason"):
        fh.record("  ", history, floors, cfg)
    fh.record("lowered on purpose for this test", history, floors, cfg)
    after = fh.load_history(history)
    assert not fh.unrecorded(after, fh.snapshot(floors, cfg))
    text = fh.render(after)
    assert "lowered on purpose for this test" in text and "| floor `answer_rate_answerable` |" in text
    assert "| 0.4242 |" in text and "| 0.777 |" in text
    with pytest.raises(ValueError, match="nothing changed"):
        fh.record("again", history, floors, cfg)


def test_the_check_command_fails_on_an_unrecorded_move(tmp_path, monkeypatch, capsys):
    floors = tmp_path / "floors.json"
    data = json.loads(fh.FLOORS.read_text(encoding="utf-8"))
    data["ceilings"]["false_answer_rate_unanswerable"] = 0.5
    floors.write_text(json.dumps(data), encoding="utf-8")
    monkeypatch.setattr(fh, "FLOORS", floors)
    assert fh.main(["check"]) == 1
    assert "ceilings false_answer_rate_unanswerable moved" in capsys.readouterr().err


def test_derive_sets_the_bounds_to_the_interval_ends_and_records_why(tmp_path):
    history, floors = tmp_path / "history.json", tmp_path / "floors.json"
    shutil.copy(fh.HISTORY, history)
    data = json.loads(fh.FLOORS.read_text(encoding="utf-8"))
    data.pop("_interval", None)
    floors.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(ValueError, match="_interval"):
        fh.derive("no interval yet", history, floors)
    data["_interval"] = {"floors": {"answer_rate_answerable": 0.4811, "not_a_bound_here": 0.1},
                         "ceilings": {"false_answer_rate_unanswerable": 0.1622}}
    floors.write_text(json.dumps(data), encoding="utf-8")
    fh.derive("bounds from the 95 % interval", history, floors)
    after = json.loads(floors.read_text(encoding="utf-8"))
    assert after["floors"]["answer_rate_answerable"] == 0.4811
    assert after["ceilings"]["false_answer_rate_unanswerable"] == 0.1622
    assert "not_a_bound_here" not in after["floors"], "derive moves bounds, it does not add new ones"
    assert after["floors"]["mrr"] == data["floors"]["mrr"], "a bound without an interval stays"
    entry = fh.load_history(history)[-1]
    assert entry["reason"] == "bounds from the 95 % interval" and entry["floors"]["answer_rate_answerable"] == 0.4811
