"""Many processes on one embedded shard: the process that holds it serves the index to the others.

Qdrant Edge loads a shard in one process only (a second load rewrites files the holder is writing:
:mod:`pipeline.storage.lock`). The design's users run the Streamlit app, a notebook and terminal commands on
the same corpus at once, so the process holding ``shard.lock`` also listens on a local socket and runs the
index calls of every other process that opens the same data directory. Every process opens the catalogue
(``store.sqlite``, SQLite in WAL mode: readers never block the writer and see the last committed version)
itself; only the index calls travel:

- reads (dense and keyword search, point ids, vectors, counts) from any process, at any time;
- writes (upserts, deletes, payloads, flushes) from a process inside its own write session: ``write.lock``
  still admits one writer at a time across all processes, so a writer is never interleaved with another,
  whichever process holds the shard.

Who holds is first come: :func:`attach` takes ``shard.lock`` when it is free, otherwise connects to the holder,
waiting up to the lock wait for one or the other. When the holder exits (or is killed: the kernel drops its
lock and its socket), a reader's next call fails over: it takes the lock itself or connects to the new holder.
A write is not retried on failover: the points it had sent may not have been flushed, so the write stops
with an error before the catalogue names them, and the store keeps the previous version.

The socket is in Linux's abstract namespace (no file to leave behind, no path-length limit), named after the
shard's real path, and the holder serves only processes of its own user (``SO_PEERCRED``). Messages are one
JSON object per line; floats survive the round trip exactly, so a served search returns the same scores in the
same order as the holder's own.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import struct
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from pipeline.storage.qdrant_index import IndexHit, IndexPoint
from pipeline.storage.sqlite import StoreError

READS = frozenset({"query_dense", "query_sparse", "dense_vectors", "point_ids", "count"})
WRITES = frozenset({"upsert", "update_sparse", "set_payload", "delete", "flush", "optimize"})
MAX_LINE = 256 * 1024 * 1024   # one message; an upsert batch of many 384-d vectors stays far below
CONNECT_TIMEOUT_S = 1.0


class IndexGone(StoreError):
    """The process that served the index stopped (closed its store, exited or was killed)."""


class HolderFailed(StoreError):
    """The holder ran the call and it failed there; the message is the holder's."""


def address(shard: Path) -> str:
    """The abstract socket name of the shard at ``shard`` (the same for every path that resolves to it)."""
    digest = hashlib.sha256(str(Path(shard).resolve()).encode("utf-8")).hexdigest()[:32]
    return f"\0workbench-shard-{digest}"


def _peer_uid(conn: socket.socket) -> int:
    pid, uid, gid = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i")))
    return uid


# -- the wire format: index values as JSON ---------------------------------------------------------------------
def _hit_out(hit: IndexHit) -> list:
    sparse = None if hit.sparse is None else [[int(i), float(v)] for i, v in hit.sparse.items()]
    return [hit.point_id, hit.score, hit.payload, sparse]


def _hit_in(row: list) -> IndexHit:
    point_id, score, payload, sparse = row
    return IndexHit(point_id, float(score), payload, None if sparse is None else {int(i): float(v) for i, v in sparse})


def _point_out(p: IndexPoint) -> list:
    return [p.point_id, list(p.dense), list(p.sparse_indices), list(p.sparse_values), p.payload]


def _point_in(row: list) -> IndexPoint:
    return IndexPoint(row[0], row[1], row[2], row[3], row[4])


def _encode_result(op: str, result: Any) -> Any:
    if op in ("query_dense", "query_sparse"):
        return [_hit_out(h) for h in result]
    if op == "point_ids":
        return list(result)
    return result


def _decode_args(op: str, args: list) -> list:
    if op == "upsert":
        return [[_point_in(p) for p in args[0]]]
    if op == "update_sparse":
        return [[(pid, list(i), list(v)) for pid, i, v in args[0]]]
    return args


class Server:
    """The holder's side: accepts connections from processes of the same user and runs each request through
    ``handle(op, args)`` (the store runs it on its index under its own lock)."""

    def __init__(self, shard: Path, handle: Callable[[str, list], Any]) -> None:
        self._handle = handle
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self._sock.bind(address(shard))
        except OSError:
            self._sock.close()
            raise
        self._sock.listen(64)
        self._stopped = threading.Event()
        self._conns: set[socket.socket] = set()
        self._conns_lock = threading.Lock()
        self._thread = threading.Thread(target=self._accept, name="workbench-shard-server", daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while not self._stopped.is_set():
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return  # closed
            if _peer_uid(conn) != os.getuid():
                conn.close()
                continue
            with self._conns_lock:
                if self._stopped.is_set():
                    conn.close()
                    return
                self._conns.add(conn)
            threading.Thread(target=self._serve, args=(conn,), name="workbench-shard-peer", daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        try:
            with conn.makefile("rb") as reader, conn.makefile("wb") as writer:
                while not self._stopped.is_set():
                    line = reader.readline(MAX_LINE)
                    if not line:
                        return
                    writer.write(self._answer(line) + b"\n")
                    writer.flush()
        except OSError:
            return
        finally:
            with self._conns_lock:
                self._conns.discard(conn)
            conn.close()

    def _answer(self, line: bytes) -> bytes:
        try:
            request = json.loads(line)
            op, args = request["op"], list(request.get("args", []))
            if op not in READS | WRITES:
                raise ValueError(f"unknown index call {op!r}")
            result = self._handle(op, _decode_args(op, args))
            return json.dumps({"ok": _encode_result(op, result)}).encode("utf-8")
        except Exception as exc:  # the caller gets the error as its own; the holder keeps serving
            return json.dumps({"error": f"{type(exc).__name__}: {exc}"[:2000]}).encode("utf-8")

    def close(self) -> None:
        """Stop accepting and drop every connection (their next call fails over)."""
        self._stopped.set()
        try:
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._sock.close()
        with self._conns_lock:
            for conn in list(self._conns):
                try:
                    conn.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
            self._conns.clear()
        self._thread.join(timeout=2)


class RemoteIndex:
    """The other processes' side: the index API of :class:`~pipeline.storage.qdrant_index.EdgeIndex`, each
    call run by the holder. Raises :class:`IndexGone` when the holder stopped; an error the call met in the
    holder comes back as :class:`HolderFailed` with the holder's message."""

    kind = "qdrant-edge (served)"

    def __init__(self, shard: Path, holder: str = "") -> None:
        self.path = shard
        self.holder = holder
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._sock.settimeout(CONNECT_TIMEOUT_S)
        try:
            self._sock.connect(address(shard))
        except OSError as exc:
            self._sock.close()
            raise IndexGone(f"no process serves {shard}: {exc}") from None
        self._sock.settimeout(None)
        self._reader = self._sock.makefile("rb")
        self._writer = self._sock.makefile("wb")
        self._lock = threading.Lock()

    def _call(self, op: str, *args: Any) -> Any:
        with self._lock:
            try:
                self._writer.write(json.dumps({"op": op, "args": list(args)}).encode("utf-8") + b"\n")
                self._writer.flush()
                line = self._reader.readline(MAX_LINE)
            except (OSError, ValueError) as exc:
                raise IndexGone(f"the process serving {self.path} stopped ({exc})") from None
        if not line:
            raise IndexGone(f"the process serving {self.path} stopped")
        reply = json.loads(line)
        if "error" in reply:
            raise HolderFailed(f"the process serving {self.path} ({self.holder or 'another process'}) failed: "
                               f"{reply['error']}")
        return reply["ok"]

    def query_dense(self, vector: list[float], limit: int) -> list[IndexHit]:
        return [_hit_in(r) for r in self._call("query_dense", [float(x) for x in vector], int(limit))]

    def query_sparse(self, indices: list[int], values: list[float], limit: int) -> list[IndexHit]:
        return [_hit_in(r) for r in self._call("query_sparse", [int(i) for i in indices],
                                               [float(v) for v in values], int(limit))]

    def dense_vectors(self, point_ids: list[str]) -> dict[str, list[float]]:
        return self._call("dense_vectors", list(point_ids))

    def point_ids(self) -> Iterator[str]:
        return iter(self._call("point_ids"))

    def count(self) -> int:
        return int(self._call("count"))

    def upsert(self, points: list[IndexPoint]) -> None:
        for start in range(0, len(points), 256):
            self._call("upsert", [_point_out(p) for p in points[start:start + 256]])

    def update_sparse(self, items: list[tuple[str, list[int], list[float]]]) -> None:
        for start in range(0, len(items), 512):
            self._call("update_sparse", [[pid, list(i), list(v)] for pid, i, v in items[start:start + 512]])

    def set_payload(self, point_id: str, payload: dict[str, Any]) -> None:
        self._call("set_payload", point_id, payload)

    def delete(self, point_ids: list[str]) -> None:
        if point_ids:
            self._call("delete", list(point_ids))

    def optimize(self) -> None:
        self._call("optimize")

    def flush(self) -> None:
        self._call("flush")

    def close(self) -> None:
        for part in (self._reader, self._writer, self._sock):
            try:
                part.close()
            except OSError:
                pass
