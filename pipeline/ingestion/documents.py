"""Document and Chunk types, and loaders for Markdown, plain text, HTML and JSONL corpora.

Every loader returns documents *and* problems: a bad file (unreadable, binary, not UTF-8, malformed front
matter, empty, duplicate id, too large) becomes one :class:`LoadProblem` line and the rest of the batch is
still loaded. Nothing here raises for bad input.

Formats (docs/ARCHITECTURE.md): Markdown/text/HTML with optional YAML front matter (``id``, ``title``, ``version``,
``effective_date``, ``product``, plus any other keys, kept as metadata), or JSONL lines
``{"id", "title", "text", ...}``. HTML is converted to Markdown-like text: headings, paragraphs, lists, code
and tables (as Markdown tables) survive; scripts, styles and hidden elements are dropped.

Normalisation (:func:`normalise_text`, applied to the body, the title and string metadata). Documents are
untrusted: a page can split "ig\u200bnore all previous instructions" with zero-width characters, reverse it
on screen with bidi overrides (the "Trojan Source" trick), or spell it with Cyrillic look-alikes
("Ign\u043ere"), so that neither a reader nor :func:`pipeline.generation.prompts.instruction_signals` sees what a
model reads. So: control characters other than tab/newline, zero-width spaces, word joiners, soft
hyphens, BOMs and bidi embedding/override/isolate controls are removed; zero-width (non-)joiners and
direction marks only between two Latin letters (elsewhere they shape Persian or Indic text); full-width
ASCII and mathematical alphanumeric letters become plain ASCII; and inside a word that mixes Latin letters
with Cyrillic or Greek ones, the look-alike letters become their Latin twins (UTS #39's mixed-script
test: no legitimate word mixes the two; an all-Cyrillic or all-Greek word is left alone).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from pipeline.ingestion.html import html_metadata, html_to_markdown

MAX_DOCUMENT_BYTES = 10 * 1024 * 1024
SUPPORTED_SUFFIXES = {".md": "md", ".markdown": "md", ".txt": "txt", ".html": "html", ".htm": "html",
                      ".jsonl": "jsonl"}
_FRONT_MATTER = re.compile(r"\A---[ \t]*\r?\n(.*?)\r?\n---[ \t]*(?:\r?\n|\Z)", re.DOTALL)
_ID_OK = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._\-]{0,199}$")
STRING_FIELDS = ("title", "version", "product", "topic", "status")


@dataclass(frozen=True)
class Document:
    doc_id: str
    title: str
    text: str                                  # Markdown-like body, front matter removed
    source: str                                # path (and line for JSONL) it came from
    format: str                                # md | txt | html | jsonl
    metadata: dict[str, str] = field(default_factory=dict)  # version, effective_date, product, topic, ...

    @property
    def content_hash(self) -> str:
        payload = json.dumps({"title": self.title, "text": self.text, "metadata": self.metadata}, sort_keys=True)
        return hashlib.sha256(payload.encode("utf-8")).hexdigest()

    @property
    def version(self) -> str:
        return self.metadata.get("version", "")

    @property
    def effective_date(self) -> str:
        return self.metadata.get("effective_date", "")

    @property
    def retracted(self) -> bool:
        return self.metadata.get("status", "").strip().lower() == "retracted"


@dataclass(frozen=True)
class Chunk:
    chunk_id: str                              # "<doc_id>#<ordinal>"
    doc_id: str
    ordinal: int
    text: str                                  # the chunk body
    heading_path: tuple[str, ...]              # document title first, then section headings
    kind: str                                  # prose | table | list | code | mixed
    title: str = ""

    @property
    def indexed_text(self) -> str:
        """What is embedded and keyword-indexed: the heading path gives every chunk its context."""
        return " > ".join(self.heading_path) + "\n" + self.text

    @property
    def word_count(self) -> int:
        return len(self.text.split())


@dataclass(frozen=True)
class LoadProblem:
    source: str
    message: str

    def __str__(self) -> str:
        return f"{self.source}: {self.message}"


def load_paths(paths: Iterable[str | Path]) -> tuple[list[Document], list[LoadProblem]]:
    """Load every supported file under ``paths`` (files or directories), in a stable order."""
    documents: list[Document] = []
    problems: list[LoadProblem] = []
    files: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            found = sorted(p for p in path.rglob("*") if p.is_file() and not p.name.startswith("."))
            files.extend(p for p in found if p.suffix.lower() in SUPPORTED_SUFFIXES)
            skipped = [p for p in found if p.suffix.lower() not in SUPPORTED_SUFFIXES]
            problems.extend(LoadProblem(str(p), f"skipped: unsupported file type {p.suffix or '(none)'!r} "
                                        f"(supported: {', '.join(sorted(SUPPORTED_SUFFIXES))})") for p in skipped)
        elif path.is_file():
            files.append(path)
        else:
            problems.append(LoadProblem(str(path), "no such file or directory"))
    seen: dict[str, str] = {}
    for path in files:
        docs, file_problems = load_file(path)
        problems.extend(file_problems)
        for doc in docs:
            if doc.doc_id in seen:
                problems.append(LoadProblem(doc.source, f"duplicate id {doc.doc_id!r} (already loaded from "
                                            f"{seen[doc.doc_id]}); skipped — give each document a unique id"))
                continue
            seen[doc.doc_id] = doc.source
            documents.append(doc)
    return documents, problems


def load_file(path: Path) -> tuple[list[Document], list[LoadProblem]]:
    source = str(path)
    fmt = SUPPORTED_SUFFIXES.get(path.suffix.lower())
    if fmt is None:
        return [], [LoadProblem(source, f"unsupported file type {path.suffix or '(none)'!r} "
                                f"(supported: {', '.join(sorted(SUPPORTED_SUFFIXES))})")]
    try:
        size = path.stat().st_size
        if size > MAX_DOCUMENT_BYTES:
            return [], [LoadProblem(source, f"too large ({size / 1e6:.1f} MB > {MAX_DOCUMENT_BYTES / 1e6:.0f} MB); "
                                    "split it into smaller documents")]
        raw = path.read_bytes()
    except OSError as exc:
        return [], [LoadProblem(source, f"cannot read file: {exc.strerror or exc}")]
    text, problem = decode_text(raw)
    if problem:
        return [], [LoadProblem(source, problem)]
    if fmt == "jsonl":
        return parse_jsonl(text, source)
    doc, problem = parse_document(text, source, fmt, default_id=_slug(path.stem))
    return ([doc] if doc else []), ([LoadProblem(source, problem)] if problem else [])


def decode_text(raw: bytes) -> tuple[str, str]:
    """UTF-8 text of a file, or ("", reason) when it is binary or in another encoding."""
    if b"\x00" in raw[:8192]:
        return "", "binary file (contains NUL bytes); only text formats can be ingested"
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        return "", (f"not valid UTF-8 (byte 0x{raw[exc.start]:02x} at offset {exc.start}); "
                    "re-save the file as UTF-8")
    return text, ""


def parse_document(text: str, source: str, fmt: str, default_id: str) -> tuple[Document | None, str]:
    """One document from the text of a Markdown, text or HTML file; (None, reason) when unusable."""
    meta: dict = {}
    body = text
    match = _FRONT_MATTER.match(text)
    if match and fmt in ("md", "txt", "html"):
        try:
            loaded = yaml.safe_load(match.group(1))
        except yaml.YAMLError as exc:
            where = getattr(exc, "problem_mark", None)
            at = f" at line {where.line + 2}" if where is not None else ""
            return None, f"malformed front matter{at}: {getattr(exc, 'problem', None) or exc}"
        if loaded is not None and not isinstance(loaded, dict):
            return None, "malformed front matter: expected 'key: value' lines between the --- markers"
        meta = loaded or {}
        body = text[match.end():]
    elif text.startswith("---\n") and fmt == "md":
        return None, "malformed front matter: opening --- has no closing --- line"
    title = ""
    if fmt == "html":
        meta = {**html_metadata(body), **meta}
        body, html_title = html_to_markdown(body)
        title = html_title
    elif fmt == "txt" and "title" not in meta:
        lines = body.strip().splitlines()
        if lines:
            title = lines[0].strip()
            body = "\n".join(lines[1:]).strip("\n")
    return build_document(meta, body, source, fmt, default_id, fallback_title=title)


def build_document(meta: dict, body: str, source: str, fmt: str, default_id: str,
                   fallback_title: str = "") -> tuple[Document | None, str]:
    metadata, problem = _clean_metadata(meta)
    if problem:
        return None, problem
    doc_id = str(meta.get("id") or default_id).strip()
    if not _ID_OK.match(doc_id):
        return None, f"invalid id {doc_id!r}: use letters, digits, '.', '_' or '-' (at most 200 characters)"
    body = _normalise(body)
    if not body.strip():
        return None, "empty document (no text after the front matter); nothing to index"
    title = metadata.pop("title", "") or normalise_text(fallback_title) or _first_heading(body) or doc_id
    return Document(doc_id=doc_id, title=title.strip(), text=body, source=source, format=fmt,
                    metadata=metadata), ""


def parse_jsonl(text: str, source: str) -> tuple[list[Document], list[LoadProblem]]:
    documents, problems = [], []
    # split on \n only: str.splitlines() also breaks at U+2028, U+0085 ..., which JSON allows raw inside a string
    for lineno, line in enumerate(text.split("\n"), start=1):
        where = f"{source}:{lineno}"
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            problems.append(LoadProblem(where, f"not valid JSON: {exc.msg} (column {exc.colno})"))
            continue
        if not isinstance(obj, dict):
            problems.append(LoadProblem(where, "expected a JSON object with id, title and text"))
            continue
        missing = [key for key in ("id", "text") if not obj.get(key)]
        if missing:
            problems.append(LoadProblem(where, f"missing required field(s): {', '.join(missing)}"))
            continue
        if not isinstance(obj["text"], str):
            problems.append(LoadProblem(where, "field 'text' must be a string"))
            continue
        meta = {k: v for k, v in obj.items() if k != "text"}
        doc, problem = build_document(meta, obj["text"], where, "jsonl", default_id=str(obj["id"]))
        if problem:
            problems.append(LoadProblem(where, problem))
        elif doc:
            documents.append(doc)
    return documents, problems


def _clean_metadata(meta: dict) -> tuple[dict[str, str], str]:
    """Front matter as strings; dates as ISO dates. Returns (metadata, problem)."""
    out: dict[str, str] = {}
    for key, value in meta.items():
        key = str(key)
        if key == "id" or value is None:
            continue
        if key == "effective_date":
            date, problem = _parse_date(value)
            if problem:
                return {}, problem
            out[key] = date
        elif isinstance(value, (str, int, float, bool)):
            out[key] = normalise_text(str(value))
        elif isinstance(value, (dt.date, dt.datetime)):
            out[key] = value.isoformat()
        elif isinstance(value, list) and all(isinstance(v, (str, int, float)) for v in value):
            out[key] = normalise_text(", ".join(str(v) for v in value))
        else:
            return {}, f"front matter field {key!r} must be a plain value, got {type(value).__name__}"
    return out, ""


def _parse_date(value) -> tuple[str, str]:
    if isinstance(value, dt.datetime):
        return value.date().isoformat(), ""
    if isinstance(value, dt.date):
        return value.isoformat(), ""
    try:
        return dt.date.fromisoformat(str(value).strip()).isoformat(), ""
    except ValueError:
        return "", f"effective_date {value!r} is not a date; use YYYY-MM-DD"


_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\u00ad\u180e\u200b\u2060-\u2064\ufeff"
                      r"\u202a-\u202e\u2066-\u2069]")
_LATIN_JOINER = re.compile(r"(?<=[A-Za-z])[\u200c-\u200f]+(?=[A-Za-z])")
_WIDE = re.compile(r"[\uff01-\uff5e\U0001d400-\U0001d7ff]")
_WORD = re.compile(r"[^\W\d_]+")
# Cyrillic and Greek letters that render like a Latin letter (after Unicode's confusables.txt).
_LOOKALIKES = str.maketrans(
    "\u0430\u0435\u043e\u0440\u0441\u0443\u0445\u0456\u0458\u0455\u0501\u04bb\u043a"
    "\u0410\u0412\u0415\u041a\u041c\u041d\u041e\u0420\u0421\u0422\u0425\u0423\u0406\u0408\u0405"
    "\u03b1\u03bf\u03bd\u03b9\u03ba\u03c1\u03c5\u0391\u0392\u0395\u0396\u0397\u0399\u039a\u039c\u039d\u039f"
    "\u03a1\u03a4\u03a5\u03a7",
    "aeopcyxijsdhk"
    "ABEKMHOPCTXYIJS"
    "aovikpuABEZHIKMNO"
    "PTYX")


def _fold_word(match: re.Match) -> str:
    word = match.group(0)
    folded = word.translate(_LOOKALIKES)
    if folded == word or not any("a" <= ch.lower() <= "z" for ch in word):
        return word  # no look-alike, or no Latin letter: an ordinary Cyrillic or Greek word
    return folded


def normalise_text(text: str) -> str:
    """Remove invisible format characters and fold look-alike letters (see the module docstring)."""
    text = _CONTROL.sub("", text)
    text = _LATIN_JOINER.sub("", text)
    text = _WIDE.sub(lambda m: unicodedata.normalize("NFKC", m.group(0)), text)
    return _WORD.sub(_fold_word, text)


def _normalise(text: str) -> str:
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    # Control characters other than tab/newline carry no meaning and break tokenisers and terminals.
    return normalise_text(text).strip("\n")


def _first_heading(body: str) -> str:
    for line in body.splitlines():
        m = re.match(r"^#{1,6}\s+(.*)", line)
        if m:
            return m.group(1).strip()
    return ""


def _slug(stem: str) -> str:
    slug = re.sub(r"[^A-Za-z0-9._\-]+", "-", stem).strip("-.")
    return slug or "document"
