"""The committed NLI citation check (pipeline/models/weights/nli): it loads offline from the repository, reads — a
sentence entails itself, a changed number or a flipped negation does not — and the validator and `workbench ask`
use it by default."""

import json
import os
import subprocess
import sys

import pytest

from pipeline.config import PipelineConfig, ValidateConfig
from pipeline.context import StageContext
from pipeline.models import resolve
from pipeline.models.registry import Models
from pipeline.testing import FakeEmbedder
from pipeline.trace import Candidate, GenerationTrace, Source
from pipeline.validation import citations

pytestmark = pytest.mark.slow

# (premise, a faithful claim, claims that alter it): written for this test, in and out of the demo corpus's domain.
FIXTURES = [
    ("Dead-lettered deliveries are kept for 14 days before they are purged.",
     "Dead-lettered deliveries are kept for 14 days before they are purged.",
     {"number": "Dead-lettered deliveries are kept for 30 days before they are purged.",
      "negation": "Dead-lettered deliveries are not kept for 14 days before they are purged."}),
    ("In version 3.1 the default value of max_retries is 8.",
     "In version 3.1 the default value of max_retries is 8.",
     {"number": "In version 3.1 the default value of max_retries is 5.",
      "negation": "In version 3.1 the default value of max_retries is not 8."}),
    ("The Eiffel Tower was completed in 1889 for the World's Fair.",
     "The Eiffel Tower was completed in 1889 for the World's Fair.",
     {"number": "The Eiffel Tower was completed in 1925 for the World's Fair.",
      "negation": "The Eiffel Tower was not completed in 1889 for the World's Fair."}),
    ("The relay listens on port 8443 and accepts only TLS connections.",
     "The relay listens on port 8443 and accepts only TLS connections.",
     {"number": "The relay listens on port 9000 and accepts only TLS connections.",
      "negation": "The relay does not listen on port 8443 and accepts only TLS connections."}),
]
LABELS = ("entailment", "neutral", "contradiction")


@pytest.fixture(scope="module")
def nli():
    return Models().nli(ValidateConfig().nli_model)


def test_the_nli_check_loads_offline_from_the_repository(nli, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    resolved = resolve.resolve_model("workbench/nli-check", download=False)
    assert resolved.path == resolve.WEIGHTS_DIR / "nli" and resolved.source.startswith("project:")
    assert (resolved.path / "MODEL_CARD.md").is_file() and (resolved.path / "training.json").is_file()
    assert (resolved.path / "model.int8.onnx").stat().st_size < 30 * 1024 * 1024
    assert set(nli.labels) == set(LABELS)


@pytest.mark.parametrize("premise, faithful, altered", FIXTURES, ids=[f[0][:30] for f in FIXTURES])
def test_a_sentence_entails_itself_and_not_its_altered_copies(nli, premise, faithful, altered):
    pairs = [(premise, faithful)] + [(premise, claim) for claim in altered.values()]
    probs = nli.predict(pairs)
    entail = list(nli.labels).index("entailment")
    assert probs[0].argmax() == entail, f"the faithful claim is entailed: {probs[0]}"
    for (kind, claim), row in zip(altered.items(), probs[1:], strict=True):
        assert row.argmax() != entail, f"{kind} not flagged: {claim} -> {dict(zip(nli.labels, row.round(2), strict=True))}"
        assert row[entail] < probs[0][entail]


def test_the_validator_flags_a_changed_number_and_a_negation_its_cosine_passes(nli):
    premise, faithful, altered = FIXTURES[0]
    chunk = Candidate(chunk_id="c", doc_id="d", title="Retention", text=premise)
    ctx = StageContext(Models(embedder=FakeEmbedder(), nli=nli))
    verdicts = {}
    for kind, claim in {"faithful": faithful, **altered}.items():
        gen = GenerationTrace(status="answered", backend="litellm", answer=f"{claim} [1]",
                              sources=(Source(1, "c", "d", "Retention"),))
        check = citations.run(gen, (chunk,), ValidateConfig(), ctx).claims[0]
        verdicts[kind] = (check.embedding_verdict, check.nli_label, check.verdict)
    assert verdicts["faithful"] == ("supported", "entailment", "supported")
    assert verdicts["negation"][0] == "supported", "the cosine and key facts pass a negated copy"
    assert verdicts["negation"][2] == "unsupported" and verdicts["number"][2] == "unsupported"


@pytest.mark.long
def test_workbench_ask_json_carries_an_nli_verdict_per_claim_offline(tmp_path):
    corpus = resolve.WEIGHTS_DIR.parents[2] / "golden" / "corpus"
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    store = tmp_path / "store"
    ingested = subprocess.run([sys.executable, "-m", "workbench.cli", "ingest", str(corpus), "--store", str(store)],
                              capture_output=True, text=True, env=env, timeout=600)
    assert ingested.returncode == 0, ingested.stderr
    done = subprocess.run([sys.executable, "-m", "workbench.cli", "ask", "How long are dead-lettered deliveries kept?",
                           "--store", str(store), "--json"], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    trace = json.loads(done.stdout)
    assert not trace["abstained"], f"the demo corpus states the retention; the gate abstained: {trace['answer']}"
    validation = trace["validation"]
    assert validation["nli_status"] == "ran" and validation["nli_model"] == PipelineConfig().validate.nli_model
    cited = [c for c in validation["claims"] if c["markers"]]
    assert cited and all(c["nli_label"] in LABELS and len(c["nli_probs"]) == 3 for c in cited)


def test_workbench_models_lists_the_nli_check_as_here():
    done = subprocess.run([sys.executable, "-m", "workbench.cli", "models"], capture_output=True, text=True,
                          env={**os.environ, "HF_HUB_OFFLINE": "1"}, timeout=120)
    line = next(x for x in done.stdout.splitlines() if "workbench/nli-check" in x)
    assert line.startswith("here") and "project:" in line
