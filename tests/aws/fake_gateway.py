"""API Gateway's HTTP API in front of the query function, on 127.0.0.1, for the console proxy's
tests: a real HTTP server that authorizes each request as the deployed API does, then hands the
query handler (functions/query/app.py) the payload v2 event API Gateway would.

- ``iam``: the request must carry a SigV4 signature for ``execute-api`` in ``region``, made with
  the secret of a known access key; it is recomputed with botocore from what arrived (method,
  path, query, the signed headers, the body) and the credentials the gateway holds, and compared.
  The event's ``requestContext.authorizer.iam`` names that key's principal (an ARN: the query
  function reads its tenant tag from IAM, moto's here). No or a bad signature: 403, as AWS.
- ``jwt``: ``Authorization: Bearer <token>`` must be one of ``tokens`` (standing in for the JWT
  authorizer's check of issuer, audience and signature); the event carries its claims. Else 401.

``seen`` keeps every request's headers as they arrived, ``requests`` its method, target and body; ``answers`` every response it sent;
``fail_with`` (status, body, headers) makes the gateway itself answer so (a throttle, a 5xx).

API Gateway's limits and Lambda's, as the deployed API answers them: a body over 10 MB is 413
``Request Entity Too Large`` before any function runs; an event over Lambda's 6 MB, or an answer
over it (lambda_support: the handler is held to Lambda's payload limits), is a failed integration,
413 and 500; a handler that runs past the integration's ``timeout_s`` (template.yaml:
TimeoutInMillis 29000) is 503 ``Service Unavailable``, and the handler's context has that much
time left when it starts."""

from __future__ import annotations

import datetime
import hmac
import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import time

from lambda_support import LambdaContext, LambdaRefused, held_to_limits

ACCOUNT = "123456789012"
BODY_LIMIT = 10 * 1024 * 1024  # an HTTP API's payload
INTEGRATION_TIMEOUT = 29.0  # template.yaml: the query integration's TimeoutInMillis
AUTH = re.compile(r"AWS4-HMAC-SHA256 Credential=([^/]+)/(\d{8})/([^/]+)/([^/]+)/aws4_request, "
                  r"SignedHeaders=([^,]+), Signature=([0-9a-f]{64})$")


class FakeHttpApi:
    def __init__(self, handler, mode: str = "iam", region: str = "us-east-1",
                 principals: dict[str, tuple[str, str | None, str]] | None = None,
                 tokens: dict[str, dict] | None = None) -> None:
        """``principals``: access key -> (secret, session token or None, principal ARN);
        ``tokens``: bearer token -> its claims."""
        self.handler = held_to_limits(handler)
        self.timeout_s = INTEGRATION_TIMEOUT
        self.mode = mode
        self.region = region
        self.principals = principals or {}
        self.tokens = tokens or {}
        self.seen: list[dict[str, str]] = []
        self.requests: list[tuple[str, str, bytes]] = []  # (method, path?query, body) as they arrived
        self.answers: list[tuple[int, bytes]] = []
        self.fail_with: tuple[int, dict, dict] | None = None
        self.server: ThreadingHTTPServer | None = None

    # ----- authorization, as API Gateway
    def verify_sigv4(self, method: str, target: str, headers: dict[str, str], body: bytes) -> tuple[int, dict] | dict:
        """The ``iam`` authorizer context, or (status, body) of the refusal."""
        from botocore.auth import SigV4Auth
        from botocore.awsrequest import AWSRequest
        from botocore.credentials import Credentials

        found = AUTH.match(headers.get("authorization", ""))
        if found is None:
            return 403, {"message": "Forbidden"}
        key, day, region, service, signed, signature = found.groups()
        if (region, service) != (self.region, "execute-api"):
            return 403, {"message": f"Credential should be scoped to a valid region and service ({region}/{service})"}
        if key not in self.principals:
            return 403, {"message": "The security token included in the request is invalid."}
        secret, token, arn = self.principals[key]
        if token is not None and headers.get("x-amz-security-token") != token:
            return 403, {"message": "The security token included in the request is invalid."}
        stamp = headers.get("x-amz-date", "")
        try:
            when = datetime.datetime.strptime(stamp, "%Y%m%dT%H%M%SZ").replace(tzinfo=datetime.timezone.utc)
        except ValueError:
            return 403, {"message": "Forbidden"}
        if abs((datetime.datetime.now(datetime.timezone.utc) - when).total_seconds()) > 300 or stamp[:8] != day:
            return 403, {"message": "Signature expired"}
        names = signed.split(";")
        if "host" not in names:
            return 403, {"message": "Forbidden"}
        request = AWSRequest(method=method, url=f"http://{headers['host']}{target}", data=body,
                             headers={n: headers.get(n, "") for n in names})
        request.context["timestamp"] = stamp
        signer = SigV4Auth(Credentials(key, secret, token), "execute-api", region)
        canonical = signer.canonical_request(request)
        expected = signer.signature(signer.string_to_sign(request, canonical), request)
        if not hmac.compare_digest(expected, signature):
            return 403, {"message": "The request signature we calculated does not match the signature you provided. "
                                    "Check your AWS Secret Access Key and signing method."}
        return {"iam": {"accessKey": key, "accountId": ACCOUNT, "callerId": f"AROA:{key}", "principalOrgId": None,
                        "userArn": arn, "userId": f"AROA:{key}"}}

    def verify_jwt(self, headers: dict[str, str]) -> tuple[int, dict] | dict:
        value = headers.get("authorization", "")
        claims = self.tokens.get(value[len("Bearer "):]) if value.startswith("Bearer ") else None
        if claims is None:
            return 401, {"message": "Unauthorized"}
        return {"jwt": {"claims": claims, "scopes": None}}

    # ----- one request
    def answer(self, method: str, target: str, headers: dict[str, str], body: bytes) -> tuple[int, dict, bytes]:
        from eragraph.entrypoints.http.lambda_event import http_event

        self.seen.append(dict(headers))
        self.requests.append((method, target, body))
        if self.fail_with is not None:
            status, payload, extra = self.fail_with
            return status, {"content-type": "application/json", **extra}, json.dumps(payload).encode()
        if len(body) > BODY_LIMIT:
            return 413, {"content-type": "application/json"}, b'{"message":"Request Entity Too Large"}'
        authorizer = self.verify_sigv4(method, target, headers, body) if self.mode == "iam" else self.verify_jwt(headers)
        if isinstance(authorizer, tuple):
            status, payload = authorizer
            return status, {"content-type": "application/json"}, json.dumps(payload).encode()
        event = http_event(method, target, headers, body, "198.51.100.7")
        event["requestContext"].update({"accountId": ACCOUNT, "apiId": "fake", "authorizer": authorizer})
        started = time.monotonic()
        try:
            out = self.handler(event, LambdaContext(remaining_ms=int(self.timeout_s * 1000)))
        except LambdaRefused as refused:
            status, message = ((413, "Request Entity Too Large") if refused.code == "RequestEntityTooLargeException"
                               else (500, "Internal Server Error"))
            return status, {"content-type": "application/json"}, json.dumps({"message": message}).encode()
        if time.monotonic() - started > self.timeout_s:  # the gateway stopped waiting
            return 503, {"content-type": "application/json"}, b'{"message":"Service Unavailable"}'
        data = out.get("body") or ""
        if out.get("isBase64Encoded"):
            import base64

            payload = base64.b64decode(data)
        else:
            payload = str(data).encode("utf-8")
        return int(out["statusCode"]), {k: str(v) for k, v in (out.get("headers") or {}).items()}, payload

    def start(self) -> str:
        gateway = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def handle_one(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                body = self.rfile.read(length) if length else b""
                headers = {k.lower(): v for k, v in self.headers.items()}
                status, out_headers, payload = gateway.answer(self.command, self.path, headers, body)
                gateway.answers.append((status, payload))
                self.send_response(status)
                for k, v in out_headers.items():
                    if k.lower() != "content-length":
                        self.send_header(k, v)
                self.send_header("content-length", str(len(payload)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(payload)

            do_GET = do_POST = do_DELETE = do_HEAD = handle_one

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}"

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
