"""The golden set (golden/golden.jsonl) is well formed and consistent with the demo corpus.

Checks the JSONL shape from docs/ARCHITECTURE.md ("Golden files"), the answerable/unanswerable split the issue asks for,
that every expected document exists in golden/corpus (and is not the retracted advisory), and the minimum
count per tag. Re-run after any edit to golden/corpus: a renamed or removed document fails here.
"""

from __future__ import annotations

import collections
import json
from pathlib import Path

import pytest

from pipeline.ingestion.documents import load_paths

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "golden" / "golden.jsonl"
CORPUS = ROOT / "golden" / "corpus"

KEYS = {"id", "question", "history", "answerable", "expected_doc_ids", "expected_answer", "tags"}
TOPIC_TAGS = {"error-code", "how-to", "config", "release-notes", "faq", "api", "concept", "troubleshooting",
              "cluster", "security", "storage", "kb", "advisory"}
INJECTION_DOCS = {"community-tips-delivery", "faq-migration-community", "guide-status-page-html"}
INJECTED_TOKEN = "hrt_admin_4f9Kc2Qx7Lm1Vb8Zt3Nw6Rp0"  # the fake admin token hidden in guide-status-page-html
MINIMUM_PER_TAG = {"hard-unanswerable": 50, "multi-turn": 30, "identifier": 20, "version-conflict": 15,
                   "injection": 1}


@pytest.fixture(scope="module")
def cases() -> list[dict]:
    lines = GOLDEN.read_text(encoding="utf-8").splitlines()
    out = []
    for number, line in enumerate(lines, 1):
        assert line.strip(), f"line {number} is empty"
        record = json.loads(line)
        assert isinstance(record, dict), f"line {number} is not a JSON object"
        out.append(record)
    return out


@pytest.fixture(scope="module")
def corpus() -> dict[str, bool]:
    """doc_id -> retracted, for every document the loader finds in the demo corpus."""
    documents, problems = load_paths([CORPUS])
    assert not problems, problems
    return {d.doc_id: d.retracted for d in documents}


def _tags(cases, tag):
    return [c for c in cases if tag in c["tags"]]


def test_every_line_has_exactly_the_design_keys_and_types(cases):
    for c in cases:
        assert set(c) == KEYS, c.get("id")
        assert isinstance(c["id"], str) and c["id"]
        assert isinstance(c["question"], str) and c["question"].strip(), c["id"]
        assert isinstance(c["history"], list), c["id"]
        assert isinstance(c["answerable"], bool), c["id"]
        assert isinstance(c["expected_doc_ids"], list), c["id"]
        assert all(isinstance(d, str) and d for d in c["expected_doc_ids"]), c["id"]
        assert c["expected_answer"] is None or isinstance(c["expected_answer"], str), c["id"]
        assert isinstance(c["tags"], list) and c["tags"], c["id"]
        assert all(isinstance(t, str) and t for t in c["tags"]), c["id"]
        assert len(set(c["tags"])) == len(c["tags"]), c["id"]


def test_ids_are_unique_and_numbered(cases):
    ids = [c["id"] for c in cases]
    assert len(set(ids)) == len(ids)
    assert ids == [f"g{n:03d}" for n in range(1, len(cases) + 1)]


def test_three_hundred_cases_one_hundred_unanswerable(cases):
    assert len(cases) == 300
    assert sum(not c["answerable"] for c in cases) == 100


def test_answerable_cases_name_documents_and_an_answer(cases):
    for c in (c for c in cases if c["answerable"]):
        assert c["expected_doc_ids"], c["id"]
        assert len(set(c["expected_doc_ids"])) == len(c["expected_doc_ids"]), c["id"]
        assert c["expected_answer"] and c["expected_answer"].strip(), c["id"]


MAX_EXPECTED_WORDS = 60   # a short fact, value or a few steps: what workbench/correctness.py can score


def test_expected_answers_are_specific_enough_to_score(cases):
    """Correctness scores an answer by the expected answer's content tokens and key facts (numbers, versions,
    identifiers): an expected answer must be short and say something the question does not, or every answer
    that restates the question would score."""
    from pipeline.text.tokenize import tokenize
    from workbench.correctness import key_facts

    vague = []
    for c in (c for c in cases if c["answerable"]):
        expected = c["expected_answer"]
        new_tokens = set(tokenize(expected)) - set(tokenize(c["question"]))
        if len(expected.split()) > MAX_EXPECTED_WORDS or (len(new_tokens) < 3 and not key_facts(expected)):
            vague.append(c["id"])
    assert vague == [], f"expected answers too long or too vague to score: {vague}"


def test_unanswerable_cases_have_no_documents_and_no_answer(cases):
    for c in (c for c in cases if not c["answerable"]):
        assert c["expected_doc_ids"] == [], c["id"]
        assert c["expected_answer"] is None, c["id"]
        assert {"hard-unanswerable", "off-topic"} & set(c["tags"]), c["id"]


def test_expected_documents_exist_in_the_corpus_and_none_is_retracted(cases, corpus):
    for c in cases:
        for doc_id in c["expected_doc_ids"]:
            assert doc_id in corpus, f"{c['id']}: {doc_id} is not in golden/corpus"
            assert not corpus[doc_id], f"{c['id']}: {doc_id} is retracted and cannot be an expected document"


def test_tag_counts_meet_the_minimums(cases):
    counts = collections.Counter(t for c in cases for t in c["tags"])
    for tag, minimum in MINIMUM_PER_TAG.items():
        assert counts[tag] >= minimum, f"{tag}: {counts[tag]} < {minimum}"
    assert counts["hard-unanswerable"] >= sum(not c["answerable"] for c in cases) / 2


def test_tags_agree_with_answerability(cases):
    for tag in ("hard-unanswerable", "off-topic", "retracted"):
        assert all(not c["answerable"] for c in _tags(cases, tag)), tag
    for tag in ("identifier", "version-conflict", "injection"):
        assert all(c["answerable"] for c in _tags(cases, tag)), tag
    for c in cases:
        assert not {"hard-unanswerable", "off-topic"} <= set(c["tags"]), c["id"]
        if "off-topic" not in c["tags"]:
            assert TOPIC_TAGS & set(c["tags"]), f"{c['id']} has no topic tag"


def test_version_conflicts_cite_more_than_one_document(cases):
    for c in _tags(cases, "version-conflict"):
        assert len(c["expected_doc_ids"]) >= 2, c["id"]


def test_injection_cases_target_the_injection_documents_and_never_echo_the_injection(cases):
    for c in _tags(cases, "injection"):
        assert INJECTION_DOCS & set(c["expected_doc_ids"]), c["id"]
    for c in cases:
        assert INJECTED_TOKEN not in (c["expected_answer"] or ""), c["id"]


def test_multi_turn_cases_have_a_valid_history_and_the_others_none(cases):
    for c in cases:
        history = c["history"]
        if "multi-turn" not in c["tags"]:
            assert history == [], c["id"]
            continue
        assert history, c["id"]
        assert len(history) % 2 == 0 and len(history) <= 6, c["id"]
        for index, turn in enumerate(history):
            assert set(turn) == {"role", "content"}, c["id"]
            assert turn["role"] == ("user" if index % 2 == 0 else "assistant"), c["id"]
            assert isinstance(turn["content"], str) and turn["content"].strip(), c["id"]
