"""'Superseded in part': which older chunks a newer document contradicts, computed once at ingestion.

Release notes change limits and defaults; the older reference page still says the old value. Rather than
guess at query time, ingestion compares chunks of documents that share a ``product`` (or, without one, a
``topic``) and carry a ``version`` or ``effective_date``. A chunk of an older document is *superseded in
part* by a chunk of a newer one when

1. they cover the same point: dense cosine similarity >= ``ingest.supersede_similarity``; and
2. they state it differently: each states a number the other does not (``100`` vs ``250``,
   ``256 KB`` vs ``1 MB``). Pure restatements, and chunks that only add to the older one, are left alone.

The older chunk's payload records ``superseded_by`` (newer chunk ids, most similar first) and a one-line
reason. Nothing is hidden: the older chunk is still retrieved, the UI badges it amber, and the prompt asks
the generator to prefer the newer source and say that they disagree.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass

import numpy as np

# Numbers as stated facts: "100", "250", "1.5", "256 KB", "10000", "2^(attempt-1)" → 2; versions are excluded
# (a chunk that mentions "3.0" does not state a different limit than one that mentions "2.4").
_NUMBER = re.compile(r"(?<![\w.])(\d+(?:[.,]\d+)*)(?:\s*(KB|MB|GB|ms|s|days?|hours?|%)\b)?", re.IGNORECASE)
_VERSIONISH = re.compile(r"(?:\bv|version\s+|\bin\s+|\bfrom\s+|\bto\s+|\bsince\s+|\bbefore\s+|\bafter\s+)$",
                         re.IGNORECASE)


@dataclass(frozen=True)
class SupersedeInput:
    chunk_id: str
    doc_id: str
    doc_title: str
    group: str            # product, else topic
    version: str
    effective_date: str
    text: str


def stated_numbers(text: str, known_versions: frozenset[str] = frozenset()) -> frozenset[str]:
    out = set()
    for m in _NUMBER.finditer(text):
        value = m.group(1)
        if value.count(".") >= 2:
            continue  # a patch version such as 3.1.1, not a quantity
        value = value.replace(",", "")
        if value in known_versions and _VERSIONISH.search(text[max(0, m.start() - 10):m.start()]):
            continue
        unit = (m.group(2) or "").lower()
        unit = {"day": "days", "hour": "hours", "s": "s"}.get(unit, unit)
        out.add(f"{value} {unit}".strip())
    return frozenset(out)


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
    numbers = {i: stated_numbers(items[i].text, versions) for i in dated}
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
                only_old, only_new = numbers[i] - numbers[j], numbers[j] - numbers[i]
                if not only_old or not only_new:
                    continue
                label = ", ".join(p for p in (f"v{newer.version}" if newer.version else "", newer.effective_date) if p)
                reason = (f"{newer.doc_title} ({label}) states {', '.join(sorted(only_new))} where this chunk "
                          f"states {', '.join(sorted(only_old))} (similarity {sims[x, y]:.2f})")
                result.setdefault(older.chunk_id, []).append((float(sims[x, y]), newer.chunk_id, reason))
    out = {}
    for chunk_id, found in result.items():
        found.sort(key=lambda f: (-f[0], f[1]))
        out[chunk_id] = (tuple(f[1] for f in found), found[0][2])
    return out
