"""The NLI training pairs: (premise, hypothesis, entailment | neutral | contradiction).

Read where it lies: ``../shared/traindata/nli_pool.tsv.gz`` (SNLI dev/test, MNLI dev-matched, TaxiNLI, SICK,
Climate-FEVER, HealthVer; its README gives sources and licences). A pair is a :class:`~workbench.training.data.Pair`
with ``question`` = premise and ``sentence`` = hypothesis, ``label`` the index into :data:`LABELS`.

- **Left out**: SICK (CC BY-NC-SA 3.0, non-commercial) never enters the shipped model (:data:`LEFT_OUT`).
- **Held apart by claim** (never trained on): the claim-evidence sets (Climate-FEVER, HealthVer dev and test; the
  closest to citation support) have their claims hashed, text lower-cased, into :data:`CLAIM_BUCKETS` buckets; every
  evidence pair of a claim in bucket 0 is held apart, so a score on them is a score on claims the model never read.
  The other sources are held apart 1 in :data:`GENERAL_BUCKETS` by premise (SNLI and MNLI write several hypotheses
  per premise: all of a premise's pairs stay on one side).
- **Perturbations** (:func:`perturb`): the pool rarely pairs a sentence with a copy of itself, or with the same
  sentence with one number changed or a negation added or removed, which is what a quoted or lightly reworded
  citation looks like. From premises of the training part (never of the held-apart part, which gets its own for
  validation) three kinds are written, seeded: an identical sentence (entailment), a changed number
  (contradiction) and an inserted or removed negation (contradiction). The kind is the pair's ``source``.
  Only training-pool text is used: never the demo corpus, golden or evaluation data.

Per epoch (:func:`nli_epoch_sample`): every training pair once, shuffled with ``random.Random(seed * 1000 + epoch)``.
"""

from __future__ import annotations

import hashlib
import random
import re
from dataclasses import dataclass
from pathlib import Path

from pipeline.text.sentences import sentence_spans
from workbench.training.data import Pair, read_pairs

NLI_POOL_FILE = "nli_pool.tsv.gz"
LABELS = ("entailment", "neutral", "contradiction")
CLAIM_SOURCES = frozenset({"climate_fever", "healthver_dev", "healthver_test"})
LEFT_OUT = frozenset({"sick"})           # CC BY-NC-SA 3.0: not in a model that may ship commercially
CLAIM_BUCKETS = 4                        # 1 claim in 4 of the claim-evidence sets held apart
GENERAL_BUCKETS = 40                     # 1 premise in 40 of the other sources held apart
PERTURB_PER_KIND = 2000                  # training perturbations of each kind (held apart: a tenth)
MAX_PERTURB_CHARS = 300                  # premises longer than this are not copied into a hypothesis

_NUMBER = re.compile(r"(?<![\w.-])(\d+(?:[.,]\d+)?)(?![\w-])")
_NEGATED = re.compile(r"\b(is|are|was|were|can|could|will|would|should|must|does|do|did|has|have|had) not\b"
                      r"|\b(cannot|can't|isn't|aren't|wasn't|weren't|won't|doesn't|don't|didn't|never)\b", re.I)
_AUXILIARY = re.compile(r"\b(is|are|was|were|can|could|will|would|should|must|has|have|had)\b(?! not)", re.I)
_POSITIVE = {"cannot": "can", "can't": "can", "isn't": "is", "aren't": "are", "wasn't": "was", "weren't": "were",
             "won't": "will", "doesn't": "does", "don't": "do", "didn't": "did", "never": "always"}


@dataclass(frozen=True)
class NLISplit:
    train: tuple[Pair, ...]
    val_claims: tuple[Pair, ...]       # Climate-FEVER / HealthVer pairs of held-apart claims
    val_general: tuple[Pair, ...]      # the other sources' held-apart premises
    val_perturb: tuple[Pair, ...]      # perturbations written from held-apart premises
    left_out: dict[str, int]           # source -> pairs not used (licence)


def _digest(text: str) -> int:
    return int(hashlib.sha1(text.lower().encode("utf-8")).hexdigest()[:8], 16)


def parse_nli_row(row: list[str]) -> Pair | None:
    """One TSV row -> Pair (question = premise, sentence = hypothesis), or None when malformed."""
    if len(row) != 4:
        return None
    source, premise, hypothesis, label = (field.strip() for field in row)
    if label not in LABELS or not premise or not hypothesis or not source:
        return None
    if source in CLAIM_SOURCES:  # one claim id across Climate-FEVER and both HealthVer splits: its text
        group = f"claims:{_digest(hypothesis):08x}"
    else:
        group = f"{source}:{_digest(premise):08x}"
    return Pair(group, source, premise, hypothesis, LABELS.index(label))


def read_nli_pool(path: Path) -> list[Pair]:
    """The NLI pool's rows as pairs; a malformed row is skipped, never fatal."""
    return read_pairs(path, ["source", "premise", "hypothesis", "label"], parse_nli_row, "NLI pool")


def nli_held_apart(pair: Pair) -> str | None:
    """"claims", "general" or None (trained on): a pure function of the pair's group."""
    digest = _digest(pair.group)
    if pair.group.startswith("claims:"):
        return "claims" if digest % CLAIM_BUCKETS == 0 else None
    return "general" if digest % GENERAL_BUCKETS == 0 else None


# -- perturbations -----------------------------------------------------------------------------------------------


def change_number(sentence: str, rng: random.Random) -> str | None:
    """The sentence with one of its numbers replaced by a different one, or None when it has none."""
    matches = list(_NUMBER.finditer(sentence))
    if not matches:
        return None
    m = rng.choice(matches)
    text = m.group(1)
    digits = text.replace(",", "")
    try:
        value = float(digits)
    except ValueError:
        return None
    candidates = [value + 1, value * 2, value + 10, max(0.0, value - 1), value * 10, value / 2]
    new = rng.choice([c for c in candidates if c != value] or [value + 1])
    decimals = len(digits.split(".")[1]) if "." in digits else 0
    replacement = f"{new:.{decimals}f}" if decimals else str(int(round(new)))
    if replacement == text:
        replacement = str(int(round(new)) + 1)
    return sentence[:m.start(1)] + replacement + sentence[m.end(1):]


def flip_negation(sentence: str) -> str | None:
    """The sentence with its first negation removed, or a "not" added after its first auxiliary verb; None when
    it has neither."""
    negated = _NEGATED.search(sentence)
    if negated:
        if negated.group(1):  # "is not" -> "is"
            return sentence[:negated.start()] + negated.group(1) + sentence[negated.end():]
        word = negated.group(2)
        positive = _POSITIVE.get(word.lower(), word)
        if word[0].isupper():
            positive = positive.capitalize()
        return sentence[:negated.start()] + positive + sentence[negated.end():]
    auxiliary = _AUXILIARY.search(sentence)
    if auxiliary is None:
        return None
    return sentence[:auxiliary.end()] + " not" + sentence[auxiliary.end():]


def perturb(premises: list[tuple[str, str]], per_kind: int, seed: int) -> list[Pair]:
    """Identity (entailment), changed-number and flipped-negation (contradiction) pairs from ``(group, premise)``.

    The hypothesis is one sentence of the premise (a citation quotes a sentence of its passage), so the
    premise-hypothesis pair is what the validator sees: passage window, claim."""
    rng = random.Random(seed)
    sentences: list[tuple[str, str, str]] = []
    for group, premise in premises:
        for s, e in sentence_spans(premise):
            text = premise[s:e].strip()
            if 20 <= len(text) <= MAX_PERTURB_CHARS:
                sentences.append((group, premise, text))
    rng.shuffle(sentences)
    out: list[Pair] = []
    counts = {"perturb_identity": 0, "perturb_number": 0, "perturb_negation": 0}
    for group, premise, text in sentences:
        if all(n >= per_kind for n in counts.values()):
            break
        kinds = [k for k, n in counts.items() if n < per_kind]
        kind = kinds[rng.randrange(len(kinds))]
        if kind == "perturb_identity":
            hypothesis, label = text, "entailment"
        elif kind == "perturb_number":
            hypothesis, label = change_number(text, rng), "contradiction"
        else:
            hypothesis, label = flip_negation(text), "contradiction"
        if hypothesis is None or hypothesis == text and label != "entailment":
            continue
        counts[kind] += 1
        out.append(Pair(group, kind, premise, hypothesis, LABELS.index(label)))
    return out


# -- the split ---------------------------------------------------------------------------------------------------


def load_nli_split(data_dir: Path, seed: int = 13, perturb_per_kind: int = PERTURB_PER_KIND,
                   leave_out: frozenset[str] = LEFT_OUT) -> NLISplit:
    pool = read_nli_pool(data_dir / NLI_POOL_FILE)
    left: dict[str, int] = {}
    train: list[Pair] = []
    claims: list[Pair] = []
    general: list[Pair] = []
    for pair in pool:
        if pair.source in leave_out:
            left[pair.source] = left.get(pair.source, 0) + 1
            continue
        side = nli_held_apart(pair)
        (claims if side == "claims" else general if side == "general" else train).append(pair)

    def premises(pairs: list[Pair]) -> list[tuple[str, str]]:
        return sorted({(p.group, p.question) for p in pairs})

    train.extend(perturb(premises(train), perturb_per_kind, seed))
    val_perturb = perturb(premises(claims + general), max(1, perturb_per_kind // 10), seed + 1)
    return NLISplit(tuple(train), tuple(claims), tuple(general), tuple(val_perturb), left)


def nli_epoch_sample(train: tuple[Pair, ...], epoch: int, seed: int) -> list[Pair]:
    """Every training pair once, in an order drawn by ``seed`` and ``epoch``."""
    sample = list(train)
    random.Random(seed * 1000 + epoch).shuffle(sample)
    return sample


def nli_input_files(data_dir: Path) -> list[Path]:
    return [data_dir / NLI_POOL_FILE]
