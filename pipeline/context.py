"""What a stage may reach besides its inputs and its own config section: the models, the store, and the
embedding settings the store was built with. The engine builds one :class:`StageContext` per run; a stage
never reads another stage's config (anything it needs from one, such as the rerank early-stop threshold the
gate implies, the engine computes and passes as an input).

Stages that only need models also accept a bare :class:`~pipeline.models.registry.Models` (tests and
notebooks call them that way); :func:`as_context` normalises.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pipeline.config import EmbeddingConfig
from pipeline.models.registry import Models

if TYPE_CHECKING:  # the store is only passed through here
    from pipeline.storage.store import Store


@dataclass(frozen=True)
class StageContext:
    models: Models
    store: Store | None = None
    embedding: EmbeddingConfig = field(default_factory=EmbeddingConfig)

    def embedder(self) -> Any:
        """The query/claim encoder: the one the store's vectors were made with (lazy, cached per process)."""
        return self.models.embedder(self.embedding)

    def nli(self, name: str) -> Any:
        """The NLI classifier ``name`` (lazy, cached per process); raises ModelUnavailable when it does not resolve."""
        return self.models.nli(name)

    def passages(self) -> Any:
        """``Store.passage_vectors`` when a store is attached (the validator's stored sentence windows)."""
        return self.store.passage_vectors if self.store is not None else None


def as_context(ctx: StageContext | Models) -> StageContext:
    return ctx if isinstance(ctx, StageContext) else StageContext(models=ctx)
