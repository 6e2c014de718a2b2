"""The vector index behind the store: Qdrant Edge in-process, or a Qdrant server/cluster by URL.

Both keep the same layout: one point per chunk, a named dense vector ``dense`` (cosine) and a named sparse
vector ``bm25`` with Qdrant's IDF modifier, the chunk's metadata as payload. The embedded engine
(``qdrant-edge-py``) is the default; ``QDRANT_URL`` selects ``qdrant-client`` against a server or cluster
(``local:/path`` or ``:memory:`` select qdrant-client's local mode, which speaks the same API and is what the
tests of that path use).

Ties in score are broken by point id so both backends return the same order for the same data: each query
fetches ``TIE_MARGIN`` extra hits and cuts after sorting, and dense cosines that differ only by float noise
(6 significant digits) count as tied.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

DENSE = "dense"
SPARSE = "bm25"
COLLECTION = "workbench_chunks"


class IndexBusy(RuntimeError):
    """The embedded shard is held by another process (or another open store in this one)."""


class IndexDamaged(RuntimeError):
    """The shard exists but cannot be opened for a reason other than being busy."""


@dataclass(frozen=True)
class IndexPoint:
    point_id: str
    dense: list[float]
    sparse_indices: list[int]
    sparse_values: list[float]
    payload: dict[str, Any]


@dataclass(frozen=True)
class IndexHit:
    point_id: str
    score: float
    payload: dict[str, Any]
    sparse: dict[int, float] | None = None


TIE_MARGIN = 10   # extra hits fetched so a tie at the cut-off is broken by point id, not by the engine


def _tie_key(score: float) -> float:
    """A cosine to 6 significant digits: the two engines' float arithmetic differs in the last bits, which
    reordered exactly tied chunks on the demo corpus; only a difference bigger than that is a real one."""
    return float(f"{score:.6g}")


def _sorted_hits(hits: list[IndexHit], limit: int | None = None, coarse: bool = False) -> list[IndexHit]:
    """Best first, ties by point id; ``coarse`` (cosines) treats float-noise differences as ties. BM25 sums
    are compared exactly: the keyword leg must order as rank-bm25 does (tests/pipeline/test_keyword_parity.py)."""
    key = (lambda h: (-_tie_key(h.score), h.point_id)) if coarse else (lambda h: (-h.score, h.point_id))
    return sorted(hits, key=key)[:limit]


class EdgeIndex:
    """Qdrant Edge: the Qdrant engine in-process, segments on disk under ``path``.

    Open it only while holding the data directory's ``shard.lock`` (:meth:`pipeline.storage.store.Store.open`
    does): loading a shard another process holds damages the holder's files. The engine's own lock error is
    still turned into :class:`IndexBusy`, for a holder that does not take ``shard.lock`` (an older release)."""

    kind = "qdrant-edge"

    def __init__(self, path: Path, dim: int, lock_wait_s: float = 5.0) -> None:
        import qdrant_edge as qe

        self._qe = qe
        self.path = path
        config = qe.EdgeConfig(
            vectors={DENSE: qe.EdgeVectorParams(size=dim, distance=qe.Distance.Cosine)},
            sparse_vectors={SPARSE: qe.EdgeSparseVectorParams(modifier=qe.Modifier.Idf)},
            # Vacuum deleted points promptly: the IDF statistics count deleted points until they are.
            optimizers=qe.EdgeOptimizersConfig(deleted_threshold=0.0, vacuum_min_vector_number=1),
        )
        deadline = time.monotonic() + lock_wait_s
        while True:
            try:
                if (path / "wal").exists() or (path / "segments").exists():
                    self._shard = qe.EdgeShard.load(str(path), config)
                else:
                    path.mkdir(parents=True, exist_ok=True)
                    self._shard = qe.EdgeShard.create(str(path), config)
                break
            except Exception as exc:  # the bindings raise a bare Exception with the engine's message
                message = str(exc)
                if "WouldBlock" in message or "lock" in message.lower():
                    if time.monotonic() < deadline:
                        time.sleep(0.25)
                        continue
                    raise IndexBusy(message) from None
                raise IndexDamaged(message) from None

    def upsert(self, points: list[IndexPoint]) -> None:
        qe = self._qe
        for start in range(0, len(points), 256):
            batch = [qe.Point(id=p.point_id, vector={DENSE: p.dense, SPARSE: qe.SparseVector(
                indices=p.sparse_indices, values=p.sparse_values)}, payload=p.payload)
                for p in points[start:start + 256]]
            self._shard.update(qe.UpdateOperation.upsert_points(batch))

    def update_sparse(self, items: list[tuple[str, list[int], list[float]]]) -> None:
        qe = self._qe
        for start in range(0, len(items), 512):
            vectors = [qe.PointVectors(id=pid, vector={SPARSE: qe.SparseVector(indices=i, values=v)})
                       for pid, i, v in items[start:start + 512]]
            self._shard.update(qe.UpdateOperation.update_vectors(vectors))

    def set_payload(self, point_id: str, payload: dict[str, Any]) -> None:
        self._shard.update(self._qe.UpdateOperation.set_payload([point_id], payload))

    def delete(self, point_ids: list[str]) -> None:
        if point_ids:
            self._shard.update(self._qe.UpdateOperation.delete_points(list(point_ids)))

    def query_dense(self, vector: list[float], limit: int) -> list[IndexHit]:
        qe = self._qe
        found = self._shard.query(qe.QueryRequest(limit=limit + TIE_MARGIN,
                                                  query=qe.Query.Nearest(vector, using=DENSE),
                                                  with_payload=True, with_vector=False))
        hits = [IndexHit(str(p.id), float(p.score), dict(p.payload or {})) for p in found]
        return _sorted_hits(hits, limit, coarse=True)

    def query_sparse(self, indices: list[int], values: list[float], limit: int) -> list[IndexHit]:
        qe = self._qe
        if not indices:
            return []
        found = self._shard.query(qe.QueryRequest(
            limit=limit + TIE_MARGIN,
            query=qe.Query.Nearest(qe.SparseVector(indices=indices, values=values), using=SPARSE),
            with_payload=True, with_vector=[SPARSE]))
        hits = []
        for p in found:
            sv = (p.vector or {}).get(SPARSE)
            sparse = dict(zip(sv.indices, sv.values, strict=True)) if sv is not None else None
            hits.append(IndexHit(str(p.id), float(p.score), dict(p.payload or {}), sparse))
        return _sorted_hits(hits, limit)

    def dense_vectors(self, point_ids: list[str]) -> dict[str, list[float]]:
        out = {}
        for start in range(0, len(point_ids), 512):
            for rec in self._shard.retrieve(point_ids[start:start + 512], with_payload=False, with_vector=[DENSE]):
                out[str(rec.id)] = list((rec.vector or {}).get(DENSE) or [])
        return out

    def point_ids(self) -> Iterator[str]:
        qe = self._qe
        offset = None
        while True:
            records, offset = self._shard.scroll(qe.ScrollRequest(offset=offset, limit=1024, with_payload=False,
                                                                  with_vector=False))
            for rec in records:
                yield str(rec.id)
            if offset is None:
                return

    def count(self) -> int:
        return int(self._shard.info().points_count)

    def optimize(self) -> None:
        self._shard.optimize()

    def flush(self) -> None:
        self._shard.flush()

    def close(self) -> None:
        try:
            self._shard.flush()
        finally:
            self._shard.close()


class ClientIndex:
    """qdrant-client: a Qdrant server or cluster by URL, or its local mode (``local:/path``, ``:memory:``)."""

    kind = "qdrant-client"

    def __init__(self, url: str, dim: int, collection: str = COLLECTION) -> None:
        from qdrant_client import QdrantClient
        from qdrant_client import models as qm

        self._qm = qm
        self.url = url
        self.collection = collection
        if url == ":memory:":
            self._client = QdrantClient(location=":memory:")
        elif url.startswith("local:"):
            self._client = QdrantClient(path=url[len("local:"):])
        else:
            self._client = QdrantClient(url=url, timeout=30)
        if not self._client.collection_exists(collection):
            self._client.create_collection(
                collection,
                vectors_config={DENSE: qm.VectorParams(size=dim, distance=qm.Distance.COSINE)},
                sparse_vectors_config={SPARSE: qm.SparseVectorParams(modifier=qm.Modifier.IDF)},
            )

    def upsert(self, points: list[IndexPoint]) -> None:
        qm = self._qm
        for start in range(0, len(points), 256):
            batch = [qm.PointStruct(id=p.point_id, vector={DENSE: p.dense, SPARSE: qm.SparseVector(
                indices=p.sparse_indices, values=p.sparse_values)}, payload=p.payload)
                for p in points[start:start + 256]]
            self._client.upsert(self.collection, points=batch, wait=True)

    def update_sparse(self, items: list[tuple[str, list[int], list[float]]]) -> None:
        qm = self._qm
        for start in range(0, len(items), 512):
            vectors = [qm.PointVectors(id=pid, vector={SPARSE: qm.SparseVector(indices=i, values=v)})
                       for pid, i, v in items[start:start + 512]]
            self._client.update_vectors(self.collection, points=vectors, wait=True)

    def set_payload(self, point_id: str, payload: dict[str, Any]) -> None:
        self._client.set_payload(self.collection, payload=payload, points=[point_id], wait=True)

    def delete(self, point_ids: list[str]) -> None:
        if point_ids:
            self._client.delete(self.collection, points_selector=self._qm.PointIdsList(points=list(point_ids)),
                                wait=True)

    def query_dense(self, vector: list[float], limit: int) -> list[IndexHit]:
        found = self._client.query_points(self.collection, query=vector, using=DENSE, limit=limit + TIE_MARGIN,
                                          with_payload=True).points
        hits = [IndexHit(str(p.id), float(p.score), dict(p.payload or {})) for p in found]
        return _sorted_hits(hits, limit, coarse=True)

    def query_sparse(self, indices: list[int], values: list[float], limit: int) -> list[IndexHit]:
        if not indices:
            return []
        found = self._client.query_points(self.collection, query=self._qm.SparseVector(indices=indices, values=values),
                                          using=SPARSE, limit=limit + TIE_MARGIN, with_payload=True,
                                          with_vectors=[SPARSE]).points
        hits = []
        for p in found:
            sv = (p.vector or {}).get(SPARSE)
            sparse = dict(zip(sv.indices, sv.values, strict=True)) if sv is not None else None
            hits.append(IndexHit(str(p.id), float(p.score), dict(p.payload or {}), sparse))
        return _sorted_hits(hits, limit)

    def dense_vectors(self, point_ids: list[str]) -> dict[str, list[float]]:
        out = {}
        for start in range(0, len(point_ids), 512):
            for rec in self._client.retrieve(self.collection, ids=point_ids[start:start + 512],
                                             with_payload=False, with_vectors=[DENSE]):
                vec = rec.vector.get(DENSE) if isinstance(rec.vector, dict) else rec.vector
                out[str(rec.id)] = list(vec or [])
        return out

    def point_ids(self) -> Iterator[str]:
        offset = None
        while True:
            records, offset = self._client.scroll(self.collection, offset=offset, limit=1024, with_payload=False,
                                                  with_vectors=False)
            for rec in records:
                yield str(rec.id)
            if offset is None:
                return

    def count(self) -> int:
        return int(self._client.count(self.collection, exact=True).count)

    def optimize(self) -> None:
        """The server optimises in the background; nothing to do from the client."""

    def flush(self) -> None:
        """Writes are acknowledged with wait=True; nothing to flush."""

    def close(self) -> None:
        self._client.close()
