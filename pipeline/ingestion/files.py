"""Corpus files: walking a folder, decoding a file's bytes, and printing a file's name safely.

Walking (:func:`walk`) is iterative — an explicit stack, so no folder depth reaches a recursion limit — and
skips hidden files and folders (a name starting with "."), as a shell glob does. A symbolic link is followed
only when its target lies inside the folder being walked (resolved): one leading out of it is refused with a
problem line, because a link a colleague left in a corpus folder must not pull ``~/.ssh`` or ``/etc`` into an
index that answers questions. A link inside the folder reaches nothing new twice: a file already reached by
its real path is not loaded again, and a folder already walked (a link loop included) is not walked again.
A path named explicitly is the user's choice and is followed wherever it leads.

Decoding (:func:`decode_text`): UTF-8 (with or without a BOM), and UTF-16/UTF-32 when the file starts with
their byte-order mark. Anything else with NUL bytes is binary (or UTF-16 without a mark, which is said so).

Names (:func:`display_name`, :func:`escape`): a problem line is one line on a terminal, so a file name is
printed with repr-style escapes for what is not printable — newlines, ESC (ANSI sequences), bidi and other
format characters — and bytes that are not UTF-8 as ``\\xNN``. The escaped name is also what is stored as a
document's source, so a name that is not UTF-8 never fails a write after the embedding work is done.
"""

from __future__ import annotations

import codecs
import os
from pathlib import Path

_BOMS = ((codecs.BOM_UTF32_LE, "utf-32"), (codecs.BOM_UTF32_BE, "utf-32"), (codecs.BOM_UTF8, "utf-8-sig"),
         (codecs.BOM_UTF16_LE, "utf-16"), (codecs.BOM_UTF16_BE, "utf-16"))
_SHORT_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def escape(text: str) -> str:
    """``text`` on one printable line: what is not printable becomes a repr-style escape."""
    if text.isprintable():
        return text
    out = []
    for ch in text:
        if ch.isprintable():
            out.append(ch)
        elif ch in _SHORT_ESCAPES:
            out.append(_SHORT_ESCAPES[ch])
        elif "\udc80" <= ch <= "\udcff":  # a byte that was not UTF-8 (os.fsdecode's surrogateescape)
            out.append(f"\\x{ord(ch) - 0xdc00:02x}")
        elif ord(ch) < 0x100:
            out.append(f"\\x{ord(ch):02x}")
        elif ord(ch) < 0x10000:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(f"\\U{ord(ch):08x}")
    return "".join(out)


def display_name(path: str | os.PathLike) -> str:
    """A path as it can be printed and stored: see the module docstring."""
    return escape(os.fspath(path))


def walk(root: Path) -> tuple[list[Path], list[tuple[Path, str]]]:
    """Every regular file under ``root`` (sorted), and (path, reason) for what could not be walked or was refused."""
    real_root = root.resolve()
    files: list[Path] = []
    problems: list[tuple[Path, str]] = []
    reached: set[Path] = set()            # real paths of the files in ``files``
    walked: set[Path] = {real_root}       # real paths of the folders walked or queued
    links: list[Path] = []
    stack: list[tuple[Path, Path]] = [(root, real_root)]
    while stack or links:
        if not stack:  # real entries first, so a file reached both ways keeps its real path
            _follow(sorted(links), real_root, root, stack, files, reached, walked, problems)
            links = []
            continue
        folder, real_folder = stack.pop()
        try:
            with os.scandir(folder) as found:
                entries = sorted(found, key=lambda e: e.name)
        except OSError as exc:
            problems.append((folder, f"cannot read folder: {exc.strerror or exc}; skipped"))
            continue
        for entry in entries:
            if entry.name.startswith("."):
                continue
            path = folder / entry.name
            try:
                if entry.is_symlink():
                    links.append(path)
                elif entry.is_dir(follow_symlinks=False):
                    walked.add(real_folder / entry.name)
                    stack.append((path, real_folder / entry.name))
                elif entry.is_file(follow_symlinks=False):
                    files.append(path)
                    reached.add(real_folder / entry.name)
            except OSError as exc:
                problems.append((path, f"cannot read: {exc.strerror or exc}; skipped"))
    return sorted(files), problems


def _follow(links: list[Path], real_root: Path, root: Path, stack: list, files: list[Path], reached: set[Path],
            walked: set[Path], problems: list[tuple[Path, str]]) -> None:
    for link in links:
        try:
            target = link.resolve(strict=True)
        except (OSError, RuntimeError) as exc:  # broken, or a loop of links (RuntimeError before 3.13)
            problems.append((link, f"broken symbolic link ({getattr(exc, 'strerror', None) or exc}); skipped"))
            continue
        if target != real_root and real_root not in target.parents:
            problems.append((link, f"symbolic link leads outside {display_name(root)} (to {display_name(target)}); "
                                   "not followed — copy the file into the folder to ingest it"))
        elif target.is_dir():
            if target not in walked:
                walked.add(target)
                stack.append((link, target))
        elif target.is_file() and target not in reached:
            reached.add(target)
            files.append(link)


def decode_text(raw: bytes) -> tuple[str, str]:
    """The text of a file, or ("", reason) when it is binary or in an encoding that cannot be told."""
    for bom, encoding in _BOMS:
        if raw.startswith(bom):
            try:
                return raw.decode(encoding), ""
            except UnicodeDecodeError as exc:
                name = encoding.replace("-sig", "").upper()
                return "", f"not valid {name} ({exc.reason} at byte {exc.start}); re-save the file as UTF-8"
    if b"\x00" in raw[:8192]:
        if _looks_like_utf16(raw[:8192]):
            return "", ("looks like UTF-16 without a byte-order mark; re-save the file as UTF-8 "
                        "(or as UTF-16 with a byte-order mark)")
        return "", "binary file (contains NUL bytes); only text formats can be ingested"
    try:
        return raw.decode("utf-8"), ""
    except UnicodeDecodeError as exc:
        return "", (f"not valid UTF-8 (byte 0x{raw[exc.start]:02x} at offset {exc.start}); "
                    "re-save the file as UTF-8")


def _looks_like_utf16(sample: bytes) -> bool:
    """Mostly-ASCII UTF-16 has a NUL in every other byte."""
    pairs = len(sample) // 2
    if pairs < 2:
        return False
    return max(sample[0:2 * pairs:2].count(0), sample[1:2 * pairs:2].count(0)) >= 0.6 * pairs
