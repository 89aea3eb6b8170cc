"""boto3's ``bedrock-agent-runtime`` client, unchanged, against a Lambda handler: a
``before-send`` hook turns each prepared request into an API Gateway HTTP API (payload v2)
event, calls ``invoke(event) -> the handler's response`` and hands the response back to
botocore, which parses it (and raises its modelled exceptions) as it would Bedrock's. Used by
tests/aws (the handler in process, moto) and tests/deployed (the built function under Python
3.12)."""

from __future__ import annotations

import base64
import copy
import json
from collections.abc import Callable

import boto3
from botocore.awsrequest import AWSResponse
from botocore.config import Config
from lambda_support import event

ENDPOINT = "https://abc123.execute-api.us-east-1.amazonaws.com"
RETRIEVE_ROUTE = "POST /knowledgebases/{knowledgeBaseId}/retrieve"


class _Raw:
    def __init__(self, data: bytes) -> None:
        self.data = data

    def stream(self, **_):
        yield self.data


def route_key(method: str, path: str) -> str:
    """API Gateway's route key of a request: the template's route with its path parameter."""
    return RETRIEVE_ROUTE if path.startswith("/knowledgebases/") else f"{method} {path}"


def kb_event(method: str, path: str, body: dict | None, authorizer: dict | None = None) -> dict:
    """A payload v2 event of ``METHOD PATH`` from the real sample; ``authorizer`` None: the
    sample's own (an IAM caller)."""
    ev = copy.deepcopy(event("api_query_valid.json"))
    ev["routeKey"] = ev["requestContext"]["routeKey"] = route_key(method, path)
    ev["rawPath"] = ev["requestContext"]["http"]["path"] = path
    ev["requestContext"]["http"]["method"] = method
    if authorizer is not None:
        ev["requestContext"]["authorizer"] = authorizer
    ev["body"] = json.dumps(body or {})
    ev["isBase64Encoded"] = False
    return ev


EventOf = Callable[[str, str, dict], dict]


def kb_client(invoke: Callable[[dict], dict], event_of: EventOf | None = None, service: str = "bedrock-agent-runtime"):
    """A ``service`` client (bedrock-agent-runtime, or bedrock-agent for the knowledge-base
    writes) whose requests reach ``invoke`` as the events ``event_of(method, path, body)`` makes
    (default: kb_event with the sample's caller)."""
    make = event_of or (lambda method, path, body: kb_event(method, path, body))
    client = boto3.client(service, region_name="us-east-1", endpoint_url=ENDPOINT,
                          aws_access_key_id="x", aws_secret_access_key="x",
                          config=Config(retries={"max_attempts": 1}))

    def send(request, **_):
        path = request.url.split(ENDPOINT, 1)[1]
        body = request.body.decode() if isinstance(request.body, bytes) else (request.body or "")
        out = invoke(make(request.method, path, json.loads(body) if body else {}))
        headers = {k.lower(): v for k, v in (out.get("headers") or {}).items()}
        raw = out.get("body") or ""
        data = base64.b64decode(raw) if out.get("isBase64Encoded") else raw.encode()
        return AWSResponse(request.url, out["statusCode"], headers, _Raw(data))

    client.meta.events.register_first(f"before-send.{service}.*", send)
    return client
