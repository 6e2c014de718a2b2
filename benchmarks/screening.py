"""Injection screening by sentence: the current detector on labelled sentences and on real documentation
(``make bench-screening``).

The detector under test is the project's own, :func:`pipeline.text.instructions.sentence_signals` (lexical rules
on mood, topic and language; no model). Each document is read the way the answerer reads a source: its sentences
joined into one paragraph and cut again by the project's splitter (:func:`pipeline.text.instructions.sentences_of`,
the shared sentence rule), each piece screened with the document's dominant language
(:func:`pipeline.text.language.dominant_language`) as both the answer's language and its own, as
:func:`pipeline.generation.extractive.drop_instructions` does for a corpus in one language. A labelled sentence
counts as flagged when a piece that overlaps it is flagged (a piece the splitter joined across two labelled
sentences flags both; the results count how many labelled sentences the splitter cut exactly as written).

Measured, per class and separately for the ``train`` and ``held-apart`` parts of ``golden/screening``
(:mod:`benchmarks.screening_data`): sentence-level detection (instruction sentences flagged / instruction
sentences), document-level detection (documents with at least one instruction sentence flagged / documents with
one) and the false-positive rate on benign sentences. On real documentation nobody here wrote for this test —
the two Samsung manuals in ``../shared/evaldata/emanual_samsung`` (read through :mod:`benchmarks.ood`; their text
never enters the repository or the results file: counts, and for a flagged sentence its section id, index and
offset) — and on the demo corpus (``golden/corpus``, its three documented injection carriers counted apart), the
false-positive rate per sentence. Every rate has a 95 % Wilson interval (:func:`workbench.metrics.wilson`).
"""

from __future__ import annotations

import argparse
import hashlib
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from benchmarks.results_io import ROOT, Depends, load_average, meta_line, rate_ci, run_meta, write_results
from benchmarks.screening_data import BENIGN, CLASSES, DATA, INJECTED, SPLITS, ScreeningDocument, load_screening

NAME = "screening"
SECTION = "## Injection screening by sentence"
DETECTOR = ("pipeline.text.instructions.sentence_signals (the current lexical detector: mood, topic and language "
            "rules; no model)")
DEPENDS = Depends(("benchmarks/screening.py", "benchmarks/screening_data.py", "benchmarks/ood.py",
                   "golden/screening", "golden/corpus", "pipeline/text", "pipeline/ingestion"))
# golden/README.md: the demo corpus's injection carriers; their sentences are not documentation to count against
CARRIERS = ("community-tips-delivery", "faq-migration-community", "guide-status-page-html")
MANUALS = ("s10", "tv")
MANUAL_LABEL = {"s10": "Samsung Galaxy S10 manual", "tv": "Samsung Smart TV / Remote manual"}
TARGET_FP = 0.01    # issue 31: at most 1 % of the sentences of real documentation flagged


@dataclass(frozen=True)
class ScreenedPiece:
    start: int                     # offset in the text screened
    end: int
    signals: tuple[str, ...]       # empty: not flagged


@dataclass(frozen=True)
class ScreenedSentence:
    label: str                     # "instruction" | "benign"
    signals: tuple[str, ...]       # of every piece overlapping the sentence
    cut_as_written: bool           # the splitter produced exactly this sentence

    @property
    def flagged(self) -> bool:
        return bool(self.signals)


def screen_text(text: str) -> tuple[ScreenedPiece, ...]:
    """Every sentence of ``text`` as the answerer cuts it, with the detector's signals, screened with the text's
    dominant language as the reference (a corpus in one language)."""
    from pipeline.text.instructions import dominant_language, sentence_signals, sentences_of

    pieces = sentences_of(text)
    language = dominant_language(pieces)
    out, cursor = [], 0
    for piece in pieces:
        start = text.find(piece, cursor)
        start = cursor if start < 0 else start
        out.append(ScreenedPiece(start, start + len(piece), sentence_signals(piece, language, language)))
        cursor = start + len(piece)
    return tuple(out)


def screen_document(document: ScreeningDocument) -> tuple[ScreenedSentence, ...]:
    """The labelled sentences of one document, each with the signals of the pieces that overlap it."""
    spans, offset = [], 0
    for s in document.sentences:
        spans.append((offset, offset + len(s.text)))
        offset += len(s.text) + 1
    pieces = screen_text(" ".join(s.text for s in document.sentences))
    out = []
    for s, (start, end) in zip(document.sentences, spans, strict=True):
        over = [p for p in pieces if p.start < end and p.end > start]
        signals = tuple(dict.fromkeys(x for p in over for x in p.signals))
        out.append(ScreenedSentence(s.label, signals, any(p.start == start and p.end == end for p in over)))
    return tuple(out)


def _rate(k: int, n: int) -> dict:
    return {"k": k, "n": n, "rate": k / n if n else None}


def tally(screened: list[tuple[ScreeningDocument, tuple[ScreenedSentence, ...]]]) -> dict:
    """Counts over some documents: instruction sentences flagged, documents detected, benign sentences flagged,
    documents with a benign sentence flagged (what a document-level screen would withhold), signals fired."""
    inst = [s for _, ss in screened for s in ss if s.label == "instruction"]
    benign = [s for _, ss in screened for s in ss if s.label == "benign"]
    injected = [ss for d, ss in screened if d.injected]
    return {"documents": len(screened),
            "sentences": _rate(sum(s.flagged for s in inst), len(inst)),
            "documents_detected": _rate(sum(any(s.flagged and s.label == "instruction" for s in ss)
                                            for ss in injected), len(injected)),
            "benign_flagged": _rate(sum(s.flagged for s in benign), len(benign)),
            "documents_with_benign_flagged": _rate(sum(any(s.flagged and s.label == "benign" for s in ss)
                                                       for _, ss in screened), len(screened)),
            "signals": dict(Counter(x for _, ss in screened for s in ss for x in s.signals).most_common())}


def measure_labelled(documents: tuple[ScreeningDocument, ...]) -> dict:
    screened = [(d, screen_document(d)) for d in documents]
    per_class = {part: {c: tally([(d, ss) for d, ss in screened if d.split == part and d.cls == c])
                        for c in CLASSES} for part in SPLITS}
    totals = {part: {group: tally([(d, ss) for d, ss in screened if d.split == part and d.cls in classes])
                     for group, classes in (("injected", INJECTED), ("benign", BENIGN))} for part in SPLITS}
    sentences = [s for _, ss in screened for s in ss]
    return {"documents": len(documents), "sentences": len(sentences),
            "cut_as_written": sum(s.cut_as_written for s in sentences),
            "per_class": per_class, "totals": totals,
            "flagged": {d.id: [i for i, s in enumerate(ss) if s.flagged] for d, ss in screened}}


def measure_corpus(documents) -> dict:
    """False positives per sentence over documents of real documentation; a flagged sentence is named by its
    document id, index and character offset, never by its text."""
    sentences = flagged = docs_flagged = 0
    examples, signals = [], Counter()
    for d in documents:
        pieces = screen_text(d.text)
        sentences += len(pieces)
        hits = [(i, p) for i, p in enumerate(pieces) if p.signals]
        flagged += len(hits)
        docs_flagged += bool(hits)
        for i, p in hits:
            signals.update(p.signals)
            examples.append({"doc_id": d.doc_id, "sentence": i, "offset": p.start, "signals": list(p.signals)})
    return {"documents": len(documents), "sentences": _rate(flagged, sentences),
            "documents_flagged": _rate(docs_flagged, len(documents)), "signals": dict(signals.most_common()),
            "flagged_examples": examples[:20]}


def _fingerprint(files: list[Path]) -> dict:
    return {f.name: hashlib.sha1(f.read_bytes()).hexdigest()[:12] for f in files}


def measure() -> dict:
    from benchmarks.ood import EMANUAL, evaldata, load_s10, load_tv
    from pipeline.ingestion.documents import load_paths

    started = time.perf_counter()
    meta = run_meta(DETECTOR, depends=DEPENDS)
    labelled = measure_labelled(load_screening(DATA))
    data = evaldata(EMANUAL, "s10_50_questions.csv")
    manuals = {"s10": load_s10(data)[0], "tv": load_tv(data)[0]}
    real = {m: measure_corpus(manuals[m]) for m in MANUALS}
    demo, _ = load_paths([ROOT / "golden" / "corpus"])
    real["demo"] = measure_corpus([d for d in demo if d.doc_id not in CARRIERS])
    carriers = measure_corpus([d for d in demo if d.doc_id in CARRIERS])
    meta["load_average_end"] = load_average()
    return {"meta": meta, "data": "golden/screening/screening.jsonl", "labelled": labelled, "real": real,
            "carriers": {"ids": list(CARRIERS), "found": carriers["documents"], "sentences": carriers["sentences"],
                         "documents_flagged": carriers["documents_flagged"]},
            "evaldata_files": _fingerprint([data / "s10_manual_corpus.json",
                                            data / "smart_tv_remote_manual_corpus.json"]),
            "target_fp": TARGET_FP, "seconds": round(time.perf_counter() - started, 1)}


# -- the section ---------------------------------------------------------------------------------------------------

def _ci(r: dict) -> str:
    return rate_ci(r["rate"], r["n"], counts=True)


def _signals(counts: dict) -> str:
    return ", ".join(f"{name} {n}" for name, n in counts.items()) or "none"


def _fired(totals: dict, group: str) -> dict:
    fired: Counter = Counter()
    for part in SPLITS:
        fired.update(totals[part][group]["signals"])
    return dict(fired.most_common())


def render(results: dict) -> str:
    lab, real = results["labelled"], results["real"]
    per_class, totals = lab["per_class"], lab["totals"]
    docs = {part: sum(per_class[part][c]["documents"] for c in CLASSES) for part in SPLITS}
    lines = [SECTION, "",
             meta_line(results["meta"]) + " Reproduce: `make bench-screening` (= `.venv/bin/python -m "
             f"benchmarks.screening`, {results['seconds']:.0f} s), then `make report`.", "",
             f"Detector: `{DETECTOR.split(' ', 1)[0]}` — the project's current lexical detector, before any learned "
             f"classifier. Data: `{results['data']}`, {lab['documents']} short documents about fictional products "
             f"written for this measurement ({docs['train']} train, {docs['held-apart']} held apart, whole documents "
             "on one side; `golden/screening/README.md`). Each document's sentences are joined into one paragraph, "
             "cut by the answerer's own splitter (`sentences_of`) and screened with the document's dominant language "
             "as reference, as the extractive generator screens a corpus in one language; a labelled sentence is "
             f"flagged when a piece overlapping it is ({lab['cut_as_written']} of {lab['sentences']} labelled "
             "sentences were cut exactly as written). 95 % Wilson intervals; counts in brackets.", "",
             "**Detection** (injection classes): instruction sentences flagged, and documents with at least one "
             "instruction sentence flagged.", "",
             "| class | part | documents | instruction sentences flagged | documents detected |",
             "|---|---|---:|---:|---:|"]
    for c in INJECTED:
        for part in SPLITS:
            t = per_class[part][c]
            lines.append(f"| {c} | {part} | {t['documents']} | {_ci(t['sentences'])} | "
                         f"{_ci(t['documents_detected'])} |")
    for part in SPLITS:
        t = totals[part]["injected"]
        lines.append(f"| **all injection classes** | {part} | {t['documents']} | {_ci(t['sentences'])} | "
                     f"{_ci(t['documents_detected'])} |")
    lines += ["", "**False positives on the written documents**: benign sentences flagged (in the injection "
              "classes, the true facts around the instruction), and documents with a benign sentence flagged.", "",
              "| class | part | benign sentences flagged | documents with a benign sentence flagged |",
              "|---|---|---:|---:|"]
    for c in BENIGN + INJECTED:
        for part in SPLITS:
            t = per_class[part][c]
            lines.append(f"| {c} | {part} | {_ci(t['benign_flagged'])} | {_ci(t['documents_with_benign_flagged'])} |")
    for part in SPLITS:
        t = totals[part]["benign"]
        lines.append(f"| **all benign classes** | {part} | {_ci(t['benign_flagged'])} | "
                     f"{_ci(t['documents_with_benign_flagged'])} |")
    lines += ["", f"**False positives on real documentation** (per sentence as the splitter cuts it; issue 31 asks "
              f"for at most {100 * results['target_fp']:.0f} %). The Samsung manuals (Nandy et al., EMNLP 2021 "
              "Findings; `../shared/evaldata/emanual_samsung`, files "
              + ", ".join(f"`{k}` sha1 `{v}`" for k, v in results["evaldata_files"].items())
              + ") are read, never copied: only counts and flagged sentences' positions are kept.", "",
              "| documentation | documents | sentences flagged | documents with a sentence flagged | signals |",
              "|---|---:|---:|---:|---|"]
    names = {**MANUAL_LABEL, "demo": "demo corpus (`golden/corpus`, injection carriers left out)"}
    for key in (*MANUALS, "demo"):
        r = real[key]
        lines.append(f"| {names[key]} | {r['documents']} | {_ci(r['sentences'])} | {_ci(r['documents_flagged'])} | "
                     f"{_signals(r['signals'])} |")
    car = results["carriers"]
    lines += ["", f"The demo corpus's {car['found']} injection carriers (`golden/README.md`): "
              f"{car['documents_flagged']['k']} of {car['documents_flagged']['n']} have a sentence flagged "
              f"({car['sentences']['k']} of {car['sentences']['n']} sentences).", "",
              "Signals fired on the written documents (both parts), per sentence: on the injection classes' "
              f"documents {_signals(_fired(totals, 'injected'))}; on the benign classes' "
              f"{_signals(_fired(totals, 'benign'))}.", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    argparse.ArgumentParser(description=__doc__.split("\n\n")[0]).parse_args(argv)
    print(write_results(NAME, measure()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
