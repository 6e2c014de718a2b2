"""The week-one citation-error report (workbench eval --week-one): the interval maths, validation off as a
setting, every citation judged on its own, the report and the command line."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.config import PipelineConfig
from pipeline.engine import Pipeline
from pipeline.testing import FakeEmbedder, FakeLLM, fake_models
from pipeline.validation.claims import split_claims
from tests.support.stores import Borrowed
from workbench import week_one as wk
from workbench.golden import load_golden

QUESTION = "What does ERR_TIMEOUT_504 mean?"
LITELLM = PipelineConfig().with_overrides(["generate.backend=litellm"])


# -- intervals ---------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("k, n, low, high", [   # Newcombe (1998), Stat Med 17:857, Table I, method 3
    (81, 263, 0.2553, 0.3662), (15, 148, 0.0624, 0.1605), (0, 20, 0.0, 0.1611), (1, 29, 0.0061, 0.1718),
    (29, 29, 0.8830, 1.0)])
def test_wilson_matches_published_intervals(k, n, low, high):
    assert [round(x, 4) for x in wk.wilson(k, n)] == [low, high]


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 5000).flatmap(lambda n: st.tuples(st.integers(0, n), st.just(n))))
def test_wilson_holds_the_observed_rate_and_narrows_with_more_data(kn):
    k, n = kn
    low, high = wk.wilson(k, n)
    assert 0.0 <= low <= k / n <= high <= 1.0
    low2, high2 = wk.wilson(2 * k, 2 * n)
    assert high2 - low2 < high - low, "the same rate on twice the data is known more precisely"


def _judged(arm: str, case: str, marker: int, wrong: bool, flagged: bool) -> wk.Judgement:
    citation = wk.Citation(case_id=case, question="q", claim=f"claim {marker}", marker=marker, chunk_id="c")
    check = wk.SupportCheck(supports=not wrong, reasons=("not_similar",) if wrong else ())
    return wk.Judgement(arm, citation, check, None, "", flagged)


def test_the_verifier_difference_is_paired_citation_by_citation():
    off = [_judged("off", f"case{i}", 1, wrong=i < 6, flagged=False) for i in range(20)]
    on = [_judged("on", f"case{i}", 1, wrong=i < 6, flagged=i < 4) for i in range(20)]
    diff = wk.difference(off, on)
    assert diff["points"] == pytest.approx(20.0) and diff["paired_citations"] == 20
    assert (diff["off_only"], diff["on_only"], diff["unpaired_citations"]) == (4, 0, 0)
    assert diff["mcnemar_p"] == pytest.approx(0.125), "exact two-sided binomial on 4 discordant citations"
    low, high = diff["ci95_points"]
    assert 0 <= low < 20 < high <= 100


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.booleans(), st.booleans()), min_size=1, max_size=40))
def test_the_paired_difference_holds_the_observed_one_and_flips_sign(rows):
    off = [_judged("off", f"c{i}", 1, wrong=w, flagged=f1) for i, (w, f1, _) in enumerate(rows)]
    on = [_judged("on", f"c{i}", 1, wrong=w, flagged=f2) for i, (w, _, f2) in enumerate(rows)]
    diff, back = wk.difference(off, on), wk.difference(on, off)
    low, high = diff["ci95_points"]
    assert low - 1e-9 <= diff["points"] <= high + 1e-9
    assert back["points"] == pytest.approx(-diff["points"]) and back["mcnemar_p"] == pytest.approx(diff["mcnemar_p"])


@pytest.mark.parametrize("k, n", [(-1, 5), (6, 5), (0, -1), (1.5, 3), (True, 3)])
def test_impossible_counts_are_refused(k, n):
    with pytest.raises(ValueError, match=r"integers|0 <= k <= n"):
        wk.wilson(k, n)


def test_no_citation_is_an_empty_rate_not_zero():
    assert wk.proportion(0, 0) == {"k": 0, "n": 0, "rate": None, "ci95": [0.0, 1.0]}


# -- validation off is a setting ---------------------------------------------------------------------------------

def _quoted(store) -> str:
    top = Pipeline(store, models=fake_models(), cfg=LITELLM, log_runs=False).search(QUESTION)
    return next(s.text for s in split_claims(top.ranked_candidates()[0].text) if s.is_claim)


def _reply(answer: str) -> str:
    return json.dumps({"answer": answer, "used_source_ids": [1, 2], "confidence": "HIGH", "limitations": []})


@pytest.fixture(scope="module")
def scripted_answer(demo_store_fake):
    """A model answer with one quoted sentence [1], one claim its source [2] does not say, one marker [9] to a
    source never offered."""
    return (f"{_quoted(demo_store_fake)} [1] The web console supports dark mode and single sign-on [2]. "
            "Payloads are signed with Ed25519 keys [9].")


def test_validation_off_shows_the_answer_unchecked_and_on_flags_it(demo_store_fake, scripted_answer, tmp_path):
    llm = FakeLLM([_reply(scripted_answer)] * 2)
    traces = {}
    for enabled in (False, True):
        cfg = LITELLM.with_overrides({"validate.enabled": enabled, "cache.enabled": False})
        traces[enabled] = Pipeline(demo_store_fake, models=fake_models(llm=llm), cfg=cfg, log_runs=False).ask(QUESTION)
    off, on = traces[False], traces[True]
    assert off.answer == on.answer and "[9]" in off.answer
    assert off.validation.status == "skipped" and "validate.enabled=false" in off.validation.reason
    assert off.validation.claims == () and off.trust.final_confidence == "HIGH"
    assert not any("[9]" in lim for lim in off.limitations), "nothing checked, nothing said"
    assert on.validation.status == "ran" and on.validation.fabricated_markers == (9,)
    assert on.trust.final_confidence == "MEDIUM" and any("[9]" in lim for lim in on.limitations)
    assert off.config_hash != on.config_hash


# -- the report on a tiny golden set -----------------------------------------------------------------------------

def _golden(tmp_path: Path, answerable: bool, expected: str | None) -> Path:
    path = tmp_path / "golden.jsonl"
    path.write_text(json.dumps({"id": "w1", "question": QUESTION, "history": [], "answerable": answerable,
                                "expected_doc_ids": ["err-timeout-504"] if answerable else [], "expected_answer": expected, "tags": ["error-code"]}) + "\n",
                    encoding="utf-8")
    return path


def _week_one(store, golden: Path, answer: str, **kw) -> wk.WeekOne:
    llm = FakeLLM([_reply(answer)] * 2)
    return wk.week_one(load_golden(golden), store, fake_models(llm=llm), LITELLM, nli=False, **kw)


def test_every_citation_is_judged_and_the_verifier_difference_is_one_number(demo_store_fake, scripted_answer,
                                                                           tmp_path):
    quoted = _quoted(demo_store_fake)
    result = _week_one(demo_store_fake, _golden(tmp_path, True, quoted), scripted_answer)
    report = result.report
    off, on = report["arms"]["off"], report["arms"]["on"]
    assert off["validation"] == ["skipped"] and on["validation"] == ["ran"]
    assert off["citations"] == on["citations"] == 3
    assert off["wrong"]["k"] == 2 and off["wrong_unflagged"]["k"] == 2 and off["flagged"] == 0
    assert off["reasons"]["fabricated"] == 1 and off["contradicting_gold"]["k"] == 0 and off["in_wrong_answers"] == 0
    assert on["wrong"]["k"] == 2 and on["flagged_wrong"] == 2 and on["wrong_unflagged"]["k"] == 0
    assert on["flagged_right"] == 0, "the quoted sentence [1] is right and not flagged"
    assert report["difference"]["points"] == pytest.approx(66.67)
    assert (report["difference"]["off_only"], report["difference"]["on_only"]) == (2, 0)
    assert report["difference"]["mcnemar_p"] == pytest.approx(0.5), "two discordant citations rule out nothing"
    assert report["judge"]["method"] == "embedding" and report["judge"]["nli"] == "off"
    by_marker = {j.citation.marker: j for j in result.judgements["off"]}
    assert by_marker[1].check.supports and by_marker[1].check.similarity == pytest.approx(1.0)
    assert not by_marker[2].check.supports and "not_similar" in by_marker[2].reasons
    assert by_marker[9].reasons == ("fabricated",) and "never offered" in by_marker[9].why()
    examples = report["examples"]
    assert [e["marker"] for e in examples] == [2, 9], "the first wrong citation of each case first, then the rest"
    assert examples[0]["flagged_with_validation_on"] is True and "dark mode" in examples[0]["claim"]
    assert examples[0]["source_snippet"], "the cited source's text is shown"
    lines = wk.headline(report)
    assert lines[0].startswith("week one (validation off): 2 of 3 = 66.7 %")
    assert "66.7 points" in lines[2]


def test_a_citation_for_a_value_the_golden_answer_contradicts_is_wrong(demo_store_fake, tmp_path):
    quoted = _quoted(demo_store_fake)
    answer = f"{quoted} [1] The request is abandoned after 45 seconds [1]."
    result = _week_one(demo_store_fake, _golden(tmp_path, True, "The request is abandoned after 30 seconds."), answer)
    off = result.report["arms"]["off"]
    assert off["citations"] == 2 and off["contradicting_gold"]["k"] == 1 and off["in_wrong_answers"] == 2
    by_claim = {j.citation.claim: j for j in result.judgements["off"]}
    assert not by_claim[quoted].wrong, "the other sentence of a wrong answer is not a wrong citation"
    rival = by_claim["The request is abandoned after 45 seconds."]
    assert "contradicts_gold" in rival.reasons and "30 -> 45" in rival.why()


def test_citations_in_answers_to_unanswerable_cases_are_context_not_errors(demo_store_fake, scripted_answer,
                                                                           tmp_path):
    report = _week_one(demo_store_fake, _golden(tmp_path, False, None), scripted_answer, examples=5).report
    off = report["arms"]["off"]
    assert off["in_unanswerable_answers"] == 3 and off["in_wrong_answers"] == 3
    assert off["wrong"]["k"] == 2, "the verbatim quote [1] still supports its sentence"
    assert "| 3 / 3 |" in wk.arm_table(report)


def test_the_markdown_report_shows_retrieved_and_answer_text_as_text(demo_store_fake, scripted_answer, tmp_path):
    report = _week_one(demo_store_fake, _golden(tmp_path, True, _quoted(demo_store_fake)), scripted_answer).report
    report["examples"][0] |= {"claim": "Click <img src=x onerror=alert(1)> [here](javascript:alert(1))",
                              "source_snippet": "<script>alert(1)</script>"}
    text = wk.render_markdown(report)
    assert "<img" not in text and "<script>" not in text and "](javascript" not in text
    assert "&lt;script&gt;" in text
    assert text.startswith("# Week-one citation-error report") and "| off |" in text and "| on |" in text


def test_a_validator_flag_is_read_per_marker():
    from pipeline.trace import CitationScore, ClaimCheck, ValidationTrace

    claim = ClaimCheck(text="A [1][2].", markers=(1, 2), verdict="supported", best_similarity=0.9,
                       similarities=(CitationScore(1, "a", 0.9), CitationScore(2, "b", 0.1)))
    ran = ValidationTrace(status="ran", threshold=0.5, claims=(claim,), supported=1)
    assert not wk.validator_flagged(ran, "A [1][2].", 1) and wk.validator_flagged(ran, "A [1][2].", 2)
    assert wk.validator_flagged(ValidationTrace(status="failed"), "A", 1), "unverified is flagged"
    assert not wk.validator_flagged(ValidationTrace(status="skipped"), "A", 1), "validation off flags nothing"


def test_the_nli_judge_decides_when_a_model_resolves():
    class Entails:
        """Entailment when every claim word is in the premise; labels not in MNLI order."""
        labels = ("neutral", "entailment", "contradiction")

        def predict(self, pairs):
            return [[0.1, 0.8, 0.1] if set(h.lower().split()) <= set(p.lower().split()) else [0.8, 0.1, 0.1]
                    for p, h in pairs]

    cites = [wk.Citation("c", "q", "retries use backoff", 1, chunk_id="x", source_text="retries use backoff always"),
             wk.Citation("c", "q", "retries never stop", 2, chunk_id="y", source_text="retries use backoff"),
             wk.Citation("c", "q", "anything", 9)]
    checks = wk.nli_judge(cites, Entails(), batch=2)
    assert [c.supports for c in checks] == [True, False, False]
    assert checks[1].reasons == ("not_entailed",) and checks[1].nli == "neutral"
    assert checks[2].reasons == ("fabricated",)


def test_the_nli_judge_reads_sentence_windows_and_takes_a_whole_sentence_quote_as_support():
    class Windows:
        """Entailment only when the premise is one sentence holding every claim word; a "not" reads as contradiction."""
        labels = ("entailment", "neutral", "contradiction")

        def predict(self, pairs):
            return [[0.1, 0.1, 0.8] if "not" in h.split() else
                    [0.8, 0.1, 0.1] if p.count(".") <= 1 and set(h.lower().split()) <= set(p.lower().split()) else
                    [0.1, 0.8, 0.1] for p, h in pairs]

    chunk = "Deliveries are signed . Retries use backoff with jitter . Keys rotate daily ."
    cites = [wk.Citation("c", "q", "Retries use backoff [1]", 1, chunk_id="x", source_text=chunk),
             wk.Citation("c", "q", "Keys do not rotate [1]", 1, chunk_id="x", source_text=chunk),
             wk.Citation("c", "q", "Payloads are not signed.", 1, chunk_id="z",
                         source_text="Intro text here. Payloads are not signed. More text.")]
    checks = wk.nli_judge(cites, Windows())
    assert checks[0].supports and checks[0].passage.startswith("Retries use backoff"), "one window entails it"
    assert not checks[1].supports and checks[1].nli == "contradiction"
    assert checks[2].supports and checks[2].nli == "entailment", "a whole sentence quoted word for word"


def test_the_embedding_judge_checks_each_source_alone_and_needs_the_claims_values():
    embedder = FakeEmbedder()
    text = "The default timeout is 30 seconds. Retries back off exponentially."
    cites = [wk.Citation("c", "q", "The default timeout is 30 seconds.", 1, chunk_id="x", source_text=text),
             wk.Citation("c", "q", "The default timeout is 45 seconds.", 1, chunk_id="x", source_text=text)]
    checks = wk.embedding_support(cites, embedder, threshold=0.5)
    assert checks[0].supports and checks[0].passage == "The default timeout is 30 seconds."
    assert not checks[1].supports and checks[1].missing == ("45",) and "missing_facts" in checks[1].reasons


# -- the command line ----------------------------------------------------------------------------------------------

@pytest.fixture
def cli(monkeypatch, demo_store_fake):
    from workbench import cli as cli_mod

    monkeypatch.setattr(cli_mod, "open_store", lambda args, cfg=None, repair=True: Borrowed(demo_store_fake))
    monkeypatch.setattr(wk, "default_models", lambda: fake_models(reranker=False))
    ran = []
    real = wk.week_one
    monkeypatch.setattr(wk, "week_one", lambda *a, **kw: ran.append(1) or real(*a, **kw))
    return cli_mod.main, ran


@pytest.fixture
def small_golden(tmp_path):
    lines = (Path(__file__).resolve().parents[2] / "golden" / "golden.jsonl").read_text(encoding="utf-8").splitlines()
    path = tmp_path / "small.jsonl"
    path.write_text("\n".join(lines[:6]) + "\n", encoding="utf-8")
    return path


def test_the_cli_prints_the_headline_and_writes_the_report(cli, small_golden, tmp_path, capsys):
    main, ran = cli
    out = tmp_path / "wk"
    assert main(["eval", str(small_golden), "--store", "x", "--week-one", "--no-nli", "--out", str(out),
                 "--examples", "3"]) == 0
    captured = capsys.readouterr()
    assert captured.out.startswith("week one (validation off): ") and "difference the verifier makes" in captured.out
    assert "week-one report: 6 cases, both arms" in captured.err
    assert {p.name for p in out.iterdir()} == {"week_one.json", "week_one.md", "citations.jsonl",
                                               "traces_validation_off.jsonl", "traces_validation_on.jsonl"}
    report = json.loads((out / "week_one.json").read_text(encoding="utf-8"))
    assert report["cases"] == 6 and report["arms"]["off"]["generators"] == ["extractive"]
    assert len(report["examples"]) <= 3
    judged = [json.loads(line) for line in (out / "citations.jsonl").read_text(encoding="utf-8").splitlines()]
    assert len(judged) == report["arms"]["off"]["citations"] + report["arms"]["on"]["citations"]
    assert main(["eval", str(small_golden), "--store", "x", "--week-one", "--no-nli", "--json", "--limit", "2"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["cases"] == 2 and set(printed["arms"]) == {"off", "on"} and len(ran) == 2


@pytest.mark.parametrize("args, message", [
    (["--week-one", "--examples", "-1"], "error: --examples must be at least 0, got -1"),
    (["--week-one", "--check", "floors.json"], "error: --check does not apply to --week-one"),
    (["--week-one", "--csv", "rows.csv"], "error: --csv does not apply to --week-one"),
    (["--examples", "3"], "error: --examples applies to the week-one report; add --week-one"),
])
def test_bad_week_one_flags_are_one_line_and_exit_2(cli, small_golden, capsys, args, message):
    main, ran = cli
    assert main(["eval", str(small_golden), "--store", "x", *args]) == 2
    err = capsys.readouterr().err
    assert err.startswith(message) and len(err.strip().splitlines()) == 1 and ran == []


def test_a_missing_golden_file_is_one_line_and_exit_2(cli, tmp_path, capsys):
    main, ran = cli
    assert main(["eval", str(tmp_path / "none.jsonl"), "--store", "x", "--week-one"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "none.jsonl" in err and "Traceback" not in err and ran == []


def test_the_report_function_refuses_a_negative_example_count(demo_store_fake, small_golden):
    with pytest.raises(wk.WeekOneError, match="--examples"):
        wk.run_week_one(small_golden, PipelineConfig(), open_store=lambda: contextlib.nullcontext(demo_store_fake),
                        models=fake_models(), examples=-2)
