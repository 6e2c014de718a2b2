"""Validation: a generated answer in, a verdict per claim and the final confidence out.

In: the :class:`~pipeline.trace.GenerationTrace`, the candidates offered as sources, the ``validate`` config
section and a :class:`~pipeline.context.StageContext` (the embedder, the store's passage vectors). Out: a
:class:`~pipeline.trace.ValidationTrace` (each claim's markers, similarities and verdict
supported / unsupported / uncited; fabricated markers; uncited sources) and a
:class:`~pipeline.trace.TrustTrace` (confidence after the trust rules, limitations).

- ``claims.py``: split an answer into sentence claims with their citation markers.
- ``citations.py``: check every claim against the sources it cites, in one batched encoder call.
- ``trust.py``: the trust rules (downgrade without citations, warn on a flagged source).
"""
