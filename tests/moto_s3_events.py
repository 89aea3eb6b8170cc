"""moto's S3 notifications, made the records S3 sends (Amazon S3 User Guide, "Event message
structure"). moto 5.2.5 builds every record alike: no ``sequencer`` (which S3 always sends, and
by which the ingest function orders a key's events), a ``size`` and ``eTag`` on a removal too,
the key's ``/`` encoded as ``%2F`` (S3 keeps it), and no ``userIdentity``,
``requestParameters``, ``responseElements`` or bucket ``ownerIdentity``. ``install`` replaces
the record so that a function that reads moto's notifications reads what S3 would send:

- the key URL-encoded as S3 encodes it (a space is ``+``, ``/`` is kept);
- a ``sequencer`` of 16 hexadecimal digits that grows with every event of the process (S3's
  grows per key; one process-wide order is one of the orders it may give);
- ``size`` and ``eTag`` for ObjectCreated only, ``versionId`` for a versioned bucket's object.

tests/s3_event_shape.py holds the ObjectRemoved records the tests build by hand to the same
shape. tests/conftest.py installs it in the test process, where the moto mocks and servers run."""

from __future__ import annotations

import functools
import itertools
import threading
import time
from typing import Any
from urllib.parse import quote_plus

_lock = threading.Lock()
_last = [0]


def sequencer() -> str:
    with _lock:
        _last[0] = max(_last[0] + 1, time.time_ns())
        return f"{_last[0]:016X}"


_ids = itertools.count(1)


def s3_record(record: dict, key: Any) -> dict:
    """moto's ``record`` as S3 sends it."""
    obj = record["s3"]["object"]
    removed = record["eventName"].startswith("ObjectRemoved:")
    shaped = {"key": quote_plus(key.name, safe="/"), **({} if removed else {"size": obj["size"], "eTag": obj["eTag"]}),
              **({"versionId": str(key.version_id)} if getattr(key, "version_id", None) not in (None, "null") else {}),
              "sequencer": sequencer()}
    return as_s3_sends({**record, "s3": {**record["s3"], "object": shaped}})


def as_s3_sends(record: dict) -> dict:
    """``record`` (its ``s3.object`` already S3's) with the identity and request fields S3 adds."""
    n = next(_ids)
    return {**{k: v for k, v in record.items() if k != "s3"},
            "userIdentity": {"principalId": "AWS:AIDAEXAMPLE"},
            "requestParameters": {"sourceIPAddress": "127.0.0.1"},
            "responseElements": {"x-amz-request-id": f"{n:016X}", "x-amz-id-2": f"moto/{n:032X}"},
            "s3": {**record["s3"], "bucket": {**record["s3"]["bucket"], "ownerIdentity": {"principalId": "AEXAMPLE"}}}}


def install() -> bool:
    """Patch moto's notification record if it is the one described above; False if moto is
    absent or builds it otherwise (then nothing is changed)."""
    try:
        from moto.s3 import notifications
    except ImportError:
        return False
    original = notifications._get_s3_event
    if getattr(original, "as_s3_sends", False):
        return True

    @functools.wraps(original)
    def get_s3_event(event_name, bucket, key, notification_id):
        event = original(event_name, bucket, key, notification_id)
        return {**event, "Records": [s3_record(r, key) for r in event["Records"]]}

    get_s3_event.as_s3_sends = True
    notifications._get_s3_event = get_s3_event
    return True
