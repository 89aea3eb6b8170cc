"""Reading documents from files, folders and JSONL corpora into SourceDocs.

What a file is comes from its content (domain.filekind): PDF, DOCX, HTML, CSV, Markdown or
plain text are read (providers.extractors), any other binary file is refused with one reason.
A JSONL line {"id", "title", "text"} is one document (its id is the document id); a CSV row is
one document when a column mapping is set (CsvMapping: the text column, optionally the id and
title columns), else a CSV file is one text document; any other file is one document whose id
derives from its path. Each unreadable file, line or row becomes an error entry naming it and
saying why; the rest of the batch goes on. A file's size is checked (stat) before it is read.
``iter_sources`` yields the documents lazily (folders walked and JSONL files read as they are
consumed), so a bulk ingest holds one batch of documents, never the corpus.

**Metadata** (domain.filters.check_metadata: strings, numbers, booleans, lists of strings): a
JSONL line may carry ``"metadata": {...}``; any file may have a sidecar ``<file name>.metadata.json``
beside it in Amazon Bedrock Knowledge Bases' shape, ``{"metadataAttributes": {"year": 2020}}``,
each attribute plain or typed (``{"value": {"type": "NUMBER", "numberValue": 2020},
"includeForEmbedding": true}``; ``includeForEmbedding`` is accepted and ignored: attributes
are filtered on, never embedded). A sidecar is never a document itself (one without its
document beside it is an error entry); a malformed one is its document's error entry. A JSONL
or CSV file's sidecar applies to each of its rows, a row's own metadata winning per key (CSV
rows take no per-row metadata)."""

from __future__ import annotations

import csv
import io
import json
import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ..domain import filekind
from ..domain.filters import MetadataError, check_metadata
from ..domain.model import BadInputError
from ..domain.refusals import reason_of
from ..domain.text import MAX_DOCUMENT_BYTES, check_size, decode_document, titled_text
from ..providers.extractors import ReadLimits, extract
from .ingest import SourceDoc


SIDECAR_SUFFIX = ".metadata.json"  # Bedrock Knowledge Bases' naming: report.pdf -> report.pdf.metadata.json
MAX_SIDECAR_BYTES = 1 << 20
_TYPED = {"STRING": ("stringValue", str), "NUMBER": ("numberValue", (int, float)),
          "BOOLEAN": ("booleanValue", bool), "STRING_LIST": ("stringListValue", list)}


def is_sidecar(name: str) -> bool:
    """Whether a file or object name is a metadata sidecar (``<document name>.metadata.json``)."""
    return len(name) > len(SIDECAR_SUFFIX) and name.endswith(SIDECAR_SUFFIX)


def typed_value(value: Mapping, where: str) -> Any:
    """One attribute in Bedrock's typed form: ``{"value": {"type": T, "<t>Value": v}, ...}``."""
    inner = value.get("value")
    kind = inner.get("type") if isinstance(inner, Mapping) else None
    if kind not in _TYPED or set(value) - {"value", "includeForEmbedding"}:
        raise MetadataError(f"{where}: an attribute is a string, a number, a boolean, a list of strings, "
                            f"or {{\"value\": {{\"type\": {'|'.join(_TYPED)}, ...}}}}")
    name, types = _TYPED[kind]
    got = inner.get(name)
    if not isinstance(got, types) or (kind == "NUMBER" and isinstance(got, bool)):
        raise MetadataError(f"{where}: a {kind} attribute needs its value in {name!r}")
    return got


def parse_sidecar(data: bytes, where: str) -> dict[str, Any]:
    """A sidecar's attributes (``{"metadataAttributes": {...}}``), validated; raises
    MetadataError naming ``where`` and the rule."""
    try:
        body = json.loads(data.decode("utf-8-sig"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        raise MetadataError(f"{where} is not UTF-8 JSON ({getattr(exc, 'msg', exc)})") from None
    if not isinstance(body, dict) or set(body) != {"metadataAttributes"}:
        got = (f"fields {', '.join(map(repr, body)) or 'none'}" if isinstance(body, dict)
               else f"a JSON {type(body).__name__}")
        raise MetadataError(f"{where} must be a JSON object with one field, \"metadataAttributes\" (got {got})")
    attrs = body["metadataAttributes"]
    if isinstance(attrs, Mapping):
        attrs = {k: typed_value(v, f"{where}.{k}") if isinstance(v, Mapping) else v for k, v in attrs.items()}
    return check_metadata(attrs, where)


def merged_metadata(base: Mapping[str, Any] | None, own: Mapping[str, Any] | None, where: str) -> dict[str, Any]:
    """``own`` over ``base`` per key (a JSONL row over its file's sidecar, a sidecar over S3 user
    metadata), validated as a whole (the key limit)."""
    if not base:
        return dict(own or {})
    return check_metadata({**base, **(own or {})}, where)


def sidecar_metadata(name: str, size: int | None, read: Callable[[], bytes]) -> dict[str, Any]:
    """The attributes of the sidecar ``name`` of ``size`` bytes (None: there is none, {}), read
    with ``read`` unless it is too large; MetadataError."""
    where = f"metadata sidecar {name}"
    if size is None:
        return {}
    if size > MAX_SIDECAR_BYTES:
        raise MetadataError(f"{where} is {size} bytes; at most {MAX_SIDECAR_BYTES}")
    return parse_sidecar(read(), where)


def read_sidecar(path: Path) -> dict[str, Any]:
    """The attributes of ``path``'s sidecar file ({} when there is none); MetadataError."""
    sidecar = path.with_name(path.name + SIDECAR_SUFFIX)
    try:
        size: int | None = sidecar.stat().st_size
    except FileNotFoundError:
        size = None
    return sidecar_metadata(sidecar.name, size, sidecar.read_bytes)


@dataclass(frozen=True)
class CsvMapping:
    """Which CSV columns make a row a document: ``text`` (required), ``id`` and ``title``."""

    text: str
    id: str = ""
    title: str = ""

    @classmethod
    def from_settings(cls, settings) -> CsvMapping | None:
        if not settings.csv_text_column:
            if settings.csv_id_column or settings.csv_title_column:
                raise ValueError("a CSV id or title column needs the text column too "
                                 "(--csv-text / ERAGRAPH_CSV_TEXT_COLUMN)")
            return None
        return cls(settings.csv_text_column, settings.csv_id_column, settings.csv_title_column)


def csv_rows(path: Path, text: str, mapping: CsvMapping, errors: list[dict[str, str]]) -> Iterator[SourceDoc]:
    """The rows of a CSV file's text as documents (a row without text is an error entry for it).
    A header without the mapped columns is a BadInputError for the whole file."""
    delimiter = "\t" if path.suffix.lower() == ".tsv" else ","
    reader = csv.DictReader(io.StringIO(text, newline=""), delimiter=delimiter)
    columns = reader.fieldnames or []
    missing = [c for c in (mapping.text, mapping.id, mapping.title) if c and c not in columns]
    if missing:
        raise BadInputError(f"{path}: no column {', '.join(map(repr, missing))} in the CSV header "
                            f"(columns: {', '.join(columns[:20]) or 'none'})")
    try:
        for n, row in enumerate(reader, start=1):
            where = f"{path}:{reader.line_num}"
            body = row.get(mapping.text) or ""
            if not body.strip():
                errors.append({"source": where, "error": f"row {n} has no text in column {mapping.text!r}"})
                continue
            doc_id = (row.get(mapping.id) or "").strip() if mapping.id else ""
            title = (row.get(mapping.title) or "").strip() if mapping.title else ""
            yield SourceDoc(source=f"{path.name}#{doc_id or f'row{n}'}", doc_id=doc_id, title=title,
                            text=titled_text(title, body), input_bytes=len(body.encode("utf-8")))
    except csv.Error as exc:
        raise BadInputError(f"{path}: CSV unreadable at line {reader.line_num}: {exc}") from None


def read_document(data: bytes, name: str, source: str, title: str, limits: ReadLimits,
                  errors: list[dict[str, str]], csv_mapping: CsvMapping | None = None,
                  path: Path | None = None) -> Iterator[SourceDoc]:
    """The documents of one file's bytes, whatever its kind (sniffed from the bytes): one
    SourceDoc titled by the file's own title (PDF/DOCX metadata, HTML <title>) or else
    ``title``; the rows of a CSV when ``csv_mapping`` is given. Raises BadInputError."""
    kind = filekind.kind_of(data, name)
    if kind == filekind.CSV and csv_mapping is not None:
        text = decode_document(data, name, max_bytes=limits.max_bytes)
        csv.field_size_limit(max(csv.field_size_limit(), limits.max_bytes))
        yield from csv_rows(path or Path(name), text, csv_mapping, errors)
        return
    got = extract(data, name, limits, kind=kind)
    yield SourceDoc(source=source, text=got.text, title=got.title or title, input_bytes=len(data), pages=got.pages)


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
    """The files named or under the folders named; a sidecar whose document is beside it is
    left out (it is read with its document), one without is kept (iter_sources reports it)."""
    for raw in paths:
        path = Path(raw)
        for file in _walk(path) if path.is_dir() else (path,):
            if not (is_sidecar(file.name) and file.with_name(file.name[:-len(SIDECAR_SUFFIX)]).is_file()):
                yield file


def jsonl_row(path: Path, lineno: int, line: str, errors: list[dict[str, str]], size: int = 0,
              base: Mapping[str, Any] | None = None) -> SourceDoc | None:
    """One JSONL line as a SourceDoc, or None (blank, or an error entry appended). Its
    ``metadata`` is the line's own over ``base`` (the file's sidecar) per key."""
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
    try:
        metadata = merged_metadata(base, check_metadata(row.get("metadata")), "metadata")
    except MetadataError as exc:
        errors.append({"source": where, "error": str(exc)})
        return None
    doc_id = str(row.get("id") or "").strip()
    title = str(row.get("title") or "")
    meta = {k: row[k] for k in ("increment",) if k in row}
    return SourceDoc(source=f"{path.name}#{doc_id or lineno}", doc_id=doc_id, title=title,
                     text=titled_text(title, row["text"]), meta=meta, input_bytes=size, metadata=metadata)


def read_jsonl(path: Path, data: bytes) -> tuple[list[SourceDoc], list[dict[str, str]]]:
    """A whole JSONL file's bytes -> (documents, errors); iter_jsonl streams a file instead."""
    docs, errors = [], []
    text = decode_document(data, str(path), max_bytes=len(data) + 1)
    for lineno, line in enumerate(text.splitlines(), start=1):
        doc = jsonl_row(path, lineno, line, errors)
        if doc is not None:
            docs.append(doc)
    return docs, errors


def iter_jsonl(path: Path, errors: list[dict[str, str]], base: Mapping[str, Any] | None = None) -> Iterator[SourceDoc]:
    """The documents of a JSONL file, read line by line (memory: one line, whatever the file's
    size). A file that is empty or binary (NUL bytes in its first 8 KiB) is one error entry, as
    for any other file; a line that is not UTF-8 is an error entry for that line. ``base``: the
    file's sidecar metadata, under each line's own."""
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
            doc = jsonl_row(path, lineno, line, errors, len(raw), base)
            if doc is not None:
                yield doc
        if not found:
            raise BadInputError(f"{name}: no text in file")


def iter_sources(paths: Iterable[str | Path], errors: list[dict[str, str]],
                 limits: ReadLimits | int = MAX_DOCUMENT_BYTES, raw: dict[str, bytes] | None = None,
                 csv_mapping: CsvMapping | None = None, reasons: dict[str, str] | None = None
                 ) -> Iterator[SourceDoc]:
    """The documents under ``paths``, one at a time: folders are walked lazily, JSONL corpora
    are read line by line, other files one file at a time, each refused before it is read when
    its size is over the limit (``limits``: ReadLimits, or just the byte limit). Unreadable
    files, lines and rows are appended to ``errors`` as they are met; ``raw`` (when given)
    receives the bytes of each non-JSONL file keyed by its source. Each document carries its
    sidecar's metadata (a JSONL line's own over it). ``reasons`` (when given) receives each
    refused file's status reason in words (domain.refusals), keyed by its source."""
    if isinstance(limits, int):
        limits = ReadLimits(max_bytes=limits)
    for path in iter_files(paths):
        name = str(path)
        if not path.exists():
            errors.append({"source": name, "error": "no such file or folder"})
            continue
        try:
            if is_sidecar(path.name):
                raise BadInputError(f"{name}: a metadata sidecar without its document "
                                    f"{path.name[:-len(SIDECAR_SUFFIX)]!r} beside it")
            base = read_sidecar(path)
            if path.suffix.lower() == ".jsonl":
                with open(path, "rb") as fh:
                    head = fh.read(8192)
                if filekind.sniff(head, name).kind == filekind.JSONL:
                    yield from iter_jsonl(path, errors, base)
                    continue
            size = path.stat().st_size
            check_size(name, size, limits.max_bytes)
            data = path.read_bytes()
            source = str(path.resolve())
            docs = [replace(d, metadata=base) if base else d
                    for d in read_document(data, name, source, path.stem, limits, errors, csv_mapping, path)]
        except MetadataError as exc:
            errors.append({"source": name, "error": str(exc)})
            if reasons is not None:
                reasons[name] = reason_of(exc)
            continue
        except BadInputError as exc:
            errors.append({"source": name, "error": str(exc).split(": ", 1)[-1]})
            if reasons is not None:
                reasons[name] = reason_of(exc)
            continue
        except OSError as exc:
            errors.append({"source": name, "error": f"cannot read: {exc.strerror}"})
            continue
        if raw is not None:
            raw[source] = data
        yield from docs


def text_key(doc_id: str) -> str:
    """Where a document's text is kept in the blob store (for rebuilds)."""
    return f"text/{doc_id}.txt"


def keep_texts(engine, docs: Iterable[SourceDoc]) -> Iterator[SourceDoc]:
    """``docs`` as they pass, each one's text kept in the engine's blob store (if it has one)."""
    for doc in docs:
        if engine.blobs is not None:
            engine.blobs.put(text_key(doc.resolved_id), doc.text.encode("utf-8"))
        yield doc
