"""What a cited chunk is compared with: its sentence windows (:func:`chunk_passages`), and the key that says which
text and windowing stored window vectors were made from (:func:`passage_key`). Ingestion stores the windows'
vectors; the citation check and the NLI check both read the same windows, so they live below both."""
from __future__ import annotations

import hashlib
import re

from pipeline.validation.claims import split_claims

__all__ = ["chunk_passages", "passage_key", "MAX_PASSAGES_PER_CHUNK", "PASSAGES_VERSION"]

MAX_PASSAGES_PER_CHUNK = 64   # a chunk is ~220 words; this only bounds a pathological one
PASSAGES_VERSION = "1"        # bump when chunk_passages changes, so stored windows are not reused


def chunk_passages(text: str, match: str = "passage") -> list[str]:
    """What one cited chunk is compared with: the whole chunk, plus (``match="passage"``) each of its
    sentences and each pair of adjacent sentences. A claim usually restates one or two sentences of a chunk
    that says several things; against the whole chunk its cosine is diluted by the rest, and a chunk longer
    than the encoder's 256 tokens is truncated, so facts near its end would never match at all."""
    if match == "chunk":
        return [text]
    sentences = [s.text for s in split_claims(text)
                 if s.why_not not in ("heading", "code") and len(re.findall(r"\w+", s.text)) >= 3]
    windows = sentences + [f"{a} {b}" for a, b in zip(sentences, sentences[1:], strict=False)]
    return list(dict.fromkeys([text, *windows]))[:MAX_PASSAGES_PER_CHUNK]


def passage_key(heading_path: tuple[str, ...] | list[str], text: str) -> str:
    """What a chunk's stored validation vectors were made from: the windowing version and the indexed text."""
    indexed = " > ".join(heading_path) + "\n" + text
    return hashlib.sha1(f"{PASSAGES_VERSION}\x00{indexed}".encode()).hexdigest()
