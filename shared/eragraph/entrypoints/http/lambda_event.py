"""The API Gateway side of a request: the HTTP API's payload v2 event of one HTTP request and the
parts of a Lambda context the resolver reads. ``eragraph serve`` does not use them to answer (its
request pipeline, pipeline.Pipeline, speaks no API Gateway, nor does the console's forwarding,
console.proxy): they serve what stands in for API Gateway (the load bench's Lambda target; the
tests' fake gateway)."""

from __future__ import annotations

import base64
import time
import uuid
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl


@dataclass
class LocalContext:
    """The parts of a Lambda context the resolver may read."""

    function_name: str = "eragraph-serve"
    memory_limit_in_mb: int = 0
    invoked_function_arn: str = "arn:aws:lambda:local:000000000000:function:eragraph-serve"
    aws_request_id: str = ""

    def get_remaining_time_in_millis(self) -> int:
        return 300_000


def http_event(method: str, target: str, headers: dict[str, str], body: bytes, source_ip: str,
               request_id: str = "") -> dict:
    """An API Gateway HTTP API payload v2 event for one HTTP request (``target``: path?query)."""
    path, _, query = target.partition("?")
    lowered = {k.lower(): v for k, v in headers.items()}
    event: dict[str, Any] = {
        "version": "2.0", "routeKey": "$default", "rawPath": path or "/", "rawQueryString": query,
        "headers": lowered,
        "requestContext": {
            "http": {"method": method, "path": path or "/", "protocol": "HTTP/1.1",
                     "sourceIp": source_ip, "userAgent": lowered.get("user-agent", "")},
            "requestId": request_id or uuid.uuid4().hex, "routeKey": "$default", "stage": "$default",
            "timeEpoch": int(time.time() * 1000),
        },
        "isBase64Encoded": False,
    }
    if query:
        event["queryStringParameters"] = dict(parse_qsl(query, keep_blank_values=True))
    if body:
        try:
            event["body"] = body.decode("utf-8")
        except UnicodeDecodeError:
            event["body"] = base64.b64encode(body).decode("ascii")
            event["isBase64Encoded"] = True
    return event
