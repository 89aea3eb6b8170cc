"""S3 document events -> ingest/remove.

The events arrive in any of these shapes, parsed with powertools' event data classes:
- an S3 notification (``Records`` of ``aws:s3``), invoked directly or as the body of an SQS
  message (the template's ``NotificationMode=direct``);
- the same inside an SNS envelope (S3 -> SNS -> SQS without raw message delivery);
- an EventBridge ``Object Created`` / ``Object Deleted`` event (S3 -> EventBridge -> SQS, the
  template's ``NotificationMode=eventbridge``), also when invoked directly;
- ``s3:TestEvent`` (S3 sends it when a notification is configured): nothing to do.

A record that cannot be used (not JSON, an unknown shape, another event type, another bucket, a
key that is not valid percent-encoded UTF-8, a field missing) is logged once with its reason
and reported as a batch-item failure, so SQS retries it and then moves it to the DLQ, whose
alarm fires. An object that no longer exists when its ObjectCreated event is handled is a
logged skip: its delete's own event decides.

An object is read by its content (PDF, DOCX, HTML, CSV or text: services.sources.read_document),
after its size (ContentLength) is checked against ERAGRAPH_MAX_DOCUMENT_BYTES without reading
it. An object that cannot be read (too large, a refused binary kind, an encrypted PDF, a
document too large for one store item...) is one "document rejected" log line with the reason
and counts in DocumentsRejected; it is never a batch-item failure (a retry would fail the same
way, into the DLQ). A read object is one "document read" line (bytes, characters, chunks).

Metadata (services.sources): an object's user-defined metadata (``x-amz-meta-*``, read with its
body) are string attributes (a name that is not a valid attribute key, or a reserved one, is
skipped with one "user metadata skipped" line), and a sidecar object ``<key>.metadata.json``
(Bedrock Knowledge Bases' shape) adds its attributes over them. A sidecar never becomes a
document: its own event (created, overwritten or deleted) re-reads its document at the version
the store holds, which re-tags the document's chunks when only the metadata changed (no
embedding) and is a no-op (counted stale) when the content changed since, as that content's
own event applies it; a document not in the store (yet) is left to its own event. As a
sidecar's events cannot be ordered against its document's (their sequencers are per key),
every ingest reads the sidecar again once its document is written, and re-tags the document
while what it finds differs from what the store holds: whichever of the two events is handled
last leaves the current sidecar's metadata. A malformed sidecar rejects its document.

Tenants (domain.tenants): an object under ``tenants/<id>/`` belongs to tenant ``<id>`` and is
ingested (or removed) in that tenant's engine; any other key belongs to the default tenant. A
``tenant`` attribute in the object's metadata that names another tenant rejects it, as does a
``tenants/`` key whose id is not valid (never the default tenant instead)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, replace
from urllib.parse import unquote_plus

from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.data_classes import S3Event, S3EventBridgeNotificationEvent, SQSRecord
from aws_lambda_powertools.utilities.data_classes.sns_event import SNSMessage

from eragraph.bootstrap.aws import LAMBDA_ENGINE, powertools
from eragraph.domain import sequencer
from eragraph.domain.filters import MetadataError, check_metadata
from eragraph.domain.ids import content_hash, document_id_for_source
from eragraph.domain.model import BadInputError
from eragraph.domain.tenants import TenantError, tenant_of_key
from eragraph.domain.text import check_size
from eragraph.providers.extractors import ReadLimits
from eragraph.services import ingest, remove
from eragraph.services.sources import SIDECAR_SUFFIX, is_sidecar, merged_metadata, read_document, sidecar_metadata

logger, metrics, tracer = powertools()
LAMBDA_ENGINE.cold_start("embedder", "ner")  # fails the init if a provider it uses is missing
processor = BatchProcessor(event_type=EventType.SQS)

EVENTBRIDGE_TYPES = {"Object Created": False, "Object Deleted": True}  # detail-type -> removed
SETTLE_ATTEMPTS = 3  # re-tags after an ingest while the sidecar read again differs from the store
_BAD_PERCENT = re.compile(r"%(?![0-9A-Fa-f]{2})")


class UnusableRecord(ValueError):
    """An event record the function cannot act on; ``reason`` is a short fixed tag."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason, self.detail = reason, detail


class UnusableEvent(RuntimeError):
    """A direct invocation carried unusable records (each already logged): the invocation
    fails, so Lambda's asynchronous retries and on-failure handling see it."""


@dataclass(frozen=True)
class ObjectChange:
    """One S3 object created or removed, whatever envelope carried it."""

    bucket: str
    key: str  # decoded
    removed: bool
    sequencer: str | None  # as the event gave it
    shape: str  # s3 | sns | eventbridge


def decode_key(raw) -> str:
    """The object key of an event (form-encoded UTF-8: ``+`` is a space), decoded strictly.

    S3 percent-encodes every key it puts into an event, and keys are UTF-8, so a ``%`` not
    followed by two hex digits, or escapes that are not UTF-8, never come from S3. A lenient
    decode (Python's default replaces bad bytes with U+FFFD and leaves bad escapes as they are)
    would name an object that does not exist: the put would look like a vanished object and
    be skipped, the delete would remove nothing or another document. Such a key is therefore
    a failure (the DLQ keeps the message for inspection), never a guess."""
    if not isinstance(raw, str) or not raw:
        raise UnusableRecord("malformed-record", f"the object key is missing or not a string ({raw!r})")
    bad = _BAD_PERCENT.search(raw)
    if bad:
        raise UnusableRecord("bad-key-encoding", f"{raw!r}: '%' at offset {bad.start()} is not followed by two hex digits")
    try:
        return unquote_plus(raw, encoding="utf-8", errors="strict")
    except UnicodeDecodeError as exc:
        raise UnusableRecord("bad-key-encoding", f"{raw!r}: the percent-escapes are not UTF-8 ({exc.reason})") from None


def _s3_changes(payload: dict, shape: str) -> list[ObjectChange | UnusableRecord]:
    event = S3Event(payload)
    if not isinstance(payload["Records"], list) or not payload["Records"]:
        raise UnusableRecord("unknown-shape", "an event whose Records is empty or not a list")
    out: list[ObjectChange | UnusableRecord] = []
    for record in event.records:
        try:
            if not isinstance(record.raw_event, dict):
                raise UnusableRecord("unknown-shape", f"a record that is a JSON {type(record.raw_event).__name__}")
            if record.event_source != "aws:s3":
                raise UnusableRecord("unknown-shape", f"a record of {record.event_source!r}, not aws:s3")
            name = record.event_name
            if not name.startswith(("ObjectCreated:", "ObjectRemoved:")):
                raise UnusableRecord("unsupported-event", f"S3 event {name!r} (only ObjectCreated:* and ObjectRemoved:*)")
            obj = record.s3.get_object
            out.append(ObjectChange(bucket=record.s3.bucket.name, key=decode_key(obj.key),
                                    removed=name.startswith("ObjectRemoved:"), sequencer=obj.get("sequencer"),
                                    shape=shape))
        except UnusableRecord as exc:
            out.append(exc)
        except (KeyError, TypeError, AttributeError) as exc:
            out.append(UnusableRecord("malformed-record", f"an S3 record without {exc}"))
    return out


def _eventbridge_change(payload: dict, shape: str) -> ObjectChange:
    event = S3EventBridgeNotificationEvent(payload)
    if event.detail_type not in EVENTBRIDGE_TYPES:
        raise UnusableRecord("unsupported-event", f"EventBridge detail-type {event.detail_type!r} "
                             f"(only {' / '.join(EVENTBRIDGE_TYPES)})")
    try:
        detail = event.detail
        obj = detail.object
        return ObjectChange(bucket=detail.bucket.name, key=decode_key(obj.raw_event.get("key")),
                            removed=EVENTBRIDGE_TYPES[event.detail_type], sequencer=obj.get("sequencer"),
                            shape=shape)
    except (KeyError, TypeError, AttributeError) as exc:
        raise UnusableRecord("malformed-record", f"an EventBridge S3 event without {exc}") from None


def changes_in(payload, shape: str = "s3") -> list[ObjectChange | UnusableRecord]:
    """The object changes of one notification (an S3 event, an EventBridge S3 event, an SNS
    envelope around either, or a test event). Raises UnusableRecord when the whole payload is
    unusable; a notification of several records lists the unusable ones in place."""
    if not isinstance(payload, dict):
        raise UnusableRecord("unknown-shape", f"a JSON {type(payload).__name__} where an event object belongs")
    if payload.get("Type") == "Notification" and "TopicArn" in payload and shape != "sns":
        message = SNSMessage(payload)
        try:
            inner = json.loads(message.message)
        except (KeyError, TypeError, ValueError) as exc:
            raise UnusableRecord("not-json", f"the SNS Message of topic {payload.get('TopicArn')!r} is not JSON ({exc})") from None
        return changes_in(inner, shape="sns")
    if payload.get("Event") == "s3:TestEvent":
        return []
    if "Records" in payload:
        return _s3_changes(payload, shape)
    if payload.get("source") == "aws.s3" and "detail-type" in payload:
        return [_eventbridge_change(payload, "eventbridge" if shape == "s3" else shape)]
    raise UnusableRecord("unknown-shape", f"an object with keys {sorted(map(str, payload))[:8]}, "
                         "not an S3, SNS or EventBridge S3 event")


def _new_counts() -> dict:
    return {"ingested": 0, "removed": 0, "rejected": 0, "stale": 0, "vanished": 0, "unusable": 0}


def _version(change: ObjectChange, source: str) -> str:
    """The event's S3 sequencer (orders the events of one key); "" when absent or malformed."""
    try:
        return sequencer.normalize(change.sequencer)
    except (ValueError, AttributeError):
        logger.warning("ignoring a malformed sequencer", extra={"source": source})
        return ""


def user_attributes(user: dict[str, str], source: str) -> dict[str, str]:
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
        logger.warning("user metadata skipped", extra={"reason": "metadata-keys-skipped", "source": source,
                                                       "keys": skipped})
    return kept


def _sidecar(engine, key: str) -> dict:
    """The attributes of ``key``'s sidecar object ({} when there is none, or it was deleted
    since its HEAD: its delete's own event re-reads the document); MetadataError."""
    name = key + SIDECAR_SUFFIX
    try:
        return sidecar_metadata(name, engine.blobs.size(name), lambda: engine.blobs.get(name))
    except KeyError:
        return {}


def _read(engine, key: str) -> tuple[bytes, dict]:
    """An object's bytes and user-defined metadata (none from a blob store without them)."""
    read = getattr(engine.blobs, "get_with_metadata", None)
    return read(key) if read is not None else (engine.blobs.get(key), {})


def _tally(counts: dict, report) -> None:
    """A re-tagged document (only its metadata changed) counts as ingested."""
    counts["ingested"] += report.documents_added + report.documents_replaced + report.documents_retagged
    counts["stale"] += report.documents_stale
    for err in report.errors:  # refused by the ingest itself (a document too large for one store item)
        logger.error("document rejected", extra={"source": err["source"], "error": err["error"]})
    counts["rejected"] += len(report.errors)


def ingest_object(engine, key: str, source: str, version: str, counts: dict, shape: str,
                  refresh: bool = False) -> None:
    """Read one object (size first, then its bytes, user metadata and sidecar) and ingest it at
    ``version``; with ``refresh`` (a sidecar's event) at the version the store holds, and only
    when the store holds the document. Then settle its metadata (see the module)."""
    if refresh:
        stored = engine.graph.get_document(document_id_for_source(source))
        if stored is None:
            logger.info("skipped: a metadata sidecar of a document not in the store; its own event reads it",
                        extra={"reason": "document-not-stored", "source": source, "shape": shape})
            return
        version = stored.version
    limits = ReadLimits.from_settings(engine.settings)
    try:
        # ContentLength: a huge object is refused unread
        check_size(key, engine.blobs.size(key), limits.max_bytes)
        data, user = _read(engine, key)
        # a CSV object is one text document here (its rows would be documents no S3 delete names)
        [read] = read_document(data, key, source, key.rsplit("/", 1)[-1], limits, [])
        user = user_attributes(user, source)
        metadata = merged_metadata(user, _sidecar(engine, key), "metadata")
    except KeyError:  # deleted since: the delete's own event decides
        logger.info("skipped: object vanished before its ObjectCreated event was handled",
                    extra={"reason": "object-vanished", "source": source, "shape": shape})
        counts["vanished"] += 1
        return
    except (BadInputError, MetadataError) as exc:  # a bad file is reported, never retried forever
        logger.error("document rejected", extra={"source": source, "error": str(exc)})
        counts["rejected"] += 1
        return
    doc = ingest.SourceDoc(source=source, text=read.text, title=read.title, version=version,
                           input_bytes=read.input_bytes, metadata=metadata)
    chunks = retagged = 0
    for _ in range(SETTLE_ATTEMPTS):
        report = ingest.ingest(engine, [doc])
        _tally(counts, report)
        chunks += report.chunks_added
        retagged += report.documents_retagged
        if report.errors:
            return
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
    logger.info("document read", extra={"source": source, "bytes": len(data), "characters": len(doc.text),
                                        "chunks": chunks, "retagged": retagged, "attributes": len(doc.metadata or {})})


def apply_change(engine, change: ObjectChange, counts: dict) -> None:
    """Ingest or remove one object (a sidecar's change: re-read its document) in the engine of
    the key's tenant (``engine``: the default tenant's). Events of one key may arrive in any
    order and more than once: each carries its ``sequencer``, and an event older than what the
    store holds for its key (document or tombstone) is a no-op."""
    try:
        tenant = tenant_of_key(change.key)
    except TenantError as exc:
        logger.error("document rejected", extra={"source": change.key, "error": str(exc), "reason": "bad-tenant"})
        counts["rejected"] += 1
        return
    if tenant:
        if change.removed and not LAMBDA_ENGINE.tenancy.exists(tenant):
            counts["stale"] += 1  # the tenant's deletion removed its files and its store
            return
        engine = LAMBDA_ENGINE.get(tenant, register=not change.removed)
    own = getattr(engine.blobs, "bucket", None)
    if own is not None and change.bucket != own:
        raise UnusableRecord("other-bucket", f"an event of bucket {change.bucket!r}; this function reads {own!r}")
    if is_sidecar(change.key.rsplit("/", 1)[-1]):
        key = change.key[:-len(SIDECAR_SUFFIX)]
        ingest_object(engine, key, f"s3://{change.bucket}/{key}", "", counts, change.shape, refresh=True)
        return
    source = f"s3://{change.bucket}/{change.key}"
    version = _version(change, source)
    if change.removed:
        report = remove.remove(engine, [source], version=version)
        counts["removed"] += report.documents_removed
        counts["stale"] += report.documents_stale
        return
    ingest_object(engine, change.key, source, version, counts, change.shape)


def _log_unusable(exc: UnusableRecord, **where) -> None:
    logger.error("event record not usable", extra={"reason": exc.reason, "detail": exc.detail, **where})


def apply_payload(payload, counts: dict, **where) -> int:
    """Apply every usable change of one notification; log each unusable record (one line
    each) and return how many there were."""
    try:
        items = changes_in(payload)
    except UnusableRecord as exc:
        _log_unusable(exc, **where)
        counts["unusable"] += 1
        return 1
    engine = LAMBDA_ENGINE.get() if items else None
    unusable = 0
    for item in items:
        if isinstance(item, ObjectChange):
            try:
                apply_change(engine, item, counts)
                continue
            except UnusableRecord as exc:
                item = exc
        _log_unusable(item, **where)
        counts["unusable"] += 1
        unusable += 1
    return unusable


def _publish(counts: dict) -> None:
    metrics.add_metric("DocumentsIngested", MetricUnit.Count, counts["ingested"])
    metrics.add_metric("DocumentsRemoved", MetricUnit.Count, counts["removed"])
    metrics.add_metric("DocumentsRejected", MetricUnit.Count, counts["rejected"])
    metrics.add_metric("StaleEventsIgnored", MetricUnit.Count, counts["stale"])
    metrics.add_metric("VanishedObjectsSkipped", MetricUnit.Count, counts["vanished"])
    metrics.add_metric("UnusableEventRecords", MetricUnit.Count, counts["unusable"])


def handle_s3_event(event: dict) -> dict:
    """A notification invoked directly (S3 -> Lambda, or an EventBridge rule targeting the
    function): the counts; raises UnusableEvent after the usable records when some were not."""
    counts = _new_counts()
    unusable = apply_payload(event, counts, delivery="direct")
    _publish(counts)
    if unusable:
        raise UnusableEvent(f"{unusable} unusable record(s) in a direct invocation (see the log)")
    return counts


_BATCH_COUNTS = _new_counts()


def record_handler(record: SQSRecord) -> None:
    where = {"message_id": record.message_id, "delivery": "sqs"}
    try:
        payload = record.json_body
    except ValueError as exc:
        unusable = UnusableRecord("not-json", f"the SQS message body is not JSON ({exc})")
        _log_unusable(unusable, **where)
        _BATCH_COUNTS["unusable"] += 1
        raise unusable from None
    try:
        unusable = apply_payload(payload, _BATCH_COUNTS, **where)
    except Exception as exc:  # a transient fault (throttling, a timeout...): SQS retries it
        logger.exception("event record failed", extra={"reason": "error", "error": repr(exc), **where})
        raise
    if unusable:
        raise UnusableRecord("unusable", f"{unusable} unusable record(s) in the message")


def _is_sqs_batch(event) -> bool:
    records = event.get("Records") if isinstance(event, dict) else None
    return bool(records) and isinstance(records, list) and all(
        isinstance(r, dict) and r.get("eventSource") == "aws:sqs" for r in records)


@logger.inject_lambda_context
@metrics.log_metrics
@tracer.capture_lambda_handler
def handler(event, context):
    if not _is_sqs_batch(event):
        return handle_s3_event(event)
    _BATCH_COUNTS.update(_new_counts())
    try:
        return process_partial_response(event=event, record_handler=record_handler,
                                        processor=processor, context=context)
    finally:
        _publish(_BATCH_COUNTS)
