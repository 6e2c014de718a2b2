"""Storage: everything the workbench keeps on disk under the data directory (``.workbench/`` or
``$WORKBENCH_HOME``).

- :mod:`~pipeline.storage.store` — the :class:`Store` facade and its crash-safe write protocol: the index
  plus the catalogue, what ingestion writes to and retrieval searches.
- :mod:`~pipeline.storage.catalogue` — ``store.sqlite``: documents with their text, chunks, term document
  frequencies, passage vectors, corpus metadata; numbered migrations.
- :mod:`~pipeline.storage.qdrant_index` — the Qdrant index (Edge shard or server): dense and BM25 sparse
  vectors per chunk.
- :mod:`~pipeline.storage.recovery` — orphan and missing points, the health probe, a damaged shard set aside.
- :mod:`~pipeline.storage.runs` — ``runs.sqlite``, the audit log: one row per ``ask`` with its full trace.
- :mod:`~pipeline.storage.cache` — ``cache.sqlite``, the answer cache of clean generated answers.
- :mod:`~pipeline.storage.sqlite` — the SQLite helper they share: connection, transaction, migrations.

In: documents, chunks, built points and tokens from :mod:`pipeline.ingestion`; traces from the engine.
Out: search hits (dense and keyword) and IDF for :mod:`pipeline.retrieval`, stored passage vectors for
:mod:`pipeline.validation`, past runs and cached answers for the engine and the workbench.
"""
