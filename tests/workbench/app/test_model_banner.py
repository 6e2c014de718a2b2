"""The one-line model banner above every answer: it names the model that is missing and what that costs."""

from __future__ import annotations

from pipeline.config import PipelineConfig
from workbench.app.page import model_banner
from workbench.app.resources import ModelStatus


def test_no_banner_when_every_model_loaded():
    assert model_banner(ModelStatus(seconds={"embedder": 0.1, "reranker": 0.1}), PipelineConfig()) == ""


def test_a_missing_reader_is_named_with_what_the_answer_loses():
    status = ModelStatus(reranker_error="no such file", reranker_model="workbench/answerability-reader")
    banner = model_banner(status, PipelineConfig())
    assert "workbench/answerability-reader" in banner and "could not be loaded here" in banner
    assert "fused order" in banner and "question's terms" in banner
    assert model_banner(status, PipelineConfig().with_overrides({"rerank.enabled": False})) == "", \
        "a reader switched off is a choice, not a missing model"


def test_a_missing_embedder_comes_first_and_says_nothing_can_be_answered():
    status = ModelStatus(embedder_error="corrupt weights", reranker_error="no such file")
    banner = model_banner(status, PipelineConfig())
    assert PipelineConfig().embedding.model in banner and "corrupt weights" in banner
    assert "no question can be answered" in banner
