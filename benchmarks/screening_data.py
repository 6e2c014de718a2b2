"""The labelled sentence set for injection screening (``golden/screening/screening.jsonl``) and its reader.

One document per line: ``{"id", "split": "train" | "held-apart", "class", "lang", "title", "sentences": [{"text",
"label": "instruction" | "benign"}]}``. Five classes carry at least one sentence addressed to whoever answers
(:data:`INJECTED`); three are documentation whose every sentence is benign (:data:`BENIGN`). Whole documents go to one
side of the split, so a classifier trained on ``train`` is measured on documents it never saw
(``golden/screening/README.md`` says how the set was written and split).

:func:`load_screening` reads the file strictly: a line that is not such a document stops the read with one
:class:`ScreeningDataError` naming ``file:line`` and what is wrong, never a bare ``json`` or ``KeyError`` traceback.
Keys beyond the required ones are allowed (keys are added freely, never renamed).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from benchmarks.results_io import ROOT

DATA = ROOT / "golden" / "screening" / "screening.jsonl"
INJECTED = ("report", "conditional", "split", "non_english", "plain_imperative")
BENIGN = ("quoted_discussion", "doc_imperative", "doc_prose")
CLASSES = INJECTED + BENIGN
SPLITS = ("train", "held-apart")
LABELS = ("instruction", "benign")
_FIELDS = ("id", "split", "class", "lang", "title", "sentences")


class ScreeningDataError(ValueError):
    """A line of the screening set that is not a document: the message starts with ``file:line:``."""


@dataclass(frozen=True)
class LabelledSentence:
    text: str
    label: str          # "instruction" | "benign"

    @property
    def instruction(self) -> bool:
        return self.label == "instruction"


@dataclass(frozen=True)
class ScreeningDocument:
    id: str
    split: str          # "train" | "held-apart"
    cls: str            # one of CLASSES (the file's "class")
    lang: str           # ISO 639-1 code of the language the whole document is written in
    title: str
    sentences: tuple[LabelledSentence, ...]

    @property
    def injected(self) -> bool:
        return any(s.instruction for s in self.sentences)


def _text(value, what: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"{what} must be a non-empty string, got {_short(value)}")
    return value


def _one_of(value, allowed: tuple[str, ...], what: str) -> str:
    if value not in allowed:
        raise ValueError(f"{what} must be one of {', '.join(allowed)}, got {_short(value)}")
    return value


def _short(value) -> str:
    text = json.dumps(value, ensure_ascii=True)
    return text if len(text) <= 40 else text[:37] + "..."


def parse_document(line: str) -> ScreeningDocument:
    """One JSONL line as a document; ``ValueError`` saying what is wrong (without the place: the caller adds it)."""
    try:
        raw = json.loads(line)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not JSON ({exc.msg} at column {exc.colno})") from None
    if not isinstance(raw, dict):
        raise ValueError(f"a document is a JSON object, got {type(raw).__name__}")
    missing = [k for k in _FIELDS if k not in raw]
    if missing:
        raise ValueError(f"missing {', '.join(missing)}")
    sentences = raw["sentences"]
    if not isinstance(sentences, list) or not sentences:
        raise ValueError("sentences must be a non-empty list")
    parsed = []
    for n, s in enumerate(sentences, 1):
        if not isinstance(s, dict) or "text" not in s or "label" not in s:
            raise ValueError(f"sentence {n} must be an object with text and label")
        parsed.append(LabelledSentence(_text(s["text"], f"sentence {n} text"),
                                       _one_of(s["label"], LABELS, f"sentence {n} label")))
    return ScreeningDocument(id=_text(raw["id"], "id"), split=_one_of(raw["split"], SPLITS, "split"),
                             cls=_one_of(raw["class"], CLASSES, "class"), lang=_text(raw["lang"], "lang"),
                             title=_text(raw["title"], "title"), sentences=tuple(parsed))


def load_screening(path: Path = DATA) -> tuple[ScreeningDocument, ...]:
    """Every document of the file, in order; blank lines skipped. Raises :class:`ScreeningDataError`
    (``file:line: what``) on the first line that is not a document, or an id seen before."""
    path = Path(path)
    documents: list[ScreeningDocument] = []
    first_line: dict[str, int] = {}
    for number, raw in enumerate(path.read_bytes().split(b"\n"), 1):
        where = f"{path}:{number}"
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise ScreeningDataError(f"{where}: not UTF-8 text") from None
        if not line.strip():
            continue
        try:
            document = parse_document(line)
        except (ValueError, RecursionError) as exc:
            reason = str(exc) if isinstance(exc, ValueError) else "nested too deeply"
            raise ScreeningDataError(f"{where}: {reason}") from None
        if document.id in first_line:
            raise ScreeningDataError(f"{where}: id {_short(document.id)} already used on line "
                                     f"{first_line[document.id]}")
        first_line[document.id] = number
        documents.append(document)
    return tuple(documents)
