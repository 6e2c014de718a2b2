"""'Superseded in part': which older chunks a newer document contradicts, computed once at ingestion.

Release notes change limits and defaults; the older reference page still says the old value. Rather than
guess at query time, ingestion compares chunks of documents that share a ``product`` (or, without one, a
``topic``) and carry a ``version`` or ``effective_date``. A chunk of an older document is *superseded in
part* by a chunk of a newer one when

1. they cover the same point: dense cosine similarity >= ``ingest.supersede_similarity``; and
2. they state it differently: for some setting or limit both chunks quantify — keyed by the nearest config
   key or identifier before the number (``rate_limit.requests_per_minute``), a table row's first cell, or
   the two content words before the number ("payload size") — the newer chunk states a value the older does
   not (``100`` vs ``250``, ``256 KB`` vs ``1 MB``). Dates, version numbers and list markers are not
   quantities. Pure restatements are left alone.

The older chunk's payload records ``superseded_by`` (newer chunk ids, most similar first) and a one-line
reason. Nothing is hidden: the older chunk is still retrieved, the UI badges it amber, and the prompt asks
the generator to prefer the newer source and say that they disagree.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass

import numpy as np

# A stated quantity: a number with an optional unit. Dates, product versions and list markers are not
# quantities and are removed before matching.
_NUMBER = re.compile(r"(?<![\w.])(\d+(?:[.,]\d+)*)(?:\s*(KB|MB|GB|ms|s|days?|hours?|minutes?|%)\b)?", re.IGNORECASE)
_DATE = re.compile(r"\b\d{4}-\d{2}-\d{2}\b")
_VERSION = re.compile(r"\bv?\d+\.\d+(?:\.\d+)+\b|\bv\d+(?:\.\d+)*\b", re.IGNORECASE)
_LIST_MARKER = re.compile(r"^\s*(?:\d{1,3}[.)]|[-*+])\s+", re.MULTILINE)
# What a quantity is about: the nearest config key / identifier before it in the same sentence ...
_IDENTIFIER = re.compile(r"`?([A-Za-z][A-Za-z0-9]*(?:[._][A-Za-z0-9]+)+)`?")
# ... or, without one, the last two content words before it.
_FILLER = frozenset("""is are was were now set default defaults changed change from to raised lowered increased
    decreased reduced up down at most least maximum max minimum min value values new old per each every after
    before than about around only also still becomes became""".split())
_WORD = re.compile(r"[A-Za-z][A-Za-z\-]+")


@dataclass(frozen=True)
class Statement:
    key: str               # "max_retries", "payload size"
    value: str             # "8", "1 mb", "14 days"


def _quantity(match: re.Match) -> str:
    value = match.group(1).replace(",", "")
    unit = (match.group(2) or "").lower()
    unit = {"day": "days", "hour": "hours", "minute": "minutes"}.get(unit, unit)
    return f"{value} {unit}".strip()


def _word_key(text_before: str) -> str:
    words = [w.lower() for w in _WORD.findall(text_before)]
    content = [w for w in words if w not in _FILLER and len(w) > 2]
    return " ".join(content[-2:])


def _key_before(text_before: str) -> str:
    # Opaque ids (ep_01JD3K8W2Q...) are examples, not settings: many digits means an id, not a key.
    identifiers = [i for i in _IDENTIFIER.findall(text_before) if sum(c.isdigit() for c in i) <= 3]
    if identifiers:
        return identifiers[-1].lower().split(".")[-1]
    return _word_key(text_before)


def stated_facts(text: str, known_versions: frozenset[str] = frozenset()) -> frozenset[Statement]:
    """(what, quantity) pairs a chunk states: table rows keyed by their first cell, prose by the nearest
    identifier or the two content words before the number."""
    text = _DATE.sub(" ", text)
    text = _VERSION.sub(" ", text)
    for version in sorted(known_versions, key=len, reverse=True):
        text = re.sub(rf"(?<![\w.]){re.escape(version)}(?![\w.]*\d)", " ", text)
    text = _LIST_MARKER.sub("", text)
    out: set[Statement] = set()
    for line in text.split("\n"):
        if line.strip().startswith("|"):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if len(cells) < 2 or set(cells[0]) <= set("-: "):
                continue
            key = _key_before(cells[0]) if _IDENTIFIER.search(cells[0]) else _word_key(cells[0])
            for cell in cells[1:]:
                out.update(Statement(key, _quantity(m)) for m in _NUMBER.finditer(cell) if key)
            continue
        for sentence in re.split(r"(?<=[.!?;:])\s+", line):
            for m in _NUMBER.finditer(sentence):
                key = _key_before(sentence[:m.start()])
                if key:
                    out.add(Statement(key, _quantity(m)))
    return frozenset(out)


def changed_statements(older: frozenset[Statement], newer: frozenset[Statement]) -> list[tuple[str, str, str]]:
    """(key, older values, newer values) for keys both state where the newer states a value the older does not."""
    old_by_key: dict[str, set[str]] = {}
    new_by_key: dict[str, set[str]] = {}
    for st in older:
        old_by_key.setdefault(st.key, set()).add(st.value)
    for st in newer:
        new_by_key.setdefault(st.key, set()).add(st.value)
    out = []
    for key in sorted(old_by_key.keys() & new_by_key.keys()):
        # "300" and "300 s" are the same statement: compare the numbers, not how the unit was written.
        old_numbers = {v.split(" ")[0] for v in old_by_key[key]}
        if any(v.split(" ")[0] not in old_numbers for v in new_by_key[key]):
            out.append((key, ", ".join(sorted(old_by_key[key])), ", ".join(sorted(new_by_key[key]))))
    return out


@dataclass(frozen=True)
class SupersedeInput:
    chunk_id: str
    doc_id: str
    doc_title: str
    group: str            # product, else topic
    version: str
    effective_date: str
    text: str


def _version_key(version: str) -> tuple[int, ...] | None:
    parts = re.findall(r"\d+", version or "")
    return tuple(int(p) for p in parts) if parts else None


def is_newer(a: SupersedeInput, b: SupersedeInput) -> bool:
    """Is b's document newer than a's? By version when both have one, else by effective date."""
    va, vb = _version_key(a.version), _version_key(b.version)
    if va is not None and vb is not None and va != vb:
        return vb > va
    if a.effective_date and b.effective_date:
        try:
            return dt.date.fromisoformat(b.effective_date) > dt.date.fromisoformat(a.effective_date)
        except ValueError:
            return False
    return False


def compute_supersession(items: list[SupersedeInput], vectors: np.ndarray, threshold: float
                         ) -> dict[str, tuple[tuple[str, ...], str]]:
    """chunk_id -> (superseding chunk ids, reason) for every chunk that is superseded in part."""
    dated = [i for i, it in enumerate(items) if it.group and (it.version or it.effective_date)]
    versions = frozenset(it.version for it in items if it.version)
    facts = {i: stated_facts(items[i].text, versions) for i in dated}
    result: dict[str, list[tuple[float, str, str]]] = {}
    by_group: dict[str, list[int]] = {}
    for i in dated:
        by_group.setdefault(items[i].group, []).append(i)
    for members in by_group.values():
        if len(members) < 2:
            continue
        sims = vectors[members] @ vectors[members].T
        for x, i in enumerate(members):
            older = items[i]
            for y, j in enumerate(members):
                newer = items[j]
                if newer.doc_id == older.doc_id or sims[x, y] < threshold or not is_newer(older, newer):
                    continue
                changes = changed_statements(facts[i], facts[j])
                if not changes:
                    continue
                label = ", ".join(p for p in (f"v{newer.version}" if newer.version else "", newer.effective_date) if p)
                stated = "; ".join(f"{key}: {new_values} (this chunk: {old_values})"
                                   for key, old_values, new_values in changes[:3])
                reason = f"{newer.doc_title} ({label}) states {stated} — similarity {sims[x, y]:.2f}"
                result.setdefault(older.chunk_id, []).append((float(sims[x, y]), newer.chunk_id, reason))
    out = {}
    for chunk_id, found in result.items():
        found.sort(key=lambda f: (-f[0], f[1]))
        out[chunk_id] = (tuple(f[1] for f in found), found[0][2])
    return out
