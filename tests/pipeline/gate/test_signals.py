"""The gate's evidence signals, the learned rule, and the plain-language abstention cases."""

from __future__ import annotations

import dataclasses
import json
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.config import GateConfig, PipelineConfig
from pipeline.gate import learned, signals
from pipeline.gate import stage as gate
from pipeline.trace import Candidate, MatchedTerm, RerankTrace, RetrievalTrace, Trace, WindowScore

SKIPPED = RerankTrace(status="skipped", reason="cross-encoder unavailable")


def _cand(chunk_id, text, fused_rank, fused_score, dense_rank=None, dense_score=None, keyword_rank=None,
          keyword_score=None, **kw):
    return Candidate(chunk_id=chunk_id, doc_id=chunk_id.split("#")[0], title="", text=text, fused_rank=fused_rank,
                     fused_score=fused_score, dense_rank=dense_rank, dense_score=dense_score,
                     keyword_rank=keyword_rank, keyword_score=keyword_score, **kw)


def _retrieval(query, candidates, idf, rrf_k=60, windows=()):
    from pipeline.text.tokenize import tokenize

    return RetrievalTrace(status="ran", query=query, query_terms=tuple(tokenize(query)), rrf_k=rrf_k,
                          candidates=tuple(candidates), query_idf=idf, window_scores=tuple(windows),
                          window_status="ran" if windows else "none")


ANSWERED = _retrieval(
    "What does ERR_TIMEOUT_502 mean in v3.1?",
    [_cand("a#0", "ERR_TIMEOUT_502 means the endpoint did not respond in v3.1 within timeout_ms.", 1, 2 / 61,
           dense_rank=1, dense_score=0.71, keyword_rank=1, keyword_score=12.0),
     _cand("b#0", "Retries back off exponentially.", 2, 1 / 62, dense_rank=2, dense_score=0.52)],
    idf={"err_timeout_502": 5.0, "err": 1.0, "timeout": 2.0, "502": 3.0, "mean": 0.5, "v3.1": 4.0, "v3": 0.5,
         "1": 0.5},
    windows=[WindowScore("a#0", 0.83, "ERR_TIMEOUT_502 means ...")])


def test_signals_of_a_run_whose_top_passage_states_the_answer():
    s = signals.compute(ANSWERED, SKIPPED)
    assert s.window == 0.83 and s.dense == 0.71 and s.dense_margin == pytest.approx(0.19)
    assert s.fused_norm == pytest.approx(1.0)  # first on both legs: the largest fused score there is
    assert s.critical_terms == ("err_timeout_502", "v3.1") and s.missing_critical == () and s.critical == 1.0
    assert s.coverage == pytest.approx(1.0) and s.missing_terms == ()
    assert s.bm25 == pytest.approx(12.0 / sum(ANSWERED.query_idf[t] for t in ANSWERED.query_terms))
    assert s.rerank is None


def test_a_missing_version_lowers_critical_and_coverage_by_its_idf():
    other = dataclasses.replace(ANSWERED, query="What does ERR_TIMEOUT_502 mean in v4.2?",
                                query_terms=("err_timeout_502", "err", "timeout", "502", "mean", "v4.2", "v4", "2"),
                                query_idf={**ANSWERED.query_idf, "v4.2": 6.0, "v4": 1.0, "2": 0.5})
    s = signals.compute(other, SKIPPED)
    assert s.missing_critical == ("v4.2",) and s.critical == 0.5
    assert set(s.missing_terms) == {"v4.2", "v4", "2"}
    mass = sum(other.query_idf[t] for t in other.query_terms)
    assert s.coverage == pytest.approx((mass - 7.5) / mass)


def test_fused_norm_keeps_its_meaning_when_k_changes():
    for k in (10, 60, 100):
        top = _cand("a#0", "x", 1, 2 / (k + 1), dense_rank=1, dense_score=0.5, keyword_rank=1, keyword_score=1.0)
        one_leg = _cand("a#0", "x", 1, 1 / (k + 1), dense_rank=1, dense_score=0.5)
        assert signals.compute(_retrieval("x", [top], {"x": 1.0}, k), SKIPPED).fused_norm == pytest.approx(1.0)
        assert signals.compute(_retrieval("x", [one_leg], {"x": 1.0}, k), SKIPPED).fused_norm == pytest.approx(0.5)


def test_the_top_candidates_are_each_legs_first_five_whatever_the_fused_order():
    cands = [_cand(f"d{i}#0", "alpha", i, 1 / (60 + i), dense_rank=i, dense_score=0.5) for i in range(1, 8)]
    cands.append(_cand("k#0", "beta", 8, 1 / 61, keyword_rank=1, keyword_score=3.0))
    tops = signals.top_candidates(tuple(cands))
    assert [c.chunk_id for c in tops] == ["d1#0", "d2#0", "d3#0", "d4#0", "d5#0", "k#0"]
    # beta is only in the keyword leg's first chunk, ranked 8th by fusion: it still counts as covered
    s = signals.compute(_retrieval("alpha beta", cands, {"alpha": 1.0, "beta": 3.0}), SKIPPED)
    assert s.missing_terms == () and s.coverage == pytest.approx(3 / 4)  # no single passage has both


def test_no_candidates_no_signals():
    s = signals.compute(RetrievalTrace(status="ran", query="v2 of Foo"), SKIPPED)
    assert (s.window, s.coverage, s.dense, s.fused_norm) == (None, None, None, None)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=120))
def test_critical_terms_never_fail_and_are_lowercase_words_of_the_question(question):
    terms = signals.critical_terms(question)
    assert len(terms) == len(set(terms))
    for t in terms:
        assert t and t == t.lower() and t in question.lower()


@pytest.mark.parametrize("question, expected", [
    ("How do I set delivery.timeout_ms?", ("delivery.timeout_ms",)),
    ("Does Harbor Relay 2.4 support SAML?", ("2.4", "harbor", "relay", "saml")),
    ("what is a webhook", ()),
    ("Why does harborctl return exit code 3", ("3",)),
])
def test_critical_terms_are_identifiers_numbers_versions_and_names(question, expected):
    assert set(signals.critical_terms(question)) == set(expected)


# -- the learned rule --------------------------------------------------------------------------------------

def test_contributions_add_up_to_the_recorded_probability():
    cfg = GateConfig()
    g = gate.run(ANSWERED, SKIPPED, cfg)
    assert g.scale == "learned" and [c.name for c in g.contributions] == ["intercept", *learned.FEATURES]
    logit = sum(c.contribution for c in g.contributions)
    assert g.score == pytest.approx(1 / (1 + math.exp(-logit)))
    window = next(c for c in g.contributions if c.name == "window")
    assert window.value == 0.83 and window.contribution == pytest.approx(0.83 * cfg.learned_window)


def test_a_missing_window_is_imputed_by_the_dense_cosine_and_marked():
    no_windows = dataclasses.replace(ANSWERED, window_scores=())
    g = gate.run(no_windows, SKIPPED, GateConfig())
    window = next(c for c in g.contributions if c.name == "window")
    assert window.imputed and window.value == 0.71


def test_coefficients_change_the_decision_and_round_trip_through_json():
    strict = GateConfig(learned_intercept=-100.0)
    assert gate.run(ANSWERED, SKIPPED, strict).decision == "abstain"
    assert gate.run(ANSWERED, SKIPPED, GateConfig(learned_intercept=100.0)).decision == "answer"
    cfg = PipelineConfig().with_overrides(["gate.learned_window=2.5", "gate.confidence_threshold_learned=0.7"])
    again = PipelineConfig.from_dict(json.loads(json.dumps(cfg.to_dict())))
    assert again.gate.learned_window == 2.5 and again.gate.confidence_threshold_learned == 0.7


def test_fit_separates_the_classes_it_is_shown():
    rng = np.random.default_rng(0)
    n = 200
    y = rng.random(n) < 0.6
    x = rng.random((n, len(learned.FEATURES))) * 0.3
    x[:, 1] += np.where(y, 0.6, 0.1)   # coverage carries the label
    intercept, coefs = learned.fit(x, y)
    assert coefs[1] > 0 and abs(coefs[1]) == max(abs(coefs))
    p = learned.probability(x, intercept, coefs)
    assert p[y].mean() > 0.8 and p[~y].mean() < 0.2
    with pytest.raises(ValueError, match="both answerable and unanswerable"):
        learned.fit(x, np.ones(n, dtype=bool))


def test_the_l2_strength_chosen_by_cross_validation_shrinks_noise_harder_than_signal():
    rng = np.random.default_rng(1)
    n = 200
    y = rng.random(n) < 0.5
    noise = rng.normal(size=(n, len(learned.FEATURES)))
    signal = noise.copy()
    signal[:, 1] += np.where(y, 1.5, -1.5)
    on_noise, on_signal = learned.choose_l2(noise, y), learned.choose_l2(signal, y)
    assert on_noise in learned.L2_GRID and on_signal in learned.L2_GRID
    assert on_noise > on_signal, "labels the signals do not predict call for the strongest shrinkage"


# -- stored traces and the plain-language reason ------------------------------------------------------------

def test_a_trace_stored_before_the_signals_still_loads_and_replays():
    stored = json.loads(Trace(question="q", retrieval=ANSWERED, rerank=SKIPPED,
                              gate=gate.run(ANSWERED, SKIPPED, GateConfig())).to_json())
    for key in ("query_idf", "window_scores", "window_status"):
        del stored["retrieval"][key]
    for key in ("signals", "contributions", "case", "plain_reason"):
        del stored["gate"][key]
    old = Trace.from_json(json.dumps(stored))
    g = gate.replay(old, GateConfig())
    assert g.signals.window is None and g.signals.bm25 is None and g.signals.dense == 0.71
    assert g.scale == "learned" and next(c for c in g.contributions if c.name == "window").imputed


def test_each_abstention_says_which_case_it_is_first():
    never = GateConfig(confidence_threshold_learned=1.0)
    on_topic = gate.run(ANSWERED, SKIPPED, never)
    assert on_topic.case == "on-topic" and on_topic.plain_reason == gate.CASES["on-topic"]

    off = _retrieval("sourdough rye starter", [_cand("a#0", "Retries back off exponentially.", 1, 1 / 61,
                                                     dense_rank=1, dense_score=0.12)],
                     {"sourdough": 6.0, "rye": 6.0, "starter": 4.0})
    g = gate.run(off, SKIPPED, GateConfig())
    assert g.decision == "abstain" and g.case == "off-topic" and "Nothing in the documents" in g.plain_reason

    retracted = dataclasses.replace(ANSWERED, candidates=(dataclasses.replace(
        ANSWERED.candidates[0], superseded_by=("a-v2#0",), superseded_reason="retracted"), *ANSWERED.candidates[1:]))
    g = gate.run(retracted, SKIPPED, never)
    assert g.case == "retracted" and "retracted or superseded" in g.plain_reason

    g = gate.run(RetrievalTrace(status="failed", reason="index down"), SKIPPED, GateConfig())
    assert g.case == "no-retrieval" and g.plain_reason

    answered = gate.run(ANSWERED, SKIPPED, GateConfig(confidence_threshold_learned=0.0))
    assert answered.decision == "answer" and answered.case == "" and answered.plain_reason == ""


def test_matched_terms_are_not_needed_for_coverage():
    # coverage reads the candidates' text, so a dense-only hit that contains the terms still covers them
    r = _retrieval("alpha", [_cand("a#0", "alpha here", 1, 1 / 61, dense_rank=1, dense_score=0.4,
                                   matched_terms=(MatchedTerm("zzz", 1, 1, 1, 1),))], {"alpha": 2.0})
    assert signals.compute(r, SKIPPED).coverage == 1.0


# -- questions about a retracted document ----------------------------------------------------------------

RETRACTED = {"advisory-2-5": ("RETRACTED advisory HRA-2024-03", frozenset(
    {"retracted", "advisory", "hra-2024-03", "hra", "2024", "03", "dlq", "entries", "lost", "restart", "2.5.0"}))}
LIVE = (_cand("notes#0", "Release notes for 2.5.0: DLQ entries survive a restart.", 1, 2 / 61, dense_rank=1,
              dense_score=0.6, keyword_rank=1, keyword_score=8.0),)


def test_a_question_naming_what_only_a_retracted_document_holds_matches_it():
    assert signals.retracted_matches("When was advisory HRA-2024-03 retracted?", LIVE, RETRACTED) == ("advisory-2-5",)
    # what it names is in the live passages too: nothing to say about retraction
    assert signals.retracted_matches("Do DLQ entries survive a restart in 2.5.0?", LIVE, RETRACTED) == ()
    # no critical term at all: ordinary words never point at a retracted document
    assert signals.retracted_matches("when were entries lost after a restart", LIVE, RETRACTED) == ()
    # a critical term no retracted document holds either
    assert signals.retracted_matches("What is advisory HRA-2025-11?", LIVE, RETRACTED) == ()
    assert signals.retracted_matches("When was advisory HRA-2024-03 retracted?", LIVE, {}) == ()


@given(st.text(max_size=120))
def test_retracted_matches_only_ever_names_retracted_documents(query):
    assert set(signals.retracted_matches(query, LIVE, RETRACTED)) <= set(RETRACTED)


def test_the_abstention_names_the_retracted_document_the_question_is_about():
    trace = dataclasses.replace(_retrieval("When was advisory HRA-2024-03 retracted?", LIVE,
                                           {"hra-2024-03": 6.0, "advisory": 2.0, "retracted": 3.0}),
                                retracted_matches=("advisory-2-5",))
    g = gate.run(trace, SKIPPED, GateConfig(confidence_threshold_learned=1.0))
    assert g.case == "retracted" and "advisory-2-5" in g.plain_reason and "retracted document" in g.plain_reason
    again = Trace.from_json(Trace(question="q", retrieval=trace, gate=g).to_json())
    assert again.retrieval.retracted_matches == ("advisory-2-5",) and gate.replay(again, GateConfig(
        confidence_threshold_learned=1.0)).case == "retracted"
