"""Crash and damage recovery for the store: what :meth:`Store.open` checks and what a repair starts from.

The catalogue (:mod:`pipeline.storage.catalogue`) is the source of truth for what is live, and keeps every
document's text, so the index is always the part that can be wrong and rebuilt:

- **orphans** (:func:`orphan_points`): index points the catalogue does not name, left by a write killed
  between upserting the new points and switching the catalogue to them. Search already ignores them; a
  repair deletes them.
- **missing points** (:func:`missing_points`): catalogue chunks whose point is not in the index (a replaced
  or damaged index); a repair re-indexes their documents from the stored text
  (:func:`pipeline.ingestion.ingest.repair`).
- **a damaged shard** (:func:`probe_index`, :func:`set_aside_damaged_shard`): a shard that will not open, or
  opens but fails a cheap health check, is moved aside (kept for inspection, never deleted) and an empty
  one started; the next repair rebuilds every chunk. Both checks run only while this process holds
  ``shard.lock`` (:mod:`pipeline.storage.lock`): a shard another process holds is busy, not damaged, and
  its opener is refused before it looks.

A repair runs as the store's one writer (``write.lock``), so points a running writer has upserted but not yet
switched to are never taken for orphans.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path
from typing import Any

import numpy as np

from pipeline.retrieval.bm25 import to_sparse
from pipeline.storage.catalogue import Catalogue
from pipeline.storage.qdrant_index import EdgeIndex


def probe_index(catalogue: Catalogue, index: Any, dim: int) -> str:
    """A cheap health check on open: one stored chunk must come back whole — its dense vector readable, its
    payload intact, itself found by a dense query with that vector and by a keyword query with its own
    terms, with a positive BM25 score. A shard can load and count right yet fail each of these (a
    truncated vector file, an overwritten payload page, a lost id mapping that corrupts the IDF
    statistics); then every search would be wrong until someone deleted the shard by hand. Returns what
    failed, or "" when healthy (or empty)."""
    first = catalogue.first_chunk()
    if first is None:
        return ""
    point_id, doc_id, chunk_terms = first
    try:
        vector = index.dense_vectors([point_id]).get(point_id) or []
        if len(vector) != dim or not np.all(np.isfinite(vector)) or not np.any(vector):
            return f"chunk point {point_id} has no readable dense vector"
        dense = {h.point_id: h for h in index.query_dense(list(vector), 5)}
        if point_id not in dense or dense[point_id].score < 0.99:
            return "a chunk's own vector does not find it on the dense leg"
        if dense[point_id].payload.get("doc_id") != doc_id:
            return "a chunk's payload does not match the catalogue"
        terms = sorted(set(chunk_terms))[:32]
        if terms:
            indices, values = to_sparse({t: 1.0 for t in terms})
            sparse = index.query_sparse(indices, values, 50)
            if any(h.score < 0 or not np.isfinite(h.score) for h in sparse):
                return "the keyword leg returns negative BM25 scores (corrupt term statistics)"
            if point_id not in {h.point_id for h in sparse}:
                return "a chunk's own terms do not find it on the keyword leg"
    except Exception as exc:  # the bindings raise bare exceptions for unreadable storage
        return f"{type(exc).__name__}: {str(exc)[:200]}"
    return ""


def set_aside_damaged_shard(home: Path, dim: int, lock_wait_s: float, why: str) -> tuple[EdgeIndex, str]:
    """Move the shard aside (kept for inspection, never deleted) and start an empty one; the next repair
    rebuilds every chunk from the catalogue's stored text. Returns the new index and the damage note."""
    damaged = home / f"shard.damaged-{int(time.time())}"
    shutil.move(str(home / "shard"), damaged)
    index = EdgeIndex(home / "shard", dim, lock_wait_s=lock_wait_s)
    return index, f"{why}; moved it to {damaged.name} and started a new one"


def orphan_points(catalogue: Catalogue, index: Any) -> list[str]:
    """Index points the catalogue does not know (left by an interrupted write)."""
    live = set(catalogue.live_points())
    return [pid for pid in index.point_ids() if pid not in live]


def missing_points(catalogue: Catalogue, index: Any) -> list[str]:
    """Catalogue chunks whose point is not in the index (a damaged or replaced index)."""
    present = set(index.point_ids())
    return [cid for pid, cid in catalogue.live_points().items() if pid not in present]
