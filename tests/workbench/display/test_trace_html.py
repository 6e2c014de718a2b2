"""workbench.display.trace_html: a Trace shows itself in Jupyter as one table per stage, coloured, with all text escaped."""

from __future__ import annotations

from bs4 import BeautifulSoup

from pipeline.config import PipelineConfig
from pipeline.engine import Pipeline
from pipeline.trace import (
    Candidate,
    CitationScore,
    ClaimCheck,
    ClosestDocument,
    GateCondition,
    GateTrace,
    GenerationTrace,
    Message,
    RerankScore,
    RerankTrace,
    RetrievalTrace,
    RewriteTrace,
    Source,
    Trace,
    TrustTrace,
    ValidationTrace,
)
from tests.support.jupyter import displayed
from workbench.display.trace_html import EMERALD, ROSE, trace_html

SCRIPT = "<script>alert('x')</script>"
STAGES = ("rewrite", "retrieve", "rerank", "gate", "generate", "validate", "trust")


def hostile_trace() -> Trace:
    """Every stage ran; a <script> in the question, a title, a chunk, the answer, a claim and a reason."""
    chunk = Candidate(chunk_id="doc-a#0", doc_id="doc-a", title=f"Title {SCRIPT}", text=f"Chunk text {SCRIPT}",
                      dense_rank=1, dense_score=0.81234, keyword_rank=2, fused_score=0.0325, fused_rank=1)
    other = Candidate(chunk_id="doc-b#0", doc_id="doc-b", title="Other", text="Other text", dense_rank=2,
                      fused_score=0.0161, fused_rank=2)
    claims = (
        ClaimCheck(text=f"Supported claim {SCRIPT}", markers=(1,), verdict="supported", best_similarity=0.71,
                   similarities=(CitationScore(1, "doc-a#0", 0.71),), closer_source=2, closer_similarity=0.98),
        ClaimCheck(text="Unsupported claim", markers=(2,), verdict="unsupported", best_similarity=0.2,
                   similarities=(CitationScore(2, "doc-b#0", 0.2),)),
        ClaimCheck(text="Claim citing a source never offered", markers=(7,), verdict="unsupported",
                   fabricated_markers=(7,), similarities=(CitationScore(7, "", None),)),
    )
    return Trace(
        question=f"What is {SCRIPT}?", history=(Message("user", "earlier"),),
        rewrite=RewriteTrace(status="rejected", backend="llm:fake", original=f"What is {SCRIPT}?",
                             proposed=f"Sure! {SCRIPT}", query=f"What is {SCRIPT}?",
                             reason=f"opens with a preamble or refusal ({SCRIPT})", llm_calls=1),
        retrieval=RetrievalTrace(status="ran", query=f"What is {SCRIPT}?", dense_hits=2, keyword_hits=1,
                                 candidates=(chunk, other)),
        rerank=RerankTrace(status="ran", model="fake", candidates_in=2, scored=2, candidates=(
            RerankScore("doc-a#0", "doc-a", 0.9123, 1, 1), RerankScore("doc-b#0", "doc-b", 0.1, 2, 2))),
        gate=GateTrace(status="ran", decision="answer", scale="rerank", score=0.9123, threshold=0.45,
                       conditions=(GateCondition("rerank", 0.9123, 0.45, True),), reason="top rerank score >= 0.45"),
        generation=GenerationTrace(status="answered", backend="extractive", answer=f"Answer {SCRIPT} [1][2][7].",
                                   sources=(Source(1, "doc-a#0", "doc-a", f"Title {SCRIPT}"),
                                            Source(2, "doc-b#0", "doc-b", "Other"))),
        validation=ValidationTrace(status="ran", claims=claims, fabricated_markers=(7,), supported=1, unsupported=2,
                                   misattributed=1),
        trust=TrustTrace(status="ran", reported_confidence="HIGH", final_confidence="MEDIUM",
                         rules_fired=("unsupported claim",)),
        answer=f"Answer {SCRIPT} [1][2][7].", confidence="MEDIUM", llm_calls=1, config_hash="abc123",
        corpus_version=3, run_id="RUNID-1234", created_at="2030-01-01T00:00:00Z",
        timings_ms={"retrieve": 12.3456, "total": 40.0})


def _soup(trace: Trace, **kwargs) -> BeautifulSoup:
    return BeautifulSoup(trace_html(trace, **kwargs), "html.parser")


def test_every_stage_appears_in_pipeline_order():
    soup = _soup(hostile_trace())
    assert [d["data-stage"] for d in soup.select("details.wb-stage")] == list(STAGES)


def test_verdicts_are_coloured_supported_emerald_unsupported_and_fabricated_rose():
    soup = _soup(hostile_trace())
    supported = soup.select("span.wb-verdict.wb-supported")
    unsupported = soup.select("span.wb-verdict.wb-unsupported")
    fabricated = soup.select("span.wb-verdict.wb-fabricated")
    assert supported and unsupported and fabricated
    assert all(f"color:{EMERALD}" in s["style"] for s in supported)
    assert all(f"color:{ROSE}" in s["style"] for s in unsupported + fabricated)
    assert "[7]" in soup.select_one(".wb-fabricated").get_text()


def test_a_misattributed_claim_names_the_source_that_states_it():
    validate = _soup(hostile_trace()).select_one('details[data-stage="validate"]').get_text()
    assert f"Supported claim {SCRIPT} → closer to [2] (0.980)" in validate


def test_script_in_question_chunk_title_answer_claim_and_reason_shows_as_text():
    out = trace_html(hostile_trace())
    assert "<script" not in out.lower()
    soup = BeautifulSoup(out, "html.parser")
    assert not soup.find_all("script")
    text = soup.get_text()
    for where in (f"What is {SCRIPT}?", f"Chunk text {SCRIPT}", f"Title {SCRIPT}", f"Answer {SCRIPT}",
                  f"Supported claim {SCRIPT}", f"Sure! {SCRIPT}"):
        assert where in text, where


def test_repr_is_reproducible_no_run_id_timestamp_or_timings_unless_asked():
    trace = hostile_trace()
    html = displayed(trace)["text/html"]
    assert html == trace_html(trace)
    for volatile in ("RUNID-1234", "2030-01-01", "12.3"):
        assert volatile not in html
    assert "12.3" in trace_html(trace, timings=True)
    assert "0.912" in html and "0.9123" not in html.split('data-stage="rerank"')[1].split("</details>")[0]


def test_plain_text_repr_is_one_short_line():
    out = displayed(hostile_trace())["text/plain"]
    assert "\n" not in out and "RUNID" not in out
    assert out.startswith("Trace(") and "answered" in out


def test_a_real_run_renders_every_stage_and_an_abstention_lists_the_closest_documents(demo_store_fake, models):
    cfg = PipelineConfig().with_overrides({"cache.enabled": False})
    pipeline = Pipeline(demo_store_fake, models, cfg, log_runs=False)
    answered = pipeline.ask("What does ERR_TIMEOUT_502 mean?")
    soup = BeautifulSoup(displayed(answered)["text/html"], "html.parser")
    assert [d["data-stage"] for d in soup.select("details.wb-stage")] == list(STAGES)
    assert soup.select("span.wb-verdict")
    abstained = Trace(question="q", gate=GateTrace(
        status="ran", decision="abstain", scale="fused", score=0.0161, threshold=0.03201,
        closest_documents=(ClosestDocument("doc-<b>", "T <i>", "doc-<b>#0", 0.0161, "fused"),)), abstained=True)
    out = displayed(abstained)["text/html"]
    assert "doc-&lt;b&gt;" in out and "T &lt;i&gt;" in out and "abstained" in out


def test_a_fused_scale_gate_shows_the_fourth_decimal_where_rrf_scores_differ():
    gate = GateTrace(status="ran", decision="answer", scale="fused_and_dense", score=0.0325, threshold=0.03201)
    shown = trace_html(Trace(question="q", gate=gate))
    assert "0.0325 vs threshold 0.0320" in shown  # at 3 decimals both read 0.03x and the margin vanishes
