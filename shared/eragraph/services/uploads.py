"""Documents submitted through the API (POST /documents, DELETE /documents/{id}; and the Bedrock
KB ingestion API), handed to THE SAME pipeline an upload to the documents bucket takes.

``submit`` validates every document of a request before it writes anything (1..MAX_DOCUMENTS; a
source name that is a relative '/'-separated path; its bytes within ERAGRAPH_MAX_DOCUMENT_BYTES;
its metadata by domain.filters.check_metadata; a ``tenant`` attribute naming the caller's tenant
only), so a bad request is one 4xx in words (``UploadError``: 400, 403 or 413) and nothing of it
is stored. Then, per document: its status is recorded ``received`` (services.doc_status), its
metadata stored as a Bedrock-style sidecar object ``<key>.metadata.json`` (or an older sidecar
deleted), and its bytes put under the key an upload to the bucket would have (``upload_key``:
``tenants/<id>/<source>`` for a named tenant, ``<source>`` for the default one), in that order,
so that the object's own event finds the status and the sidecar. Finally the pipeline
(ports.uploads.DocumentPipeline, built by the profile) takes the keys:

- on AWS (``BucketPipeline``) the object in the documents bucket is the hand-over: the bucket's
  notification runs the ingest function (services.object_events), exactly as for any upload;
  a removal deletes the object, and its delete event removes the document;
- locally, a worker in the serving process (services.upload_worker) reads and ingests each key as
  services.object_events reads an object, under the store's writer lock.

A document that cannot be read (binary, empty, not UTF-8, too large for the reader) ends in
state ``failed`` with the reason, as an object of the bucket does."""

from __future__ import annotations

import base64
import binascii
import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..domain import tenants
from ..domain.filters import MetadataError, check_metadata
from ..domain.ids import document_id_for_source
from ..domain.model import BadInputError
from ..domain.refusals import reason
from ..ports.uploads import DocumentPipeline
from . import doc_status, ingest_quota
from .engine import Engine
from .sources import SIDECAR_SUFFIX, is_sidecar

LOG = logging.getLogger(__name__)

MAX_DOCUMENTS = 25  # documents a request
MAX_NAME_BYTES = 900  # S3 keys are at most 1024 bytes: room for tenants/<id>/ in front
MAX_PART_BYTES = 192  # a file name is at most 255 bytes on common filesystems; the local store writes a
# sidecar (+ .metadata.json) through a hidden temporary name (+ 42 bytes)
RESERVED_PREFIXES = (tenants.KEY_PREFIX, "text/")  # tenants' keys; the local store's kept texts


class UploadError(BadInputError):
    """A request the service refuses, with its HTTP status (400, 403, 409, 413 or 429: the daily
    ingestion quota) and the reason."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


class UnknownDocument(LookupError):
    """No document and no status of that id (answered 404)."""


@dataclass(frozen=True)
class Upload:
    """One submitted document: its source name, its bytes, its attributes."""

    source: str
    data: bytes
    metadata: Mapping[str, Any] | None = None


def check_name(name: Any, where: str = "source") -> str:
    """A source name as an object key: a relative '/'-separated path, no empty, '.' or '..'
    part, no control character or backslash, not under a reserved prefix, not a sidecar."""
    if not isinstance(name, str) or not name.strip():
        raise UploadError(f"{where}: a document needs a non-empty source name")
    if len(name.encode("utf-8", "surrogatepass")) > MAX_NAME_BYTES:
        raise UploadError(f"{where}: the source name is longer than {MAX_NAME_BYTES} bytes")
    if name.startswith("/") or "\\" in name or any(ord(c) < 32 or ord(c) == 127 for c in name):
        raise UploadError(f"{where}: {name[:80]!r} must be a relative '/'-separated path (no leading '/', "
                          "backslash or control character), such as notes/a.md")
    if any(part in ("", ".", "..") for part in name.split("/")):
        raise UploadError(f"{where}: {name[:80]!r} has an empty, '.' or '..' part")
    if any(len(part.encode("utf-8", "surrogatepass")) > MAX_PART_BYTES for part in name.split("/")):
        raise UploadError(f"{where}: {name[:80]!r} has a part (between '/') longer than {MAX_PART_BYTES} bytes "
                          "(a file name of the local store; keep each part shorter)")
    for prefix in RESERVED_PREFIXES:
        if name.startswith(prefix):
            raise UploadError(f"{where}: source names under {prefix!r} are reserved (the tenant comes from the "
                              "caller's identity, never from the name)")
    if is_sidecar(name.rsplit("/", 1)[-1]):
        raise UploadError(f"{where}: {name[:80]!r} is a metadata sidecar name ({SIDECAR_SUFFIX}); give a "
                          "document's attributes in its \"metadata\" instead")
    return name


def upload_key(tenant: str, name: str) -> str:
    """The key an upload of ``name`` by ``tenant`` has in the documents bucket (domain.tenants)."""
    return f"{tenants.KEY_PREFIX}{tenant}/{name}" if tenant else name


def owns_key(tenant: str, key: str, prefix: str = "") -> bool:
    """Whether the documents bucket's ``key`` is under ``tenant``'s own prefix (``prefix``: the
    deployment's DocumentPrefix): ``tenants/<tenant>/``, or for the default tenant any key outside
    ``tenants/``."""
    if not key.startswith(prefix):
        return False
    try:
        return tenants.tenant_of_key(key[len(prefix):]) == tenant
    except tenants.TenantError:
        return False


def decode(items: Sequence[Mapping[str, Any]]) -> list[Upload]:
    """Request entries (``source``, ``text`` | ``bytes`` in base64, ``metadata``) as Uploads."""
    out = []
    for n, item in enumerate(items):
        where = f"documents[{n}]"
        text, raw = item.get("text"), item.get("bytes")
        if (text is None) == (raw is None):
            raise UploadError(f"{where}: give exactly one of \"text\" and \"bytes\" (base64)")
        if raw is not None:
            try:
                data = base64.b64decode(raw, validate=True)
            except (binascii.Error, ValueError):
                raise UploadError(f"{where}.bytes is not valid base64") from None
        else:
            try:
                data = text.encode("utf-8")
            except UnicodeEncodeError:
                raise UploadError(f"{where}.text is not valid Unicode (a lone surrogate)") from None
        out.append(Upload(source=item.get("source", ""), data=data, metadata=item.get("metadata")))
    return out


def _checked(engine: Engine, uploads: Sequence[Upload]) -> list[tuple[Upload, dict[str, Any]]]:
    if not uploads:
        raise UploadError("documents: give at least one document")
    if len(uploads) > MAX_DOCUMENTS:
        raise UploadError(f"documents: at most {MAX_DOCUMENTS} documents a request (got {len(uploads)})")
    seen: set[str] = set()
    limit = engine.settings.max_document_bytes
    out = []
    for n, up in enumerate(uploads):
        where = f"documents[{n}]"
        name = check_name(up.source, f"{where}.source")
        if name in seen:
            raise UploadError(f"{where}.source: {name!r} is given twice in this request")
        seen.add(name)
        if len(up.data) > limit:
            raise UploadError(f"{where} ({name}) is {len(up.data)} bytes; at most {limit} "
                              "(ERAGRAPH_MAX_DOCUMENT_BYTES)", 413)
        try:
            metadata = check_metadata(up.metadata, f"{where}.metadata")
            named, _rest = tenants.resolve(engine.tenant, metadata, f"{where}.metadata")
        except MetadataError as exc:
            raise UploadError(str(exc)) from None
        except tenants.TenantError as exc:
            raise UploadError(str(exc), 403) from None
        if named != engine.tenant:
            raise UploadError(f"{where}.metadata names tenant {named!r}; the caller's is "
                              f"{engine.tenant or 'the default tenant'} (it comes from its identity)", 403)
        out.append((up, metadata))
    return out


def _store(engine: Engine, key: str, doc_id: str, data: bytes, metadata: Mapping[str, Any]) -> None:
    """The sidecar first (the document's event reads it), then the bytes. Without metadata, an
    earlier upload's sidecar is deleted only when the stored document has attributes: a delete
    in a versioned bucket is a delete marker and an event of its own, not worth one per upload."""
    sidecar = key + SIDECAR_SUFFIX
    if metadata:
        engine.blobs.put(sidecar, json.dumps({"metadataAttributes": dict(metadata)}).encode("utf-8"))
    else:
        stored = engine.graph.get_document(doc_id)
        if stored is not None and stored.metadata:
            engine.blobs.delete(sidecar)  # the earlier upload's attributes do not outlive it
    engine.blobs.put(key, data)


def submit(engine: Engine, pipeline: DocumentPipeline, uploads: Sequence[Upload]) -> list[dict[str, str]]:
    """Validate ``uploads`` (all or nothing), record each ``received``, store it and hand the keys
    to ``pipeline``; the documents' ids, sources and state."""
    if engine.blobs is None:
        raise UploadError("this store keeps no documents (it has no blob store)", 409)
    checked = _checked(engine, uploads)
    try:  # the whole request against the tenant's daily quota, before anything is stored
        ingest_quota.charge(engine, sum(len(up.data) for up, _ in checked))
    except ingest_quota.QuotaExceeded as exc:
        raise UploadError(str(exc), 429) from None
    out, keys = [], []
    for up, metadata in checked:
        key = pipeline.key_for(engine.tenant, up.source)
        source = pipeline.source_of(engine, key)
        doc_id = document_id_for_source(source)
        # before the object: its event finds it. Uncounted: the API's role writes no counter (the
        # COUNT partition holds the graph layout's too); the ingest counts it on that event
        received = doc_status.record_received(engine, doc_id, source, count=False)
        ingest_quota.submitted(engine, source, received.received_at)  # charged above: its event is not
        try:
            _store(engine, key, doc_id, up.data, metadata)
        except ValueError as exc:  # a key the blob store refuses
            doc_status.record_failed(engine, source, reason("not_stored"), doc_id, count=False)
            raise UploadError(f"{up.source}: {exc}") from None
        except OSError as exc:  # the filesystem refuses the name or the write: settled, said without its path
            LOG.warning("upload not stored", extra={"source": up.source, "error": f"{type(exc).__name__}: {exc}"})
            doc_status.record_failed(engine, source, reason("not_stored"), doc_id)
            raise UploadError(f"{up.source[:80]!r}: the store could not keep this document (the detail is in the "
                              "logs)", 409) from None
        keys.append(key)
        out.append({"doc_id": doc_id, "source": source, "state": "received"})
    pipeline.ingest(engine, keys)
    return out


def delete(engine: Engine, pipeline: DocumentPipeline, doc_id: str) -> dict[str, str]:
    """Remove the document ``doc_id`` through the pipeline (UnknownDocument when there is no such
    document, nor a status of one)."""
    doc = engine.graph.get_document(doc_id)
    status = engine.graph.get_doc_status(doc_id) if doc is None else None
    if doc is None and status is None:
        raise UnknownDocument(f"no document {doc_id!r}")
    source = doc.source if doc is not None else status.source
    pipeline.remove(engine, doc_id, pipeline.key_of(engine, source))
    return {"doc_id": doc_id, "source": source, "state": "deleting"}


class BucketPipeline:
    """The AWS pipeline: the documents bucket. An object put there is ingested by the bucket's
    notification (the ingest function); a removal deletes the object (and its sidecar), and the
    delete event removes the document. Sources are ``s3://<bucket>/<key>``, as the ingest
    function names them. ``prefix``/``suffix``: the template's DocumentPrefix/DocumentSuffix, the
    keys the notification ingests: an upload goes under the prefix, and one the notification would
    not see (a name without the suffix; a named tenant's when a prefix is set, which makes the
    deployment single-tenant) is refused in words rather than stored and never ingested."""

    def __init__(self, prefix: str = "", suffix: str = "") -> None:
        self.prefix, self.suffix = prefix, suffix

    def key_for(self, tenant: str, name: str) -> str:
        if self.prefix and tenant:
            raise UploadError(f"this deployment ingests only keys under {self.prefix!r} (its DocumentPrefix), so it "
                              "holds the default tenant's documents only: a named tenant cannot upload here", 409)
        if self.suffix and not name.endswith(self.suffix):
            raise UploadError(f"source {name[:80]!r}: this deployment ingests only names ending in "
                              f"{self.suffix!r} (its DocumentSuffix)")
        return self.prefix + upload_key(tenant, name)

    def source_of(self, engine: Engine, key: str) -> str:
        return f"s3://{engine.blobs.bucket}/{key}"

    def key_of(self, engine: Engine, source: str) -> str | None:
        """The key of a document of the documents bucket, which must be under the caller's own
        prefix: a document whose source names another tenant's object (a dump of another tenant
        imported before imports checked sources) is refused, never its object deleted."""
        prefix = f"s3://{engine.blobs.bucket}/"
        if not source.startswith(prefix):
            return None
        key = source[len(prefix):]
        if not owns_key(engine.tenant, key, self.prefix):
            raise UploadError(f"document source {source[:200]!r} is not under this tenant's own prefix of the "
                              "documents bucket: its object is not this tenant's to delete", 403)
        return key

    def ingest(self, engine: Engine, keys: Sequence[str]) -> None:
        """Nothing: the objects' notifications run the ingest function."""

    def remove(self, engine: Engine, doc_id: str, key: str | None) -> None:
        if key is None:
            raise UploadError(f"document {doc_id} did not come from the documents bucket: remove it where it "
                              "was ingested from", 409)
        engine.blobs.delete(key)
        engine.blobs.delete(key + SIDECAR_SUFFIX)
