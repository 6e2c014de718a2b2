"""Document and Chunk types, and loaders for Markdown, plain text, HTML and JSONL corpora.

Every loader returns documents *and* problems: a bad file (unreadable, binary, not UTF-8, malformed front
matter, empty, duplicate id, too large) becomes one :class:`LoadProblem` line and the rest of the batch is
still loaded. Nothing here raises for bad input.

Formats (docs/ARCHITECTURE.md): Markdown/text/HTML with optional YAML front matter (``id``, ``title``, ``version``,
``effective_date``, ``product``, plus any other keys, kept as metadata), or JSONL lines
``{"id", "title", "text", ...}``. HTML is converted to Markdown-like text: headings, paragraphs, lists, code
and tables (as Markdown tables) survive; scripts, styles and hidden elements are dropped.

Robustness: no recursion, integer or time limit is reachable from a file. Folders are walked iteratively and
symbolic links out of a folder are refused (:mod:`pipeline.ingestion.files`, which also decodes UTF-16/32 by
their byte-order mark and escapes file names for problem lines and sources); front matter YAML that cannot be
constructed (an impossible date, nesting too deep) is malformed front matter; a JSONL line nested too deeply is
one problem naming its line, and an integer longer than Python converts is kept as its digits; and as a last
resort any other failure while loading one file is a problem line for that file, never the batch's end.

Hidden content: comments, link-reference "comments" and hidden raw HTML are removed from Markdown
(:mod:`pipeline.ingestion.markdown`) as from HTML (:mod:`pipeline.ingestion.html`). Then :func:`normalise_text`
(:mod:`pipeline.ingestion.normalise`) removes invisible format characters and folds look-alike letters in the
body, the title and string metadata.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from pipeline.ingestion.files import decode_text, display_name, escape, walk
from pipeline.ingestion.html import html_metadata, html_to_markdown
from pipeline.ingestion.markdown import strip_hidden
from pipeline.ingestion.normalise import normalise_text

__all__ = ["Chunk", "Document", "LoadProblem", "SUPPORTED_SUFFIXES", "decode_text", "load_file", "load_paths",
           "normalise_text", "parse_document", "parse_jsonl"]

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
        """One printable line: a name or message with a newline or an ANSI escape cannot forge more lines."""
        return f"{escape(self.source)}: {escape(self.message)}"


def load_paths(paths: Iterable[str | Path]) -> tuple[list[Document], list[LoadProblem]]:
    """Load every supported file under ``paths`` (files or directories), in a stable order."""
    documents: list[Document] = []
    problems: list[LoadProblem] = []
    files: list[Path] = []
    supported = ", ".join(sorted(SUPPORTED_SUFFIXES))
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            found, refused = walk(path)
            problems.extend(LoadProblem(display_name(p), reason) for p, reason in refused)
            files.extend(p for p in found if p.suffix.lower() in SUPPORTED_SUFFIXES)
            problems.extend(LoadProblem(display_name(p), f"skipped: unsupported file type {_suffix(p)} "
                                        f"(supported: {supported})")
                            for p in found if p.suffix.lower() not in SUPPORTED_SUFFIXES)
        elif path.is_file():
            files.append(path)
        elif path.exists():
            problems.append(LoadProblem(display_name(path), "not a regular file or folder; skipped"))
        else:
            problems.append(LoadProblem(display_name(path), "no such file or directory"))
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


def _suffix(path: Path) -> str:
    return repr(escape(path.suffix)) if path.suffix else "'(none)'"


def load_file(path: Path) -> tuple[list[Document], list[LoadProblem]]:
    source = display_name(path)
    fmt = SUPPORTED_SUFFIXES.get(path.suffix.lower())
    if fmt is None:
        return [], [LoadProblem(source, f"unsupported file type {_suffix(path)} "
                                f"(supported: {', '.join(sorted(SUPPORTED_SUFFIXES))})")]
    try:
        size = path.stat().st_size
        if size > MAX_DOCUMENT_BYTES:
            return [], [LoadProblem(source, f"too large ({size / 1e6:.1f} MB > {MAX_DOCUMENT_BYTES / 1e6:.0f} MB); "
                                    "split it into smaller documents")]
        raw = path.read_bytes()
    except OSError as exc:
        return [], [LoadProblem(source, f"cannot read file: {exc.strerror or exc}")]
    try:
        return _parse_file(raw, source, fmt, default_id=_slug(path.stem))
    except Exception as exc:  # noqa: BLE001 — the last line of defence: one file never ends the batch
        return [], [LoadProblem(source, f"could not be loaded ({type(exc).__name__}: {exc}); the rest of the batch "
                                "was loaded — please report this file")]


def _parse_file(raw: bytes, source: str, fmt: str, default_id: str) -> tuple[list[Document], list[LoadProblem]]:
    text, problem = decode_text(raw)
    if problem:
        return [], [LoadProblem(source, problem)]
    if text.startswith("\ufeff"):
        text = text[1:]
    if fmt == "jsonl":
        return parse_jsonl(text, source)
    doc, problem = parse_document(text, source, fmt, default_id=default_id)
    return ([doc] if doc else []), ([LoadProblem(source, problem)] if problem else [])


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
            reason = " ".join(str(getattr(exc, "problem", None) or exc).split())  # PyYAML's own text spans lines
            return None, f"malformed front matter{at}: {reason}"
        except RecursionError:
            return None, "malformed front matter: nested too deeply"
        except (ValueError, OverflowError, TypeError) as exc:  # a date that does not exist, a number too long
            reason = " ".join(str(exc).split())
            return None, (f"malformed front matter: {reason} — quote the value to keep it as text, or write a date "
                          "as YYYY-MM-DD")
        if loaded is not None and not isinstance(loaded, dict):
            return None, "malformed front matter: expected 'key: value' lines between the --- markers"
        meta = loaded or {}
        body = text[match.end():]
    elif text.startswith("---\n") and fmt == "md":
        return None, "malformed front matter: opening --- has no closing --- line"
    title = ""
    if fmt == "md":
        body = strip_hidden(body)
    elif fmt == "html":
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
    raw_id = meta.get("id") or default_id
    if not isinstance(raw_id, (str, int, float)):
        return None, f"invalid id: expected a string, got {type(raw_id).__name__}"
    doc_id = str(raw_id).strip()
    if not _ID_OK.match(doc_id):
        shown = doc_id if len(doc_id) <= 80 else doc_id[:60] + f"... ({len(doc_id)} characters)"
        return None, f"invalid id {shown!r}: use letters, digits, '.', '_' or '-' (at most 200 characters)"
    body = _normalise(body)
    if not body.strip():
        return None, "empty document (no text after the front matter); nothing to index"
    title = metadata.pop("title", "") or normalise_text(fallback_title) or _first_heading(body) or doc_id
    return Document(doc_id=doc_id, title=title.strip(), text=body, source=source, format=fmt,
                    metadata=metadata), ""


def parse_jsonl(text: str, source: str) -> tuple[list[Document], list[LoadProblem]]:
    """One document per line; a bad line is one problem naming ``source:line`` and the other lines still load."""
    documents, problems = [], []
    # split on \n only: str.splitlines() also breaks at U+2028, U+0085 ..., which JSON allows raw inside a string
    for lineno, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        where = f"{source}:{lineno}"
        try:
            doc, problem = _jsonl_record(line, where)
        except Exception as exc:  # noqa: BLE001 — one line never ends the file
            doc, problem = None, f"could not be loaded ({type(exc).__name__}: {exc}); please report this line"
        if problem:
            problems.append(LoadProblem(where, problem))
        elif doc:
            documents.append(doc)
    return documents, problems


def _jsonl_record(line: str, where: str) -> tuple[Document | None, str]:
    try:
        obj = json.loads(line, parse_int=_parse_int)
    except json.JSONDecodeError as exc:
        return None, f"not valid JSON: {exc.msg} (column {exc.colno})"
    except RecursionError:
        return None, "not loaded: JSON nested too deeply"
    if not isinstance(obj, dict):
        return None, "expected a JSON object with id, title and text"
    missing = [key for key in ("id", "text") if not obj.get(key)]
    if missing:
        return None, f"missing required field(s): {', '.join(missing)}"
    if not isinstance(obj["text"], str):
        return None, "field 'text' must be a string"
    meta = {k: v for k, v in obj.items() if k != "text"}
    return build_document(meta, obj["text"], where, "jsonl", default_id="")


def _parse_int(digits: str) -> int | str:
    """An integer, or its digits when Python will not convert one that long (``sys.set_int_max_str_digits``)."""
    try:
        return int(digits)
    except ValueError:
        return digits


def _clean_metadata(meta: dict) -> tuple[dict[str, str], str]:
    """Front matter as strings; dates as ISO dates. Returns (metadata, problem)."""
    out: dict[str, str] = {}
    for key, value in meta.items():
        key = normalise_text(str(key))
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


def _normalise(text: str) -> str:
    text = text.replace("\r\n", "\n").replace("\r", "\n")
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
