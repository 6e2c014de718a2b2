"""The cross-encoder stage: sigmoid scores, batching, the skipped path (never a fake score), early stop, and
sentence granularity (the reader scores each quotable sentence; a candidate scores its best)."""

import math

import numpy as np
import pytest

from pipeline.config import GateConfig, PipelineConfig, RerankConfig
from pipeline.context import StageContext
from pipeline.engine import rerank_stop_at
from pipeline.gate import stage as gate
from pipeline.models.registry import Models
from pipeline.retrieval import rerank, retrieve
from pipeline.testing import FakeEmbedder, FakeReranker, fake_models
from pipeline.trace import Candidate, RetrievalTrace


def _retrieval(n: int) -> RetrievalTrace:
    """n synthetic candidates in fused order; passage i's text is 'passage <i>'."""
    return RetrievalTrace(status="ran", query="q", candidates=tuple(
        Candidate(chunk_id=f"doc{i}#0", doc_id=f"doc{i}", title=f"Doc {i}", text=f"passage {i}",
                  heading_path=(f"Doc {i}",), fused_rank=i + 1, fused_score=1 / (61 + i))
        for i in range(n)))


class ScriptedReranker:
    """Logit per passage index from a table (default -3); records every batch it was given."""

    def __init__(self, logits: dict[int, float] | None = None, default: float = -3.0) -> None:
        self.name = "scripted"
        self.logits = logits or {}
        self.default = default
        self.batches: list[int] = []

    def score(self, query, passages):
        self.batches.append(len(passages))
        return np.array([self.logits.get(int(p.rsplit(" ", 1)[1]), self.default) for p in passages],
                        dtype=np.float32)


MS_MARCO = "cross-encoder/ms-marco-MiniLM-L-6-v2"


def _cfg(**kw) -> RerankConfig:
    """Passage granularity: these tests are about batching whole passages (sentence granularity is tested below)."""
    return RerankConfig(**{"granularity": "passage", **kw})


def test_scores_are_the_sigmoid_of_the_logits_best_first():
    reranker = ScriptedReranker({3: 2.0, 7: 0.5, 1: -1.0})
    trace = rerank.run("q", _retrieval(20), _cfg(candidates=20, top_k=5), Models(reranker=reranker), rerank_stop_at(GateConfig()))
    assert trace.status == "ran" and trace.reason == ""
    assert trace.model == "scripted", "the trace names the model that scored, not only the configured one"
    assert [s.chunk_id for s in trace.candidates[:3]] == ["doc3#0", "doc7#0", "doc1#0"]
    for s in trace.candidates:
        assert s.rerank_score == pytest.approx(1 / (1 + math.exp(-s.logit)))
        assert 0.0 <= s.rerank_score <= 1.0
    assert [s.rerank_rank for s in trace.candidates] == [1, 2, 3, 4, 5]
    assert trace.candidates[0].fused_rank == 4
    assert trace.candidates_in == 20 and trace.scored == 20 and not trace.early_stopped
    # equal scores keep the fused order
    assert [s.fused_rank for s in trace.candidates[3:]] == [1, 3]


def test_only_the_fused_top_candidates_are_scored_in_batches():
    reranker = ScriptedReranker()
    trace = rerank.run("q", _retrieval(60), _cfg(candidates=40, top_k=10, batch_size=16), Models(reranker=reranker), rerank_stop_at(GateConfig()))
    assert reranker.batches == [16, 16, 8]
    assert trace.candidates_in == 40 and trace.scored == 40
    assert len(trace.candidates) == 10
    assert trace.latency_ms >= 0.0


def test_the_passage_shown_to_the_model_includes_the_heading_path():
    seen = []

    class Recorder(ScriptedReranker):
        def score(self, query, passages):
            seen.extend(passages)
            return super().score(query, passages)

    rerank.run("q", _retrieval(2), _cfg(candidates=2, top_k=2), Models(reranker=Recorder()), rerank_stop_at(GateConfig()))
    assert seen[0] == "Doc 0\npassage 0"


def test_disabled_reranker_is_not_called():
    reranker = ScriptedReranker()
    trace = rerank.run("q", _retrieval(5), _cfg(enabled=False, top_k=5, candidates=5), Models(reranker=reranker), rerank_stop_at(GateConfig()))
    assert trace.status == "disabled" and trace.candidates == ()
    assert reranker.batches == []


def test_an_unresolvable_cross_encoder_is_skipped_with_what_to_install():
    # Real resolution, offline (tests set HF_HUB_OFFLINE=1): the hub's passage cross-encoder is not installed.
    trace = rerank.run("q", _retrieval(5), _cfg(candidates=5, top_k=5, model=MS_MARCO), Models(embedder=FakeEmbedder()), rerank_stop_at(GateConfig()))
    assert trace.status == "skipped"
    assert "cross-encoder/ms-marco-MiniLM-L-6-v2" in trace.reason
    assert "download" in trace.reason or "install" in trace.reason
    assert trace.candidates == () and trace.scored == 0


def test_skipped_reranker_sends_the_gate_to_the_offline_rule(demo_store_fake):
    models = fake_models(reranker=False)
    cfg = PipelineConfig()
    ret = retrieve.run("ERR_TIMEOUT_502", cfg.retrieve, StageContext(models, demo_store_fake, cfg.embedding))
    rr = rerank.run("ERR_TIMEOUT_502", ret, cfg.rerank, models, rerank_stop_at(cfg.gate))
    assert rr.status == "skipped" and "not available" in rr.reason
    g = gate.run(ret, rr, cfg.gate)
    assert g.scale == "learned" and [c.scale for c in g.conditions] == ["learned"]
    assert g.conditions[0].threshold == cfg.gate.confidence_threshold_learned
    assert g.top_rerank_score is None
    # the decision shows each evidence signal's share of the learned rule
    assert {c.name for c in g.contributions} >= {"window", "coverage", "bm25", "dense"}


def test_int8_without_its_onnx_module_is_a_recorded_skip():
    trace = rerank.run("q", _retrieval(3), _cfg(candidates=3, top_k=3, precision="int8", model=MS_MARCO), Models(embedder=FakeEmbedder()), rerank_stop_at(GateConfig()))
    assert trace.status == "skipped" and trace.precision == "int8"
    assert "rerank_onnx" in trace.reason or "unavailable" in trace.reason
    assert trace.candidates == ()


@pytest.mark.parametrize("bad", [
    lambda q, p: (_ for _ in ()).throw(RuntimeError("segfault in tokenizer")),
    lambda q, p: np.full(len(p), np.nan),
    lambda q, p: np.zeros(len(p) + 1),
], ids=["raises", "nan", "wrong-length"])
def test_a_misbehaving_model_is_a_skip_never_a_fake_score(bad):
    class Bad:
        name = "bad"

        def score(self, query, passages):
            return bad(query, passages)

    trace = rerank.run("q", _retrieval(5), _cfg(candidates=5, top_k=5), Models(reranker=Bad()), rerank_stop_at(GateConfig()))
    assert trace.status == "skipped" and trace.candidates == ()
    assert "fused scale" in trace.reason


def test_rerank_on_the_demo_store_puts_the_matching_page_first(demo_store_fake, models):
    cfg = PipelineConfig()
    ret = retrieve.run("ERR_TIMEOUT_502 endpoint did not respond", cfg.retrieve, StageContext(models, demo_store_fake, cfg.embedding))
    rr = rerank.run("ERR_TIMEOUT_502 endpoint did not respond", ret, cfg.rerank, models, rerank_stop_at(cfg.gate))
    assert rr.status == "ran" and len(rr.candidates) == cfg.rerank.top_k
    assert rr.candidates_in == min(cfg.rerank.candidates, len(ret.candidates))
    assert rr.candidates[0].doc_id == "err-timeout-502"
    # sentence granularity (the default): every candidate's sentences in one call; the model batches the pairs
    assert isinstance(models._reranker, FakeReranker) and models._reranker.calls == 1
    assert models._reranker.pairs_scored == rr.pairs_scored > rr.candidates_in


RERANK_GATE = GateConfig(signal="rerank")  # early stop applies where the gate reads the rerank scale


# -- early stop ---------------------------------------------------------------------------------------------

def test_early_stop_ends_after_the_batch_where_the_answer_is_certain():
    reranker = ScriptedReranker({2: 3.0})  # sigmoid(3) = 0.95 >= 0.45, in the first batch
    cfg = _cfg(candidates=64, top_k=10, batch_size=16, early_stop=True)
    trace = rerank.run("q", _retrieval(64), cfg, Models(reranker=reranker), rerank_stop_at(RERANK_GATE))
    assert reranker.batches == [16]
    assert trace.early_stopped and trace.scored == 16 and trace.candidates_in == 64
    assert len(trace.candidates) == 10 and trace.candidates[0].chunk_id == "doc2#0"
    assert "early stop after 16 of 64" in trace.reason
    full = rerank.run("q", _retrieval(64), _cfg(candidates=64, top_k=10, batch_size=16), Models(reranker=ScriptedReranker({2: 3.0})), rerank_stop_at(RERANK_GATE))
    ret = _retrieval(64)
    assert gate.run(ret, trace, RERANK_GATE).decision == gate.run(ret, full, RERANK_GATE).decision == "answer"


def test_early_stop_never_stops_towards_abstention():
    reranker = ScriptedReranker()  # every score sigmoid(-3) = 0.047 < 0.45
    trace = rerank.run("q", _retrieval(40), _cfg(candidates=40, top_k=10, batch_size=8, early_stop=True), Models(reranker=reranker), rerank_stop_at(RERANK_GATE))
    assert trace.scored == 40 and not trace.early_stopped
    assert gate.run(_retrieval(40), trace, GateConfig()).decision == "abstain"


def test_early_stop_still_scores_at_least_top_k():
    reranker = ScriptedReranker({0: 4.0})
    trace = rerank.run("q", _retrieval(40), _cfg(candidates=40, top_k=10, batch_size=4, early_stop=True), Models(reranker=reranker), rerank_stop_at(RERANK_GATE))
    assert reranker.batches == [4, 4, 4]
    assert trace.scored == 12 and len(trace.candidates) == 10


def test_early_stop_trades_away_the_top_k_order():
    # Candidate 30 would be the best, but candidate 1 already decides "answer" in the first batch.
    logits = {1: 1.0, 30: 5.0}
    stopped = rerank.run("q", _retrieval(40), _cfg(candidates=40, top_k=10, batch_size=16, early_stop=True), Models(reranker=ScriptedReranker(logits)), rerank_stop_at(RERANK_GATE))
    full = rerank.run("q", _retrieval(40), _cfg(candidates=40, top_k=10, batch_size=16), Models(reranker=ScriptedReranker(logits)), rerank_stop_at(RERANK_GATE))
    assert full.candidates[0].chunk_id == "doc30#0"
    assert stopped.candidates[0].chunk_id == "doc1#0"
    assert "doc30#0" not in {s.chunk_id for s in stopped.candidates}


def test_early_stop_does_not_apply_when_the_gate_ignores_rerank_scores():
    reranker = ScriptedReranker({0: 4.0})
    trace = rerank.run("q", _retrieval(40), _cfg(candidates=40, top_k=10, batch_size=8, early_stop=True),
                       Models(reranker=reranker), rerank_stop_at(GateConfig(signal="fused")))
    assert trace.scored == 40 and not trace.early_stopped
    assert "early stop not applied" in trace.reason


# -- sentence granularity (the reader) ---------------------------------------------------------------------------

class SentenceReader:
    """Logit 3 for a sentence containing 'answer', -3 otherwise; records every text it read."""

    name = "sentence-reader"

    def __init__(self) -> None:
        self.read: list[str] = []

    def score(self, query, passages):
        self.read.extend(passages)
        return np.array([3.0 if "answer" in p else -3.0 for p in passages], dtype=np.float32)


def _prose_retrieval() -> RetrievalTrace:
    texts = ["Retries happen often. They back off exponentially.",
             "The limit is set per endpoint. The answer is eight retries. Nothing else matters here.",
             "# Heading only\n\nA paragraph about timeouts and nothing else."]
    return RetrievalTrace(status="ran", query="q", candidates=tuple(
        Candidate(chunk_id=f"doc{i}#0", doc_id=f"doc{i}", title=f"Doc {i}", text=t, heading_path=(f"Doc {i}",),
                  fused_rank=i + 1, fused_score=1 / (61 + i)) for i, t in enumerate(texts)))


def test_sentence_granularity_scores_each_sentence_and_ranks_a_candidate_by_its_best():
    reader = SentenceReader()
    trace = rerank.run("how many retries", _prose_retrieval(), RerankConfig(candidates=3, top_k=3),
                       Models(reranker=reader))
    assert trace.status == "ran" and trace.granularity == "sentence"
    assert "The answer is eight retries." in reader.read
    assert "# Heading only" not in " ".join(reader.read), "headings are context, not sentences to read"
    assert trace.pairs_scored == len(reader.read)
    top = trace.candidates[0]
    assert top.chunk_id == "doc1#0", "the candidate holding the answering sentence ranks first, though fused second"
    assert [u.text for u in top.units] == ["The limit is set per endpoint.", "The answer is eight retries.",
                                           "Nothing else matters here."], "every sentence kept, in document order"
    assert top.rerank_score == pytest.approx(max(u.score for u in top.units))
    assert trace.unit_scores()["doc1#0"]["The answer is eight retries."] == pytest.approx(1 / (1 + math.exp(-3)))
    cand, unit = trace.best_unit()
    assert cand.chunk_id == "doc1#0" and unit.text == "The answer is eight retries."


def test_sentence_granularity_reads_at_most_max_sentences_per_candidate():
    reader = SentenceReader()
    text = " ".join(f"Sentence number {i} is here." for i in range(10))
    retrieval = RetrievalTrace(status="ran", query="q", candidates=(
        Candidate(chunk_id="d#0", doc_id="d", title="D", text=text, fused_rank=1, fused_score=0.03),))
    trace = rerank.run("q", retrieval, RerankConfig(max_sentences=4), Models(reranker=reader))
    assert len(reader.read) == 4 and len(trace.candidates[0].units) == 4
    assert reader.read[0] == "Sentence number 0 is here."


def test_the_gate_names_the_closest_sentence_when_the_reader_finds_no_answer():
    class Doubtful(SentenceReader):
        def score(self, query, passages):
            return np.array([-1.0 if "eight" in p else -4.0 for p in passages], dtype=np.float32)

    retrieval = _prose_retrieval()
    rr = rerank.run("how many retries", retrieval, RerankConfig(), Models(reranker=Doubtful()))
    gt = gate.run(retrieval, rr, GateConfig(signal="rerank"))
    assert gt.decision == "abstain"
    assert gt.closest_sentence == "The answer is eight retries."
    assert gt.closest_sentence_score == pytest.approx(1 / (1 + math.exp(1)))
    if gt.case == "on-topic":
        assert "The answer is eight retries." in gt.plain_reason and "does not answer" in gt.plain_reason


def test_the_reader_missing_from_a_checkout_is_a_recorded_skip_and_the_engine_still_answers(
        tmp_path, monkeypatch, demo_store_fake):
    from pipeline.engine import Pipeline
    from pipeline.models import resolve

    monkeypatch.setattr(resolve, "WEIGHTS_DIR", tmp_path / "no-weights")
    resolve.clear_cache()
    models = Models(embedder=FakeEmbedder())
    trace = Pipeline(demo_store_fake, models, PipelineConfig()).ask("How long are dead-lettered deliveries kept?")
    assert trace.rerank.status == "skipped"
    assert "workbench/answerability-reader" in trace.rerank.reason and "make train-models" in trace.rerank.reason
    assert any(d.startswith("rerank skipped") for d in trace.degradations)
    assert trace.gate.scale == "learned", "without the reader the gate falls back to the learned rule"
    assert trace.answer


def test_the_blend_order_fuses_the_fused_rank_and_the_reader_rank():
    # reader scores for candidates in fused order 1..4: the reader prefers the fourth, the fusion the first
    scores, fused = [0.2, 0.1, 0.05, 0.9], [1, 2, 3, 4]
    assert rerank.blend_order(scores, fused, k=60) == [0, 3, 1, 2], "fused 1 + reader 2 leads fused 4 + reader 1"
    reader_only = rerank.run("how many retries", _prose_retrieval(), RerankConfig(order="reader"),
                             Models(reranker=SentenceReader()))
    assert reader_only.candidates[0].chunk_id == "doc1#0"
