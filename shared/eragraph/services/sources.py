"""Reading documents from files, folders and JSONL corpora into SourceDocs.

A JSONL line {"id", "title", "text"} is one document (its id is the document id); any other
file with a text suffix is one document whose id derives from its path. Each unreadable file
or line becomes an error entry naming it and saying why; the rest of the batch goes on."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from pathlib import Path

from ..domain.model import BadInputError
from ..domain.text import MAX_DOCUMENT_BYTES, TEXT_SUFFIXES, decode_document, titled_text
from .ingest import SourceDoc


def iter_files(paths: Iterable[str | Path]) -> Iterator[Path]:
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            for child in sorted(path.rglob("*")):
                if child.is_file() and not any(part.startswith(".") for part in child.relative_to(path).parts):
                    yield child
        else:
            yield path


def read_jsonl(path: Path, data: bytes) -> tuple[list[SourceDoc], list[dict[str, str]]]:
    docs, errors = [], []
    text = decode_document(data, str(path), max_bytes=len(data) + 1)
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        where = f"{path}:{lineno}"
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            errors.append({"source": where, "error": f"not JSON: {exc.msg}"})
            continue
        if not isinstance(row, dict) or not isinstance(row.get("text"), str) or not row["text"].strip():
            errors.append({"source": where, "error": "a line needs a non-empty string field 'text'"})
            continue
        doc_id = str(row.get("id") or "").strip()
        title = str(row.get("title") or "")
        meta = {k: row[k] for k in ("increment",) if k in row}
        docs.append(SourceDoc(source=f"{path.name}#{doc_id or lineno}", doc_id=doc_id, title=title,
                              text=titled_text(title, row["text"]), meta=meta))
    return docs, errors


def load_sources(paths: Iterable[str | Path], max_bytes: int = MAX_DOCUMENT_BYTES
                 ) -> tuple[list[SourceDoc], list[dict[str, str]], dict[str, bytes]]:
    """Returns (documents, errors, raw bytes of each readable file keyed by its source)."""
    docs: list[SourceDoc] = []
    errors: list[dict[str, str]] = []
    raw: dict[str, bytes] = {}
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
            size = path.stat().st_size
            if suffix != ".jsonl" and size > max_bytes:
                raise BadInputError(f"{name}: {size} bytes is over the {max_bytes}-byte limit")
            data = path.read_bytes()
            if suffix == ".jsonl":
                found, bad = read_jsonl(path, data)
                docs += found
                errors += bad
                continue
            text = decode_document(data, name, max_bytes=max_bytes)
        except BadInputError as exc:
            errors.append({"source": name, "error": str(exc).split(": ", 1)[-1]})
            continue
        except OSError as exc:
            errors.append({"source": name, "error": f"cannot read: {exc.strerror}"})
            continue
        source = str(path.resolve())
        title = path.stem
        docs.append(SourceDoc(source=source, text=text, title=title))
        raw[source] = data
    return docs, errors, raw
