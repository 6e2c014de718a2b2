"""The answer cache: a repeated question is served from a stored trace, with no LLM call.

**Key.** :func:`cache_key` hashes the normalised standalone query (Unicode NFKC, case-folded, whitespace
collapsed, trailing ``?``/``!``/``.`` and friends removed — "What is X?" and "what is x" are one question),
the corpus version, the config hash and the catalogue's id. Every ingest, replacement or ``workbench
delete`` bumps the corpus version, so a corpus change invalidates every earlier entry by construction: their
keys are never asked for again. A different config (another generator, threshold or model) is a different
key. The catalogue id (``meta.catalogue_id``, made with the catalogue) covers the one way a version number
can come back: a catalogue lost or replaced and rebuilt starts counting again, under a new id.

**What is cached, and why.** Only a *clean generated answer*: generation status ``answered`` (an LLM or the
extractive generator), validation ran, at least one claim, and every claim ``supported`` — no fabricated
marker, no unsupported claim, no uncited factual sentence. Caching exists to repeat good work cheaply; a bad
generation must get a fresh try instead of being served again. So these are never cached:

- an answer with a **fabricated marker** or an **unsupported claim** (the issue's rule: one bad generation
  is not served again), an **uncited** factual sentence (unverified, the same risk), or a **misattributed**
  claim (another offered source states it much more closely than the one cited);
- **gate abstentions**: they cost no LLM call, so there is nothing to save, and recomputing them shows the
  closest documents of the current corpus;
- **generator abstentions** (the model declined although retrieval passed the gate): the next try may
  answer, and caching would pin the miss;
- **fallbacks** (the provider failed and the extractive answer stood in): the outage is transient, and a
  cached fallback would keep being served after the provider is back;
- answers whose validation was skipped or failed, and replays of cached answers (already stored);
- anything **flagged**: an offered source holding text addressed to a model
  (``GenerationTrace.flagged_sources``), a trust rule that flags the answer itself (it cites an injected
  source, reads as an instruction, carries live markup, shows a source's own marker as a citation), a
  limitation about text addressed to models, a ``flags`` entry, or any **degradation** of the run (a stage
  that fell back or was skipped). A cache exists to repeat a clean answer; a flagged one must be looked at
  afresh each time, never served as if it were clean. An entry that breaks this rule (written by an older
  release) is deleted when it is read, and the run recomputes.

**Deleted documents.** Beyond the version key, each entry records the ``doc_id`` of every source offered to
the generator, and :meth:`AnswerCache.invalidate_documents` deletes every entry that could rest on a
deleted document — so the guarantee "no cached answer that cited a deleted document is served" does not
depend on one counter. :meth:`AnswerCache.prune` drops entries of other corpus versions to keep the file
small.

Storage: SQLite in WAL mode (shared by the Streamlit server's threads and CLI processes), one lock-guarded
connection per instance, opened on first use. The cache is **disposable and never blocks an answer**: the
busy timeout is short (:data:`CACHE_WAIT_S`, at most ``$WORKBENCH_LOCK_WAIT_S``), and :meth:`AnswerCache.get`
and :meth:`AnswerCache.put` raise :class:`CacheUnavailable` — one line naming the file — for a cache that is
locked, damaged or cannot be opened; the engine then answers without it and records the line as a
degradation. A damaged file (not a database, a malformed or truncated image, a directory in its place) is
moved aside to ``cache.sqlite.corrupt-<time>`` (with its ``-wal``/``-shm``), never deleted, and the next use
starts an empty cache. A locked one is left alone. The maintenance calls
(:meth:`AnswerCache.invalidate_documents`, :meth:`AnswerCache.prune`) return 0 on an unusable cache: the
version key already keeps what they would drop from being served. A stored entry that no longer parses is
deleted and reported as a miss, never raised.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import sqlite3
import time
import unicodedata
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pipeline.storage.sqlite import Database, DatabaseUnusable, lock_wait_s, transaction, utc_now
from pipeline.trace import Trace

CACHE_WAIT_S = 1.0   # how long an ask waits for a cache another process holds before answering without it

_TRAILING = re.compile(r"[\s?!.。？！…,;:]+$")


def normalise_query(query: str) -> str:
    """Case, width, whitespace and trailing punctuation do not make a different question."""
    text = unicodedata.normalize("NFKC", query).casefold()
    text = re.sub(r"\s+", " ", text).strip()
    return _TRAILING.sub("", text)


def cache_key(query: str, corpus_version: int, config_hash: str, catalogue_id: str = "") -> str:
    parts: list[Any] = [normalise_query(query), int(corpus_version), config_hash]
    if catalogue_id:
        parts.append(catalogue_id)
    canonical = json.dumps(parts, ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


# Trust rules (pipeline/validation/trust.py) that flag the answer itself: it cites an injected source, reads
# as an order to a model or a reader, carries live markup, or shows a source's own marker as a citation.
_FLAGGING_RULES = frozenset({"cites_injected_source", "answer_reads_as_instruction", "answer_has_markup",
                             "validation_copied_marker"})
_ADDRESSED_TO_MODELS = re.compile(r"addressed to (?:ai )?models?|instructions? to (?:a |the )?(?:ai|model)",
                                  re.IGNORECASE)


# A reranker that is not installed is a standing condition of the setup, the same on every run with this
# configuration (part of the cache key), not something that went wrong with this answer: it does not block caching.
STANDING_DEGRADATION = "rerank skipped:"


def why_flagged(trace: Trace) -> str:
    """"" when nothing in ``trace`` is flagged, else what is: a source with text addressed to a model, a
    trust rule or limitation about one, a ``flags`` entry, or a degradation."""
    gen = trace.generation
    if gen.flagged_sources:
        return "flagged source " + ", ".join(f"[{n}]" for n in gen.flagged_sources)
    fired = [r for r in trace.trust.rules_fired if r in _FLAGGING_RULES]
    if fired:
        return f"trust rule {fired[0]}"
    for obj in (trace, gen, trace.validation, trace.trust):
        if getattr(obj, "flags", None):  # a flags field, wherever a stage records one
            return "flagged: " + str(next(iter(obj.flags)))
    for text in (*trace.limitations, *gen.limitations, *trace.trust.limitations):
        if _ADDRESSED_TO_MODELS.search(text):
            return "limitation about text addressed to models"
    degraded = [d for d in trace.degradations if not d.startswith(STANDING_DEGRADATION)]
    if degraded:
        return f"degraded: {degraded[0]}"
    return ""


def why_not_cacheable(trace: Trace) -> str:
    """"" when ``trace`` may be cached, else the reason it must not be (see the module docstring)."""
    gen, val = trace.generation, trace.validation
    if trace.abstained or gen.is_abstention or gen.status == "abstained":
        return "abstention"
    if gen.status != "answered":
        return f"generation {gen.status}"
    if val.status != "ran":
        return f"validation {val.status}"
    if val.fabricated_markers:
        return "fabricated marker"
    if val.unsupported:
        return "unsupported claim"
    if val.uncited:
        return "uncited claim"
    if val.misattributed:
        return "misattributed claim"
    if not val.supported:
        return "no supported claim"
    return why_flagged(trace)


def m001_answers(db: sqlite3.Connection) -> None:
    db.execute("""
        CREATE TABLE answers (
            key TEXT PRIMARY KEY,
            corpus_version INTEGER NOT NULL,
            config_hash TEXT NOT NULL,
            query TEXT NOT NULL,
            trace_json TEXT NOT NULL,
            created_at TEXT NOT NULL
        )""")
    db.execute("CREATE TABLE answer_documents (key TEXT NOT NULL, doc_id TEXT NOT NULL, PRIMARY KEY (key, doc_id))")
    db.execute("CREATE INDEX answer_documents_doc ON answer_documents (doc_id)")


MIGRATIONS = [m001_answers]


class CacheUnavailable(DatabaseUnusable):
    """The answer cache cannot be used for this run (locked, damaged, unopenable); the message says which file,
    and whether it was moved aside. The engine answers without the cache and records the message."""


class AnswerCache(Database):
    """Clean answers by (normalised query, corpus version, config hash, catalogue id). Safe across threads and
    processes; disposable: never blocks or fails an answer (see the module docstring)."""

    migrations = MIGRATIONS

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self._opened_as: tuple[int, int] | None = None

    def busy_timeout_s(self) -> float:
        return min(CACHE_WAIT_S, lock_wait_s())

    def get(self, key: str) -> Trace | None:
        """The clean answer stored under ``key``, or None; :class:`CacheUnavailable` when the cache is unusable."""
        row = self._run(lambda db: db.execute("SELECT trace_json FROM answers WHERE key=?", (key,)).fetchone())
        if row is None:
            return None
        try:
            trace = Trace.from_json(row[0])
        except (TypeError, ValueError):
            trace = None  # written by an incompatible version, or damaged: recompute
        if trace is None or why_not_cacheable(trace):
            self._delete_keys([key])  # unreadable, or cached under an older, looser rule: never served
            return None
        return trace

    def put(self, key: str, trace: Trace) -> bool:
        """Store ``trace`` under ``key`` if it is a clean answer; returns whether it was stored.
        :class:`CacheUnavailable` when the cache is unusable."""
        if why_not_cacheable(trace):
            return False
        doc_ids = sorted({s.doc_id for s in trace.generation.sources if s.doc_id})

        def write(db: sqlite3.Connection) -> None:
            with transaction(db):
                db.execute("DELETE FROM answer_documents WHERE key=?", (key,))
                db.execute("INSERT OR REPLACE INTO answers VALUES (?, ?, ?, ?, ?, ?)",
                           (key, trace.corpus_version, trace.config_hash, trace.rewrite.query or trace.question,
                            trace.to_json(), utc_now()))
                db.executemany("INSERT INTO answer_documents VALUES (?, ?)", [(key, d) for d in doc_ids])

        self._run(write)
        return True

    def invalidate_documents(self, doc_ids: list[str] | tuple[str, ...] | set[str]) -> int:
        """Delete every entry whose answer was generated from one of ``doc_ids``; returns how many (0 when
        the cache is unusable: those entries sit under an older corpus version and are never asked for)."""
        ids = sorted(set(doc_ids))
        if not ids:
            return 0
        marks = ", ".join("?" * len(ids))
        try:
            keys = self._run(lambda db: [r[0] for r in db.execute(
                f"SELECT DISTINCT key FROM answer_documents WHERE doc_id IN ({marks})", ids)])
            return self._delete_keys(keys)
        except CacheUnavailable:
            return 0

    def prune(self, corpus_version: int) -> int:
        """Delete entries of every other corpus version (they can never be hit again); returns how many (0 when
        the cache is unusable)."""
        try:
            keys = self._run(lambda db: [r[0] for r in db.execute(
                "SELECT key FROM answers WHERE corpus_version != ?", (int(corpus_version),))])
            return self._delete_keys(keys)
        except CacheUnavailable:
            return 0

    def __len__(self) -> int:
        return int(self._run(lambda db: db.execute("SELECT COUNT(*) FROM answers").fetchone()[0]))

    def _delete_keys(self, keys: list[str]) -> int:
        if not keys:
            return 0

        def delete(db: sqlite3.Connection) -> None:
            with transaction(db):
                for key in keys:
                    db.execute("DELETE FROM answer_documents WHERE key=?", (key,))
                    db.execute("DELETE FROM answers WHERE key=?", (key,))

        self._run(delete)
        return len(keys)

    # -- an unusable cache ---------------------------------------------------------------------------------
    def _connection(self) -> sqlite3.Connection:
        if self._db is None:
            self._opened_as = _identity(self.path)  # the file this open reads, to set aside only that one
        return super()._connection()

    def _run(self, fn: Callable[[sqlite3.Connection], Any]) -> Any:
        try:
            return super()._run(fn)
        except DatabaseUnusable as exc:
            moved = "" if exc.kind == "busy" else self._set_aside()
            raise CacheUnavailable(self._unusable(exc.kind, exc.reason, moved), self.path, exc.kind,
                                   exc.reason) from None

    def _unusable(self, kind: str, reason: str, moved: str) -> str:
        if kind == "busy":
            return (f"answer cache {self.path} is locked by another process (waited {self.busy_timeout_s():g} s); "
                    "answered without the cache")
        if moved:
            return (f"answer cache {self.path} was unreadable ({reason}); moved it to {moved} and answered without "
                    "the cache (an empty one is started on the next ask)")
        return f"answer cache {self.path} cannot be used ({reason}); answered without the cache"

    def _set_aside(self) -> str:
        """Move the damaged file (and its -wal/-shm) to ``<name>.corrupt-<time>``; returns the new name, or ""
        when it could not be moved or is no longer the file that failed (another process replaced it)."""
        with self._lock:
            self._drop()
            failed, self._opened_as = self._opened_as, None
            if failed is not None and _identity(self.path) != failed:
                return ""  # already set aside and restarted by someone else
            target = self.path.with_name(f"{self.path.name}.corrupt-{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}")
            try:
                os.replace(self.path, target)
            except OSError:
                return ""
            for suffix in ("-wal", "-shm", "-journal"):
                side = self.path.with_name(self.path.name + suffix)
                try:
                    if side.exists():
                        os.replace(side, target.with_name(target.name + suffix))
                except OSError:
                    pass
            return target.name


def _identity(path: Path) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino)
