"""S3 object changes (domain.object_changes) applied to the store: ingest or remove one
object in the engine of its key's tenant, a sidecar's change re-reading its document, and the
settle loop that leaves the current sidecar's metadata on a document.

An object is read by its content (PDF, DOCX, HTML, CSV or text: services.sources.read_document),
after its size is checked against ERAGRAPH_MAX_DOCUMENT_BYTES without reading it. An object that
cannot be read (too large, a refused binary kind, an encrypted PDF, a document too large for one
store item...) is one "document rejected" log line with the reason and counts as rejected; it is
never a failure to retry (a retry would fail the same way). A read object is one "document read"
line (bytes, characters, chunks). An object that no longer exists when its created event is
handled is a logged skip: its delete's own event decides.

Quota (services.ingest_quota): an object put straight into the bucket is charged against its
tenant's daily quota with the size its event gives, before it is read; past the quota it is
refused (``failed``, the reason in words, the object left in place). One submitted through the
API was charged there: its ``received`` status says so, and it is not charged again.

Metadata (services.sources): an object's user-defined metadata are string attributes (a name
that is not a valid attribute key, or a reserved one, is skipped with one "user metadata
skipped" line), and a sidecar object ``<key>.metadata.json`` (Bedrock Knowledge Bases' shape)
adds its attributes over them. A sidecar never becomes a document: its own event re-reads its
document at the version the store holds, which re-tags the document's chunks when only the
metadata changed (no embedding) and is a no-op (counted stale) when the content changed since;
a document not in the store (yet) is left to its own event. As a sidecar's events cannot be
ordered against its document's (their sequencers are per key), every ingest reads the sidecar
again once its document is written, and re-tags the document while what it finds differs from
what the store holds (at most SETTLE_ATTEMPTS times): whichever of the two events is handled last
leaves the current sidecar's metadata. A malformed sidecar rejects its document.

Tenants (domain.tenants): an object under ``tenants/<id>/`` belongs to tenant ``<id>`` and is
ingested (or removed) in that tenant's engine; any other key belongs to the default tenant. A
``tenant`` attribute in the object's metadata that names another tenant rejects it, as does a
``tenants/`` key whose id is not valid (never the default tenant instead). Events of one key may
arrive in any order and more than once: each carries its sequencer, and an event older than
what the store holds for its key (document or tombstone) is a no-op."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ..domain import sequencer
from ..domain.filters import MetadataError, check_metadata
from ..domain.ids import content_hash, document_id_for_source
from ..domain.model import BadInputError
from ..domain.object_changes import ObjectChange, UnusableRecord
from ..domain.doc_status import FAILED, RECEIVED
from ..domain.refusals import human_size, reason, reason_of
from ..domain.tenants import TenantError, tenant_of_key
from ..domain.text import check_size
from ..providers.extractors import ReadLimits
from . import doc_status, ingest, ingest_quota, remove
from .sources import SIDECAR_SUFFIX, is_sidecar, merged_metadata, read_document, sidecar_metadata

SETTLE_ATTEMPTS = 3  # re-tags after an ingest while the sidecar read again differs from the store


# each count's metric (the ingest function publishes them per invocation)
METRICS = {"ingested": "DocumentsIngested", "removed": "DocumentsRemoved", "rejected": "DocumentsRejected",
           "stale": "StaleEventsIgnored", "vanished": "VanishedObjectsSkipped", "unusable": "UnusableEventRecords"}


def new_counts() -> dict:
    return {"ingested": 0, "removed": 0, "rejected": 0, "stale": 0, "vanished": 0, "unusable": 0}


def _sidecar(engine, key: str) -> dict:
    """The attributes of ``key``'s sidecar object ({} when there is none, or it was deleted
    since its HEAD: its delete's own event re-reads the document); MetadataError."""
    name = key + SIDECAR_SUFFIX
    try:
        return sidecar_metadata(name, engine.blobs.size(name), lambda: engine.blobs.get(name))
    except KeyError:
        return {}


def _charged(engine, status, source: str, version: str) -> bool:
    """Whether the object in flight for ``source`` was charged against the daily quota already
    by the API: its status is the ``received`` services.uploads.submit recorded (and noted,
    services.ingest_quota.submitted). Without a sequencer to mark the charge with, an earlier
    event's ``received`` or the fault a retried message records count too. Any other object (a
    put straight into the bucket) is charged by its event, marked with its version (once)."""
    if status is None or status.source != source:
        return False
    if status.state == RECEIVED and ingest_quota.was_submitted(engine, source, status.received_at):
        return True
    return not version and (status.state == RECEIVED or (
        status.state == FAILED and status.reason == reason("internal_retried")))


def _read(engine, key: str) -> tuple[bytes, dict]:
    """An object's bytes and user-defined metadata (none from a blob store without them)."""
    read = getattr(engine.blobs, "get_with_metadata", None)
    return read(key) if read is not None else (engine.blobs.get(key), {})


class ObjectEvents:
    """Applies object changes: ``engines`` gives a tenant's engine (``get(tenant, register)``,
    ``tenancy.exists(tenant)``: bootstrap.aws.LazyEngine), ``log`` takes the structured lines
    (the function's logger)."""

    def __init__(self, engines: Any, log: Any) -> None:
        self.engines, self.log = engines, log

    def _version(self, change: ObjectChange, source: str) -> str:
        """The event's S3 sequencer (orders the events of one key); "" when absent or malformed."""
        try:
            return sequencer.normalize(change.sequencer)
        except (ValueError, AttributeError):
            self.log.warning("ignoring a malformed sequencer", extra={"source": source})
            return ""

    def user_attributes(self, user: dict[str, str], source: str) -> dict[str, str]:
        """An object's user-defined metadata as string attributes; the names that are not valid
        attribute keys (or are reserved, or too long a value) are skipped with one log line."""
        kept: dict[str, str] = {}
        skipped = []
        for key, value in sorted(user.items()):
            try:
                kept.update(check_metadata({key: value}))
            except MetadataError:
                skipped.append(key)
        if skipped:
            self.log.warning("user metadata skipped", extra={"reason": "metadata-keys-skipped", "source": source,
                                                           "keys": skipped})
        return kept

    def _tally(self, counts: dict, report) -> None:
        """A re-tagged document (only its metadata changed) counts as ingested."""
        counts["ingested"] += report.documents_added + report.documents_replaced + report.documents_retagged
        counts["stale"] += report.documents_stale
        for err in report.errors:  # refused by the ingest itself (a document too large for one store item)
            self.log.error("document rejected", extra={"source": err["source"], "error": err["error"]})
        counts["rejected"] += len(report.errors)

    def ingest_object(self, engine, key: str, source: str, version: str, counts: dict, shape: str,
                      refresh: bool = False, size: int | None = None) -> ingest.SourceDoc | None:
        """Read one object (size first, then its bytes, user metadata and sidecar) and ingest it at
        ``version``; with ``refresh`` (a sidecar's event) at the version the store holds, and only
        when the store holds the document. Then settle its metadata (see the module). Returns the
        document read (None: none was: skipped, vanished or rejected)."""
        if refresh:
            stored = engine.graph.get_document(document_id_for_source(source))
            if stored is None:
                self.log.info("skipped: a metadata sidecar of a document not in the store; its own event reads it",
                            extra={"reason": "document-not-stored", "source": source, "shape": shape})
                return None
            version = stored.version
        status = engine.graph.get_doc_status(document_id_for_source(source))
        if not refresh and not _charged(engine, status, source, version):  # put straight into the bucket
            try:
                ingest_quota.charge(engine, size if size is not None else engine.blobs.size(key),
                                    mark=f"{source}@{version}" if version else None)
            except KeyError:
                size = None  # vanished: the read below says so
            except ingest_quota.QuotaExceeded as exc:
                self.log.error("document rejected", extra={"source": source, "error": str(exc), "reason": "over-quota"})
                doc_status.record_failed(engine, source, reason(
                    "over_quota", limit=human_size(engine.settings.ingest_daily_bytes)))
                counts["rejected"] += 1
                return None
            if status is None or status.state != RECEIVED or status.source != source:  # charged, in flight
                doc_status.record_received(engine, document_id_for_source(source), source)
        elif status is None:  # first sight of it
            doc_status.record_received(engine, document_id_for_source(source), source)
        limits = ReadLimits.from_settings(engine.settings)
        try:
            # ContentLength: a huge object is refused unread
            check_size(key, engine.blobs.size(key), limits.max_bytes)
            data, user = _read(engine, key)
            # a CSV object is one text document here (its rows would be documents no S3 delete names)
            [read] = read_document(data, key, source, key.rsplit("/", 1)[-1], limits, [])
            user = self.user_attributes(user, source)
            metadata = merged_metadata(user, _sidecar(engine, key), "metadata")
        except KeyError:  # deleted since: the delete's own event decides
            self.log.info("skipped: object vanished before its ObjectCreated event was handled",
                        extra={"reason": "object-vanished", "source": source, "shape": shape})
            counts["vanished"] += 1
            if engine.graph.get_document(document_id_for_source(source)) is None:
                doc_status.delete(engine, document_id_for_source(source))  # not "received" forever
            return None
        except (BadInputError, MetadataError) as exc:  # a bad file is reported, never retried forever
            why = reason_of(exc)  # the owner's words; the detail is the log line's
            self.log.error("document rejected", extra={"source": source, "error": str(exc), "status_reason": why})
            doc_status.record_failed(engine, source, why)
            counts["rejected"] += 1
            return None
        doc = ingest.SourceDoc(source=source, text=read.text, title=read.title, version=version,
                               input_bytes=read.input_bytes, metadata=metadata, pages=read.pages)
        chunks = retagged = 0
        for _ in range(SETTLE_ATTEMPTS):
            report = ingest.ingest(engine, [doc])
            self._tally(counts, report)
            chunks += report.chunks_added
            retagged += report.documents_retagged
            if report.errors:
                return None
            stored = engine.graph.get_document(doc.resolved_id)
            if stored is None or stored.content_hash != content_hash(doc.text):
                break  # stale: the newer content's own event reads the sidecar
            try:
                now = merged_metadata(user, _sidecar(engine, key), "metadata")
            except MetadataError:
                break  # malformed since: its own event reports it
            if ingest.same_attributes(stored, now, stored.title):
                break
            doc = replace(doc, metadata=now, version=stored.version)
        self.log.info("document read", extra={"source": source, "bytes": len(data), "characters": len(doc.text),
                                            "chunks": chunks, "retagged": retagged, "attributes": len(doc.metadata or {})})
        doc_status.settle_received(engine, doc.resolved_id, doc.source, content_hash(doc.text))
        return doc

    def apply_change(self, engine, change: ObjectChange, counts: dict) -> None:
        """Ingest or remove one object (a sidecar's change: re-read its document) in the engine of
        the key's tenant (``engine``: the default tenant's). Events of one key may arrive in any
        order and more than once: each carries its ``sequencer``, and an event older than what the
        store holds for its key (document or tombstone) is a no-op."""
        try:
            tenant = tenant_of_key(change.key)
        except TenantError as exc:
            self.log.error("document rejected", extra={"source": change.key, "error": str(exc), "reason": "bad-tenant"})
            counts["rejected"] += 1
            return
        if tenant:
            if change.removed and not self.engines.tenancy.exists(tenant):
                counts["stale"] += 1  # the tenant's deletion removed its files and its store
                return
            engine = self.engines.get(tenant, register=not change.removed)
        own = getattr(engine.blobs, "bucket", None)
        if own is not None and change.bucket != own:
            raise UnusableRecord("other-bucket", f"an event of bucket {change.bucket!r}; this function reads {own!r}")
        if is_sidecar(change.key.rsplit("/", 1)[-1]):
            key = change.key[:-len(SIDECAR_SUFFIX)]
            self.ingest_object(engine, key, f"s3://{change.bucket}/{key}", "", counts, change.shape, refresh=True)
            return
        source = f"s3://{change.bucket}/{change.key}"
        version = self._version(change, source)
        if change.removed:
            report = remove.remove(engine, [source], version=version)
            counts["removed"] += report.documents_removed
            counts["stale"] += report.documents_stale
            return
        try:
            self.ingest_object(engine, change.key, source, version, counts, change.shape, size=change.size)
        except Exception as exc:  # a fault: SQS retries the message, then keeps it in the DLQ
            self._record_fault(engine, source, exc)
            raise

    def _record_fault(self, engine, source: str, exc: Exception) -> None:
        """The document's status says why its message is being retried (and, once the retries
        are spent, why it sits in the dead-letter queue); a later success replaces it."""
        try:
            doc_status.record_failed(engine, source, reason("internal_retried"))  # the detail: the caller's log line
        except Exception:  # the store itself failing: the log line of the caller is what is left
            self.log.exception("document status not recorded", extra={"source": source})

    def _log_unusable(self, exc: UnusableRecord, **where) -> None:
        self.log.error("event record not usable", extra={"reason": exc.reason, "detail": exc.detail, **where})

    def apply(self, items: list[ObjectChange | UnusableRecord] | UnusableRecord, counts: dict, **where) -> int:
        """Apply every usable change of one notification (``items``: its parsed records, or the
        UnusableRecord of the whole payload); log each unusable record (one line each) and
        return how many there were."""
        if isinstance(items, UnusableRecord):
            self._log_unusable(items, **where)
            counts["unusable"] += 1
            return 1
        engine = self.engines.get() if items else None
        unusable = 0
        for item in items:
            if isinstance(item, ObjectChange):
                try:
                    self.apply_change(engine, item, counts)
                    continue
                except UnusableRecord as exc:
                    item = exc
            self._log_unusable(item, **where)
            counts["unusable"] += 1
            unusable += 1
        return unusable
