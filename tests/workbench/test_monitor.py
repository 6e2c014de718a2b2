"""workbench/monitor.py and ``workbench monitor``: the exact test, the drift alarm on simulated Bernoulli streams
(a shifted stream alarms, an unshifted one at most at the stated rate), rates per bucket, click-through per
document, and the command line's exit codes."""

from __future__ import annotations

import dataclasses
import json
import random

import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy.stats import fisher_exact

from pipeline.storage.runs import RunLog
from pipeline.storage.store import data_dir
from tests.support.traces import abstained_trace, answered_trace
from workbench import monitor
from workbench.cli import main


def _row(i: int, *, abstained=False, fallback=False, unsupported=0, cache_hit=False, sources=1, clicked=False,
         latency=100.0, created_at=None, docs=("doc-a",), model="", prompt=0, completion=0, question=None) -> dict:
    return {"run_id": f"r{i:04d}", "created_at": created_at or f"2026-01-01T{(i // 60) % 24:02d}:{i % 60:02d}:00Z",
            "question": question or f"question {i}", "gate_decision": "abstain" if abstained else "answer",
            "abstained": int(abstained), "fallback": int(fallback), "unsupported": unsupported,
            "cache_hit": int(cache_hit), "degradations": 0, "sources": sources,
            "source_docs_json": json.dumps(list(docs)), "latency_ms": latency, "llm_model": model,
            "prompt_tokens": prompt, "completion_tokens": completion, "clicked": int(clicked)}


def _stream(rng: random.Random, n: int, p: float, start: int = 0) -> list[dict]:
    return [_row(start + i, abstained=rng.random() < p) for i in range(n)]


# -- the exact test ----------------------------------------------------------------------------------------------

@given(st.integers(0, 30), st.integers(0, 30), st.integers(1, 30), st.integers(1, 30))
def test_the_one_sided_test_is_fishers_exact_test(a, b, n_recent, n_base):
    recent_hits, baseline_hits = min(a, n_recent), min(b, n_base)
    table = [[recent_hits, n_recent - recent_hits], [baseline_hits, n_base - baseline_hits]]
    up = monitor.fisher_one_sided(recent_hits, n_recent, baseline_hits, n_base, "up")
    down = monitor.fisher_one_sided(recent_hits, n_recent, baseline_hits, n_base, "down")
    assert up == pytest.approx(fisher_exact(table, alternative="greater")[1], rel=1e-9, abs=1e-12)
    assert down == pytest.approx(fisher_exact(table, alternative="less")[1], rel=1e-9, abs=1e-12)
    assert 0 <= up <= 1 and 0 <= down <= 1


def test_impossible_counts_are_refused():
    with pytest.raises(ValueError, match="exceed"):
        monitor.fisher_one_sided(5, 3, 0, 10, "up")
    with pytest.raises(ValueError, match="negative"):
        monitor.fisher_one_sided(-1, 3, 0, 10, "up")


# -- the alarm on simulated streams ----------------------------------------------------------------------------

def test_an_unshifted_stream_alarms_at_most_at_the_stated_rate():
    alpha, seeds = 0.05, 400
    alarms = 0
    for seed in range(seeds):
        rows = _stream(random.Random(seed), 125, 0.2)
        alarms += monitor.check(rows, baseline=100, recent=25, alpha=alpha).alarm
    # Bonferroni plus a conservative exact test: the per-check rate is at most alpha (binomial slack for 400 seeds)
    assert alarms / seeds <= alpha + 0.02


def test_a_shifted_stream_alarms_and_lists_the_runs_behind_it():
    fired = 0
    for seed in range(50):
        rng = random.Random(seed)
        rows = _stream(rng, 100, 0.1) + _stream(rng, 25, 0.5, start=100)
        result = monitor.check(rows, baseline=100, recent=25, alpha=0.01)
        fired += result.alarm
        if result.alarm:
            (test,) = result.alarmed
            assert test.name == "abstention" and test.p_value <= result.threshold
            recent_abstained = [r["run_id"] for r in rows[100:] if r["abstained"]]
            assert list(test.runs) == recent_abstained
            assert [r["run_id"] for r in result.runs_behind] == recent_abstained
    assert fired >= 40   # power of at least 80 % for a 0.1 -> 0.5 shift over 25 runs


def test_a_drop_alarms_for_a_rate_where_lower_is_bad():
    rows = [_row(i, cache_hit=i % 2 == 0) for i in range(100)] + [_row(100 + i) for i in range(25)]
    result = monitor.check(rows, baseline=100, recent=25)
    assert [t.name for t in result.alarmed] == ["cache_hit"]
    more_hits = [_row(i) for i in range(100)] + [_row(100 + i, cache_hit=True) for i in range(25)]
    assert not monitor.check(more_hits, baseline=100, recent=25).alarm   # more cache hits is not a degradation


def test_the_bonferroni_threshold_counts_only_testable_metrics():
    rows = [_row(i, sources=0) for i in range(30)]              # no run offered a source: no click-through
    result = monitor.check(rows, baseline=20, recent=10, alpha=0.01)
    by_name = {t.name: t for t in result.tests}
    assert by_name["click_through"].p_value is None and not by_name["click_through"].alarm
    assert result.threshold == pytest.approx(0.01 / 4)
    assert "0.01/4" in result.reason and "at most 0.01" in result.reason


def test_too_few_runs_is_not_an_alarm_and_says_how_many_more():
    result = monitor.check([_row(i, abstained=True) for i in range(10)], baseline=20, recent=5)
    assert not result.ready and not result.alarm
    assert "15 more" in result.reason


@pytest.mark.parametrize("baseline, recent, alpha, word", [
    (0, 5, 0.01, "baseline"), (10, -1, 0.01, "recent"), (10, 5, 1.5, "alpha"), (10, 5, 0, "alpha")])
def test_bad_windows_are_refused_naming_the_setting(baseline, recent, alpha, word):
    with pytest.raises(ValueError, match=word):
        monitor.check([], baseline, recent, alpha)


# -- rates per bucket, click-through per document, cost --------------------------------------------------------

def test_rates_latency_and_cost_per_bucket():
    rows = [_row(0, abstained=True, sources=0, latency=100, created_at="2026-01-01T10:05:00Z"),
            _row(1, unsupported=2, latency=300, created_at="2026-01-01T10:30:00Z", model="m", prompt=10, completion=1),
            _row(2, clicked=True, latency=200, created_at="2026-01-01T10:59:00Z"),
            _row(3, fallback=True, cache_hit=True, latency=50, created_at="2026-01-02T08:00:00Z")]
    costs, unpriced = monitor.priced(rows, prices={"m": (0.001, 0.01)})
    assert costs["r0001"] == pytest.approx(10 * 0.001 + 0.01) and unpriced == []
    hours = monitor.buckets(rows, "hour", costs)
    assert [b["bucket"] for b in hours] == ["2026-01-01T10:00Z", "2026-01-02T08:00Z"]
    first = hours[0]
    assert first["runs"] == 3
    assert first["abstention_rate"] == pytest.approx(1 / 3) and first["unsupported_rate"] == pytest.approx(1 / 3)
    assert first["click_through_rate"] == pytest.approx(1 / 2)     # over the two runs that offered sources
    assert (first["latency_p50_ms"], first["latency_p95_ms"]) == (200, 300)
    assert first["llm_cost_usd"] == pytest.approx(0.02) and first["prompt_tokens"] == 10
    days = monitor.buckets(rows, "day")
    assert [(b["bucket"], b["runs"], b["fallback_rate"]) for b in days] == [("2026-01-01", 3, 0.0),
                                                                           ("2026-01-02", 1, 1.0)]


def test_a_model_without_a_price_is_named_and_local_models_cost_nothing():
    rows = [_row(0, model="no-such-model-xyz", prompt=5), _row(1, model="HuggingFaceTB/SmolLM2-360M", prompt=9)]
    costs, unpriced = monitor.priced(rows, prices={})
    assert unpriced == ["no-such-model-xyz"] and set(costs.values()) == {0.0}


def test_click_through_per_document_and_per_day():
    rows = [_row(0, docs=("a", "b")), _row(1, docs=("a",)), _row(2, docs=("b",))]
    clicks = [{"click_id": 1, "run_id": "r0000", "source_number": 1, "doc_id": "a", "chunk_id": "a#0",
               "clicked_at": "2026-01-01T10:00:00Z"},
              {"click_id": 2, "run_id": "r0000", "source_number": 1, "doc_id": "a", "chunk_id": "a#0",
               "clicked_at": "2026-01-02T10:00:00Z"}]
    docs = {d["doc_id"]: d for d in monitor.click_through_by_document(rows, clicks)}
    assert (docs["a"]["runs_offered"], docs["a"]["runs_clicked"], docs["a"]["clicks"]) == (2, 1, 2)
    assert docs["a"]["click_through"] == 0.5 and docs["b"]["click_through"] == 0.0
    assert monitor.clicks_per_bucket(clicks, "day") == [
        {"bucket": "2026-01-01", "clicks": 1, "runs_clicked": 1}, {"bucket": "2026-01-02", "clicks": 1,
                                                                   "runs_clicked": 1}]


def test_the_text_report_names_the_alarm_and_escapes_questions():
    rows = [_row(i) for i in range(20)] + [_row(20 + i, abstained=True, question="bad\x1b[31m q") for i in range(5)]
    text = monitor.report_text(monitor.report(rows, [], bucket="day", baseline=20, recent=5))
    assert "ALARM: abstention rate" in text
    assert "\x1b" not in text and "bad\\x1b[31m q" in text


# -- the command line ------------------------------------------------------------------------------------------

def _log(store, n_ok: int, n_abstained: int) -> None:
    log = RunLog(data_dir(str(store)) / "runs.sqlite")
    for i in range(n_ok):
        log.record(dataclasses.replace(answered_trace(f"q{i}"), created_at=f"2026-01-01T10:{i % 60:02d}:00Z"))
    for i in range(n_abstained):
        log.record(dataclasses.replace(abstained_trace(f"a{i}"), created_at=f"2026-01-01T11:{i % 60:02d}:00Z"))


def test_the_command_exits_3_on_an_alarm_and_0_without(tmp_path, capsys):
    store = tmp_path / "store"
    _log(store, 20, 0)
    assert main(["monitor", "--store", str(store), "--baseline", "15", "--recent", "5"]) == 0
    assert "abstention rate" in capsys.readouterr().out
    _log(store, 0, 5)
    assert main(["monitor", "--store", str(store), "--baseline", "15", "--recent", "5", "--json",
                 "--bucket", "hour"]) == 3
    out = json.loads(capsys.readouterr().out)
    assert out["alarm"] and [b["bucket"] for b in out["buckets"]] == ["2026-01-01T10:00Z", "2026-01-01T11:00Z"]
    assert {r["question"] for r in out["check"]["runs_behind"]} == {f"a{i}" for i in range(5)}
    assert out["check"]["false_alarm_rate_per_check_at_most"] == 0.01


def test_bad_arguments_are_one_line_and_exit_2(tmp_path, capsys):
    assert main(["monitor", "--store", str(tmp_path / "s"), "--recent", "0"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "recent window" in err
    with pytest.raises(SystemExit) as exc:
        main(["monitor", "--store", str(tmp_path / "s"), "--bucket", "week"])
    assert exc.value.code == 2


def test_runs_to_detect_shrinks_with_the_shift_and_delivers_about_its_power():
    assert monitor.runs_to_detect(0.3, 0.3, 0.01) is None
    small, large = monitor.runs_to_detect(0.3, 0.4, 0.002), monitor.runs_to_detect(0.3, 0.7, 0.002)
    assert small > large > 0
    n = monitor.runs_to_detect(0.1, 0.4, 0.01)
    rng = random.Random(7)
    detected = 0
    for _ in range(300):
        base = sum(rng.random() < 0.1 for _ in range(n))
        recent = sum(rng.random() < 0.4 for _ in range(n))
        detected += monitor.fisher_one_sided(recent, n, base, n, "up") <= 0.01
    assert 0.6 <= detected / 300 <= 0.95   # about the 80 % asked for (the exact test is a little conservative)
    with pytest.raises(ValueError):
        monitor.runs_to_detect(1.5, 0.2, 0.01)
