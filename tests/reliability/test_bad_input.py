"""Bad input (issue 10, part 2): each case is a clear one-line error or a recorded degradation, and nothing
already stored is lost or half-written.

Groups: questions (through the Pipeline and the real CLI), documents (loaders, ingest, the CLI), config
values and keys (the API and the CLI), LLM replies (through the whole pipeline with a scripted fake model),
and a golden file with bad lines (``workbench eval``).
"""

from __future__ import annotations

import json
import re

import pytest

from pipeline.config import ConfigError, PipelineConfig
from pipeline.engine import MAX_QUESTION_CHARS, Pipeline, QuestionError
from pipeline.generation.prompts import ABSTENTION_MESSAGE
from pipeline.ingestion.ingest import ingest_paths, needs_repair
from pipeline.retrieval.bm25 import query_weights, to_sparse
from pipeline.storage.runs import RunLog
from pipeline.storage.store import Store
from pipeline.testing import FakeLLM, fake_models
from pipeline.text.tokenize import tokenize
from tests.reliability.rel_support import LLM_CFG, QUESTION, error_lines, one_line_error, workbench


def snapshot(store: Store) -> dict:
    """Everything a user would miss if it were lost: documents, their chunk texts, the corpus version."""
    return {"version": store.corpus_version,
            "documents": {d.doc_id: d.content_hash for d in store.documents()},
            "chunks": [(c.chunk_id, c.text) for c in store.chunks()],
            "index_points": store.index.count()}


def keyword_docs(store: Store, query: str) -> set[str]:
    indices, values = to_sparse(query_weights(tokenize(query)))
    return {h.doc_id for h in store.keyword_search(indices, values, 10)}


# == questions ==================================================================================================

BAD_QUESTIONS = [
    pytest.param("", "the question is empty", id="q-empty"),
    pytest.param("   \n\t  ", "the question is empty", id="q-whitespace"),
    pytest.param("x" * 100_000, "the limit is 2,000", id="q-100kb"),
    pytest.param("q" * (MAX_QUESTION_CHARS + 1), "the limit is 2,000", id="q-one-over-the-limit"),
    pytest.param("\x00\x07\x1b\x7f\u200b\u202e", "the question is empty", id="q-control-characters-only"),
    pytest.param(None, "must be text", id="q-not-text"),
]


@pytest.mark.parametrize(("question", "message"), BAD_QUESTIONS)
def test_a_bad_question_is_a_clear_error_and_nothing_is_logged(benign_store, tmp_path, question, message):
    runs = RunLog(tmp_path / "runs.sqlite")
    pipeline = Pipeline(benign_store, fake_models(), runs=runs)
    with pytest.raises(QuestionError, match=re.escape(message)) as raised:
        pipeline.ask(question)
    assert "\n" not in str(raised.value)
    assert runs.list() == [], "a rejected question leaves no half-written run"


@pytest.mark.parametrize(("question", "expected"), [
    pytest.param("What is the default\x00 request\x1b timeout of\x07 Marlin Gateway?", QUESTION, id="q-control-mixed-in"),
    pytest.param("\u202eWhat is the default request timeout of Marlin Gateway?\u202c", QUESTION, id="q-bidi-override"),
    pytest.param("q" * MAX_QUESTION_CHARS, "q" * MAX_QUESTION_CHARS, id="q-exactly-the-limit"),
])
def test_a_question_with_stray_characters_is_cleaned_and_the_cleaned_text_recorded(benign_store, tmp_path, question,
                                                                                 expected):
    runs = RunLog(tmp_path / "runs.sqlite")
    trace = Pipeline(benign_store, fake_models(), runs=runs).ask(question)
    assert trace.question == expected
    assert [r.run_id for r in runs.list()] == [trace.run_id]


def test_a_right_to_left_question_is_answered_or_abstains_never_crashes(benign_store, tmp_path):
    runs = RunLog(tmp_path / "runs.sqlite")
    trace = Pipeline(benign_store, fake_models(), runs=runs).ask("ما هي مهلة الطلب الافتراضية في Marlin Gateway؟")
    assert trace.gate.status == "ran" and trace.answer
    assert trace.abstained or re.search(r"\[\d+\]", trace.answer)
    assert runs.get(trace.run_id).question == trace.question


def test_a_malformed_history_is_a_clear_error(benign_store):
    with pytest.raises(QuestionError, match="history turns must be objects with 'role' and 'content'"):
        Pipeline(benign_store, fake_models(), log_runs=False).ask(QUESTION, history=[{"role": "user"}])


@pytest.mark.parametrize(("args", "message"), [
    pytest.param([""], "the question is empty", id="cli-q-empty"),
    pytest.param(["  \t "], "the question is empty", id="cli-q-whitespace"),
    pytest.param(["x" * 100_000], "the limit is 2,000", id="cli-q-100kb"),
    pytest.param(["\x07\x1b\u200b\u202e"], "the question is empty", id="cli-q-control-only"),
    pytest.param([QUESTION, "--history", "{history}/bad.json"], "is not valid JSON", id="cli-history-not-json"),
    pytest.param([QUESTION, "--history", "{history}/object.json"], "must hold a list", id="cli-history-not-a-list"),
    pytest.param([QUESTION, "--history", "{history}/missing.json"], "cannot read history file", id="cli-history-missing"),
])
def test_a_bad_question_on_the_cli_is_one_line_and_exit_2(cli_store, tmp_path, args, message):
    (tmp_path / "bad.json").write_text("[{\"role\": ", encoding="utf-8")
    (tmp_path / "object.json").write_text('{"history": "user: hi"}', encoding="utf-8")
    args = [a.replace("{history}", str(tmp_path)) for a in args]
    result = workbench("ask", *args, "--store", str(cli_store), timeout=120)
    assert result.returncode == 2
    assert message in one_line_error(result)


def test_a_right_to_left_question_on_the_cli_answers_or_abstains(cli_store):
    result = workbench("ask", "كيف أعيد تشغيل الأحداث من قائمة الرسائل الميتة؟", "--store", str(cli_store), "--json",
                       timeout=300)
    assert result.returncode == 0, result.stderr
    trace = json.loads(result.stdout)
    assert trace["gate"]["decision"] in ("answer", "abstain") and trace["answer"]


# == documents ====================================================================================================

def _utf16(text: str) -> bytes:
    return text.encode("utf-16-le")  # no byte-order mark: with one, the file is decoded (test_batch_robustness)


BAD_DOCUMENTS = [
    pytest.param("logo.md", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", "binary file", id="doc-binary"),
    pytest.param("empty.md", b"", "empty document", id="doc-empty"),
    pytest.param("blank.txt", b"  \n\n\t\n", "empty document", id="doc-whitespace-only"),
    pytest.param("only-fm.md", b"---\nid: only-front-matter\ntitle: Nothing else\n---\n", "empty document",
                 id="doc-only-front-matter"),
    pytest.param("latin1.md", "Le d\xe9lai par d\xe9faut est 30 s.".encode("latin-1"), "not valid UTF-8",
                 id="doc-latin-1"),
    pytest.param("utf16-no-bom.txt", _utf16("Title\nThe default timeout is 30 s."), "UTF-16 without a byte-order mark",
                 id="doc-utf-16-without-bom"),
    pytest.param("cp1252.html", "<p>\x93smart quotes\x94</p>".encode("latin-1"), "not valid UTF-8", id="doc-cp1252-html"),
    pytest.param("broken-fm.md", b"---\nid: [unclosed\ntitle: x\n---\nBody text.\n", "malformed front matter",
                 id="doc-front-matter-yaml-error"),
    pytest.param("list-fm.md", b"---\n- id\n- title\n---\nBody text.\n", "expected 'key: value' lines",
                 id="doc-front-matter-not-a-mapping"),
    pytest.param("open-fm.md", b"---\nid: open\n\nBody without a closing marker.\n", "no closing ---",
                 id="doc-front-matter-not-closed"),
    pytest.param("nested-fm.md", b"---\nid: nested\ntitle:\n  en: Nested\n---\nBody text.\n", "must be a plain value",
                 id="doc-front-matter-nested-value"),
    pytest.param("date-fm.md", b"---\nid: dated\neffective_date: next tuesday\n---\nBody text.\n", "not a date",
                 id="doc-front-matter-bad-date"),
    pytest.param("bad-id.md", b"---\nid: ../../etc/passwd\n---\nBody text.\n", "invalid id", id="doc-path-like-id"),
    pytest.param("dup.md", b"---\nid: mg-timeout\n---\nA second document claiming an existing id.\n", "duplicate id",
                 id="doc-duplicate-id-in-batch"),
    pytest.param("lines.jsonl", b'{"id": "j-1", "text": "one"\n', "not valid JSON", id="doc-jsonl-broken-line"),
    pytest.param("nofield.jsonl", b'{"id": "j-2", "title": "no text"}\n', "missing required field(s): text",
                 id="doc-jsonl-missing-text"),
    pytest.param("type.jsonl", b'{"id": "j-3", "text": ["not", "a", "string"]}\n', "must be a string",
                 id="doc-jsonl-text-not-a-string"),
    pytest.param("array.jsonl", b'["id", "text"]\n', "expected a JSON object", id="doc-jsonl-not-an-object"),
    pytest.param("dupe.jsonl", b'{"id": "j-4", "text": "first"}\n{"id": "j-4", "text": "second"}\n', "duplicate id",
                 id="doc-jsonl-duplicate-id"),
    pytest.param("manual.pdf", b"%PDF-1.7 binary", "unsupported file type '.pdf'", id="doc-unsupported-type"),
]


@pytest.mark.parametrize(("name", "content", "message"), BAD_DOCUMENTS)
def test_a_bad_document_is_one_problem_line_and_nothing_stored_is_lost(benign_home, tmp_path, name, content,
                                                                       message):
    batch = tmp_path / "batch"
    batch.mkdir()
    (batch / name).write_bytes(content)
    with Store.open(benign_home / "store") as store:
        before = snapshot(store)
        report = ingest_paths(store, [benign_home / "corpus", batch], PipelineConfig(), fake_models(), progress=False)
        assert len(report.problems) == 1 and message in report.problems[0] and "\n" not in report.problems[0]
        assert name in report.problems[0]
        after = snapshot(store)
        if report.added:  # dupe.jsonl: the first of two lines with one id is a valid new document
            assert report.added == ("j-4",) and after["version"] == before["version"] + 1
            after = {**after, "version": before["version"], "index_points": before["index_points"],
                     "documents": {k: v for k, v in after["documents"].items() if k != "j-4"},
                     "chunks": [c for c in after["chunks"] if not c[0].startswith("j-4#")]}
            store.delete_document("j-4")  # leave the shared store as it was
        assert after == before, "a rejected document changes nothing stored: no document, chunk or version"
        assert not needs_repair(store)
        assert "mg-timeout" in keyword_docs(store, "default request timeout")


def test_a_document_over_the_size_limit_is_rejected_without_being_read(benign_home, tmp_path):
    big = tmp_path / "huge.md"
    with big.open("wb") as f:  # sparse: 11 MB on paper, nothing on disk
        f.truncate(11 * 1024 * 1024)
    with Store.open(benign_home / "store") as store:
        before = snapshot(store)
        report = ingest_paths(store, [big], PipelineConfig(), fake_models(), progress=False)
        assert report.problems == (f"{big}: too large (11.5 MB > 10 MB); split it into smaller documents",)
        assert snapshot(store) == before


def test_a_huge_valid_document_is_ingested_whole(tmp_path):
    paragraphs = [f"Paragraph {i} of the capacity plan says node {i} holds {i * 3} queues." for i in range(6000)]
    (tmp_path / "plan.md").write_text("---\nid: capacity-plan\n---\n# Capacity plan\n\n" + "\n\n".join(paragraphs),
                                      encoding="utf-8")
    assert (tmp_path / "plan.md").stat().st_size > 400_000
    with Store.open(tmp_path / "store") as store:
        report = ingest_paths(store, [tmp_path / "plan.md"], PipelineConfig(), fake_models(), progress=False)
        assert report.problems == () and report.documents == 1
        text = " ".join(c.text for c in store.chunks("capacity-plan"))
        assert all(f"node {i} holds" in text for i in (0, 2999, 5999)), "no part of the document was dropped"
        assert store.index.count() == store.chunk_count() == report.chunks > 100


def test_a_batch_of_only_bad_files_through_the_cli_prints_one_line_each_and_keeps_the_store(cli_store, tmp_path):
    batch = tmp_path / "bad"
    batch.mkdir()
    for name, content, _ in (p.values for p in BAD_DOCUMENTS):
        if name not in ("dup.md", "dupe.jsonl"):  # duplicates: the first copy is valid
            (batch / name).write_bytes(content)
    before = json.loads(workbench("docs", "--store", str(cli_store), "--json").stdout)
    result = workbench("ingest", str(batch), "--store", str(cli_store), "--json", timeout=300)
    assert result.returncode == 2, "nothing valid in the batch: bad input"
    assert "Traceback" not in result.stderr
    problems = [line for line in error_lines(result) if line.startswith("problem: ")]
    assert len(problems) == len(BAD_DOCUMENTS) - 2, result.stderr  # one line per bad file
    assert json.loads(result.stdout)["corpus_version"] == before["corpus_version"]
    assert json.loads(workbench("docs", "--store", str(cli_store), "--json").stdout) == before


def test_of_two_files_with_one_id_the_first_loaded_wins_and_the_problem_names_both(benign_home, tmp_path):
    # Recorded, not prevented: the order of the paths decides which copy is ingested.
    (tmp_path / "a-copy.md").write_text("---\nid: mg-timeout\n---\nThe timeout is 45 seconds.\n", encoding="utf-8")
    with Store.open(tmp_path / "copy") as store:
        report = ingest_paths(store, [tmp_path / "a-copy.md", benign_home / "corpus"], PipelineConfig(), fake_models(),
                              progress=False)
        (problem,) = report.problems
        assert "timeout.md" in problem and "already loaded from" in problem and "a-copy.md" in problem
        assert [c.text for c in store.chunks("mg-timeout")] == ["The timeout is 45 seconds."]


def test_another_file_reusing_a_stored_id_replaces_it_and_says_so(benign_home, tmp_path):
    (tmp_path / "other.md").write_text("---\nid: mg-retries\ntitle: Retries, rewritten\n---\nRetries: 7.\n",
                                       encoding="utf-8")
    with Store.open(tmp_path / "copy") as store:
        ingest_paths(store, [benign_home / "corpus"], PipelineConfig(), fake_models(), progress=False)
        version = store.corpus_version
        report = ingest_paths(store, [tmp_path / "other.md"], PipelineConfig(), fake_models(), progress=False)
        assert report.updated == ("mg-retries",), "the replacement is reported, not silent"
        assert store.corpus_version == version + 1
        assert [c.text for c in store.chunks("mg-retries")] == ["Retries: 7."]
        assert {d.doc_id for d in store.documents()} == {"mg-timeout", "mg-retries", "mg-keys"}


# == config ==========================================================================================================

BAD_OVERRIDES = [
    pytest.param({"gaet.signal": "auto"}, "unknown config section 'gaet' (did you mean 'gate'?)", id="cfg-unknown-section"),
    pytest.param({"rerank.topk": "5"}, "unknown config key rerank.topk (did you mean rerank.top_k?)",
                 id="cfg-unknown-key"),
    pytest.param({"gate.confidence_threshold_rerank": "1.5"}, "must be between 0.0 and 1.0; got 1.5",
                 id="cfg-out-of-range"),
    pytest.param({"validate.claim_threshold": "nan"}, "must be a finite number", id="cfg-nan"),
    pytest.param({"gate.confidence_threshold_fused": "inf"}, "must be a finite number", id="cfg-infinite"),
    pytest.param({"cache.enabled": "maybe"}, "must be true or false; got 'maybe'", id="cfg-bad-bool"),
    pytest.param({"generate.backend": "gpt-5"}, "must be one of extractive, litellm, local", id="cfg-bad-choice"),
    pytest.param({"rerank.top_k": "2.5"}, "rerank.top_k must be an integer; got '2.5'", id="cfg-float-for-int"),
    pytest.param({"rerank.top_k": "200"}, "must not exceed rerank.candidates", id="cfg-inconsistent-values"),
    pytest.param({"signal": "auto"}, "must look like stage.key", id="cfg-key-without-section"),
    pytest.param({"retrieve.dense_top_k": "-3"}, "must be between 1 and 1000; got -3", id="cfg-negative"),
]


@pytest.mark.parametrize(("override", "message"), BAD_OVERRIDES)
def test_a_bad_config_value_or_key_is_one_clear_message(override, message):
    with pytest.raises(ConfigError) as raised:
        PipelineConfig().with_overrides(override)
    assert message in str(raised.value) and "\n" not in str(raised.value)


BAD_CONFIG_FILES = [
    pytest.param("{gate: 1}", "config is not valid JSON", id="cfg-file-not-json"),
    pytest.param("[1, 2]", "a config must be a JSON object of sections", id="cfg-file-array"),
    pytest.param('{"gate": {"treshold": 0.3}}', "unknown config key gate.treshold", id="cfg-file-unknown-key"),
    pytest.param('{"gate": "strict"}', "config section 'gate' must be an object", id="cfg-file-section-not-object"),
    pytest.param('{"gate": {"confidence_threshold_rerank": "high"}}', "gate.confidence_threshold_rerank: expected a number, got 'high'",
                 id="cfg-file-wrong-type"),
]


@pytest.mark.parametrize(("text", "message"), BAD_CONFIG_FILES)
def test_a_bad_config_file_is_one_clear_message(text, message):
    with pytest.raises(ConfigError) as raised:
        PipelineConfig.from_json(text)
    assert message in str(raised.value) and "\n" not in str(raised.value)


@pytest.mark.parametrize(("args", "message"), [
    pytest.param(["--set", "gate.signal"], "--set expects stage.key=value", id="cli-set-without-equals"),
    pytest.param(["--set", "gate.confidence_threshold_rerank=2"], "must be between 0.0 and 1.0", id="cli-set-out-of-range"),
    pytest.param(["--set", "generate.backend=gpt-5"], "must be one of extractive, litellm, local", id="cli-set-bad-choice"),
    pytest.param(["--config", "{dir}/bad.json"], "config is not valid JSON", id="cli-config-file-not-json"),
    pytest.param(["--config", "{dir}/unknown.json"], "unknown config section 'gaet'", id="cli-config-file-unknown-section"),
])
def test_a_bad_config_on_the_cli_is_one_line(cli_store, tmp_path, args, message):
    (tmp_path / "bad.json").write_text("{not json", encoding="utf-8")
    (tmp_path / "unknown.json").write_text('{"gaet": {}}', encoding="utf-8")
    args = [a.replace("{dir}", str(tmp_path)) for a in args]
    result = workbench("ask", QUESTION, "--store", str(cli_store), *args, timeout=120)
    assert result.returncode == 2
    assert message in one_line_error(result)


# == LLM replies ======================================================================================================

def _reply(**fields) -> str:
    base = {"answer": "The default request timeout of Marlin Gateway is 30 seconds [1].", "used_source_ids": [1],
            "confidence": "HIGH", "limitations": []}
    base.update(fields)
    return json.dumps({k: v for k, v in base.items() if v is not ...})


BAD_REPLIES = [
    pytest.param("", "the reply is empty", id="llm-empty"),
    pytest.param("   \n ", "the reply is empty", id="llm-whitespace"),
    pytest.param("The timeout is 30 seconds, according to the docs.", "the reply contains no JSON object",
                 id="llm-prose-not-json"),
    pytest.param('{"answer": "The timeout is 30 s [1].", "used_source_ids": [1]', "not valid JSON", id="llm-truncated-json"),
    pytest.param('["The timeout is 30 s [1]."]', "the reply is a JSON list, not an object", id="llm-json-array"),
    pytest.param(_reply(confidence=..., limitations=...), "missing required field(s): confidence, limitations",
                 id="llm-missing-fields"),
    pytest.param(_reply(answer=None), "answer must be a non-empty string", id="llm-null-answer"),
    pytest.param(_reply(used_source_ids="one"), "used_source_ids must be a list", id="llm-ids-wrong-type"),
    pytest.param(_reply(used_source_ids=["first"]), "used_source_ids must hold source numbers", id="llm-ids-not-numbers"),
    pytest.param(_reply(confidence=5), "confidence must be HIGH, MEDIUM or LOW", id="llm-confidence-wrong-type"),
    pytest.param(_reply(confidence="VERY HIGH"), "confidence must be HIGH, MEDIUM or LOW", id="llm-confidence-unknown"),
    pytest.param(_reply(limitations={"none": True}), "limitations must be a list of strings",
                 id="llm-limitations-wrong-type"),
    pytest.param("x" * 51_200, "more than generate.max_output_tokens=512 allows", id="llm-50kb-garbage"),
]


@pytest.mark.parametrize(("reply", "parse_error"), BAD_REPLIES)
def test_a_malformed_reply_twice_is_the_cited_extractive_answer_with_the_reason(benign_store, reply, parse_error):
    llm = FakeLLM([reply, reply])
    trace = Pipeline(benign_store, fake_models(llm=llm), LLM_CFG, log_runs=False).ask(QUESTION)
    gen = trace.generation
    assert gen.status == "fallback" and gen.backend == "extractive" and trace.llm_calls == 2
    assert parse_error in gen.attempts[0].parse_error and parse_error in gen.fallback_reason
    assert parse_error in llm.requests[1].messages[-1].content, "the retry tells the model what was wrong"
    assert len(llm.requests[1].messages[-2].content) <= 2000, "a huge bad reply is not echoed back whole"
    assert re.search(r"30 seconds .*\[1\]", trace.answer), "the user still gets the cited passage"
    assert any(d.startswith("generation fell back to extractive") for d in trace.degradations)
    assert trace.validation.supported >= 1 and trace.confidence in ("MEDIUM", "LOW")


def test_a_malformed_reply_then_a_good_one_is_used_and_the_retry_recorded(benign_store):
    llm = FakeLLM(["not json", _reply()])
    trace = Pipeline(benign_store, fake_models(llm=llm), LLM_CFG, log_runs=False).ask(QUESTION)
    assert trace.generation.status == "answered" and trace.llm_calls == 2
    assert trace.generation.attempts[0].parse_error == "the reply contains no JSON object"


def test_the_abstention_sentence_with_citations_is_an_abstention_without_them(benign_store):
    llm = FakeLLM([_reply(answer=f"{ABSTENTION_MESSAGE} [1]", used_source_ids=[1, 2])])
    trace = Pipeline(benign_store, fake_models(llm=llm), LLM_CFG, log_runs=False).ask(QUESTION)
    assert trace.abstained and trace.answer == ABSTENTION_MESSAGE
    assert trace.generation.used_source_ids == ()
    assert "citations on the abstention sentence removed" in trace.generation.notes


def test_markers_to_sources_that_do_not_exist_are_flagged_as_fabricated(benign_store):
    llm = FakeLLM([_reply(answer="The timeout is 30 seconds [0]. Retries are unlimited [99].", used_source_ids=[0, 99])])
    trace = Pipeline(benign_store, fake_models(llm=llm), LLM_CFG, log_runs=False).ask(QUESTION)
    assert set(trace.validation.fabricated_markers) == {0, 99}
    assert "[0]" in trace.answer and "[99]" in trace.answer, "the markers are shown, never hidden"
    assert trace.confidence == "MEDIUM" and any("never offered" in lim for lim in trace.limitations)


def test_a_50kb_reply_is_rejected_and_the_cited_extractive_answer_served_with_the_reason(benign_store):
    big = " ".join(["The default request timeout of Marlin Gateway is 30 seconds [1]."] * 800)
    llm = FakeLLM([_reply(answer=big), _reply(answer=big)])
    trace = Pipeline(benign_store, fake_models(llm=llm), LLM_CFG, log_runs=False).ask(QUESTION)
    assert len(big) > 50_000
    assert trace.generation.status == "fallback" and trace.generation.backend == "extractive"
    assert "generate.max_output_tokens=512" in trace.generation.fallback_reason
    assert len(trace.answer) < 2_000 and "[1]" in trace.answer
    assert "max_output_tokens" in trace.generation.attempts[1].messages[-1].content  # the retry said why


def test_a_runaway_reply_then_a_brief_one_serves_the_brief_one(benign_store):
    big = " ".join(["The default request timeout of Marlin Gateway is 30 seconds [1]."] * 800)
    llm = FakeLLM([_reply(answer=big), _reply(answer="The default request timeout is 30 seconds [1].")])
    trace = Pipeline(benign_store, fake_models(llm=llm), LLM_CFG, log_runs=False).ask(QUESTION)
    assert trace.generation.status == "answered" and trace.llm_calls == 2
    assert trace.answer == "The default request timeout is 30 seconds [1]."


@pytest.mark.parametrize(("reply", "status"), [
    pytest.param("", "rejected", id="rewrite-empty"),
    pytest.param("What is the timeout? " * 2600, "rejected", id="rewrite-50kb"),
])
def test_a_bad_rewrite_reply_keeps_the_users_question(benign_store, reply, status):
    cfg = PipelineConfig().with_overrides({"rewrite.backend": "llm", "rewrite.model": "openai/x", "cache.enabled": False})
    history = [{"role": "user", "content": "Tell me about Marlin Gateway timeouts."},
               {"role": "assistant", "content": "The default request timeout is 30 seconds [1]."}]
    trace = Pipeline(benign_store, fake_models(rewrite_llm=FakeLLM([reply])), cfg, log_runs=False).ask(
        "and the default?", history=history)
    assert trace.rewrite.status == status and trace.rewrite.query == "and the default?"
    assert any(d.startswith(f"rewrite {status}") for d in trace.degradations)


# == a golden file with bad lines ==========================================================================================

GOLDEN_LINES = [
    {"id": "ok-1", "question": "How do I replay events from the dead-letter queue?", "answerable": True,
     "expected_doc_ids": ["guide-replay-from-dlq"]},
    "{not json",
    {"id": "no-question", "answerable": True, "expected_doc_ids": ["err-timeout-502"]},
    {"id": "bad-bool", "question": "What is ERR_TIMEOUT_502?", "answerable": "yes", "expected_doc_ids": []},
    {"id": "no-expected", "question": "What is ERR_TIMEOUT_502?", "answerable": True},
    {"id": "ok-1", "question": "Duplicate id.", "answerable": False},
    {"id": "bad-history", "question": "And then?", "answerable": False, "history": [{"role": "user"}]},
    [1, 2, 3],
    {"id": "ok-2", "question": "Does Harbor Relay support carrier pigeons?", "answerable": False},
]


def test_eval_with_bad_golden_lines_reports_each_on_one_line_and_evaluates_the_rest(cli_store, tmp_path):
    golden = tmp_path / "golden.jsonl"
    golden.write_text("\n".join(line if isinstance(line, str) else json.dumps(line) for line in GOLDEN_LINES) + "\n",
                      encoding="utf-8")
    result = workbench("eval", str(golden), "--store", str(cli_store), "--no-nli", "--json", timeout=600)
    assert "Traceback" not in result.stderr
    problems = [line for line in error_lines(result) if line.startswith("problem: ")]
    assert [int(re.search(r"line (\d+)", p).group(1)) for p in problems] == [2, 3, 4, 5, 6, 7, 8]
    assert result.returncode == 2, "bad lines make the run fail, after evaluating the good ones"
    rows = json.loads(result.stdout)["rows"]
    assert [r["id"] for r in rows] == ["ok-1", "ok-2"]


@pytest.mark.parametrize(("content", "message"), [
    pytest.param("{not json}\n[1]\n", "has no valid cases; first problem: golden.jsonl line 1", id="golden-no-valid-line"),
    pytest.param(None, "not found", id="golden-missing-file"),
    pytest.param(b"\xff\xfe\x00b", "cannot read golden file", id="golden-not-utf8"),
])
def test_eval_with_an_unusable_golden_file_is_one_line(cli_store, tmp_path, content, message):
    golden = tmp_path / "golden.jsonl"
    if isinstance(content, str):
        golden.write_text(content, encoding="utf-8")
    elif isinstance(content, bytes):
        golden.write_bytes(content)
    result = workbench("eval", str(golden), "--store", str(cli_store), "--no-nli", timeout=300)
    assert result.returncode == 2
    assert message in one_line_error(result)
