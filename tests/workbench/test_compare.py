"""workbench.compare: the diff the Compare page highlights (config, rewrite, ranks, gate, claim verdicts)."""

from __future__ import annotations

import dataclasses

from pipeline.config import PipelineConfig
from pipeline.trace import Candidate, ClaimCheck, GateTrace, RerankScore, RerankTrace, RetrievalTrace, RewriteTrace
from tests.support.traces import answered_trace
from workbench.compare import config_changes, diff_traces, rank_moves


def _ranked(trace, chunk_ids):
    cands = tuple(Candidate(chunk_id=c, doc_id=c.split("#")[0], title=c, text=c, fused_rank=i + 1)
                  for i, c in enumerate(chunk_ids))
    return dataclasses.replace(trace, retrieval=RetrievalTrace(status="ran", candidates=cands),
                               rerank=RerankTrace(status="skipped"))


def test_identical_runs_have_nothing_to_report():
    a = answered_trace()
    diff = diff_traces(a, a)
    assert diff.summary() == []
    assert not diff.gate_changed and not diff.rewrite_changed and not diff.answer_changed
    assert all(m.movement == "same" for m in diff.rank_moves)


def test_config_changes_lists_only_the_keys_that_differ():
    a = PipelineConfig()
    b = a.with_overrides({"rerank.enabled": False, "gate.signal": "dense"})
    changes = config_changes(a, b)
    assert [(c.key, c.a, c.b) for c in changes] == [("rerank.enabled", True, False), ("gate.signal", "auto", "dense")]


def test_rank_moves_up_down_new_and_dropped():
    base = answered_trace()
    a = _ranked(base, ["d1#0", "d2#0", "d3#0", "d4#0"])
    b = _ranked(base, ["d3#0", "d1#0", "d5#0", "d2#0"])
    moves = {m.chunk_id: m for m in rank_moves(a, b, top_k=3)}
    assert moves["d3#0"].movement == "up" and moves["d3#0"].places == 2
    assert moves["d1#0"].movement == "down" and moves["d1#0"].places == -1
    assert moves["d5#0"].movement == "new" and moves["d5#0"].rank_a is None
    assert moves["d2#0"].movement == "dropped" and (moves["d2#0"].rank_a, moves["d2#0"].rank_b) == (2, 4)
    assert "d4#0" not in moves, "outside both top-3"
    assert [m.chunk_id for m in rank_moves(a, b, top_k=3)][:3] == ["d3#0", "d1#0", "d5#0"], "B's order first"


def test_rank_moves_follow_rerank_order_when_the_reranker_ran():
    base = _ranked(answered_trace(), ["d1#0", "d2#0"])
    reranked = dataclasses.replace(base, rerank=RerankTrace(status="ran", candidates=(
        RerankScore("d2#0", "d2", 0.9, 1, 2), RerankScore("d1#0", "d1", 0.2, 2, 1))))
    moves = {m.chunk_id: m for m in rank_moves(base, reranked)}
    assert moves["d2#0"].movement == "up" and moves["d1#0"].movement == "down"


def test_gate_flip_rewrite_and_claim_verdict_changes():
    a = answered_trace()
    b = dataclasses.replace(
        a, rewrite=RewriteTrace(status="expanded", original=a.question, query=a.question + " timeout_ms"),
        gate=GateTrace(status="ran", decision="abstain", scale="rerank", score=0.3, threshold=0.45),
        validation=dataclasses.replace(a.validation, claims=(
            ClaimCheck(text="the default is  15000 ms.", markers=(1,), verdict="unsupported", best_similarity=0.3),
            ClaimCheck(text="Retries back off.", markers=(2,), verdict="supported", best_similarity=0.8))),
        answer="", llm_calls=0)
    diff = diff_traces(a, b)
    assert diff.gate_changed and diff.rewrite_changed and diff.answer_changed
    by_text = {c.text: c for c in diff.claim_changes}
    same_claim = by_text["The default is 15000 ms."]
    assert (same_claim.verdict_a, same_claim.verdict_b, same_claim.status) == ("supported", "unsupported", "changed")
    assert by_text["Retries back off."].status == "only_b"
    summary = diff.summary()
    assert summary[0] == "gate decision: answer → abstain"
    assert "2 claim verdict(s) differ" in summary and "LLM calls: 1 → 0" in summary


# -- two runs over the same cases: the paired tests ------------------------------------------------------------

def _row(case_id: str, answerable: bool, answered: bool, verdict: str | None = None):
    from workbench.correctness import Correctness
    from workbench.evaluate import EvalRow

    return EvalRow(id=case_id, answerable=answerable, abstained=not answered, gate_score=0.5, gate_scale="learned",
                   retrieved_doc_ids=(), supported=True if answered else None, llm_calls=int(answered),
                   claims=2 if answered else 0, supported_claims=1 if answered else 0,
                   correctness=Correctness(verdict, "test") if answered and verdict else None)


def test_two_runs_are_compared_case_by_case_and_only_on_the_cases_both_ran():
    from workbench.compare import compare_runs

    # A answers 8 of 10 answerable cases, B 4 of the same 10 (B's answered ones are among A's); A answers 1 of 5
    # unanswerable cases, B none; a case only A ran is left out
    a = [_row(f"q{i}", True, i < 8, "correct" if i < 6 else "wrong") for i in range(10)]
    a += [_row(f"u{i}", False, i == 0) for i in range(5)] + [_row("only-a", True, True, "correct")]
    b = [_row(f"q{i}", True, i < 4, "correct") for i in range(10)] + [_row(f"u{i}", False, False) for i in range(5)]
    rates = {r.name: r.test for r in compare_runs(a, b)}
    answered = rates["answered"]
    assert (answered.n, answered.rate_a, answered.rate_b) == (10, 0.8, 0.4)
    assert (answered.a_only, answered.b_only) == (4, 0), "only the cases where the two runs differ"
    assert answered.difference_ci95[0] > 0 and answered.p_value == 0.125   # 4 vs 0: 2 * 0.5**4
    correct = rates["correct"]
    assert (correct.rate_a, correct.rate_b) == (0.6, 0.4), "an abstention is not a correct answer"
    false = rates["false_answers"]
    assert (false.n, false.a_only, false.b_only, false.p_value) == (5, 1, 0, 1.0)


def test_without_correctness_scored_the_correct_rate_is_not_compared():
    from workbench.compare import compare_runs

    a = [_row(f"q{i}", True, i < 3) for i in range(5)]
    b = [_row(f"q{i}", True, i < 2) for i in range(5)]
    assert [r.name for r in compare_runs(a, b)] == ["answered"], "no unanswerable case and nothing scored"


def test_the_comparison_table_shows_each_rate_with_its_interval_beside_the_paired_test():
    from workbench.compare import compare_runs, comparison_table

    a = [_row(f"q{i}", True, i < 8) for i in range(10)]
    b = [_row(f"q{i}", True, i < 4) for i in range(10)]
    (row,) = comparison_table(compare_runs(a, b))
    assert row["rate"] == "answered (of answerable)" and row["cases"] == 10
    assert row["A [95 % CI]"] == "80.0 % [49.0–94.3]" and row["B [95 % CI]"] == "40.0 % [16.8–68.7]"
    assert row["A − B, points [95 % paired bootstrap]"].startswith("+40.0 [")
    assert row["only A / only B"] == "4 / 0" and row["McNemar p (exact)"] == 0.125
