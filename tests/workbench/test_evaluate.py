"""workbench eval: every golden case through the pipeline, one row each, the docs/ARCHITECTURE.md summary, every trace kept."""

from __future__ import annotations

import contextlib
import csv
import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from pipeline.config import PipelineConfig
from pipeline.generation.prompts import ABSTENTION_MESSAGE
from pipeline.models.registry import Models
from pipeline.testing import FakeEmbedder, fake_models
from pipeline.trace import Candidate, GateTrace, Trace
from workbench import evaluate
from workbench.evaluate import MemoEmbedder, build_row, read_traces
from workbench.golden import GoldenCase, load_golden, parse_lines
from workbench.nli import nli_support

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "golden" / "golden.jsonl"
ROW_KEYS = {"id", "answerable", "abstained", "gate_score", "gate_scale", "retrieved_doc_ids", "supported", "llm_calls"}
SUMMARY_KEYS = {"answer_rate_answerable", "false_answer_rate_unanswerable", "recall_at_10", "mrr",
                "citation_support_rate", "llm_calls_saved", "abstention_precision", "abstention_recall",
                "fabricated_marker_rate", "llm_calls_made", "recall_at_10_fraction", "latency_ms", "nli", "per_tag",
                "correct_answer_rate", "supported_but_wrong_rate", "trust_answerable", "trust_unanswerable"}


def _case(**kw) -> GoldenCase:
    base = {"id": "c1", "question": "q?", "answerable": True, "expected_doc_ids": ("b",), "tags": ("config",)}
    return GoldenCase(**{**base, **kw})


def _trace(doc_ids, decision="answer", answer="An answer [1].") -> Trace:
    cands = tuple(Candidate(chunk_id=f"{d}#{i}", doc_id=d, title=d, text=d, fused_score=0.03 - i / 1000,
                            fused_rank=i + 1) for i, d in enumerate(doc_ids))
    return Trace(question="q?", retrieval=dataclasses.replace(Trace(question="").retrieval, status="ran",
                                                              candidates=cands),
                 gate=GateTrace(status="ran", decision=decision, scale="fused", score=0.03),
                 answer=answer, abstained=decision == "abstain")


def test_a_row_scores_retrieval_by_document_over_the_top_ten_chunks():
    row = build_row(_case(expected_doc_ids=("b", "z")), _trace(["a", "a", "b", "c"] + [f"x{i}" for i in range(9)]))
    assert row.retrieved_doc_ids[:3] == ("a", "b", "c") and len(row.retrieved_doc_ids) == 9  # 10 chunks, 9 docs
    assert row.hit_at_10 is True and row.recall_at_10 == 0.5 and row.reciprocal_rank == 0.5
    miss = build_row(_case(expected_doc_ids=("late",)), _trace([f"x{i}" for i in range(10)] + ["late"]))
    assert miss.hit_at_10 is False and miss.reciprocal_rank == 0.0
    assert set(row.to_dict()) >= ROW_KEYS


def test_abstention_is_the_gate_decision_or_the_exact_abstention_sentence():
    assert build_row(_case(), _trace(["a"], decision="abstain", answer=ABSTENTION_MESSAGE)).abstained_by == "gate"
    by_generator = build_row(_case(), _trace(["a"], answer=ABSTENTION_MESSAGE))
    assert by_generator.abstained and by_generator.abstained_by == "generator"
    assert not build_row(_case(), _trace(["a"], answer="I don't know, but maybe 5 [1].")).abstained


def test_memo_embedder_encodes_each_text_once_and_returns_the_same_vectors():
    inner = FakeEmbedder()
    memo = MemoEmbedder(inner)
    first = memo.encode(["alpha beta", "gamma", "alpha beta"], batch_size=8)
    second = memo.encode(["gamma", "delta"])
    assert np.array_equal(first, inner.encode(["alpha beta", "gamma", "alpha beta"]))
    assert np.array_equal(second, inner.encode(["gamma", "delta"]))
    assert memo.encoded == 3 and memo.texts == 5 and memo.calls == 2


@pytest.fixture(scope="module")
def small_golden(tmp_path_factory):
    """The first 20 cases plus five multi-turn ones: answerable, unanswerable, off-topic and follow-ups."""
    lines = GOLDEN.read_text(encoding="utf-8").splitlines()
    multi = [ln for ln in lines[20:] if '"multi-turn"' in ln][:5]
    path = tmp_path_factory.mktemp("golden") / "small.jsonl"
    path.write_text("\n".join(lines[:20] + multi) + "\n", encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def evaluation(demo_store_fake, small_golden):
    return evaluate.evaluate(load_golden(small_golden), demo_store_fake, fake_models(reranker=False), PipelineConfig())


def test_evaluation_has_one_row_per_case_and_the_design_summary(evaluation, small_golden):
    golden = load_golden(small_golden)
    assert [r.id for r in evaluation.rows] == [c.id for c in golden.cases]
    data = json.loads(json.dumps(evaluation.to_dict()))
    assert set(data) == {"summary", "rows"}
    assert SUMMARY_KEYS <= set(data["summary"])
    assert all(ROW_KEYS <= set(row) for row in data["rows"])
    s = evaluation.summary
    assert s["cases"] == 25 and s["answerable"] + s["unanswerable"] == 25
    answered = sum(not r.abstained for r in evaluation.rows if r.answerable)
    assert s["answer_rate_answerable"] == round(answered / s["answerable"], 4)
    assert s["recall_at_10"] == round(sum(bool(r.hit_at_10) for r in evaluation.rows if r.answerable)
                                      / s["answerable"], 4)
    assert s["llm_calls_saved"] == sum(r.abstained_by == "gate" for r in evaluation.rows)
    assert {"retrieve", "validate", "total"} <= set(s["latency_ms"])
    assert s["latency_ms"]["total"]["p95"] >= s["latency_ms"]["total"]["p50"]
    assert s["per_tag"]["off-topic"]["answerable"] == 0 and s["per_tag"]["off-topic"]["cases"] >= 1
    assert s["stack"]["gate_scales"] == {"learned": 25}  # no cross-encoder: auto uses the learned rule


def test_multi_turn_cases_are_asked_with_their_history(evaluation):
    multi = [(c, t) for c, t in zip(evaluation.cases, evaluation.traces, strict=True) if "multi-turn" in c.tags]
    assert len(multi) >= 5
    for case, trace in multi:
        assert len(trace.history) == len(case.history) > 0
        assert trace.rewrite.status != "skipped"
    single = [t for c, t in zip(evaluation.cases, evaluation.traces, strict=True) if not c.history]
    assert all(t.rewrite.status == "skipped" for t in single)


def test_the_nli_block_reads_the_validators_own_verdicts(evaluation):
    nli = evaluation.summary["nli"]
    labels = [c.nli_label for t in evaluation.traces for c in t.validation.claims if c.nli_label]
    assert nli["status"] == "ran" and nli["source"] == "validator" and nli["claims"] == len(labels) > 0
    assert nli["support_rate"] == pytest.approx(labels.count("entailment") / len(labels), abs=1e-4)


def test_the_nli_check_is_reported_unavailable_never_as_a_number(evaluation, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    unread = [dataclasses.replace(t, validation=dataclasses.replace(t.validation, nli_status="unavailable"))
              for t in evaluation.traces]
    nli = nli_support(unread, Models(embedder=FakeEmbedder()), "no-such-org/no-such-nli")
    assert nli["status"] == "unavailable" and "no-such-org/no-such-nli" in nli["reason"]
    assert nli["support_rate"] is None and nli["agreement"] is None


class _OverlapNLI:
    """Entails when every hypothesis word is in the premise; labels deliberately not in MNLI order."""
    labels = ("neutral", "entailment", "contradiction")

    def predict(self, pairs):
        out = []
        for premise, hypothesis in pairs:
            words = set(hypothesis.lower().split())
            entailed = len(words & set(premise.lower().split())) / max(len(words), 1) > 0.6
            out.append([0.1, 0.8, 0.1] if entailed else [0.7, 0.2, 0.1])
        return np.array(out)


def test_nli_support_and_agreement_with_the_embedding_validator(evaluation):
    traces = evaluation.traces
    result = nli_support(traces, fake_models(reranker=False).__class__(nli=_OverlapNLI()), "fake-nli")
    from pipeline.validation.entailment import structured

    cited = sum(c.verdict in ("supported", "unsupported") and not structured(c.text)   # table rows are not NLI claims
                for t in traces for c in t.validation.claims)
    assert result["status"] == "ran" and result["claims"] == cited > 0
    assert 0.0 <= result["support_rate"] <= 1.0
    assert result["agreement"] == pytest.approx(1 - result["embedding_only"] - result["nli_only"], abs=1e-3)


def test_eval_does_not_touch_the_answer_cache_or_the_run_log(demo_store_fake, small_golden):
    runs = Path(demo_store_fake.home) / "runs.sqlite"
    before = runs.stat().st_size if runs.exists() else None
    golden = load_golden(small_golden)
    twice = [evaluate.evaluate(golden, demo_store_fake, fake_models(reranker=False), PipelineConfig(), nli=False)
             for _ in range(2)]
    assert not any(t.cache_hit for e in twice for t in e.traces)
    assert (runs.stat().st_size if runs.exists() else None) == before
    assert [r.to_dict() | {"latency_ms": 0} for r in twice[0].rows] == \
        [r.to_dict() | {"latency_ms": 0} for r in twice[1].rows]


def _main(monkeypatch, store, golden, **kw):
    return evaluate.run_eval(golden, PipelineConfig(), open_store=lambda: contextlib.nullcontext(store),
                             models=fake_models(reranker=False), **{"nli": False, "json_output": True, **kw})


def test_json_output_and_the_files_written_under_out(demo_store_fake, small_golden, tmp_path, monkeypatch, capsys):
    out, extra_csv = tmp_path / "out", tmp_path / "rows-copy.csv"
    assert _main(monkeypatch, demo_store_fake, small_golden, out=str(out), csv_path=str(extra_csv), limit=6) == 0
    printed = json.loads(capsys.readouterr().out)
    assert len(printed["rows"]) == 6
    assert json.loads((out / "summary.json").read_text()) == printed["summary"]
    traces = read_traces(out / "traces.jsonl")
    assert list(traces) == [r["id"] for r in printed["rows"]]
    assert all(isinstance(t, Trace) and t.retrieval.candidates for t in traces.values())
    rows = list(csv.DictReader((out / "rows.csv").open(encoding="utf-8")))
    assert [r["id"] for r in rows] == [r["id"] for r in printed["rows"]]
    assert rows[0]["retrieved_doc_ids"] == " ".join(printed["rows"][0]["retrieved_doc_ids"])
    assert extra_csv.read_text() == (out / "rows.csv").read_text()


def test_bad_golden_lines_are_reported_the_rest_evaluated_and_the_exit_is_2(demo_store_fake, tmp_path,
                                                                            monkeypatch, capsys):
    good = GOLDEN.read_text(encoding="utf-8").splitlines()[:3]
    path = tmp_path / "mixed.jsonl"
    path.write_text("\n".join([good[0], '{"id": "broken"', good[1], good[2]]) + "\n", encoding="utf-8")
    assert parse_lines(path.read_text().splitlines())[1]  # the file really has a bad line
    assert _main(monkeypatch, demo_store_fake, path) == 2
    captured = capsys.readouterr()
    assert len(json.loads(captured.out)["rows"]) == 3
    assert "problem: mixed.jsonl line 2: not valid JSON" in captured.err


def test_cli_on_an_empty_store_says_ingest_first(tmp_path):
    result = subprocess.run([sys.executable, "-m", "workbench.cli", "eval", str(GOLDEN), "--store",
                             str(tmp_path / "empty")], cwd=ROOT, capture_output=True, text=True, timeout=300,
                            env={"HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin"})
    lines = [ln for ln in result.stderr.splitlines() if ln.strip()]
    assert result.returncode == 2 and len(lines) == 1 and "Traceback" not in result.stderr
    assert "is empty; ingest documents first: workbench ingest golden/corpus" in lines[0]


@pytest.mark.long
@pytest.mark.slow
def test_real_stack_retrieves_the_expected_documents_and_a_dense_gate_abstains_off_topic(demo_store_real,
                                                                                         real_models):
    """The offline default stack (packaged MiniLM, the committed reader) on a slice of the golden set."""
    golden = load_golden(GOLDEN)
    picked = [c for c in golden.cases if c.answerable][:12] + [c for c in golden.cases if "off-topic" in c.tags][:6]
    sliced = dataclasses.replace(golden, cases=tuple(picked))
    default = evaluate.evaluate(sliced, demo_store_real, real_models, PipelineConfig(), nli=False)
    assert default.summary["recall_at_10"] >= 0.9
    assert default.summary["stack"]["gate_scales"] == {"learned": 18}  # auto is the learned rule
    assert not default.summary["stack"].get("rerank_unavailable_reason"), "the committed reader runs offline"
    dense = PipelineConfig().with_overrides({"gate.signal": "dense", "gate.confidence_threshold_dense": 0.6749})
    gated = evaluate.evaluate(sliced, demo_store_real, real_models, dense, nli=False)
    off_topic = [r for r in gated.rows if "off-topic" in r.tags]
    assert all(r.abstained_by == "gate" and r.llm_calls == 0 and r.gate_scale == "dense" for r in off_topic)
    assert gated.summary["llm_calls_saved"] >= len(off_topic)
    assert {r.id: r.retrieved_doc_ids for r in gated.rows} == {r.id: r.retrieved_doc_ids for r in default.rows}


# -- the one golden-set driver ----------------------------------------------------------------------------------

def test_the_driver_reports_progress_once_per_case_and_keeps_golden_order(demo_store_fake, small_golden):
    golden = load_golden(small_golden)
    calls = []
    pipeline = evaluate.eval_pipeline(demo_store_fake, fake_models(reranker=False), PipelineConfig())
    run = evaluate.run_cases(golden, pipeline, generate=False, on_progress=lambda *a: calls.append(a))
    ids = [c.id for c in golden.cases]
    assert calls == [(i, len(ids), case_id) for i, case_id in enumerate(ids)] + [(len(ids), len(ids), "")]
    assert [c.id for c in run.cases] == [r.id for r in run.rows] == list(run.by_id()) == ids
    assert not run.generated and all(t.generation.status != "ran" for t in run.traces)
    assert run.golden == golden.path and run.corpus_version == demo_store_fake.corpus_version
    assert run.config_hash == pipeline.cfg.config_hash() and not pipeline.cfg.cache.enabled
    assert list(run.scores().ids) == ids


def test_a_rejected_question_is_a_problem_and_the_rest_run(demo_store_fake):
    cases = (_case(id="ok", question="What does ERR_TIMEOUT_502 mean?"), _case(id="empty", question="   ", line=2))
    run = evaluate.run_cases(cases, evaluate.eval_pipeline(demo_store_fake, fake_models(reranker=False),
                                                           PipelineConfig()), generate=False)
    assert [c.id for c in run.cases] == ["ok"] and len(run.rejected) == 1
    assert run.rejected[0].startswith("case empty (line 2): ") and run.problems == run.rejected


def test_evaluate_and_tune_walk_the_golden_set_with_the_same_driver():
    from workbench import tune

    assert tune.run_cases is evaluate.run_cases
    assert evaluate.evaluate.__globals__["run_cases"] is evaluate.run_cases


# -- answer correctness in the rows and the summary ------------------------------------------------------------

def _row(id_, answerable, abstained, verdict=None, supported=True):
    from workbench.correctness import Correctness

    return evaluate.EvalRow(id=id_, answerable=answerable, abstained=abstained, gate_score=0.5, gate_scale="fused",
                            retrieved_doc_ids=(), supported=None if abstained else supported, llm_calls=0,
                            correctness=Correctness(verdict=verdict, why="") if verdict else None)


def test_correctness_figures_on_a_hand_built_set():
    from workbench.summary import summarise

    rows = [_row("a1", True, False, "correct"), _row("a2", True, False, "partly"),
            _row("a3", True, False, "wrong"), _row("a4", True, False, "wrong", supported=False),
            _row("a5", True, True), _row("u1", False, True), _row("u2", False, False, "wrong"),
            _row("u3", False, True)]
    s = summarise(rows, [])
    assert s["correct_answer_rate"] == 0.25 and s["partly_answer_rate"] == 0.25 and s["wrong_answer_rate"] == 0.5
    # supported and wrong: a3 and u2, over the five answered cases; among answered answerable, a3 of four
    assert s["supported_but_wrong_rate"] == 0.4 and s["supported_but_wrong_rate_answerable"] == 0.25
    assert s["trust_answerable"] == {"answered_correctly": 0.2, "answered_partly": 0.2, "abstained": 0.2,
                                     "answered_wrongly": 0.4, "cases": 5, "unscored": 0}
    assert s["trust_unanswerable"] == {"answered_correctly": 0.0, "answered_partly": 0.0, "abstained": 0.6667,
                                       "answered_wrongly": 0.3333, "cases": 3, "unscored": 0}
    assert s["correctness"]["verdicts"] == {"correct": 1, "partly": 1, "wrong": 3}
    assert s["answer_rate_answerable"] == 0.8, "the existing keys are unchanged"
    text = evaluate.render_summary(s)
    assert "correct_answer_rate" in text and "supported_but_wrong_rate" in text and "answerable: ok/part/abst/wrong" in text


def test_every_rate_carries_its_interval_and_counts():
    from workbench.summary import summarise

    rows = [_row(f"a{i}", True, i >= 8, "correct" if i < 6 else "wrong") for i in range(10)] + \
           [_row(f"u{i}", False, i >= 1, "wrong") for i in range(5)]
    rows = [dataclasses.replace(r, claims=2, supported_claims=2 if r.id != "a0" else 0) if not r.abstained else r
            for r in rows]
    s = summarise(rows, [])
    ci = s["intervals"]
    assert ci["answer_rate_answerable"]["k"] == 8 and ci["answer_rate_answerable"]["n"] == 10
    low, high = ci["answer_rate_answerable"]["ci95"]
    assert low < s["answer_rate_answerable"] == 0.8 < high and ci["answer_rate_answerable"]["method"] == "Wilson"
    assert ci["false_answer_rate_unanswerable"]["k"] == 1 and ci["false_answer_rate_unanswerable"]["n"] == 5
    support = ci["citation_support_rate"]
    assert support["n"] == 18 and support["method"].startswith("bootstrap over 9 answers")
    assert support["ci95"][0] < s["citation_support_rate"] <= support["ci95"][1] <= 1.0
    text = evaluate.render_summary(s)
    line = next(ln for ln in text.splitlines() if ln.startswith("answer_rate_answerable"))
    assert f"[{low:.3f}–{high:.3f}] (8/10, Wilson)" in line
    assert "mrr" not in ci, "no labelled case, no interval"


def test_every_answered_row_carries_a_correctness_verdict(evaluation):
    for row, case in zip(evaluation.rows, evaluation.cases, strict=True):
        if row.abstained:
            assert row.correctness is None
        else:
            assert row.correctness.verdict in ("correct", "partly", "wrong")
            assert case.answerable or row.correctness.verdict == "wrong"
    data = json.loads(json.dumps(evaluation.to_dict()))
    answered = [r for r in data["rows"] if not r["abstained"] and r["answerable"]]
    assert answered and {"verdict", "token_recall", "token_f1", "semantic", "nli"} <= set(answered[0]["correctness"])
    assert answered[0]["correctness"]["semantic"] is not None, "the evaluation's embedder gives a semantic match"
    assert evaluation.summary["correctness"]["nli"] == "ran", "the fake models carry an NLI classifier"
    assert answered[0]["correctness"]["nli"] in ("entailment", "neutral", "contradiction")


def test_a_row_scores_the_top_ten_chunks_against_the_chunks_that_state_the_answer():
    trace = _trace(["a", "b", "b", "c"] + [f"x{i}" for i in range(8)])   # chunk ids a#0, b#1, b#2, c#3, ...
    row = build_row(_case(expected_doc_ids=("b",)), trace, relevant=("b#2", "b#20"))
    assert row.relevant_chunks == 2 and row.passage_recall_at_10 == 0.5
    assert row.passage_ndcg_at_10 == pytest.approx((1 / np.log2(4)) / (1 + 1 / np.log2(3)))
    unlabelled = build_row(_case(expected_doc_ids=("b",)), trace)
    assert unlabelled.passage_recall_at_10 is None and unlabelled.passage_ndcg_at_10 is None


def test_the_summary_reports_passage_metrics_with_intervals_and_calls_recall_at_10_hit(evaluation):
    from workbench.summary import render_summary

    s = evaluation.summary
    labelled = [r for r in evaluation.rows if r.passage_ndcg_at_10 is not None]
    assert labelled and len(labelled) == sum(r.answerable and bool(r.expected_doc_ids) for r in evaluation.rows)
    assert s["passage_ndcg_at_10"] == round(sum(r.passage_ndcg_at_10 for r in labelled) / len(labelled), 4)
    low, high = s["intervals"]["passage_recall_at_10"]["ci95"]
    assert low <= s["passage_recall_at_10"] <= high
    text = render_summary(s)
    assert "hit@10 (any expected document)" in text and "passage nDCG@10" in text
    assert "recall_at_10 " not in text
