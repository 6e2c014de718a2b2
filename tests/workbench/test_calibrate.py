"""Label-free calibration (workbench/calibrate.py): probes written from the corpus, the estimate they give, and
``workbench calibrate`` as a user runs it."""

from __future__ import annotations

import json
import random
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.config import GateConfig, PipelineConfig
from pipeline.models.registry import Models
from pipeline.testing import FakeEmbedder, fake_models
from pipeline.text.tokenize import tokenize
from tests.support.stores import ingest_texts
from workbench import calibrate, sweep
from workbench import probes as writing
from workbench.probes import PSEUDO, UNANSWERABLE, Corpus, Probe

DOCS = {
    "retries.md": "---\nid: retries\ntitle: Retries\n---\n# Retries\n\nHarbor Relay retries a failed delivery up to "
                  "eight times with exponential backoff and full jitter. After the last attempt the delivery moves "
                  "to the dead-letter queue and the console shows it as failed.\n\n- Set `delivery.max_retries` "
                  "in harbor.toml to change how many attempts are made before giving up.\n",
    "tokens.md": "---\nid: tokens\ntitle: API tokens\n---\n# API tokens\n\nAn admin creates API tokens in the "
                 "console under Settings and copies the secret once, because it is never shown again. A revoked "
                 "token stops working within one minute on every node of the cluster.\n",
    "limits.md": "---\nid: limits\ntitle: Limits\n---\n# Limits\n\nVersion 3.1 raised the endpoint limit per project "
                 "from fifty to two hundred endpoints for paying customers. Throttled deliveries wait in the queue "
                 "for capacity instead of failing with ERR_RATE_LIMITED_429 errors.\n",
}


def _corpus(texts: dict[str, str]) -> Corpus:
    chunks = [(f"{doc}#0", doc, text) for doc, text in texts.items()]
    return Corpus.build(chunks, {cid: tokenize(text) for cid, _doc, text in chunks})


PLAIN = {doc.removesuffix(".md"): text.split("---\n", 2)[2] for doc, text in DOCS.items()}


# -- text --------------------------------------------------------------------------------------------------------

def test_sentences_skip_headings_code_and_tables_and_keep_identifiers_whole():
    text = ("# Title\n\nThe `delivery.max_retries` key sets the **attempts** per delivery. It defaults to eight.\n\n"
            "```toml\nmax_retries = 8\n```\n\n| key | value |\n|---|---|\n| a | b |\n\n- A list item is one "
            "statement\n- [Read more](https://example.com/x) about ERR_TIMEOUT_502\n")
    out = writing.sentences(text)
    assert out == ["The delivery.max_retries key sets the attempts per delivery.", "It defaults to eight.",
                   "A list item is one statement", "Read more about ERR_TIMEOUT_502"]


def test_a_pseudo_question_leaves_its_answer_out_and_asks():
    sentence = "Harbor Relay retries a failed delivery up to eight times with exponential backoff and full jitter."
    made = [writing.pseudo_question(sentence, random.Random(seed)) for seed in range(20)]
    assert all(m is not None for m in made)
    for question, answer in made:
        assert question.endswith("?") and question.split()[0] in ("What", "Which", "How", "Why")
        assert answer and answer not in question
        kept = [w for w in question[:-1].split()[1:] if tokenize(w)]
        assert 3 <= len(kept) <= writing.MAX_KEPT
    assert len({q for q, _ in made}) > 5, "different draws ask different questions"


def test_a_short_sentence_gives_no_question():
    assert writing.pseudo_question("It works.", random.Random(0)) is None


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=400), st.integers(0, 2**16))
def test_probe_writers_never_fail_on_any_text(text, seed):
    rng = random.Random(seed)
    corpus = _corpus({"a": text, "b": "Another document about queues and retries with ERR_X_1 codes."})
    for sentence in writing.sentences(text):
        made = writing.pseudo_question(sentence, rng)
        if made is None:
            continue
        assert made[0].endswith("?")
        for kind in ("swapped-out", "swapped-in", "swapped-near"):
            probe = writing.perturb(made[0], ("a#0", "a", text), kind, corpus, rng)
            assert probe is None or (probe[0] != made[0] and " -> " in probe[1])


def test_a_swapped_out_term_is_one_the_corpus_never_uses():
    corpus = _corpus(PLAIN)
    question = "Which limit did Version 3.1 raise per project?"
    for seed in range(10):
        probe, changed = writing.perturb(question, ("limits#0", "limits", PLAIN["limits"]), "swapped-out", corpus,
                                           random.Random(seed))
        old, new = changed.split(" -> ")
        assert old == "3.1" and new != "3.1" and new in probe
        assert not corpus.holds(tokenize(new)[0]), "the whole term is new to the corpus"


def test_an_identifier_is_swapped_out_for_a_new_one_with_the_same_parts():
    corpus = _corpus(PLAIN)
    probe, changed = writing.perturb("Why do deliveries fail with ERR_RATE_LIMITED_429 errors?",
                                       ("limits#0", "limits", PLAIN["limits"]), "swapped-out", corpus, random.Random(0))
    old, new = changed.split(" -> ")
    assert old == "ERR_RATE_LIMITED_429" and new.startswith("ERR_RATE_LIMITED_") and new != old
    assert not corpus.holds(new.lower()) and new in probe


def test_a_swapped_in_term_comes_from_another_document_and_never_meets_the_rest_in_one_chunk():
    corpus = _corpus(PLAIN)
    question = "How many times does Harbor Relay retry a failed delivery with backoff?"
    chunk = ("retries#0", "retries", PLAIN["retries"])
    made = [writing.perturb(question, chunk, "swapped-in", corpus, random.Random(s)) for s in range(10)]
    made = [m for m in made if m is not None]
    assert made
    for probe, changed in made:
        new = changed.split(" -> ")[1]
        assert all(corpus.holds(t) for t in tokenize(new)) and new.lower() not in PLAIN["retries"].lower()
        assert not corpus.meet(tokenize(probe))


def test_a_swapped_near_term_comes_from_the_same_chunk_and_no_sentence_states_the_probe():
    corpus = _corpus(PLAIN)
    question = "How many times does Harbor Relay retry a failed delivery with backoff?"
    chunk = ("retries#0", "retries", PLAIN["retries"])
    made = [writing.perturb(question, chunk, "swapped-near", corpus, random.Random(s)) for s in range(10)]
    made = [m for m in made if m is not None]
    assert made
    for probe, changed in made:
        new = changed.split(" -> ")[1]
        assert new in PLAIN["retries"] and new.lower() not in question.lower()
        assert not any(set(tokenize(probe)) <= set(tokenize(s)) for s in writing.sentences(PLAIN["retries"]))


def test_off_corpus_questions_the_corpus_could_answer_are_dropped():
    cooking = {**PLAIN, "eggs": "You should boil an egg for six minutes for a runny yolk; how long depends on its size."}
    kept = writing.off_corpus(_corpus(cooking), len(writing.OFF_CORPUS), random.Random(0))
    questions = {p.query for p in kept}
    assert "How long should I boil an egg for a runny yolk?" not in questions
    assert len(questions) == len(writing.OFF_CORPUS) - 1


def test_probes_are_seeded_and_of_every_kind(demo_store_fake):
    corpus = calibrate.corpus_of(demo_store_fake)
    probes = writing.make_probes(corpus, 40, seed=3)
    assert probes == writing.make_probes(corpus, 40, seed=3)
    assert probes != writing.make_probes(corpus, 40, seed=4)
    kinds = {k: sum(p.kind == k for p in probes) for k in calibrate.KINDS}
    assert kinds == writing.counts(40)
    live = {c.chunk_id for c in demo_store_fake.chunks() if not c.superseded_by and not c.superseded_reason}
    assert all(p.chunk_id in live for p in probes if p.kind != "off-corpus")
    assert all(p.answerable == (p.kind == PSEUDO) for p in probes)


# -- the estimate --------------------------------------------------------------------------------------------------

def _scores(probes: list[Probe], learned: list[float]) -> sweep.Scores:
    n = len(probes)
    return sweep.Scores(ids=tuple(str(i) for i in range(n)), answerable=np.array([p.answerable for p in probes]),
                        rerank=np.full(n, np.nan), fused=np.full(n, 0.03), dense=np.full(n, 0.7), inputs=(),
                        learned=np.array(learned, dtype=float))


def _probes(kinds: dict[str, int]) -> list[Probe]:
    return [Probe(kind, f"{kind} {i}") for kind, n in kinds.items() for i in range(n)]


def test_the_false_answer_rate_weighs_each_kind_of_unanswerable_probe():
    probes = _probes({PSEUDO: 4, "off-corpus": 4, "swapped-out": 2, "swapped-in": 2, "answer-removed": 2,
                      "swapped-near": 2})
    # every off-corpus probe scores high, every on-topic probe low: half the weight is answered at 0.5; the
    # swapped-near probes are all answered but weigh nothing by default
    learned = [0.9, 0.9, 0.9, 0.2] + [0.8] * 4 + [0.1] * 6 + [0.95] * 2
    est = calibrate.estimate(_scores(probes, learned), probes, GateConfig(confidence_threshold_learned=0.5))
    assert est.rule == "learned"
    assert est.current.answer_rate == 0.75 and est.current.false_answer_rate == pytest.approx(0.5)
    assert est.current.by_kind == {PSEUDO: 0.75, "off-corpus": 1.0, "swapped-out": 0.0, "swapped-in": 0.0,
                                   "answer-removed": 0.0, "swapped-near": 1.0}
    removed_answered = calibrate.estimate(_scores(probes, learned[:12] + [0.9, 0.9] + [0.95] * 2), probes,
                                          GateConfig(confidence_threshold_learned=0.5))
    assert removed_answered.current.false_answer_rate == pytest.approx(0.5 + 0.5 / 3), \
        "answered answer-removed probes weigh a third of the on-topic half"
    c = est.calibrated
    assert c is not None and c.false_answer_rate <= 0.05
    assert 0.8 < c.thresholds["t_learned"] <= 0.9 and c.answer_rate == 0.75
    assert est.settings() == [f"gate.confidence_threshold_learned={c.thresholds['t_learned']:.6g}"]
    adversarial = calibrate.estimate(_scores(probes, learned), probes, GateConfig(confidence_threshold_learned=0.5),
                                     weights=calibrate.parse_weights("swapped-near=1"))
    assert adversarial.current.false_answer_rate == 1.0, "a stated mix of only adversarial probes"


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.sampled_from(UNANSWERABLE), st.floats(0, 1e6, allow_nan=False), min_size=1))
def test_weights_round_trip(weights):
    if sum(weights.values()) <= 0:
        with pytest.raises(ValueError, match="more than 0"):
            calibrate.parse_weights(calibrate.format_weights(weights))
        return
    parsed = calibrate.parse_weights(calibrate.format_weights(weights))
    assert parsed == {k: weights.get(k, 0.0) for k in UNANSWERABLE}


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=80))
def test_any_weights_text_parses_or_says_what_is_wrong(text):
    try:
        parsed = calibrate.parse_weights(text)
    except ValueError as exc:
        assert str(exc).startswith("weights: ")
    else:
        assert set(parsed) == set(UNANSWERABLE) and sum(parsed.values()) > 0


def test_no_threshold_reaches_an_impossible_target():
    probes = _probes({PSEUDO: 2, "off-corpus": 2, "swapped-out": 1, "swapped-in": 1})
    learned = [0.5, 0.5, 0.9, 0.9, 0.9, 0.9]  # every probe above every pseudo-question
    est = calibrate.estimate(_scores(probes, learned), probes, GateConfig(), target=0.05)
    assert est.calibrated is not None and est.calibrated.answer_rate == 0.0, "only 'answer nothing' is within 5 %"


def test_the_comparison_reports_estimate_minus_measured_in_points():
    probes = _probes({PSEUDO: 2, "off-corpus": 2, "swapped-out": 1, "swapped-in": 1})
    est = calibrate.estimate(_scores(probes, [0.9, 0.9, 0.1, 0.1, 0.95, 0.1]), probes,
                             GateConfig(confidence_threshold_learned=0.5),
                             weights=calibrate.parse_weights("off-corpus=2,swapped-out=1,swapped-in=1"))
    assert est.current.false_answer_rate == pytest.approx(0.25)
    labelled = sweep.Scores(ids=("a", "b", "c", "d"), answerable=np.array([True, True, False, False]),
                            rerank=np.full(4, np.nan), fused=np.full(4, 0.03), dense=np.full(4, 0.7), inputs=(),
                            learned=np.array([0.9, 0.2, 0.6, 0.1]))
    c = calibrate.compare(est, labelled, GateConfig(confidence_threshold_learned=0.5))
    assert c.measured_current["false_answer_rate_unanswerable"] == 0.5
    assert c.error_current_points == pytest.approx(-25.0)
    assert c.measured_calibrated is not None and c.error_calibrated_points is not None
    result = calibrate.Calibration("store", 1, 0, tuple(probes), labelled, est)
    lines = calibrate.report_lines(result, calibrate.Measured("golden test part", c))
    measured = next(line for line in lines if "at the configured threshold" in line and line.startswith("measured"))
    assert "answered 50.0 % [9.5–90.5] / false answers 50.0 % [9.5–90.5]" in measured, "each rate over its 2 cases"
    assert "estimate off by -25.0 points" in measured


def test_a_corpus_without_sentences_is_a_clear_error():
    probes = _probes({"off-corpus": 3})
    with pytest.raises(ValueError, match="needs pseudo-questions"):
        calibrate.estimate(_scores(probes, [0.1] * 3), probes, GateConfig())


# -- against a store ---------------------------------------------------------------------------------------------

def test_calibration_on_a_small_corpus_reads_the_learned_rule_without_a_cross_encoder(demo_store_fake):
    models = Models(embedder=FakeEmbedder(), reranker_unavailable="no cross-encoder in this test")
    result = calibrate.calibrate(demo_store_fake, models, PipelineConfig(), n=30, seed=0)
    e = result.estimate
    assert e.rule == "learned"
    assert e.probes[PSEUDO] == 30 and all(e.probes[k] > 0 for k in UNANSWERABLE)
    for point in (e.current, e.calibrated):
        assert point is not None
        assert 0.0 <= point.answer_rate <= 1.0 and 0.0 <= point.false_answer_rate <= 1.0
    assert e.calibrated.false_answer_rate <= e.target
    rows = result.rows()
    assert len(rows) == len(result.probes) and {r["kind"] for r in rows} == set(calibrate.KINDS)
    lines = calibrate.report_lines(result)
    assert lines[1] == "rule read: learned"
    assert any(line.startswith("settings: --set gate.confidence_threshold_learned=") for line in lines)


def test_calibration_reads_the_rule_the_gate_applies_when_the_cross_encoder_ran(demo_store_fake):
    """With a cross-encoder the gate's ``auto`` reads the learned rule (the rerank score is one of its inputs, or
    not, per the fitted set); the estimate reads the same rule, so each probe counts as answered exactly when the
    gate answers it."""
    from workbench.evaluate import eval_pipeline

    cfg = PipelineConfig()
    result = calibrate.calibrate(demo_store_fake, fake_models(), cfg, n=12, seed=1)
    assert result.estimate.rule == "learned"
    assert set(result.estimate.current.thresholds) == {"t_learned"}
    pipe = eval_pipeline(demo_store_fake, fake_models(), cfg)
    plain = [(p, r) for p, r in zip(result.probes, result.rows(), strict=True) if not p.removed]
    decisions = [pipe.search(p.query).gate for p, _ in plain]
    assert [r["answered"] for _, r in plain] == [g.decision == "answer" for g in decisions]
    assert {g.scale for g in decisions if g.status == "ran"} <= {"learned", "fused_and_dense"}


def test_an_answer_removed_probe_is_searched_without_the_chunks_that_state_its_answer(demo_store_fake):
    from workbench.evaluate import eval_pipeline

    cfg = PipelineConfig()
    removed = [p for p in writing.make_probes(calibrate.corpus_of(demo_store_fake), 40, seed=3)
               if p.kind == "answer-removed"]
    assert len(removed) == writing.counts(40)["answer-removed"]
    texts = {c.chunk_id: c.text for c in demo_store_fake.chunks()}
    view = calibrate._Hiding(demo_store_fake)
    hiding, seeing = eval_pipeline(view, fake_models(), cfg), eval_pipeline(demo_store_fake, fake_models(), cfg)
    sources_found = 0
    for probe in removed:
        assert probe.chunk_id in probe.removed and not probe.answerable
        assert set(tokenize(probe.changed)) <= set(tokenize(texts[probe.chunk_id])), "its answer is in its source"
        view.hidden = frozenset(probe.removed)
        hidden = [c.chunk_id for c in hiding.search(probe.query).retrieval.candidates]
        shown = [c.chunk_id for c in seeing.search(probe.query).retrieval.candidates]
        assert not set(hidden) & set(probe.removed), "no removed chunk is a candidate"
        assert len(hidden) >= len(shown) // 2, "the legs still return candidates"
        sources_found += probe.chunk_id in shown
    assert sources_found >= len(removed) // 2, "without the view the question finds its source"


# -- the command line --------------------------------------------------------------------------------------------

@pytest.fixture
def small_store(tmp_path, monkeypatch):
    ingest_texts(tmp_path, DOCS)
    monkeypatch.setattr("pipeline.models.registry.default_models", lambda: fake_models(reranker=False))
    return tmp_path / "store"


def test_cli_prints_one_line_per_key_figure(small_store, capsys):
    from workbench.cli import main

    assert main(["calibrate", "--store", str(small_store), "--probes", "10"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert re.match(r"probes: \d+ pseudo-questions, \d+ off-corpus, \d+ swapped-out, \d+ swapped-in", lines[0])
    assert lines[1] == "rule read: learned"
    assert lines[2].startswith("at the configured threshold (confidence_threshold_learned=")
    assert "estimated false answers" in lines[2] and "estimated answered" in lines[2]
    assert lines[3].startswith("for at most 5.0 % false answers")


def test_cli_json_and_golden_measurement(small_store, tmp_path, capsys):
    from workbench.cli import main

    golden = tmp_path / "golden.jsonl"
    rows = [{"id": "a", "question": "How many times does Harbor Relay retry a delivery?", "answerable": True,
             "expected_doc_ids": ["retries"]},
            {"id": "b", "question": "How do I bake sourdough bread?", "answerable": False}]
    golden.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    assert main(["calibrate", "--store", str(small_store), "--probes", "10", "--golden", str(golden), "--json",
                 "--probes-out"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["rule"] == "learned" and 0 < data["probes"]["pseudo"] <= 10, "a tiny corpus gives what it can"
    assert 0.0 <= data["current"]["false_answer_rate"] <= 1.0
    assert data["measured"]["label"] == "golden.jsonl, all part (2 cases)"
    assert data["measured"]["cases"] == 2 and "error_current_points" in data["measured"]
    assert {r["kind"] for r in data["probe_rows"]} <= set(calibrate.KINDS)


@pytest.mark.parametrize("args, message", [
    (["--probes", "3"], "--probes must be at least 10"),
    (["--target", "1.5"], "--target must be a false-answer rate between 0 and 1"),
    (["--golden", "missing.jsonl"], "missing.jsonl"),
    (["--golden", "{golden}", "--split", "test"], "split"),
    (["--weights", "swapped-in=0.5,elsewhere=1"], "--weights: unknown probe kind 'elsewhere'"),
    (["--weights", "off-corpus=0"], "--weights: at least one kind must weigh more than 0"),
])
def test_cli_bad_input_is_one_line_and_exit_2(small_store, tmp_path, capsys, args, message):
    from workbench.cli import main

    golden = tmp_path / "g.jsonl"
    golden.write_text(json.dumps({"id": "a", "question": "q?", "answerable": False}) + "\n")
    args = [a.replace("{golden}", str(golden)) for a in args]
    assert main(["calibrate", "--store", str(small_store), *args]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and message in err[0]


def test_cli_on_an_empty_store_says_to_ingest_first(tmp_path, monkeypatch, capsys):
    from workbench.cli import main

    monkeypatch.setattr("pipeline.models.registry.default_models", lambda: fake_models(reranker=False))
    assert main(["calibrate", "--store", str(tmp_path / "empty")]) == 2
    assert "is empty; ingest documents first" in capsys.readouterr().err
