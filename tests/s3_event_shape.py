"""S3's ObjectRemoved notification as S3 sends it (Amazon S3 User Guide, "Event message
structure", event version 2.1; the same record reaches a function directly or in the body of an
SQS message). A test that builds one by hand is held to it, so that the ingest function is
never tested on a record S3 would not send: ``check_removed`` raises ``AssertionError`` naming
what differs.

- ``eventName`` ``ObjectRemoved:Delete`` (a delete of an object, or of a version) or
  ``ObjectRemoved:DeleteMarkerCreated`` (a delete in a versioned bucket);
- the record's fields (``eventVersion`` 2.x, ``eventSource`` aws:s3, ``awsRegion``, ``eventTime``
  ISO 8601 in UTC, ``userIdentity``, ``requestParameters``, ``responseElements``) and ``s3``
  (``s3SchemaVersion`` 1.0, ``configurationId``, ``bucket`` with its ``name``,
  ``ownerIdentity`` and ``arn``);
- ``object``: the ``key`` URL-encoded as S3 encodes it (a space is ``+``, every character but
  letters, digits, ``-_.~*/`` is ``%XX``), a ``sequencer`` of hexadecimal digits, a
  ``versionId`` for a delete marker; a removal has no ``size`` and no ``eTag``."""

from __future__ import annotations

import json
import re
from typing import Any

REMOVED = {"ObjectRemoved:Delete", "ObjectRemoved:DeleteMarkerCreated"}
RECORD_KEYS = {"eventVersion", "eventSource", "awsRegion", "eventTime", "eventName", "userIdentity",
               "requestParameters", "responseElements", "s3"}
ENCODED_KEY = re.compile(r"^(?:[A-Za-z0-9\-_.~*/+]|%[0-9A-F]{2})+$")
SEQUENCER = re.compile(r"^[0-9A-F]+$")
EVENT_TIME = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d{3})?Z$")


def _need(cond: bool, what: str, record: dict) -> None:
    if not cond:
        raise AssertionError(f"not an ObjectRemoved record as S3 sends it: {what}: {json.dumps(record)[:400]}")


def check_removed(record: dict) -> None:
    _need(set(record) == RECORD_KEYS, f"its fields are {sorted(RECORD_KEYS)}, not {sorted(record)}", record)
    _need(record["eventName"] in REMOVED, f"eventName {record['eventName']!r}", record)
    _need(str(record["eventVersion"]).startswith("2.") and record["eventSource"] == "aws:s3",
          "eventVersion 2.x from aws:s3", record)
    _need(isinstance(record["eventTime"], str) and EVENT_TIME.match(record["eventTime"]) is not None,
          "eventTime in ISO 8601, UTC", record)
    _need("principalId" in record["userIdentity"] and "sourceIPAddress" in record["requestParameters"]
          and {"x-amz-request-id", "x-amz-id-2"} <= set(record["responseElements"]),
          "userIdentity, requestParameters, responseElements", record)
    s3 = record["s3"]
    _need(s3.get("s3SchemaVersion") == "1.0" and "configurationId" in s3, "s3SchemaVersion 1.0, configurationId",
          record)
    bucket = s3.get("bucket", {})
    _need(bucket.get("arn") == f"arn:aws:s3:::{bucket.get('name')}" and "principalId" in bucket.get("ownerIdentity", {}),
          "bucket name, ownerIdentity and arn", record)
    obj = s3.get("object", {})
    _need(isinstance(obj.get("key"), str) and ENCODED_KEY.match(obj["key"]) is not None,
          f"object key URL-encoded as S3 sends it ({obj.get('key')!r})", record)
    _need(isinstance(obj.get("sequencer"), str) and SEQUENCER.match(obj["sequencer"]) is not None,
          f"a hexadecimal sequencer ({obj.get('sequencer')!r})", record)
    _need(set(obj) <= {"key", "sequencer", "versionId"}, f"a removal has no {sorted(set(obj) - {'key', 'sequencer', 'versionId'})}",
          record)
    if record["eventName"] == "ObjectRemoved:DeleteMarkerCreated":
        _need(bool(obj.get("versionId")), "a delete marker's versionId", record)


def removed_records(event: Any) -> list[dict]:
    """The ObjectRemoved records of a Lambda event: S3's own, or those in the bodies of an SQS
    event's messages (S3 -> SQS -> Lambda)."""
    out: list[dict] = []
    for record in (event.get("Records") or []) if isinstance(event, dict) else []:
        if not isinstance(record, dict):
            continue
        if record.get("eventSource") == "aws:sqs":
            try:
                body = json.loads(record.get("body") or "")
            except (TypeError, ValueError):
                continue
            out += removed_records(body)
        elif record.get("eventSource") == "aws:s3" and record.get("eventName") in REMOVED:
            out.append(record)
    return out
