"""workbench.display.eval_html: an Evaluation shows itself in Jupyter — metrics, outcomes, failing rows first, escaped."""

from __future__ import annotations

import json

from bs4 import BeautifulSoup

from pipeline.config import PipelineConfig
from tests.support.jupyter import displayed
from workbench.correctness import Correctness
from workbench.display.eval_html import FAILURES, OUTCOMES, evaluation_html, outcome
from workbench.evaluate import EvalRow, evaluate
from workbench.golden import load_golden

SCRIPT = "<script>alert(1)</script>"


def row(id_, answerable, abstained, unsupported=0, fabricated=0, question="q", verdict=None):
    return EvalRow(id=id_, answerable=answerable, abstained=abstained, gate_score=0.5, gate_scale="rerank",
                   retrieved_doc_ids=(), supported=None if abstained else not (unsupported or fabricated),
                   llm_calls=0, unsupported_claims=unsupported, fabricated_markers=fabricated, question=question,
                   correctness=Correctness(verdict=verdict, why="") if verdict else None)


def test_outcomes_name_each_kind_of_failure():
    assert outcome(row("a", answerable=False, abstained=False)) == "false answer"
    assert outcome(row("b", answerable=True, abstained=True)) == "false abstention"
    assert outcome(row("c", answerable=True, abstained=False, unsupported=1)) == "unsupported"
    assert outcome(row("d", answerable=True, abstained=False, fabricated=1)) == "unsupported"
    assert outcome(row("e", answerable=True, abstained=False)) == "answered"
    assert outcome(row("e2", answerable=True, abstained=False, verdict="correct")) == "answered"
    assert outcome(row("g", answerable=True, abstained=False, verdict="wrong")) == "supported but wrong"
    assert outcome(row("h", answerable=True, abstained=False, unsupported=1, verdict="wrong")) == "unsupported"
    assert outcome(row("i", answerable=False, abstained=False, verdict="wrong")) == "false answer"
    assert {"supported but wrong", "wrong answer"} <= set(FAILURES)
    assert OUTCOMES.index("supported but wrong") < OUTCOMES.index("answered")
    assert outcome(row("f", answerable=False, abstained=True)) == "abstained"


def test_failing_rows_come_first_and_every_question_is_escaped():
    rows = [row("ok", True, False, verdict="correct"), row("bad", False, False, question=f"asked {SCRIPT}"),
            row("sbw", True, False, verdict="wrong")]
    out = evaluation_html({"cases": 3, "answer_rate_answerable": 1.0, "nli": {"status": "off"}}, rows)
    assert "<script" not in out
    soup = BeautifulSoup(out, "html.parser")
    ids = [tr.find("td").get_text() for tr in soup.select("table")[-1].select("tbody tr")]
    assert ids == ["bad", "sbw", "ok"]
    assert "supported but wrong" in soup.get_text()
    assert f"asked {SCRIPT}" in soup.get_text()


def test_an_evaluation_displays_without_timings(tmp_path, demo_store_fake, models):
    golden = tmp_path / "golden.jsonl"
    golden.write_text("\n".join(json.dumps(c) for c in (
        {"id": "s1", "question": f"What does ERR_TIMEOUT_502 mean? {SCRIPT}", "history": [], "answerable": True,
         "expected_doc_ids": ["err-timeout-502"], "expected_answer": "x", "tags": []},
        {"id": "s2", "question": "How do I bake sourdough bread?", "history": [], "answerable": False,
         "expected_doc_ids": [], "expected_answer": None, "tags": ["off-topic"]})) + "\n", encoding="utf-8")
    evaluation = evaluate(load_golden(golden), demo_store_fake, models, PipelineConfig(), nli=False)
    html = displayed(evaluation)["text/html"]
    soup = BeautifulSoup(html, "html.parser")
    assert not soup.find_all("script") and SCRIPT in soup.get_text()
    assert "seconds" not in html and "latency" not in html
    assert {"s1", "s2"} <= {tr.find("td").get_text() for tr in soup.select("table")[-1].select("tbody tr")}
    assert "Evaluation(2 cases" in displayed(evaluation)["text/plain"]


def test_the_document_hit_rate_is_labelled_hit_at_10_not_recall():
    html = evaluation_html({"recall_at_10": 0.97, "mrr": 0.8}, [row("a", answerable=True, abstained=False)])
    cells = [td.get_text() for td in BeautifulSoup(html, "html.parser").find_all("td")]
    assert "hit@10 (any expected document)" in cells and "MRR@10" in cells
    assert not any("recall" in c for c in cells)


def test_each_headline_rate_shows_its_interval_and_counts_from_the_summary():
    summary = {"answer_rate_answerable": 0.58, "mrr": 0.8,
               "intervals": {"answer_rate_answerable": {"k": 58, "n": 100, "ci95": [0.482, 0.672],
                                                        "method": "Wilson"}}}
    html = evaluation_html(summary, [row("a", answerable=True, abstained=False)])
    rows = {tr.find_all("td")[0].get_text(): [td.get_text() for td in tr.find_all("td")]
            for tr in BeautifulSoup(html, "html.parser").select("table")[0].select("tbody tr")}
    assert rows["answer_rate_answerable"][1:] == ["0.580", "0.482–0.672 (58/100)"]
    assert rows["MRR@10"][2] == "", "no interval where the summary has none"
