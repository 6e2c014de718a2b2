"""The answer cache: a repeated question is served from a stored trace, with no LLM call.

**Key.** :func:`cache_key` hashes the normalised standalone query (Unicode NFKC, case-folded, whitespace
collapsed, trailing ``?``/``!``/``.`` and friends removed — "What is X?" and "what is x" are one question),
the corpus version and the config hash. Every ingest, replacement or ``workbench delete`` bumps the corpus
version, so a corpus change invalidates every earlier entry by construction: their keys are never asked
for again. A different config (another generator, threshold or model) is a different key.

**What is cached, and why.** Only a *clean generated answer*: generation status ``answered`` (an LLM or the
extractive generator), validation ran, at least one claim, and every claim ``supported`` — no fabricated
marker, no unsupported claim, no uncited factual sentence. Caching exists to repeat good work cheaply; a bad
generation must get a fresh try instead of being served again. So these are never cached:

- an answer with a **fabricated marker** or an **unsupported claim** (the issue's rule: one bad generation
  is not served again), or an **uncited** factual sentence (unverified, the same risk);
- **gate abstentions**: they cost no LLM call, so there is nothing to save, and recomputing them shows the
  closest documents of the current corpus;
- **generator abstentions** (the model declined although retrieval passed the gate): the next try may
  answer, and caching would pin the miss;
- **fallbacks** (the provider failed and the extractive answer stood in): the outage is transient, and a
  cached fallback would keep being served after the provider is back;
- answers whose validation was skipped or failed, and replays of cached answers (already stored).

**Deleted documents.** Beyond the version key, each entry records the ``doc_id`` of every source offered to
the generator, and :meth:`AnswerCache.invalidate_documents` deletes every entry that could rest on a
deleted document — so the guarantee "no cached answer that cited a deleted document is served" does not
depend on one counter. :meth:`AnswerCache.prune` drops entries of other corpus versions to keep the file
small.

Storage: SQLite in WAL mode with a busy timeout (shared by the Streamlit server's threads and CLI
processes), one lock-guarded connection per instance. A stored entry that no longer parses is deleted and
reported as a miss, never raised.
"""

from __future__ import annotations

import hashlib
import json
import re
import sqlite3
import unicodedata

from pipeline.storage.sqlite import Database, transaction, utc_now
from pipeline.trace import Trace

_TRAILING = re.compile(r"[\s?!.。？！…,;:]+$")


def normalise_query(query: str) -> str:
    """Case, width, whitespace and trailing punctuation do not make a different question."""
    text = unicodedata.normalize("NFKC", query).casefold()
    text = re.sub(r"\s+", " ", text).strip()
    return _TRAILING.sub("", text)


def cache_key(query: str, corpus_version: int, config_hash: str) -> str:
    canonical = json.dumps([normalise_query(query), int(corpus_version), config_hash], ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


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
    if not val.supported:
        return "no supported claim"
    return ""


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


class AnswerCache(Database):
    """Clean answers by (normalised query, corpus version, config hash). Safe across threads and processes."""

    migrations = MIGRATIONS

    def get(self, key: str) -> Trace | None:
        with self._lock:
            row = self._db.execute("SELECT trace_json FROM answers WHERE key=?", (key,)).fetchone()
        if row is None:
            return None
        try:
            return Trace.from_json(row[0])
        except (TypeError, ValueError):
            self._delete_keys([key])  # written by an incompatible version, or damaged: recompute
            return None

    def put(self, key: str, trace: Trace) -> bool:
        """Store ``trace`` under ``key`` if it is a clean answer; returns whether it was stored."""
        if why_not_cacheable(trace):
            return False
        doc_ids = sorted({s.doc_id for s in trace.generation.sources if s.doc_id})
        with self._lock, transaction(self._db) as db:
            db.execute("DELETE FROM answer_documents WHERE key=?", (key,))
            db.execute("INSERT OR REPLACE INTO answers VALUES (?, ?, ?, ?, ?, ?)",
                       (key, trace.corpus_version, trace.config_hash, trace.rewrite.query or trace.question,
                        trace.to_json(), utc_now()))
            db.executemany("INSERT INTO answer_documents VALUES (?, ?)", [(key, d) for d in doc_ids])
        return True

    def invalidate_documents(self, doc_ids: list[str] | tuple[str, ...] | set[str]) -> int:
        """Delete every entry whose answer was generated from one of ``doc_ids``; returns how many."""
        ids = sorted(set(doc_ids))
        if not ids:
            return 0
        with self._lock:
            marks = ", ".join("?" * len(ids))
            keys = [r[0] for r in self._db.execute(
                f"SELECT DISTINCT key FROM answer_documents WHERE doc_id IN ({marks})", ids)]
        return self._delete_keys(keys)

    def prune(self, corpus_version: int) -> int:
        """Delete entries of every other corpus version (they can never be hit again); returns how many."""
        with self._lock:
            keys = [r[0] for r in self._db.execute("SELECT key FROM answers WHERE corpus_version != ?",
                                                   (int(corpus_version),))]
        return self._delete_keys(keys)

    def __len__(self) -> int:
        with self._lock:
            return int(self._db.execute("SELECT COUNT(*) FROM answers").fetchone()[0])

    def _delete_keys(self, keys: list[str]) -> int:
        if not keys:
            return 0
        with self._lock, transaction(self._db) as db:
            for key in keys:
                db.execute("DELETE FROM answer_documents WHERE key=?", (key,))
                db.execute("DELETE FROM answers WHERE key=?", (key,))
        return len(keys)
