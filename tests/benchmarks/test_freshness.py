"""Results that cannot go stale: a results file that names what it depends on (code, model weights, configuration
sections) fails here when any of them changed since it was measured; and the fingerprint sees such a change."""

from __future__ import annotations

import json

import pytest

from benchmarks import results_io
from benchmarks.results_io import RESULTS_DIR, Depends, fingerprint, run_meta, stale

FILES = sorted(RESULTS_DIR.glob("*.json"))


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_no_results_file_is_older_than_what_it_depends_on(path):
    meta = json.loads(path.read_text(encoding="utf-8")).get("meta") or {}
    assert {"date", "machine", "git_commit", "model"} <= set(meta), f"{path.name} does not say when and how it was measured"
    changed = stale(meta)
    assert not changed, (f"{path.name} was measured at {meta['git_commit']} and these changed since: "
                         f"{', '.join(changed[:8])}{' …' if len(changed) > 8 else ''}; re-measure it")


def test_a_changed_file_or_config_section_makes_a_measurement_stale(tmp_path, monkeypatch):
    (tmp_path / "code").mkdir()
    (tmp_path / "code" / "stage.py").write_text("THRESHOLD = 0.5\n", encoding="utf-8")
    (tmp_path / "code" / "__pycache__").mkdir()
    (tmp_path / "code" / "__pycache__" / "stage.cpython-311.pyc").write_bytes(b"cache")
    monkeypatch.setattr(results_io, "ROOT", tmp_path)
    meta = run_meta("test model", depends=Depends(("code", "gone.py"), ("gate",)))
    assert set(meta["depends"]["files"]) == {"code/stage.py", "gone.py"}, "caches are not dependencies"
    assert meta["depends"]["files"]["gone.py"] == "missing" and "gate" in meta["depends"]["config"]
    assert stale(meta) == []
    (tmp_path / "code" / "__pycache__" / "stage.cpython-311.pyc").write_bytes(b"other cache")
    assert stale(meta) == []
    (tmp_path / "code" / "stage.py").write_text("THRESHOLD = 0.6\n", encoding="utf-8")
    assert stale(meta) == ["file code/stage.py"]
    (tmp_path / "code" / "new.py").write_text("\n", encoding="utf-8")
    assert "file code/new.py" in stale(meta), "a file added to a folder it depends on counts"
    from pipeline import config

    changed = config.GateConfig(confidence_threshold_learned=0.123)
    monkeypatch.setattr(config.PipelineConfig, "__init__", _with_gate(config.PipelineConfig.__init__, changed))
    assert "config gate" in stale(meta)
    assert fingerprint(Depends((), ("validate",)))["config"]["validate"] == \
        run_meta("m", depends=Depends((), ("validate",)))["depends"]["config"]["validate"]


def _with_gate(init, gate):
    def patched(self, *args, **kwargs):
        init(self, *args, **kwargs)
        object.__setattr__(self, "gate", gate)
    return patched
