"""A deterministic synthetic support-docs corpus for the performance benchmarks (1k / 10k / 100k chunks).

Why synthetic: the latency of the legs, fusion and validation depends on the corpus's *shape* — how many
chunks, how long they are, how many distinct terms and how they are distributed — not on what the text
means. The demo corpus is far smaller; to measure at 100k we generate text with the shape of a support
site and push it through the real loader types, chunker, tokenizer and ingestion.

How the text is made (``random.Random(seed)``, so the same seed gives byte-identical documents):

- **Vocabulary with a long tail.** Words come from three pools, each drawn Zipf-distributed (rank r with
  probability ∝ 1/r^1.07, the exponent measured on English text): ~200 general English words, ~170
  support-domain words (endpoint, retry, certificate ...), and 30,000 pseudo-words built from syllables,
  standing for product names, rare terms and typos — so the vocabulary keeps growing with the corpus as
  Heaps' law says a real one does, and the BM25 posting lists have realistic lengths.
- **Identifiers**, which the project's tokenizer keeps whole: error codes (``ERR_QUEUE_FULL_417``), config
  keys (``delivery.timeout_ms``), versions (``v3.1``), file names (``relay.toml``), CLI commands, HTTP
  statuses, drawn for a fixed share of the words (:meth:`CorpusGenerator.word`).
- **Structure**: documents of 1–6 ``##`` sections, each 1–4 paragraphs of 2–6 sentences of 5–40 words
  (mean ~17), with occasional bullet lists and fenced config snippets; front matter with ``product`` and
  ``topic``, and a ``version`` on config pages and release notes only (as on real sites, most pages are
  unversioned; it also keeps supersession's per-product comparison to the versioned minority).
- Chunks come from the project's own chunker (220-word budget), so their length distribution is the one
  ingestion really produces.

Queries (:func:`make_queries`) are drawn from the corpus the way users ask: an identifier alone, or a few
content words of one chunk with a question frame around them.
"""

from __future__ import annotations

import random
from collections.abc import Iterator

from pipeline.config import ChunkingConfig
from pipeline.ingestion.chunking import chunk_document
from pipeline.ingestion.documents import Chunk, Document

GENERAL = """the a to of and in is for that on with as it be by this are or not from at you can when if
will an your has all each one more new use used using after before only other than then also any most
must should may need needs set sets make makes run runs time first last next same such both between
into over under out up down back while until because so but which who what how where there their
them they we our us its do does did done have had been being were was would could show shows shown
keep keeps kept take takes give gives find found see seen check checks change changes changed start
starts started stop stops stopped send sends sent receive receives received return returns returned
allow allows allowed open opens close closes read reads write writes call calls called wait waits
default value values number numbers list lists name names type types state states level levels
per every some many few less least most much very still already again always never often usually
large small long short high low full empty old older newer latest early late fast slow safe
""".split()

DOMAIN = """endpoint endpoints delivery deliveries retry retries backoff queue queues subscription
subscriber publisher event events webhook webhooks payload payloads signature signatures secret secrets
token tokens scope scopes key keys certificate certificates handshake cipher tls mtls proxy gateway
console dashboard metric metrics alert alerts log logs audit schema schemas transform transforms script
filter filters route routes tenant tenants workspace project account billing quota quotas region zone
cluster clusters node nodes quorum leader follower replica replicas shard shards storage backup restore
snapshot migration upgrade rollback release config configuration setting settings timeout timeouts
latency throughput rate limit limits header headers request requests response responses status code
codes error errors failure failures attempt attempts worker workers thread threads connection
connections socket dns resolver host hosts port ports database postgres index cache memory disk cpu
batch batches stream streams partition partitions offset consumer producer broker topic topics
replay dead-letter retention expiry ttl window duration interval jitter exponential linear threshold
sdk client server daemon service agent plugin api version versions deprecation feature flag rollout
""".split()

_SYLLABLES = """ka lo ve ri tan mor quel sil dra fen gor hal ix jun kel lum nar ost pry rud sev tor
ul vin wex yor zan bre cal dun eth fal gri hos ith jor kla lev mav nep orm pex qui ros sha tri
""".split()
_UNITS = ("ms", "s", "mb", "kb", "count", "percent", "max", "min", "size", "enabled", "interval")
_SECTIONS = ("delivery", "storage", "cluster", "security", "rate_limit", "ingest", "console", "transform",
             "retention", "metrics", "auth", "tls", "queue", "replay", "logging")
_KINDS = ("error", "guide", "faq", "config", "concept", "release-notes", "troubleshooting", "api")
_VERBS = ("configure", "rotate", "enable", "disable", "raise", "lower", "debug", "fix", "monitor", "replay",
          "verify", "migrate", "restore", "inspect", "reset", "limit")
_FRAMES = ("how do I {}", "what does {} mean", "why does {} happen", "{} default", "can I change {}",
           "{} not working", "troubleshoot {}", "where is {} configured", "{}")
ZIPF_S = 1.07
TAIL_SIZE = 30_000


class _Zipf:
    """Draw items Zipf-distributed by rank (cumulative weights, binary search through ``random.choices``)."""

    def __init__(self, items: list[str], s: float = ZIPF_S) -> None:
        self.items = items
        total, acc = 0.0, []
        for r in range(1, len(items) + 1):
            total += 1.0 / r ** s
            acc.append(total)
        self.cum = acc

    def draw(self, rng: random.Random) -> str:
        return rng.choices(self.items, cum_weights=self.cum, k=1)[0]


class CorpusGenerator:
    """Documents, identifiers and queries from one seed; see the module docstring for the recipe."""

    def __init__(self, seed: int = 7) -> None:
        self.rng = random.Random(seed)
        vocab_rng = random.Random(seed * 1_000_003 + 1)
        self.general = _Zipf(GENERAL)
        self.domain = _Zipf(DOMAIN)
        tail = []
        seen = set(GENERAL) | set(DOMAIN)
        while len(tail) < TAIL_SIZE:
            word = "".join(vocab_rng.choice(_SYLLABLES) for _ in range(vocab_rng.randint(2, 4)))
            if word not in seen:
                seen.add(word)
                tail.append(word)
        self.tail = _Zipf(tail)
        self.error_codes = _Zipf([f"ERR_{vocab_rng.choice(DOMAIN).upper().replace('-', '_')}_"
                                  f"{vocab_rng.choice(['FAILED', 'INVALID', 'EXPIRED', 'FULL', 'DENIED', 'TIMEOUT'])}_"
                                  f"{vocab_rng.randint(100, 599)}" for _ in range(600)])
        self.config_keys = _Zipf([f"{vocab_rng.choice(_SECTIONS)}.{vocab_rng.choice(DOMAIN).replace('-', '_')}_"
                                  f"{vocab_rng.choice(_UNITS)}" for _ in range(900)])
        self.products = [f"{vocab_rng.choice(_SYLLABLES)}{vocab_rng.choice(_SYLLABLES)}-relay" for _ in range(30)]

    # -- pieces -------------------------------------------------------------------------------------------
    def identifier(self) -> str:
        rng = self.rng
        roll = rng.random()
        if roll < 0.30:
            return self.error_codes.draw(rng)
        if roll < 0.60:
            return f"`{self.config_keys.draw(rng)}`"
        if roll < 0.72:
            return f"v{rng.randint(1, 5)}.{rng.randint(0, 9)}"
        if roll < 0.82:
            return f"{self.domain.draw(rng)}.{rng.choice(['toml', 'yaml', 'json', 'log'])}"
        if roll < 0.92:
            return str(rng.choice([200, 202, 301, 400, 401, 403, 404, 409, 413, 429, 500, 502, 503, 504]))
        return str(rng.choice([5, 8, 10, 30, 60, 100, 250, 1000, 5000, 15000, 30000]))

    def word(self) -> str:
        roll = self.rng.random()
        if roll < 0.55:
            return self.general.draw(self.rng)
        if roll < 0.85:
            return self.domain.draw(self.rng)
        if roll < 0.93:
            return self.tail.draw(self.rng)
        return self.identifier()

    def sentence(self) -> str:
        n = min(40, max(5, int(self.rng.gauss(17, 6))))
        words = [self.word() for _ in range(n)]
        first = words[0]
        words[0] = first[0].upper() + first[1:] if first[0].isalpha() and not first.startswith("ERR_") else first
        return " ".join(words) + "."

    def paragraph(self) -> str:
        return " ".join(self.sentence() for _ in range(self.rng.randint(2, 6)))

    def heading(self) -> str:
        words = [self.domain.draw(self.rng) for _ in range(self.rng.randint(1, 3))]
        if self.rng.random() < 0.3:
            words.append(self.identifier().strip("`"))
        return " ".join(words).capitalize()

    def block(self) -> str:
        roll = self.rng.random()
        if roll < 0.12:
            return "\n".join(f"- {self.sentence()}" for _ in range(self.rng.randint(2, 6)))
        if roll < 0.18:
            keys = [self.config_keys.draw(self.rng) for _ in range(self.rng.randint(2, 6))]
            body = "\n".join(f"{k.split('.', 1)[1]} = {self.rng.randint(1, 30000)}" for k in keys)
            return f"```toml\n[{keys[0].split('.')[0]}]\n{body}\n```"
        return self.paragraph()

    def document(self, number: int) -> Document:
        rng = self.rng
        kind = _KINDS[number % len(_KINDS)]
        subject = self.error_codes.draw(rng) if kind == "error" else self.heading()
        title = f"{subject}: {' '.join(self.word().strip('`') for _ in range(rng.randint(2, 6)))}"
        sections = [f"# {title}", self.paragraph()]
        for _ in range(rng.randint(1, 6)):
            sections.append(f"## {self.heading()}")
            sections.extend(self.block() for _ in range(rng.randint(1, 4)))
        metadata = {"product": rng.choice(self.products), "topic": kind}
        if kind in ("config", "release-notes"):
            metadata["version"] = f"{rng.randint(1, 5)}.{rng.randint(0, 9)}"
            metadata["effective_date"] = f"20{rng.randint(20, 26)}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"
        return Document(doc_id=f"syn-{number:06d}", title=title, text="\n\n".join(sections),
                        source=f"synthetic:{number}", format="md", metadata=metadata)

    def documents(self) -> Iterator[Document]:
        number = 0
        while True:
            yield self.document(number)
            number += 1


def build_corpus(n_chunks: int, seed: int = 7, chunking: ChunkingConfig | None = None
                 ) -> tuple[list[Document], list[Chunk]]:
    """Whole documents until the chunker has produced at least ``n_chunks`` chunks (the last document's
    extra chunks are kept, so the count is within a few chunks of the target); deterministic per seed."""
    chunking = chunking or ChunkingConfig()
    docs, chunks = [], []
    for doc in CorpusGenerator(seed).documents():
        docs.append(doc)
        chunks.extend(chunk_document(doc, chunking))
        if len(chunks) >= n_chunks:
            return docs, chunks
    raise AssertionError("unreachable")  # pragma: no cover


def make_queries(chunks: list[Chunk], n: int, seed: int = 11) -> list[str]:
    """``n`` user-like queries drawn from ``chunks``: an identifier alone (one in four), or 2-5 content
    words of one chunk inside a question frame."""
    from pipeline.text.tokenize import STOP_WORDS

    rng = random.Random(seed)
    out = []
    while len(out) < n:
        chunk = rng.choice(chunks)
        words = [w.strip("`.,;:()") for w in chunk.text.split()]
        idents = [w for w in words if "_" in w or "." in w]
        content = [w.lower() for w in words if w.isalpha() and w.lower() not in STOP_WORDS and len(w) > 3]
        if idents and rng.random() < 0.25:
            out.append(rng.choice(idents))
        elif len(content) >= 2:
            picked = rng.sample(content, min(len(content), rng.randint(2, 5)))
            out.append(rng.choice(_FRAMES).format(f"{rng.choice(_VERBS)} " * (rng.random() < 0.3) + " ".join(picked)))
    return out
