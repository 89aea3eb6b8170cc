"""The HTTP query API (payload v2): the resolver of the route table's API routes
(eragraph.entrypoints.http.routes: POST /query, GET /documents/{id}, GET /documents, GET /stats,
GET /health, the Bedrock KB routes, and POST /mcp when given an MCP server).

One definition serves both the API Gateway function (functions/query/app.py) and the local warm
server (``eragraph serve``, eragraph.entrypoints.http.server): ``make_app`` builds the powertools
resolver over an engine getter, so both validate requests with the same pydantic models
(eragraph.entrypoints.http.models) and answer with the same JSON and the same 4xx errors
(eragraph.entrypoints.http.errors). The OpenAPI schema is the resolver's, generated from the
route table, never a stored copy: ``python -m eragraph.entrypoints.http.api`` prints it
(``openapi_schema``). Needs the ``aws`` extra (powertools, pydantic).

Every malformed request is a 4xx with a ``message`` in words, never a 500:
- 400 when the body is no JSON object: bad base64 (``isBase64Encoded``), bytes that are not
  UTF-8, invalid JSON, nesting deeper than body.MAX_BODY_DEPTH (checked before parsing, so a body
  nested 100,000 deep costs one scan, not a RecursionError), or a JSON value other than an object
  (powertools' validation would otherwise take the first element of an array);
- 422 when the object breaks the request model (unknown field, wrong type, a limit): the
  message names the field, the rule and the limit (``k must be at most 100 (got 100000)``), and
  ``detail`` lists each error's ``loc`` and ``type`` as before. Types are strict: ``"k": "5"`` or
  ``"k": true`` is refused, not converted;
- 415 when the content-type is given and is not JSON.
The fuzz corpus of these cases is tests/api_corpus.py.

Tenants: every route answers from the caller's tenant's engine. The tenant comes from the
caller's identity (``tenant_of``: bootstrap.identity, the JWT claim or IAM principal tag;
admission.Admission), never from the body: a body whose ``tenant`` names another tenant is refused (403), and a filter on
``tenant`` only ever selects inside the caller's own.

Cost bounds (config.ApiLimits, bootstrap.limits): with ``answer: true`` a ``budget`` over the
cap is a 422; each tenant's requests take a token of its bucket (``admit``), and a tenant out of
tokens gets a 429 with ``Retry-After`` (seconds). With a ``logger``, every log line of a request
carries its tenant, the API request id and the caller (IAM ARN or JWT subject)."""

from __future__ import annotations

import base64
import binascii
import inspect
from collections.abc import Callable
from functools import cached_property
from types import MethodType
from typing import Any, Optional

from aws_lambda_powertools.event_handler import APIGatewayHttpResolver
from aws_lambda_powertools.utilities.data_classes import APIGatewayProxyEventV2

from ...services.engine import Engine
from . import errors
from .admission import Admission
from .body import BadRequestBody, parse_body
from .request import check_json_type, text_of
from .context import RouteContext
from .. import request_log
from .routes import API, ROUTES, route_of

OPENAPI_TITLE = "Eragraph query API"
OPENAPI_VERSION = "0.1.0"


class StrictHttpEvent(APIGatewayProxyEventV2):
    """The payload v2 event with a strict body decode: bad base64 or bytes that are not UTF-8
    are a BadRequestBody (powertools' own decode would raise binascii.Error /
    UnicodeDecodeError out of the route: a 500)."""

    @cached_property
    def decoded_body(self) -> Optional[str]:
        body = self.body
        given = self.headers.get("content-type") if body else None
        if not (self.is_base64_encoded and body):
            check_json_type(given)
            return body
        try:
            data = base64.b64decode(body, validate=True)
        except (binascii.Error, ValueError):
            check_json_type(given)
            raise BadRequestBody("the body is marked base64-encoded (isBase64Encoded) but is not valid base64") from None
        return text_of(data, given)


class QueryApiResolver(APIGatewayHttpResolver):
    """The HTTP API resolver whose events decode their body strictly (StrictHttpEvent) and
    parse it with parse_body."""

    def __init__(self, access_log: bool = False) -> None:
        super().__init__(enable_validation=True, json_body_deserializer=parse_body)
        self.access_log = access_log

    def resolve(self, event, context):
        """The response to ``event``, within its request record (request_log: the request id of
        its error messages; with ``access_log``, its log line: caller, tenant, route, status)."""
        http = ((event or {}).get("requestContext") or {}).get("http") or {}
        method, path = str(http.get("method", "")), str((event or {}).get("rawPath") or http.get("path") or "")
        found = route_of(method, path)
        rid = ((event or {}).get("requestContext") or {}).get("requestId")
        record = request_log.current()
        if record is None or record["request_id"] != rid:  # not one the ASGI server opened already
            record = request_log.begin(rid, method, found.key if found is not None else "(no route)")
        out = super().resolve(event, context)
        if self.access_log:
            request_log.finish(record, int(out.get("statusCode", 0)) if isinstance(out, dict) else 0)
        return out

    def _to_proxy_event(self, event: dict) -> StrictHttpEvent:  # powertools' hook building current_event
        return StrictHttpEvent(event, self._json_body_deserializer)


def make_app(get_engine: Callable[[str], Engine], on_query: Callable | None = None,
             tenant_of: Callable[[dict], str] | None = None, limits: Any = None,
             admit: Callable[[str], Any] | None = None, logger: Any = None,
             mcp: Callable[[dict, bytes, str, Any], tuple[int, dict, str]] | None = None,
             tenants: Callable[[], Any] | None = None, choice: Any = None, uploads: Any = None,
             write_engine: Callable[[str], Engine] | None = None,
             principals: Callable[[dict], Any] | None = None) -> APIGatewayHttpResolver:
    """The resolver with every API route of the route table; ``get_engine(tenant)`` is called per
    request (the warm engine of that tenant: the Lambda container's, or the local server's);
    ``tenant_of(event)`` is the caller's tenant from its identity (None: everyone is the default
    tenant); ``on_query`` sees each query response (the Lambda function publishes metrics from
    it); ``limits`` (config.ApiLimits) caps the answer budget; ``admit(tenant)`` takes a token of
    the tenant's bucket (a domain.rate_limit.Decision); ``logger`` (powertools) gets the request's
    tenant, request id and caller as keys; ``mcp(event, body, tenant, caller)`` serves POST /mcp (the MCP
    tools over stateless streamable HTTP: mcp.event_response) for the caller's tenant, after the
    same identity, rate limit and logging as every route (None: no such route); ``tenants()``
    lists the store's tenants, so that the Bedrock KB routes (eragraph.entrypoints.bedrock_kb) tell
    another tenant's knowledge base id (403) from an unknown one (404); ``choice`` (``eragraph
    serve``: tenant_choice) is how a request's tenant is chosen, which GET /tenants reports;
    ``uploads`` (the profile's ports.uploads.DocumentPipeline) serves POST /documents and
    DELETE /documents/{doc_id} (None: no such routes), with ``write_engine(tenant)`` (None:
    ``get_engine``); ``principals(event)``: the caller's domain.access.Caller from its identity
    (bootstrap.principals; None: every caller is the operator)."""
    app = QueryApiResolver(access_log=logger is not None)
    ctx = RouteContext(app, Admission(tenant_of, admit, logger), get_engine, limits=limits, on_query=on_query,
                       mcp=mcp, tenants=tenants, choice=choice, uploads=uploads, write_engine=write_engine,
                       principals=principals)
    errors.install(app, route_of)
    for route in ROUTES:
        if API not in route.on or (route.needs and getattr(ctx, route.needs, None) is None):
            continue
        handler = route.handler
        if next(iter(inspect.signature(handler).parameters), None) == "ctx":
            handler = MethodType(handler, ctx)  # the resolver sees the handler's own parameters only
        app.route(route.rule, route.method, summary=route.summary, description=route.description)(handler)
    return app


TITLE, VERSION = "Eragraph query API", "0.1.0"


def openapi_schema() -> str:
    """The OpenAPI schema (JSON) of every API route, as the query function's resolver generates
    it: the resolver built with every route served (its engine getter is never called)."""

    def no_engine(tenant: str) -> Engine:
        raise RuntimeError(f"the schema's resolver answers no request (tenant {tenant!r})")

    every = make_app(no_engine, mcp=lambda *_: (501, {}, ""), uploads=object())
    return every.get_openapi_json_schema(title=TITLE, version=VERSION)


if __name__ == "__main__":  # pragma: no cover
    print(openapi_schema())
