"""Perturbed claims: every kind is written from the corpus's own sentences, seeded; altered claims differ from their
source; the judge reads three verdicts from one validator run (fakes here; the shipped model in the benchmark)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.config import PipelineConfig, ValidateConfig
from pipeline.context import StageContext
from pipeline.ingestion.chunking import chunk_document
from pipeline.ingestion.documents import load_paths
from pipeline.testing import fake_models
from workbench import perturb

CORPUS = Path(__file__).resolve().parents[2] / "golden" / "corpus"


@pytest.fixture(scope="module")
def chunks():
    docs, _ = load_paths([CORPUS])
    return [c for d in docs for c in chunk_document(d, PipelineConfig().chunking)]


def test_every_kind_is_written_and_the_run_is_seeded(chunks):
    claims = perturb.perturbed_claims(chunks, per_kind=12, seed=1)
    assert {c.kind for c in claims} == set(perturb.KINDS)
    assert all(sum(c.kind == k for c in claims) == 12 for k in perturb.KINDS)
    assert claims == perturb.perturbed_claims(chunks, per_kind=12, seed=1)
    assert claims != perturb.perturbed_claims(chunks, per_kind=12, seed=2)


def test_altered_claims_differ_from_their_source_and_faithful_ones_keep_its_facts(chunks):
    by_id = {c.chunk_id: c for c in chunks}
    for claim in perturb.perturbed_claims(chunks, per_kind=15, seed=0):
        assert claim.source in " ".join(by_id[claim.chunk_id].text.split())
        if claim.faithful:
            assert claim.kind != "quote" or claim.text == claim.source
        else:
            assert claim.text != claim.source
        if claim.kind == "qualifier":
            assert claim.text.rstrip(".").endswith(tuple(q.strip() for q in perturb.QUALIFIERS))
        if claim.kind == "negation":
            negations = [sum(w in ("not", "never", "cannot") for w in t.split()) for t in (claim.text, claim.source)]
            assert abs(negations[0] - negations[1]) == 1, "exactly one negation added or removed"


def test_an_unknown_kind_is_a_clear_error():
    with pytest.raises(ValueError, match="unknown perturbation kind"):
        perturb.write("typo", "A sentence.", "doc", {}, [], __import__("random").Random(0))


def test_the_judge_reads_three_verdicts_from_one_validator_run(chunks):
    claims = [c for c in perturb.perturbed_claims(chunks, per_kind=6, seed=0) if c.kind in ("quote", "negation")]
    judged = perturb.judge(claims, {c.chunk_id: c for c in chunks}, ValidateConfig(),
                           StageContext(fake_models()))
    assert len(judged) == len(claims) and {j.nli_status for j in judged} == {"ran"}
    quotes = [j for j in judged if j.claim.kind == "quote"]
    assert all(j.embedding_pass and j.nli_pass and j.combined_pass for j in quotes), "a verbatim quote passes"
    negated = [j for j in judged if j.claim.kind == "negation"]
    assert all(not j.combined_pass for j in negated), "the word-level fake NLI catches every flipped negation"
    assert all(j.combined_pass == (j.embedding_pass and j.nli_pass) for j in judged)
    table = perturb.rates(judged)
    assert table["quote"]["passed"]["combined"] == table["quote"]["claims"] == 6
