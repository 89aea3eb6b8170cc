"""The documents of IngestKnowledgeBaseDocuments as uploads (services.uploads.Upload): Bedrock's
KnowledgeBaseDocument shapes read into a source name, bytes and attributes.

- content: CUSTOM (``customDocumentIdentifier.id`` names it) with inline TEXT, inline BYTE
  (the file kinds Eragraph reads: PDF, DOCX, HTML, CSV, Markdown, text; its ``mimeType`` one of
  BYTE_MIME_TYPES, parameters such as ``; charset=utf-8`` aside) or an S3_LOCATION; or S3
  (``s3Location.uri``, an object of the data source's bucket). An S3 location is read from a
  bucket this deployment may read (the profile's source buckets; locally, folders);
- metadata: IN_LINE_ATTRIBUTE (``inlineAttributes``: key and typed value) or S3_LOCATION (a
  sidecar object in Bedrock's ``{"metadataAttributes": ...}`` shape);
- Bedrock's limits per call: at most MAX_DOCUMENTS documents, each at most MAX_INLINE_BYTES
  inline, and all of them at most MAX_PAYLOAD_BYTES; besides, each within the store's
  ERAGRAPH_MAX_DOCUMENT_BYTES (services.uploads checks it)."""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from typing import Any

from ...domain import kb_sync
from ...domain.filters import MetadataError
from ...services import kb_sources
from ...services.engine import Engine
from ...services.sources import typed_value, parse_sidecar

MAX_DOCUMENTS = 10
MAX_INLINE_BYTES = 5 * 1024 * 1024
MAX_PAYLOAD_BYTES = 6 * 1024 * 1024
BYTE_MIME_TYPES = frozenset({  # the types of the file kinds Eragraph reads (domain.filekind)
    "application/pdf", "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
    "text/html", "application/xhtml+xml", "text/csv", "text/tab-separated-values", "text/markdown",
    "text/x-markdown", "text/plain", "application/x-ndjson", "application/jsonl"})


def _bad(message: str) -> kb_sync.SyncError:
    return kb_sync.SyncError("ValidationException", message)


def read_s3(engine: Engine, uri: str, where: str, record: Mapping[str, Any] | None = None) -> bytes:
    """The bytes of the object ``s3://bucket/key`` in a bucket this deployment may read, in the
    engine's tenant's area of it (domain.kb_sync's sharing model); for an S3 data source's
    ``record``, in its bucket and under its prefix too."""
    if not uri.startswith("s3://") or "/" not in uri[5:]:
        raise _bad(f"{where}: {uri[:200]!r} is not an S3 object URI (s3://<bucket>/<key>)")
    bucket, key = uri[5:].split("/", 1)
    prefix = ""
    if record is not None and record["dataSourceConfiguration"]["type"] == "S3":
        own, prefix = kb_sync.bucket_of(record["dataSourceConfiguration"])
        if bucket != own:
            raise kb_sync.SyncError("AccessDeniedException", f"{where}: {uri[:200]!r} is not an object of the "
                                    f"data source's bucket (s3://{own}/<key>)")
    kb_sync.check_key(engine.tenant, key, where, prefix)
    store = kb_sources.bucket_store(engine, bucket)
    try:
        size = store.size(key)
        if size > engine.settings.max_document_bytes:
            raise _bad(f"{where}: {uri} is {size} bytes; at most {engine.settings.max_document_bytes} "
                       "(ERAGRAPH_MAX_DOCUMENT_BYTES)")
        return store.get(key)
    except (KeyError, ValueError):
        raise kb_sync.SyncError("ResourceNotFoundException", f"{where}: no object {uri}") from None


def attributes(engine: Engine, metadata: Mapping[str, Any] | None, where: str,
               record: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A document's attributes from its DocumentMetadata ({} when it has none); a sidecar is
    read as read_s3 reads (in the tenant's area, and ``record``'s bucket and prefix)."""
    if not metadata:
        return {}
    try:
        if metadata["type"] == "IN_LINE_ATTRIBUTE":
            inline = metadata.get("inlineAttributes") or []
            return {a["key"]: typed_value({"value": a["value"]}, f"{where}.inlineAttributes[{n}]")
                    for n, a in enumerate(inline)}
        uri = (metadata.get("s3Location") or {}).get("uri", "")
        return parse_sidecar(read_s3(engine, uri, f"{where}.s3Location", record), f"{where}.s3Location {uri}")
    except MetadataError as exc:
        raise _bad(str(exc)) from None


def _inline(content: Mapping[str, Any], where: str) -> bytes:
    inline = content.get("inlineContent") or {}
    if inline.get("type") == "TEXT" and "textContent" in inline:
        data = inline["textContent"]["data"].encode("utf-8", "surrogatepass")
    elif inline.get("type") == "BYTE" and "byteContent" in inline:
        given = str(inline["byteContent"].get("mimeType", ""))
        if given.split(";", 1)[0].strip().lower() not in BYTE_MIME_TYPES:
            raise _bad(f"{where}.byteContent.mimeType {given[:60]!r} is not a type this service reads; "
                       f"one of {', '.join(sorted(BYTE_MIME_TYPES))}")
        try:
            data = base64.b64decode(inline["byteContent"]["data"], validate=True)
        except (binascii.Error, ValueError):
            raise _bad(f"{where}.byteContent.data is not valid base64") from None
    else:
        raise _bad(f"{where}: inline content of type TEXT needs textContent, of type BYTE byteContent")
    if len(data) > MAX_INLINE_BYTES:
        raise _bad(f"{where} is {len(data)} bytes; inline content is at most {MAX_INLINE_BYTES} bytes")
    return data


def key_and_bytes(engine: Engine, record: Mapping[str, Any], content: Mapping[str, Any], where: str) -> tuple[str, bytes]:
    """The key (under the data source) and the bytes of one document's DocumentContent."""
    kind = content.get("dataSourceType")
    if kind != record["dataSourceConfiguration"]["type"]:
        raise _bad(f"{where}: data source {record['dataSourceId']} is of type "
                   f"{record['dataSourceConfiguration']['type']}, not {kind}")
    if kind == "S3":
        uri = ((content.get("s3") or {}).get("s3Location") or {}).get("uri", "")
        return kb_sources.s3_key(record, uri, engine.tenant), read_s3(engine, uri, f"{where}.s3", record)
    custom = content.get("custom") or {}
    key = custom["customDocumentIdentifier"]["id"]
    if custom.get("sourceType") == "S3_LOCATION":
        return key, read_s3(engine, (custom.get("s3Location") or {}).get("uri", ""), f"{where}.custom.s3Location")
    return key, _inline(custom, f"{where}.custom.inlineContent")


def uploads_of(engine: Engine, record: Mapping[str, Any], documents: list[Mapping[str, Any]]) -> list[Any]:
    """The uploads of IngestKnowledgeBaseDocuments' ``documents`` (SyncError, in words)."""
    from ...services.uploads import Upload

    if len(documents) > MAX_DOCUMENTS:
        raise _bad(f"documents: at most {MAX_DOCUMENTS} documents a call (got {len(documents)})")
    out, total = [], 0
    for n, doc in enumerate(documents):
        where = f"documents[{n}]"
        if (doc.get("metadata") or {}).get("accessControlList"):
            raise _bad(f"{where}.metadata.accessControlList is not supported by this service (Eragraph applies "
                       "no access control lists): remove it from the request")
        key, data = key_and_bytes(engine, record, doc["content"], f"{where}.content")
        total += len(data)
        if total > MAX_PAYLOAD_BYTES:
            raise _bad(f"documents: the documents of a call are at most {MAX_PAYLOAD_BYTES} bytes together")
        out.append(Upload(source=kb_sources.upload_name(record, key), data=data,
                          metadata=attributes(engine, doc.get("metadata"), f"{where}.metadata", record)))
    return out


def identifier_of(record: Mapping[str, Any], content: Mapping[str, Any]) -> dict[str, Any]:
    """The DocumentIdentifier of a DocumentContent."""
    if content["dataSourceType"] == "S3":
        return {"dataSourceType": "S3", "s3": {"uri": content["s3"]["s3Location"]["uri"]}}
    return {"dataSourceType": "CUSTOM", "custom": {"id": content["custom"]["customDocumentIdentifier"]["id"]}}
