"""``make reproduce-models`` on a toy run: a re-run of a shipped model's recorded settings and data comes back within
the card's tolerance; a record it cannot match (another score, other data) is reported as not reproduced."""

import json
import shutil

import pytest

from benchmarks import train_reproduce
from workbench.training.reproduce import compare, reproduce
from workbench.training.run import export_answerability, train_answerability

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def shipped(data_dir, toy_settings, tmp_path_factory):
    """A toy model exported as the shipped folder is (training.json + MODEL_CARD.md + int8 graph)."""
    out = tmp_path_factory.mktemp("shipped-run")
    train_answerability(data_dir, out, toy_settings, report=lambda _: None)
    return export_answerability(out, data_dir, "abc1234", report=lambda _: None)


def test_a_rerun_of_the_recorded_settings_reproduces_the_selected_checkpoint(shipped, data_dir, tmp_path):
    lines: list[str] = []
    result = reproduce(shipped, data_dir, tmp_path / "again", report=lines.append)
    record = json.loads((shipped / "training.json").read_text())
    selected = next(p for p in record["learning_curve"] if p["step"] == record["selected_step"])
    assert result.within_tolerance and result.data_matches
    assert result.stopped_after_pairs == selected["pairs_seen"], "stops at the selected point, not the end"
    assert [p.pairs_seen for p in result.points] == [p["pairs_seen"] for p in record["learning_curve"]
                                                     if p["pairs_seen"] <= selected["pairs_seen"]]
    assert result.largest_difference < 1e-6, "same machine, same seed: the same numbers"
    text = "\n".join(result.lines())
    assert text.splitlines()[-1].startswith("reproduced") and "abc1234" in text
    section = train_reproduce.render({"meta": {"date": "d", "machine": "m", "git_commit": "c", "model": "x"},
                                      **result.to_dict()})
    assert "within the model card's tolerance" in section and "| int8 ONNX, selected |" in section


def test_a_shipped_score_the_rerun_cannot_match_is_not_reproduced(shipped, data_dir, tmp_path):
    record = json.loads((shipped / "training.json").read_text())
    rerun = {"state": {"curve": [dict(p, selection=p["selection"] - 0.05) for p in record["learning_curve"]],
                       "pairs_seen": record["pairs_seen"], "seconds": 1.0}}
    result = compare(record, rerun, record["validation_int8"]["selection"], [])
    assert not result.within_tolerance and result.largest_difference == pytest.approx(0.05)
    assert result.lines()[-1].startswith("NOT reproduced")


def test_changed_training_data_is_named_and_fails_the_check(shipped, data_dir, tmp_path):
    data = tmp_path / "data"
    shutil.copytree(data_dir, data)
    pool = data / "answerability_pool.tsv.gz"
    pool.write_bytes(pool.read_bytes())  # same bytes: still matches
    record = json.loads((shipped / "training.json").read_text())
    record["inputs_sha256"]["answerability_pool.tsv.gz"] = "0" * 64
    fake = tmp_path / "shipped"
    shutil.copytree(shipped, fake)
    (fake / "training.json").write_text(json.dumps(record))
    result = reproduce(fake, data, tmp_path / "again", report=lambda _: None)
    assert not result.data_matches and not result.within_tolerance
    assert result.data_differences == ("answerability_pool.tsv.gz: changed",)


def test_no_shipped_model_is_one_line_naming_the_missing_file(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(train_reproduce, "WEIGHTS_DIR", tmp_path)
    assert train_reproduce.main() == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("reproduce-models: ") and "training.json is missing" in err and "\n" not in err
