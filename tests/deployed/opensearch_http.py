"""The request-checking OpenSearch fake (tests/aws/fake_opensearch.py) behind a real HTTP server
on 127.0.0.1, speaking the OpenSearch REST API, so that the opensearch-py client of a deployed
function (RequestsHttpConnection, SigV4-signed) talks to it over the wire.

Routes (every one the adapter in eragraph.adapters.aws.vector_opensearch and lexical_opensearch use):

    HEAD /{index}                    indices.exists          200 | 404
    PUT  /{index}                    indices.create          200 | 400 resource_already_exists_exception
    GET  /{index}/_mapping           indices.get_mapping
    PUT  /{index}/_mapping           indices.put_mapping
    POST /{index}/_refresh           indices.refresh
    POST /_bulk, /{index}/_bulk      bulk (NDJSON)
    POST /{index}/_search            search
    POST /{index}/_msearch           msearch (NDJSON: a header and a search body per line pair)
    POST /{index}/_mget              mget
    GET|POST /{index}/_count         count (a query body: the tenant's scope)
    POST /{index}/_delete_by_query   delete_by_query (a tenant's deletion)

An index that does not exist answers 404 ``index_not_found_exception``; a request the fake finds
malformed (its ShapeError) answers 400 ``illegal_argument_exception``, one it refuses as the cluster
would (its Refused: the API specification, the k-NN plugin's limits) answers that refusal's
status and JSON; both are kept in ``errors``;
an unknown route answers 400 like OpenSearch ("no handler found for uri"). Every request must
carry a valid SigV4 signature for the ``es`` service of the region: the signature is recomputed
from the received method, URL, signed headers and body with the known test secret; a request
that fails the check answers 403 and is kept in ``unsigned``."""

from __future__ import annotations

import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

AUTH = re.compile(r"AWS4-HMAC-SHA256 Credential=(?P<key>[^/]+)/(?P<date>\d{8})/(?P<region>[^/]+)/(?P<service>[^/]+)/"
                  r"aws4_request, SignedHeaders=(?P<signed>[^,]+), Signature=(?P<signature>[0-9a-f]{64})$")


def _error(status: int, kind: str, reason: str, index: str | None = None) -> tuple[int, dict]:
    cause: dict[str, Any] = {"type": kind, "reason": reason}
    if index is not None:
        cause.update({"index": index, "resource.type": "index_or_alias", "resource.id": index})
    return status, {"error": {"root_cause": [cause], **cause}, "status": status}


class OpenSearchHttpFake:
    def __init__(self, fake: Any = None, *, region: str = "us-east-1", service: str = "es",
                 secret_key: str = "testing") -> None:
        if fake is None:
            from contract.aws_factories import fake_opensearch_module

            fake = fake_opensearch_module().FakeOpenSearch()
        self.fake = fake
        self.region = region
        self.service = service
        self.secret_key = secret_key
        self.lock = threading.RLock()  # the fake is not thread-safe; OpenSearch applies each request whole
        self.errors: list[str] = []
        self.unsigned: list[str] = []
        self.served = 0
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # ----- lifecycle -----
    def start(self) -> OpenSearchHttpFake:
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:  # quiet
                pass

            def _serve(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                status, payload = owner.handle(self.command, self.path, dict(self.headers.items()), body)
                data = b"" if payload is None else json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json; charset=UTF-8")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)

            do_GET = do_PUT = do_POST = do_HEAD = do_DELETE = _serve

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="opensearch-fake", daemon=True)
        self._thread.start()
        return self

    @property
    def endpoint(self) -> str:
        assert self._server is not None, "start() first"
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    # ----- signing -----
    def _signed(self, method: str, target: str, headers: dict[str, str], body: bytes) -> str:
        """"" when the SigV4 signature is valid, else why not."""
        from botocore.auth import SigV4Auth
        from botocore.awsrequest import AWSRequest
        from botocore.credentials import Credentials

        lower = {k.lower(): v for k, v in headers.items()}
        m = AUTH.match(lower.get("authorization", ""))
        if m is None:
            return "no SigV4 Authorization header"
        if m["region"] != self.region or m["service"] != self.service:
            return f"signed for {m['region']}/{m['service']}, not {self.region}/{self.service}"
        signed = m["signed"].split(";")
        if "host" not in signed or "x-amz-date" not in signed:
            return f"host and x-amz-date must be signed (signed: {signed})"
        if lower.get("x-amz-date", "")[:8] != m["date"]:
            return "x-amz-date does not match the credential scope"
        request = AWSRequest(method=method, url=f"http://{lower['host']}{target}", data=body or None,
                             headers={h: lower[h] for h in signed if h in lower})
        request.context["timestamp"] = lower["x-amz-date"]
        auth = SigV4Auth(Credentials(m["key"], self.secret_key, lower.get("x-amz-security-token")),
                         self.service, self.region)
        string_to_sign = auth.string_to_sign(request, auth.canonical_request(request))
        if auth.signature(string_to_sign, request) != m["signature"]:
            return "signature does not match"
        return ""

    # ----- routing -----
    def handle(self, method: str, target: str, headers: dict[str, str], body: bytes) -> tuple[int, Any]:
        with self.lock:
            self.served += 1
            why = self._signed(method, target, headers, body)
            if why:
                self.unsigned.append(f"{method} {target}: {why}")
                return 403, {"message": f"The request signature we calculated does not match ({why})"}
            try:
                return self._route(method, target, body)
            except AssertionError as exc:  # the fake's ShapeError: the request is malformed
                self.errors.append(f"{method} {target}: {exc}")
                if isinstance(getattr(exc, "info", None), dict):  # its Refused: the cluster's own answer
                    return exc.status_code, exc.info
                return _error(400, "illegal_argument_exception", str(exc))

    def _route(self, method: str, target: str, body: bytes) -> tuple[int, Any]:
        parts = urlsplit(target)
        segments = [s for s in parts.path.split("/") if s]
        params = {k: v[-1] for k, v in parse_qs(parts.query, keep_blank_values=True).items()}
        fake = self.fake
        text = body.decode("utf-8") if body else ""

        def payload() -> dict:
            return json.loads(text) if text else {}

        if segments and segments[-1] == "_bulk" and len(segments) <= 2 and method in ("POST", "PUT"):
            index = segments[0] if len(segments) == 2 else None
            refresh = params.get("refresh", "false")
            if refresh not in ("", "true", "false", "wait_for"):
                return _error(400, "illegal_argument_exception", f"unknown value for refresh: [{refresh}]")
            missing = self._missing_bulk_index(text, index)
            if missing:
                return _error(404, "index_not_found_exception", f"no such index [{missing}]", missing)
            return 200, fake.bulk(body=text, index=index, refresh=refresh)
        if len(segments) == 1 and not segments[0].startswith("_"):
            index = segments[0]
            if method == "HEAD":
                return (200 if fake.indices.exists(index=index) else 404), None
            if method == "PUT":
                if index in fake.indexes:
                    return _error(400, "resource_already_exists_exception", f"index [{index}/fake] already exists",
                                  index)
                return 200, {**fake.indices.create(index=index, body=payload()), "shards_acknowledged": True}
            if method == "GET":
                if index not in fake.indexes:
                    return _error(404, "index_not_found_exception", f"no such index [{index}]", index)
                mapping = fake.indices.get_mapping(index=index)[index]
                return 200, {index: {**mapping, "settings": {"index": {"number_of_replicas":
                                                                       str(fake.indexes[index]["replicas"])}}}}
        if len(segments) == 2 and not segments[0].startswith("_"):
            index, action = segments
            if index not in fake.indexes:
                return _error(404, "index_not_found_exception", f"no such index [{index}]", index)
            if action == "_mapping" and method == "GET":
                return 200, fake.indices.get_mapping(index=index)
            if action == "_mapping" and method in ("PUT", "POST"):
                return 200, fake.indices.put_mapping(index=index, body=payload())
            if action == "_refresh" and method in ("POST", "GET"):
                fake.indices.refresh(index=index)
                return 200, {"_shards": {"total": 1, "successful": 1, "failed": 0}}
            if action == "_search" and method in ("POST", "GET"):
                out = fake.search(index=index, body=payload())
                return 200, {"took": 1, "timed_out": False, "_shards": {"total": 1, "successful": 1, "failed": 0},
                             **out}
            if action == "_msearch" and method in ("POST", "GET"):
                out = fake.msearch(index=index, body=text)
                shards = {"total": 1, "successful": 1, "failed": 0}
                return 200, {"took": out["took"], "responses": [
                    {"took": 1, "timed_out": False, "_shards": shards, **r} for r in out["responses"]]}
            if action == "_mget" and method in ("POST", "GET"):
                out = fake.mget(index=index, body=payload())
                return 200, {"docs": [{"_index": index, **d} for d in out["docs"]]}
            if action == "_count" and method in ("POST", "GET"):
                out = fake.count(index=index, body=payload() if text else None)
                return 200, {**out, "_shards": {"total": 1, "successful": 1, "failed": 0}}
            if action == "_delete_by_query" and method == "POST":
                out = fake.delete_by_query(index=index, body=payload(), refresh=params.get("refresh"),
                                           conflicts=params.get("conflicts"))
                return 200, {"took": 1, "timed_out": False, "total": out["deleted"], **out}
        return _error(400, "illegal_argument_exception", f"no handler found for uri [{parts.path}] and method [{method}]")

    def _missing_bulk_index(self, text: str, default: str | None) -> str | None:
        lines = text.splitlines()
        i = 0
        while i < len(lines):
            try:
                action = json.loads(lines[i])
            except ValueError:
                return None  # the fake reports the malformed body
            if not isinstance(action, dict) or len(action) != 1:
                return None
            (op, meta), = action.items()
            name = (meta or {}).get("_index", default)
            if name is not None and name not in self.fake.indexes:
                return name
            i += 1 if op == "delete" else 2
        return None
