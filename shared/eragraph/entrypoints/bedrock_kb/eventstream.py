"""The AWS event stream framing (``application/vnd.amazon.eventstream``) that botocore's
``EventStream`` reads: each message is a prelude (total length, headers length, the prelude's
CRC32), string headers, the payload and the message's CRC32. Only what the Bedrock KB stream
needs is written: string headers and JSON event payloads (botocore.eventstream is the decoder)."""

from __future__ import annotations

import json
import struct
import zlib
from typing import Any

CONTENT_TYPE = "application/vnd.amazon.eventstream"
_STRING = 7  # the header value type of a string


def _headers(headers: dict[str, str]) -> bytes:
    out = bytearray()
    for name, value in headers.items():
        raw_name, raw_value = name.encode("utf-8"), value.encode("utf-8")
        out += struct.pack("!B", len(raw_name)) + raw_name + struct.pack("!BH", _STRING, len(raw_value)) + raw_value
    return bytes(out)


def message(headers: dict[str, str], payload: bytes) -> bytes:
    """One framed message."""
    head = _headers(headers)
    total = 12 + len(head) + len(payload) + 4
    prelude = struct.pack("!II", total, len(head))
    prelude += struct.pack("!I", zlib.crc32(prelude) & 0xFFFFFFFF)
    body = prelude + head + payload
    return body + struct.pack("!I", zlib.crc32(body) & 0xFFFFFFFF)


def event(event_type: str, body: dict[str, Any]) -> bytes:
    """A modelled event (``:event-type`` names the member of the stream's union) with a JSON body."""
    return message({":event-type": event_type, ":content-type": "application/json", ":message-type": "event"},
                   json.dumps(body).encode("utf-8"))


def exception(code: str, message_text: str) -> bytes:
    """A modelled exception event, as the stream reports an error mid-way: ``code`` is the member
    of the stream's union that names it (``validationException``), which botocore raises as an
    EventStreamError with that code."""
    return message({":exception-type": code, ":content-type": "application/json", ":message-type": "exception"},
                   json.dumps({"message": message_text}).encode("utf-8"))
