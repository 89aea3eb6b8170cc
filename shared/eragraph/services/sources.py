"""Reading documents from files, folders and JSONL corpora into SourceDocs.

A JSONL line {"id", "title", "text"} is one document (its id is the document id); any other
file with a text suffix is one document whose id derives from its path. Each unreadable file
or line becomes an error entry naming it and saying why; the rest of the batch goes on.
``iter_sources`` yields the documents lazily (folders walked and JSONL files read as they are
consumed), so a bulk ingest holds one batch of documents, never the corpus."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator
from pathlib import Path

from ..domain.model import BadInputError
from ..domain.text import MAX_DOCUMENT_BYTES, TEXT_SUFFIXES, decode_document, titled_text
from .ingest import SourceDoc


def _walk(folder: Path) -> Iterator[Path]:
    """Files under ``folder`` in sorted-path order (as sorted(folder.rglob("*"))), lazily: one
    directory's entry names at a time. Hidden entries are skipped; symlinked folders are not
    entered (as rglob)."""
    with os.scandir(folder) as it:
        entries = sorted((e for e in it if not e.name.startswith(".")), key=lambda e: e.name)
    for entry in entries:
        path = Path(entry.path)
        if entry.is_dir(follow_symlinks=False):
            yield from _walk(path)
        elif entry.is_file():
            yield path


def iter_files(paths: Iterable[str | Path]) -> Iterator[Path]:
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            yield from _walk(path)
        else:
            yield path


def jsonl_row(path: Path, lineno: int, line: str, errors: list[dict[str, str]]) -> SourceDoc | None:
    """One JSONL line as a SourceDoc, or None (blank, or an error entry appended)."""
    if not line.strip():
        return None
    where = f"{path}:{lineno}"
    try:
        row = json.loads(line)
    except json.JSONDecodeError as exc:
        errors.append({"source": where, "error": f"not JSON: {exc.msg}"})
        return None
    if not isinstance(row, dict) or not isinstance(row.get("text"), str) or not row["text"].strip():
        errors.append({"source": where, "error": "a line needs a non-empty string field 'text'"})
        return None
    doc_id = str(row.get("id") or "").strip()
    title = str(row.get("title") or "")
    meta = {k: row[k] for k in ("increment",) if k in row}
    return SourceDoc(source=f"{path.name}#{doc_id or lineno}", doc_id=doc_id, title=title,
                     text=titled_text(title, row["text"]), meta=meta)


def read_jsonl(path: Path, data: bytes) -> tuple[list[SourceDoc], list[dict[str, str]]]:
    """A whole JSONL file's bytes -> (documents, errors); iter_jsonl streams a file instead."""
    docs, errors = [], []
    text = decode_document(data, str(path), max_bytes=len(data) + 1)
    for lineno, line in enumerate(text.splitlines(), start=1):
        doc = jsonl_row(path, lineno, line, errors)
        if doc is not None:
            docs.append(doc)
    return docs, errors


def iter_jsonl(path: Path, errors: list[dict[str, str]]) -> Iterator[SourceDoc]:
    """The documents of a JSONL file, read line by line (memory: one line, whatever the file's
    size). A file that is empty or binary (NUL bytes in its first 8 KiB) is one error entry, as
    for any other file; a line that is not UTF-8 is an error entry for that line."""
    name = str(path)
    with open(path, "rb") as fh:
        head = fh.read(8192)
        if not head:
            raise BadInputError(f"{name}: empty file")
        if b"\x00" in head:
            raise BadInputError(f"{name}: binary file (NUL bytes), not text")
        fh.seek(0)
        found = False
        for lineno, raw in enumerate(fh, start=1):
            if lineno == 1 and raw.startswith(b"\xef\xbb\xbf"):
                raw = raw[3:]
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                errors.append({"source": f"{path}:{lineno}", "error": f"not valid UTF-8 (byte {exc.start})"})
                continue
            found = found or bool(line.strip())
            doc = jsonl_row(path, lineno, line, errors)
            if doc is not None:
                yield doc
        if not found:
            raise BadInputError(f"{name}: no text in file")


def iter_sources(paths: Iterable[str | Path], errors: list[dict[str, str]], max_bytes: int = MAX_DOCUMENT_BYTES,
                 raw: dict[str, bytes] | None = None) -> Iterator[SourceDoc]:
    """The documents under ``paths``, one at a time: folders are walked lazily, JSONL corpora
    are read line by line, other files one file at a time. Unreadable files and lines are
    appended to ``errors`` as they are met; ``raw`` (when given) receives the bytes of each
    non-JSONL file keyed by its source."""
    for path in iter_files(paths):
        name = str(path)
        if not path.exists():
            errors.append({"source": name, "error": "no such file or folder"})
            continue
        suffix = path.suffix.lower()
        if suffix not in TEXT_SUFFIXES:
            errors.append({"source": name, "error": f"unsupported file type {suffix or '(none)'!r}"})
            continue
        try:
            if suffix == ".jsonl":
                yield from iter_jsonl(path, errors)
                continue
            size = path.stat().st_size
            if size > max_bytes:
                raise BadInputError(f"{name}: {size} bytes is over the {max_bytes}-byte limit")
            data = path.read_bytes()
            text = decode_document(data, name, max_bytes=max_bytes)
        except BadInputError as exc:
            errors.append({"source": name, "error": str(exc).split(": ", 1)[-1]})
            continue
        except OSError as exc:
            errors.append({"source": name, "error": f"cannot read: {exc.strerror}"})
            continue
        source = str(path.resolve())
        if raw is not None:
            raw[source] = data
        yield SourceDoc(source=source, text=text, title=path.stem)


def load_sources(paths: Iterable[str | Path], max_bytes: int = MAX_DOCUMENT_BYTES
                 ) -> tuple[list[SourceDoc], list[dict[str, str]], dict[str, bytes]]:
    """Returns (documents, errors, raw bytes of each readable file keyed by its source), all in
    memory: for small inputs and tests. Bulk ingest streams with iter_sources."""
    errors: list[dict[str, str]] = []
    raw: dict[str, bytes] = {}
    docs = list(iter_sources(paths, errors, max_bytes, raw))
    return docs, errors, raw
