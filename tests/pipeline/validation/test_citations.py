"""Citation validation: verdicts, fabricated markers, dimmed and superseded sources, one encoder call. The embedding
check alone (validate.nli=off): the NLI check is tested in test_entailment.py and tests/pipeline/models/test_nli_model.py."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from pipeline.config import ValidateConfig
from pipeline.context import StageContext
from pipeline.models.registry import Models
from pipeline.testing import FakeEmbedder
from pipeline.trace import Candidate, GenerationTrace, Source, Trace
from pipeline.validation import citations

CHUNKS = {
    "timeout": "ERR_TIMEOUT_502 is recorded when the endpoint does not respond within delivery.timeout_ms. "
               "The default timeout is 15000 ms per attempt.",
    "retries": "Deliveries are retried with exponential backoff and full jitter. After 8 retries the delivery "
               "moves to the dead-letter queue.",
    "signing": "Signatures use HMAC-SHA256 over the raw body with the endpoint secret.",
}
SUPPORTED = "The default timeout is 15000 ms per attempt"
UNSUPPORTED = "Harbor Relay stores events in PostgreSQL"


def candidates(*, superseded: tuple[str, ...] = ()) -> tuple[Candidate, ...]:
    return tuple(Candidate(chunk_id=cid, doc_id=f"doc-{cid}", title=cid.title(), text=text,
                           superseded_by=("doc-newer",) if cid in superseded else ())
                 for cid, text in CHUNKS.items())


def generation(answer: str, offered: tuple[str, ...] = ("timeout", "retries", "signing"), **kw) -> GenerationTrace:
    sources = tuple(Source(number=i, chunk_id=cid, doc_id=f"doc-{cid}", title=cid.title())
                    for i, cid in enumerate(offered, start=1))
    return GenerationTrace(status="answered", backend="litellm", sources=sources, answer=answer,
                           used_source_ids=tuple(range(1, len(offered) + 1)), confidence="HIGH", **kw)


def validate(answer: str, embedder=None, cfg: ValidateConfig | None = None, **kw):
    embedder = embedder or FakeEmbedder()
    return citations.run(generation(answer, **kw), candidates(), cfg or ValidateConfig(nli="off"), StageContext(Models(embedder=embedder))), embedder


def test_one_fabricated_one_unsupported_one_supported_is_reported_exactly_so():
    answer = f"{SUPPORTED} [1]. {UNSUPPORTED} [2]. Payloads are signed with Ed25519 [7]."
    val, embedder = validate(answer)
    assert val.status == "ran"
    assert [(c.markers, c.verdict, c.fabricated_markers) for c in val.claims] == [
        ((1,), "supported", ()), ((2,), "unsupported", ()), ((7,), "unsupported", (7,))]
    assert val.fabricated_markers == (7,)
    assert (val.supported, val.unsupported, val.uncited) == (1, 2, 0)
    first, second, third = val.claims
    assert first.similarities[0].chunk_id == "timeout" and first.similarities[0].similarity >= 0.5
    assert second.similarities[0].chunk_id == "retries" and second.similarities[0].similarity < 0.5
    assert third.similarities[0].chunk_id == "" and third.similarities[0].similarity is None
    assert "[7]" in generation(answer).answer  # flagged, not removed
    assert embedder.calls == 1


@pytest.mark.parametrize("n_claims", [1, 10])
def test_one_encoder_call_per_answer_whatever_its_length(n_claims):
    sentences = [f"{SUPPORTED} in case {i} [{1 + i % 3}]." for i in range(n_claims)]
    val, embedder = validate(" ".join(sentences))
    assert len(val.claims) == n_claims
    assert embedder.calls == 1 and val.encoder_calls == 1
    cited = [list(CHUNKS.values())[n] for n in sorted({i % 3 for i in range(n_claims)})]
    passages = sum(len(citations.chunk_passages(text)) for text in cited)
    assert embedder.texts_seen == n_claims + passages  # claims and every cited passage in the same batch


def test_a_claim_citing_several_sources_is_supported_if_any_one_reaches_the_threshold():
    val, _ = validate(f"{SUPPORTED} [3][1].")
    (claim,) = val.claims
    assert claim.verdict == "supported"
    by_marker = {s.marker: s.similarity for s in claim.similarities}
    assert by_marker[1] >= 0.5 > by_marker[3]
    assert claim.best_similarity == by_marker[1]


def test_the_best_matching_passage_of_the_chunk_is_recorded():
    val, _ = validate(f"{SUPPORTED} [1].")
    assert val.claims[0].similarities[0].passage == "The default timeout is 15000 ms per attempt."


def test_a_chunk_is_compared_whole_plus_its_sentences_and_adjacent_pairs():
    text = "First sentence is here. Second sentence is here. Third one is here."
    assert citations.chunk_passages(text) == [
        text, "First sentence is here.", "Second sentence is here.", "Third one is here.",
        "First sentence is here. Second sentence is here.", "Second sentence is here. Third one is here."]
    assert citations.chunk_passages(text, "chunk") == [text]


def test_a_claim_restating_one_sentence_of_a_long_chunk_is_supported_only_with_passages():
    filler = " ".join(f"Unrelated detail number {i} concerns the {w} subsystem." for i, w in
                      enumerate(["storage", "cluster", "console", "billing", "metrics", "quorum", "tls", "dns"]))
    gen = generation(f"{SUPPORTED} [1].", offered=("long",))
    long = (Candidate(chunk_id="long", doc_id="doc-long", title="Long", text=f"{filler} {SUPPORTED}. {filler}"),)
    by_passage = citations.run(gen, long, ValidateConfig(nli="off"), StageContext(Models(embedder=FakeEmbedder())))
    by_chunk = citations.run(gen, long, ValidateConfig(nli="off", match="chunk"), StageContext(Models(embedder=FakeEmbedder())))
    assert by_passage.claims[0].verdict == "supported"
    assert by_chunk.claims[0].verdict == "unsupported" and by_chunk.claims[0].similarities[0].passage == ""


def test_the_configured_threshold_decides():
    answer = "In Harbor Relay the default timeout is 15000 ms per attempt [1]."
    default, _ = validate(answer)
    similarity = default.claims[0].best_similarity
    assert default.claims[0].verdict == "supported" and similarity < 0.99
    strict, _ = validate(answer, cfg=ValidateConfig(nli="off", claim_threshold=round(similarity + 0.01, 2)))
    assert strict.claims[0].verdict == "unsupported"
    assert strict.threshold == round(similarity + 0.01, 2)


def test_an_unmarked_factual_sentence_is_uncited_and_not_embedded():
    val, embedder = validate(f"{SUPPORTED} [1]. Most receivers answer in well under a second.")
    assert [c.verdict for c in val.claims] == ["supported", "uncited"]
    assert val.claims[1].similarities == () and val.claims[1].best_similarity is None
    assert val.uncited == 1
    assert embedder.texts_seen == 1 + len(citations.chunk_passages(CHUNKS["timeout"]))  # the uncited one is not sent


def test_sources_offered_but_never_cited_are_listed_for_dimming():
    val, _ = validate(f"{SUPPORTED} [1].")
    assert val.cited_sources == (1,)
    assert val.uncited_sources == (2, 3)


def test_offered_chunks_that_are_superseded_are_marked():
    gen = generation(f"{SUPPORTED} [1].")
    val = citations.run(gen, candidates(superseded=("retries",)), ValidateConfig(nli="off"), StageContext(Models(embedder=FakeEmbedder())))
    assert val.superseded_sources == (2,)


def test_sources_are_matched_to_candidate_texts_by_chunk_id_not_by_position():
    gen = generation(f"{SUPPORTED} [2].", offered=("signing", "timeout"))
    val = citations.run(gen, tuple(reversed(candidates())), ValidateConfig(nli="off"), StageContext(Models(embedder=FakeEmbedder())))
    assert val.claims[0].similarities[0].chunk_id == "timeout"
    assert val.claims[0].verdict == "supported"


def test_headings_and_lead_ins_are_listed_as_non_claims_not_counted_as_uncited():
    val, _ = validate(f"## Timeouts\n\nHere is what the sources say:\n\n- {SUPPORTED} [1]")
    assert [c.verdict for c in val.claims] == ["supported"]
    assert val.uncited == 0
    assert val.non_claims == ("heading: Timeouts", "lead-in: Here is what the sources say:")


def test_a_cited_source_whose_text_is_missing_is_unverified_not_fabricated():
    gen = generation(f"{SUPPORTED} [1].")
    val = citations.run(gen, candidates()[1:], ValidateConfig(nli="off"), StageContext(Models(embedder=FakeEmbedder())))
    (claim,) = val.claims
    assert claim.verdict == "unsupported" and claim.fabricated_markers == ()
    assert claim.similarities[0].chunk_id == "timeout" and claim.similarities[0].similarity is None


@pytest.mark.parametrize("gen", [
    GenerationTrace(status="skipped"),
    GenerationTrace(status="answered", answer="I cannot answer that from the documents I have.", is_abstention=True),
    GenerationTrace(status="answered", answer="   "),
])
def test_nothing_to_validate_is_skipped_with_a_reason_and_no_encoder_call(gen):
    embedder = FakeEmbedder()
    val = citations.run(gen, candidates(), ValidateConfig(nli="off"), StageContext(Models(embedder=embedder)))
    assert val.status == "skipped" and val.reason
    assert val.claims == () and embedder.calls == 0


def test_an_answer_with_only_fabricated_markers_makes_no_encoder_call():
    val, embedder = validate("Payloads are signed with Ed25519 [8]. Keys rotate daily [9].")
    assert val.fabricated_markers == (8, 9) and val.unsupported == 2
    assert embedder.calls == 0 and val.encoder_calls == 0


class BrokenEmbedder(FakeEmbedder):
    def __init__(self, result):
        super().__init__()
        self.result = result

    def encode(self, texts, batch_size=None):
        self.calls += 1
        if isinstance(self.result, Exception):
            raise self.result
        return self.result


@pytest.mark.parametrize("result", [RuntimeError("CUDA out of memory"), np.zeros((1, 3)),
                                    np.full((2, 3), np.nan)])
def test_an_encoder_failure_is_recorded_and_leaves_claims_unverified(result):
    val, _ = validate(f"{SUPPORTED} [1].", embedder=BrokenEmbedder(result))
    assert val.status == "failed" and val.reason
    assert [c.verdict for c in val.claims] == ["unsupported"]
    assert val.claims[0].similarities[0].similarity is None


class PlainEmbedder:
    """An embedder that only takes texts (the Embedder protocol's minimum)."""

    def __init__(self):
        self.inner, self.calls = FakeEmbedder(), 0

    def encode(self, texts):
        self.calls += 1
        return self.inner.encode(texts)


def test_the_one_call_uses_the_configured_mini_batch_and_works_without_one():
    seen = []

    class Recording(FakeEmbedder):
        def encode(self, texts, batch_size=None):
            seen.append(batch_size)
            return super().encode(texts, batch_size)

    validate(f"{SUPPORTED} [1].", embedder=Recording(), cfg=ValidateConfig(nli="off", encode_batch_size=4))
    assert seen == [4]
    plain, embedder = validate(f"{SUPPORTED} [1].", embedder=PlainEmbedder())
    assert plain.status == "ran" and plain.supported == 1 and embedder.calls == 1


def test_marker_verdicts_colour_each_marker_for_the_app():
    answer = f"{SUPPORTED} [1]. {UNSUPPORTED} [2]. Payloads are signed with Ed25519 [7]."
    val, _ = validate(answer)
    assert citations.marker_verdicts(val) == {1: "supported", 2: "unsupported", 7: "fabricated"}


def test_a_marker_that_fails_one_of_its_claims_is_not_coloured_supported():
    val, _ = validate(f"{SUPPORTED} [1]. {UNSUPPORTED} [1].")
    assert citations.marker_verdicts(val) == {1: "unsupported"}
    assert [citations.claim_marker_verdicts(c, val.threshold) for c in val.claims] == [
        {1: "supported"}, {1: "unsupported"}]


def test_the_claim_span_locates_the_sentence_in_the_answer():
    answer = f"{SUPPORTED} [1]. {UNSUPPORTED} [2]."
    val, _ = validate(answer)
    start, end = val.claims[1].span
    assert answer[start:end] == f"{UNSUPPORTED} [2]."


def test_the_validation_record_survives_the_trace_json_round_trip():
    val, _ = validate(f"{SUPPORTED} [1]. {UNSUPPORTED} [2]. Signed with Ed25519 [7]. Unmarked claim here.")
    trace = Trace(question="q", validation=val)
    again = Trace.from_json(trace.to_json())
    assert again == trace
    assert dataclasses.asdict(again.validation) == dataclasses.asdict(val)


@pytest.mark.slow
def test_real_minilm_separates_a_supported_claim_from_an_unrelated_one(real_models):
    from pipeline.config import EmbeddingConfig

    embedder = real_models.embedder(EmbeddingConfig())
    answer = ("ERR_TIMEOUT_502 is recorded when the endpoint does not answer within delivery.timeout_ms [1]. "
              "The web console is written in React and supports dark mode [1].")
    val = citations.run(generation(answer), candidates(), ValidateConfig(nli="off"), StageContext(Models(embedder=embedder)))
    assert [c.verdict for c in val.claims] == ["supported", "unsupported"]
    assert val.encoder_calls == 1


# -- end to end through the engine ----------------------------------------------------------------------

def test_through_the_engine_a_fabricated_an_unsupported_and_a_supported_claim_are_reported_so(
        demo_store_fake, tmp_path):
    import json

    from pipeline.config import PipelineConfig
    from pipeline.engine import Pipeline
    from pipeline.storage.cache import AnswerCache
    from pipeline.storage.runs import RunLog
    from pipeline.testing import FakeLLM, fake_models
    from pipeline.validation.claims import split_claims

    cfg = PipelineConfig().with_overrides(["generate.backend=litellm"])
    question = "What does ERR_TIMEOUT_504 mean?"
    runs, cache = RunLog(tmp_path / "runs.sqlite"), AnswerCache(tmp_path / "cache.sqlite")
    top = Pipeline(demo_store_fake, models=fake_models(), cfg=cfg, runs=runs, cache=cache).search(question)
    quoted = next(s.text for s in split_claims(top.ranked_candidates()[0].text) if s.is_claim)
    answer = (f"{quoted} [1] The web console supports dark mode and single sign-on [2]. "
              "Payloads are signed with Ed25519 keys [9].")
    llm = FakeLLM([json.dumps({"answer": answer, "used_source_ids": [1, 2], "confidence": "HIGH",
                               "limitations": []})])
    embedder = FakeEmbedder()
    trace = Pipeline(demo_store_fake, models=fake_models(llm=llm, embedder=embedder), cfg=cfg, runs=runs,
                     cache=cache).ask(question)

    val = trace.validation
    assert trace.generation.status == "answered" and len(llm.requests) == 1
    assert [(c.markers, c.verdict) for c in val.claims] == [((1,), "supported"), ((2,), "unsupported"),
                                                            ((9,), "unsupported")]
    assert val.fabricated_markers == (9,) and val.claims[2].fabricated_markers == (9,)
    assert "[9]" in trace.answer
    assert val.encoder_calls == 1 and embedder.calls == 2   # one for the query, one for the whole answer
    assert trace.trust.final_confidence == trace.confidence == "MEDIUM"
    assert any("[9]" in lim for lim in trace.limitations)
    assert len(cache) == 0                                  # never served again
    (row,) = runs.list()
    assert (row.supported, row.unsupported, row.fabricated_markers) == (1, 2, 1)
    assert runs.get(row.run_id) == trace


# -- key facts and markers copied from a source (issue 14) ---------------------------------------------------

@pytest.mark.parametrize(("claim", "source", "missing"), [
    ("Set tls.min_version = 1.0 for compatibility.", "The minimum is set by `tls.min_version` and defaults to 1.2.",
     ["tls.min_version = 1.0", "1.0"]),
    ("logs.format = none disables logging.", "`logs.format = json` by default; `logs.format = combined` also works.",
     ["logs.format = none"]),
    ("The drain lasts 20 seconds (deploy.drain_s).", "It drains open requests for 20 seconds (`deploy.drain_s`).", []),
    ("The queue holds 30,000 entries.", "The queue holds 30000 entries.", []),
    ("Version 3.1 raised it to 8.", "In 3.1 the default max_retries is 8.", []),
    ("See https://marlin-help.example/eject for details.", "Ejection is described below.", ["marlin-help.example/eject"]),
    ("The port is 22.", "The metrics port is 9464; SSH uses 2200.", ["22"]),
    ("As the handbook explains (ref 9), retries stop at 2.", "retries stop at 2 [9]", []),
    # a source sentence that ends right after the value still states it; a longer dotted value does not
    ("Set cache.ttl = 5 to expire quickly.", "Expiry is short when cache.ttl = 5.", []),
    ("Set cache.ttl = 5 to expire quickly.", "Expiry is short when cache.ttl = 5.5 here.", ["cache.ttl = 5", "5"]),
])
def test_a_claim_is_checked_for_the_values_a_user_acts_on(claim, source, missing):
    assert citations.missing_facts(claim, [source]) == missing


def test_a_supported_looking_claim_with_a_value_no_source_has_is_unsupported(fake_embedder):
    cand = Candidate(chunk_id="c1", doc_id="d", title="TLS", text="The minimum TLS version tls.min_version defaults "
                     "to 1.2 and can be raised to 1.3.")
    gen = GenerationTrace(status="answered", backend="litellm", answer="The minimum TLS version tls.min_version "
                          "defaults to 1.0 [1].", sources=(Source(number=1, chunk_id="c1", doc_id="d", title="TLS"),))
    trace = citations.run(gen, (cand,), ValidateConfig(nli="off", claim_threshold=0.3), StageContext(Models(embedder=fake_embedder)))
    (claim,) = trace.claims
    assert claim.best_similarity >= 0.3 and claim.verdict == "unsupported"
    assert citations.claim_marker_verdicts(claim, 0.3) == {1: "unsupported"}


@pytest.mark.parametrize(("answer", "copied"), [
    ("Retries stop after two attempts, as the handbook explains [2].", [2]),
    ("Marlin answers 421 when the SNI name and the Host header disagree [1][2].", [1, 2]),
    ("Retries stop after two attempts [1].", []),                    # the model's own citation
    ("As the handbook explains [3], retries stop.", []),             # a marker the source never wrote
])
def test_a_marker_copied_with_its_words_from_a_source_is_found(answer, copied):
    sources = ["Retries stop after two attempts, as the handbook explains [2].",
               "Marlin answers `421` when the SNI name and the Host header disagree [1][2]."]
    assert sorted({n for _, n in citations.quoted_markers(answer, 0, len(answer), sources)}) == copied


def test_a_copied_marker_is_no_citation_and_one_to_a_source_never_offered_stays_fabricated(fake_embedder):
    text = "Retries stop after two attempts, as the handbook explains [2]. The operations handbook [9] has more."
    cands = (Candidate(chunk_id="c1", doc_id="d", title="Retries", text=text),
             Candidate(chunk_id="c2", doc_id="e", title="Other", text="Unrelated text about queues."))
    sources = tuple(Source(number=i, chunk_id=c.chunk_id, doc_id=c.doc_id, title=c.title) for i, c in enumerate(cands, 1))
    gen = GenerationTrace(status="answered", backend="litellm", sources=sources,
                          answer="Retries stop after two attempts, as the handbook explains [2]. The operations "
                                 "handbook [9] has more.")
    trace = citations.run(gen, cands, ValidateConfig(nli="off"), StageContext(Models(embedder=fake_embedder)))
    first, second = trace.claims
    assert first.markers == () and first.verdict == "uncited", "[2] was the source's, not the model's"
    assert 9 in second.fabricated_markers and trace.fabricated_markers == (9,)
    assert 2 not in trace.cited_sources
    assert any(note.startswith(citations.COPIED_MARKER + "[2]") for note in trace.non_claims)


@pytest.mark.parametrize("line", [
    '2025-11-24T13:08:42.555Z WARN harbord::delivery attempt failed endpoint=ep_01JD attempt=1 '
    'chain="https://hooks.example.com/harbor -> 301 https://hooks.example.com/harbor/"',
    "Latency p99 was 12.5ms at 10:42.750 on node-3.",
])
def test_a_line_quoted_verbatim_from_its_source_misses_no_key_fact(line):
    """A number inside a timestamp or a decimal ("08:42.555Z") is no fact of its own: the claim must not ask
    the source for a "42" it only writes as part of "42.555"."""
    assert citations.missing_facts(line, [f"Example log:\n\n```\n{line}\n```\n"]) == []


def test_a_changed_number_is_still_a_missing_fact():
    assert citations.missing_facts("The timeout is 42 seconds.", ["The timeout is 42.5 seconds."]) == ["42"]


# -- misattributed citations --------------------------------------------------------------------------

COPIED = "Deliveries are retried with exponential backoff and full jitter"   # verbatim in the "retries" chunk
NEIGHBOUR = "Failed deliveries are retried later with exponential backoff."    # close enough to reach 0.5


class _StoredLookup:
    """``Store.passage_vectors`` for a fixed set of chunks, made the way ingestion makes them."""

    def __init__(self, embedder, chunks: dict[str, str]) -> None:
        from pipeline.storage.catalogue import StoredPassages

        self.entries = {}
        for cid, text in chunks.items():
            windows = citations.chunk_passages(text)[1:]
            vectors = embedder.encode([" > ".join(()) + "\n" + text, *windows])
            self.entries[cid] = StoredPassages(cid, embedder.name, citations.passage_key((), text), tuple(windows),
                                               vectors)

    def __call__(self, chunk_ids):
        return {cid: self.entries[cid] for cid in chunk_ids if cid in self.entries}


def _with_neighbour(answer: str, stored: tuple[str, ...], cfg: ValidateConfig | None = None):
    chunks = {**CHUNKS, "neighbour": NEIGHBOUR}
    cands = tuple(Candidate(chunk_id=cid, doc_id=f"doc-{cid}", title=cid.title(), text=text)
                  for cid, text in chunks.items())
    embedder = FakeEmbedder()
    lookup = _StoredLookup(FakeEmbedder(), {cid: chunks[cid] for cid in stored})

    class Ctx(StageContext):
        def passages(self):
            return lookup

    gen = generation(answer, offered=("timeout", "retries", "signing", "neighbour"))
    return citations.run(gen, cands, cfg or ValidateConfig(nli="off"), Ctx(Models(embedder=embedder))), embedder


def test_a_sentence_copied_from_one_source_but_cited_to_a_neighbour_is_flagged_misattributed():
    val, embedder = _with_neighbour(f"{COPIED} [4].", stored=tuple(CHUNKS) + ("neighbour",))
    (claim,) = val.claims
    assert claim.verdict == "supported" and claim.best_similarity < 0.9   # the neighbour alone passes the threshold
    assert claim.closer_source == 2 and claim.closer_similarity == 1.0
    assert claim.closer_passage == COPIED + "."
    assert val.misattributed == 1 and val.not_compared == ()
    assert embedder.texts_seen == 1   # every source's vectors were stored: only the claim was encoded


def test_citing_the_source_that_states_it_is_not_flagged_and_the_margin_switches_the_check():
    right, _ = _with_neighbour(f"{COPIED} [2].", stored=tuple(CHUNKS) + ("neighbour",))
    assert right.claims[0].closer_source is None and right.misattributed == 0
    off, _ = _with_neighbour(f"{COPIED} [4].", stored=tuple(CHUNKS) + ("neighbour",),
                             cfg=ValidateConfig(nli="off", misattribution_margin=0.0))
    assert off.claims[0].closer_source is None and off.misattributed == 0
    assert off.claims[0].verdict == "supported"
    wide, _ = _with_neighbour(f"{COPIED} [4].", stored=tuple(CHUNKS) + ("neighbour",),
                              cfg=ValidateConfig(nli="off", misattribution_margin=0.5))
    assert wide.misattributed == 0   # 1.0 does not beat the cited source by 0.5


def test_sources_without_stored_vectors_are_not_encoded_but_a_copied_sentence_is_still_found_by_its_words():
    val, embedder = _with_neighbour(f"{COPIED} [4].", stored=("neighbour",))
    assert val.not_compared == (1, 2, 3) and embedder.texts_seen == 1   # no cosine with 1-3, nothing encoded
    (claim,) = val.claims
    assert val.misattributed == 1 and claim.closer_source == 2 and claim.closer_similarity is None
    assert claim.closer_passage == COPIED + "."
    short, _ = _with_neighbour("Deliveries retried [4].", stored=("neighbour",))
    assert short.misattributed == 0   # too few words to call a copy
    cited_elsewhere, _ = _with_neighbour(f"{COPIED} [4]. Signatures use HMAC-SHA256 over the raw body [3]. "
                                         "Deliveries back off [2].", stored=("neighbour",))
    assert cited_elsewhere.claims[0].closer_source == 2 and cited_elsewhere.claims[0].closer_similarity == 1.0
    assert cited_elsewhere.not_compared == (1,)


@given(st.text(max_size=200), st.text(max_size=400),
       st.text(st.characters(whitelist_categories=("L", "Nd", "Zs")), max_size=200))
def test_copied_share_is_a_share_and_a_sentence_copied_word_for_word_scores_one(claim, text, prose):
    share, window = citations.copied_share(claim, text)
    assert 0.0 <= share <= 1.0 and (share == 0.0 or window)
    text = prose
    sentence = "Relay keeps every dead-lettered event for fourteen days before deleting it."
    assert citations.copied_share(sentence, f"{text} {sentence} Other words follow here.")[0] == 1.0
