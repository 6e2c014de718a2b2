"""Model checkpoints built for tests from the packaged weights (no hub)."""

from __future__ import annotations

from pathlib import Path

SEED = 20261202


def build_untrained_cross_encoder(dest: Path, seed: int = SEED) -> Path:
    """all-MiniLM-L6-v2's encoder + a seeded, untrained 1-logit head, saved as a transformers checkpoint: the
    architecture and cost of cross-encoder/ms-marco-MiniLM-L-6-v2 (a passage cross-encoder from the hub), whose
    scores mean nothing — enough to test the passage cross-encoder path and its int8 export offline."""
    if (dest / "config.json").exists():
        return dest
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from pipeline.models.resolve import resolve_model

    src = resolve_model("sentence-transformers/all-MiniLM-L6-v2").path
    torch.manual_seed(seed)
    model = AutoModelForSequenceClassification.from_pretrained(str(src), num_labels=1)
    dest.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(dest))
    AutoTokenizer.from_pretrained(str(src)).save_pretrained(str(dest))
    return dest
