"""S3 document events as ObjectChanges (domain.object_changes), parsed with powertools' event
data classes, in any of these shapes:
- an S3 notification (``Records`` of ``aws:s3``), invoked directly or as the body of an SQS
  message (the template's ``NotificationMode=direct``);
- the same inside an SNS envelope (S3 -> SNS -> SQS without raw message delivery);
- an EventBridge ``Object Created`` / ``Object Deleted`` event (S3 -> EventBridge -> SQS, the
  template's ``NotificationMode=eventbridge``), also when invoked directly;
- ``s3:TestEvent`` (S3 sends it when a notification is configured): nothing to do.

A record that cannot be used (not JSON, an unknown shape, another event type, a key that is not
valid percent-encoded UTF-8, a field missing) is an UnusableRecord with a short reason."""

from __future__ import annotations

import json
import re
from urllib.parse import unquote_plus

from aws_lambda_powertools.utilities.data_classes import S3Event, S3EventBridgeNotificationEvent
from aws_lambda_powertools.utilities.data_classes.sns_event import SNSMessage

from ...domain.object_changes import ObjectChange, UnusableRecord

EVENTBRIDGE_TYPES = {"Object Created": False, "Object Deleted": True}  # detail-type -> removed
_BAD_PERCENT = re.compile(r"%(?![0-9A-Fa-f]{2})")


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
                                    shape=shape, size=_size(obj.get("size"))))
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
                            shape=shape, size=_size(obj.get("size")))
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


def parse_changes(payload) -> list[ObjectChange | UnusableRecord] | UnusableRecord:
    """changes_in, or the UnusableRecord of a payload that is unusable as a whole."""
    try:
        return changes_in(payload)
    except UnusableRecord as exc:
        return exc


def is_sqs_batch(event) -> bool:
    """Whether ``event`` is an SQS batch (every record of aws:sqs), not a notification invoked directly."""
    records = event.get("Records") if isinstance(event, dict) else None
    return bool(records) and isinstance(records, list) and all(
        isinstance(r, dict) and r.get("eventSource") == "aws:sqs" for r in records)


def _size(value) -> int | None:
    """An event's object size (a created object's; a removal has none): a whole number or None."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None
