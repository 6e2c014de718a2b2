"""The training loop on a tiny data set: a seeded run is reproducible, an interrupted run resumed from its checkpoint
ends with the same weights, and the export loads offline in the class the pipeline uses."""

import json

import numpy as np
import pytest

from workbench.training.loop import Trainer
from workbench.training.run import export_answerability, train_answerability

pytestmark = pytest.mark.slow

def _weights(out):
    import torch

    return torch.load(out / "checkpoint.pt", weights_only=False)["model"]


@pytest.mark.long
def test_a_seeded_run_is_reproducible_and_writes_a_learning_curve(data_dir, toy_settings, tmp_path):
    lines: list[str] = []
    first = train_answerability(data_dir, tmp_path / "a", toy_settings, report=lines.append)
    train_answerability(data_dir, tmp_path / "b", toy_settings, report=lambda _: None)
    a, b = _weights(tmp_path / "a"), _weights(tmp_path / "b")
    assert all(np.array_equal(a[k].numpy(), b[k].numpy()) for k in a)
    result = json.loads(first.read_text())
    curve = result["state"]["curve"]
    assert curve[0]["pairs_seen"] == 0 and curve[-1]["pairs_seen"] == result["state"]["pairs_seen"] > 0
    assert len(curve) >= 3 and all("selection" in p for p in curve)
    assert set(result["inputs"]) == {"answerability_pool.tsv.gz", "squad2_train_subset/train-v2.0.first10articles.json"}
    assert any("pairs/s" in line and "ETA" in line for line in lines), "a progress line with the time left"


@pytest.mark.long
def test_an_interrupted_run_resumes_to_the_same_weights(data_dir, toy_settings, tmp_path, monkeypatch):
    train_answerability(data_dir, tmp_path / "whole", toy_settings, report=lambda _: None)

    class Interrupt(Exception):
        pass

    original = Trainer.evaluate
    calls = {"n": 0}

    def evaluate_then_die(self):
        point = original(self)
        calls["n"] += 1
        if calls["n"] == 3:  # after the second checkpoint past the start
            self.save_checkpoint()
            raise Interrupt
        return point

    monkeypatch.setattr(Trainer, "evaluate", evaluate_then_die)
    with pytest.raises(Interrupt):
        train_answerability(data_dir, tmp_path / "cut", toy_settings, report=lambda _: None)
    monkeypatch.setattr(Trainer, "evaluate", original)
    lines: list[str] = []
    train_answerability(data_dir, tmp_path / "cut", toy_settings, report=lines.append)
    assert any(line.startswith("resumed at step") for line in lines)
    a, b = _weights(tmp_path / "whole"), _weights(tmp_path / "cut")
    assert all(np.allclose(a[k].numpy(), b[k].numpy(), atol=1e-6) for k in a)


def test_the_export_is_int8_onnx_with_a_model_card_and_loads_offline(data_dir, toy_settings, tmp_path):
    from pipeline.models.rerank_onnx import OnnxReranker

    out = tmp_path / "run"
    train_answerability(data_dir, out, toy_settings, report=lambda _: None)
    folder = export_answerability(out, data_dir, "abc1234", report=lambda _: None)
    assert (folder / "model.int8.onnx").stat().st_size < 30 * 1024 * 1024
    card = (folder / "MODEL_CARD.md").read_text()
    provenance = json.loads((folder / "training.json").read_text())
    assert provenance["commit"] == "abc1234" and len(provenance["inputs_sha256"]) == 2
    for digest in provenance["inputs_sha256"].values():
        assert digest in card
    assert "int8 ONNX (shipped)" in card and "Known limits" in card
    reader = OnnxReranker("toy", folder, folder / "model.int8.onnx", max_tokens=32)
    logits = reader.score("how many retries for job 3 ?", ["job 3 is retried 5 times .", "the weather was mild ."])
    assert logits.shape == (2,) and np.all(np.isfinite(logits))


def test_nli_trains_exports_and_loads_in_the_validators_classifier(data_dir, toy_settings, tmp_path):
    import dataclasses

    from pipeline.models.encoders import NLIClassifier
    from workbench.training.run import export_nli, train_nli

    settings = dataclasses.replace(toy_settings, task="nli", use_squad=False, epochs=1, eval_every=40)
    out = tmp_path / "nli"
    result = json.loads(train_nli(data_dir, out, settings, report=lambda _: None).read_text())
    assert result["counts"]["left_out"] == {"sick": 40}
    assert {"val_claims", "val_general", "val_perturb"} <= set(result["state"]["curve"][-1])
    folder = export_nli(out, data_dir, "abc1234", report=lambda _: None)
    card = (folder / "MODEL_CARD.md").read_text()
    assert "NLI citation check" in card and "sick (40 pairs)" in card and "Known limits" in card
    model = NLIClassifier(str(folder))
    assert model.labels == ("entailment", "neutral", "contradiction")
    probs = model.predict([("The job 3 is retried 5 times .", "The job 3 is retried .")])
    assert probs.shape == (1, 3) and abs(float(probs.sum()) - 1.0) < 1e-4


def test_export_without_a_finished_run_is_a_one_line_error(tmp_path):
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "workbench.cli", "train", "nli", "--export-only", "--out",
                           str(tmp_path / "nothing")], capture_output=True, text=True)
    assert done.returncode != 0 and "Traceback" not in done.stderr
    assert "holds no finished training run" in done.stderr and len(done.stderr.strip().splitlines()) == 1
