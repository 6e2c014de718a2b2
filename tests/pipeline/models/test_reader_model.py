"""The committed reader (pipeline/models/weights/answerability): it loads offline from the repository and reads —
an answering sentence outranks same-topic sentences that do not answer — and the default pipeline uses it."""

import numpy as np
import pytest

from pipeline.config import PipelineConfig, RerankConfig
from pipeline.engine import Pipeline
from pipeline.models import resolve
from pipeline.models.registry import Models

pytestmark = pytest.mark.slow

# (question, the sentence that answers it, same-topic sentences that do not): written for this test, in and out of
# the demo corpus's domain.
FIXTURES = [
    ("How long are dead-lettered deliveries kept?",
     "Dead-lettered deliveries are kept for 14 days before they are purged.",
     ["Dead-lettered deliveries can be replayed from the dashboard.",
      "The dead-letter queue is listed on the Deliveries page."]),
    ("What port does the relay listen on by default?",
     "By default the relay listens on port 8443.",
     ["The relay can be configured to listen on another port.", "Ports below 1024 need root privileges."]),
    ("Who painted the ceiling of the Sistine Chapel?",
     "Michelangelo painted the ceiling of the Sistine Chapel between 1508 and 1512.",
     ["The Sistine Chapel is in Vatican City.", "Millions of visitors see the chapel's ceiling every year."]),
    ("When was the Eiffel Tower completed?",
     "The Eiffel Tower was completed in 1889 for the World's Fair.",
     ["The Eiffel Tower is about 330 metres tall.", "The tower is repainted every seven years."]),
    ("What does the command harborctl endpoints test send?",
     "harborctl endpoints test sends a harbor.ping event to the endpoint and prints the response code.",
     ["harborctl endpoints list shows every endpoint with its status.",
      "Endpoints can be paused from the command line."]),
    ("How many retries does a delivery get by default?",
     "A delivery is retried up to 8 times by default.",
     ["Retries use exponential backoff with jitter.", "You can change the retry policy per endpoint."]),
]


@pytest.fixture(scope="module")
def reader():
    return Models().reranker(RerankConfig())


def test_the_reader_loads_offline_from_the_repository(reader, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    resolved = resolve.resolve_model("workbench/answerability-reader", download=False)
    assert resolved.path == resolve.WEIGHTS_DIR / "answerability" and resolved.source.startswith("project:")
    assert (resolved.path / "MODEL_CARD.md").is_file() and (resolved.path / "training.json").is_file()
    assert (resolved.path / "model.int8.onnx").stat().st_size < 30 * 1024 * 1024
    assert reader.source.startswith("onnx-int8:") and str(resolved.path) in reader.source


@pytest.mark.parametrize("question, answer, others", FIXTURES, ids=[f[0][:30] for f in FIXTURES])
def test_the_answering_sentence_outranks_same_topic_sentences(reader, question, answer, others):
    logits = reader.score(question, [answer, *others])
    assert np.all(np.isfinite(logits))
    assert logits[0] > max(logits[1:]), dict(zip([answer, *others], np.round(logits, 2), strict=True))


def test_the_default_pipeline_reads_with_it_and_quotes_what_answers(demo_store_real, real_models):
    trace = Pipeline(demo_store_real, real_models, PipelineConfig().with_overrides({"cache.enabled": False}),
                     log_runs=False).ask("What is the default max_retries in 3.1?")
    assert trace.rerank.status == "ran" and trace.rerank.granularity == "sentence"
    assert trace.rerank.model == "workbench/answerability-reader" and trace.rerank.pairs_scored > 0
    assert all(c.units for c in trace.rerank.candidates)
    assert not trace.abstained and "8" in trace.answer
    assert trace.generation.reader_scores and min(trace.generation.reader_scores) >= 0.5
