"""The HTTP query API (payload v2): POST /query, GET /documents/{id}, GET /stats, GET /health, and
POST /mcp when given an MCP server (eragraph.entrypoints.mcp).

One definition serves both the API Gateway function (functions/query/app.py) and the local warm
server (``eragraph serve``, eragraph.entrypoints.http.server): ``make_app`` builds the powertools resolver over an
engine getter, so both validate requests with the same pydantic model and answer with the same
JSON and the same 4xx errors. Requests are validated from the models below; the OpenAPI schema
they generate is kept in functions/query/openapi.json. Needs the ``aws`` extra (powertools,
pydantic).

Every malformed request is a 4xx with a ``message`` in words, never a 500:
- 400 when the body is no JSON object: bad base64 (``isBase64Encoded``), bytes that are not
  UTF-8, invalid JSON, nesting deeper than MAX_BODY_DEPTH (checked before parsing, so a body
  nested 100,000 deep costs one scan, not a RecursionError), or a JSON value other than an object
  (powertools' validation would otherwise take the first element of an array);
- 422 when the object breaks the request model (unknown field, wrong type, a limit): the
  message names the field, the rule and the limit (``k must be at most 100 (got 100000)``), and
  ``detail`` lists each error's ``loc`` and ``type`` as before. Types are strict: ``"k": "5"`` or
  ``"k": true`` is refused, not converted;
- 415 when the content-type is given and is not JSON.
The fuzz corpus of these cases is tests/api_corpus.py.

Tenants: every route answers from the caller's tenant's engine. The tenant comes from the
caller's identity (``tenant_of``: bootstrap.identity, the JWT claim or IAM principal tag), never
from the body: a body whose ``tenant`` names another tenant is refused (403), and a filter on
``tenant`` only ever selects inside the caller's own.

Cost bounds (config.ApiLimits, bootstrap.limits): with ``answer: true`` a ``budget`` over the
cap is a 422; each tenant's requests take a token of its bucket (``admit``), and a tenant out of
tokens gets a 429 with ``Retry-After`` (seconds). With a ``logger``, every log line of a request
carries its tenant, the API request id and the caller (IAM ARN or JWT subject)."""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Callable
from functools import cached_property
from typing import Annotated, Any, Optional, Union

from aws_lambda_powertools.event_handler import APIGatewayHttpResolver, Response, content_types
from aws_lambda_powertools.event_handler.exceptions import NotFoundError
from aws_lambda_powertools.event_handler.openapi.exceptions import (
    RequestUnsupportedContentType,
    RequestValidationError,
)
from aws_lambda_powertools.event_handler.openapi.params import Path, Query
from aws_lambda_powertools.utilities.data_classes import APIGatewayProxyEventV2
from pydantic import BaseModel, ConfigDict, Field

from ...domain.model import LexicalIndexMissing
from ...providers.prompts import ModelCallError
from ...domain.rerank import RerankSpec
from ...domain.tenants import MAX_LENGTH as TENANT_MAX_LENGTH
from ...domain.validation import describe_all
from ...services import query as query_service
from ...services.modes import MODES, mode_names
from ...services.engine import Engine
from ..documents import document_json

OPENAPI_TITLE = "Eragraph query API"
OPENAPI_VERSION = "0.1.0"


MAX_BODY_DEPTH = 16  # nested JSON arrays/objects; a query needs 1


class RerankRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    candidates: Optional[int] = Field(None, ge=1, le=1000, description="Results retrieved for the reranker "
                                      "(default ERAGRAPH_RERANK_CANDIDATES; never fewer than k)")
    model: Optional[str] = Field(None, min_length=1, max_length=256, description="A Bedrock rerank model id or ARN "
                                 "(default: the configured reranker's; a local reranker runs only its own)")


class QueryRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    query: str = Field(min_length=1, max_length=4000, description="The question or search text")
    # the registry (services.modes) is the one list of modes; an unknown one gets the service's 400
    mode: str = Field("collapsed", description="; ".join(f"{m.name}: {m.description}" for m in MODES.values()),
                      json_schema_extra={"enum": mode_names()})
    k: int = Field(5, ge=1, le=100, description="Number of results")
    budget: Optional[int] = Field(None, ge=1, le=100000, description="Token budget of the evidence (default: ERAGRAPH_TOKEN_BUDGET)")
    p: Optional[float] = Field(None, ge=0.0, le=1.0, description="Bias proportion (detailed/summarized)")
    answer: bool = Field(False, description="Generate an answer with citations from the evidence")
    tenant: Optional[str] = Field(None, max_length=TENANT_MAX_LENGTH, description="Optional; must be the caller's own tenant, which "
                                  "comes from its identity (JWT claim or IAM principal tag), never from here")
    filter: Optional[dict[str, Any]] = Field(
        None, description="Metadata filter in Amazon Bedrock Knowledge Bases' shape, e.g. "
        '{"andAll": [{"equals": {"key": "lang", "value": "en"}}, {"greaterThanOrEquals": {"key": "year", '
        '"value": 2020}}]}; operators: equals, notEquals, in, notIn, greaterThan(OrEquals), lessThan(OrEquals), '
        "startsWith, andAll, orAll. Every result is a leaf chunk whose document matches")
    rerank: Union[bool, RerankRequest] = Field(False, description="Re-order the results with the configured reranker: "
                                               "true, or {candidates, model}; the response's rerank says it ran")


def rerank_spec(value: bool | RerankRequest) -> RerankSpec | None:
    if value is False:
        return None
    if value is True:
        return RerankSpec()
    return RerankSpec(candidates=value.candidates, model=value.model)


class BadRequestBody(ValueError):
    """A request body that is no JSON object (answered 400 with this message)."""


# a JSON string (so brackets inside strings are not counted), or one bracket
_JSON_TOKEN = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]')


def nesting_exceeds(text: str, limit: int) -> bool:
    """Whether JSON ``text`` nests arrays/objects deeper than ``limit`` (one linear scan)."""
    if text.count("[") + text.count("{") <= limit:
        return False
    depth = 0
    for match in _JSON_TOKEN.finditer(text):
        token = match.group()
        if token in "[{":
            depth += 1
            if depth > limit:
                return True
        elif token in "]}":
            depth -= 1
    return False


def _no_constant(name: str):
    raise BadRequestBody(f"the body is not valid JSON: {name} is not a JSON number")


def parse_body(text: str) -> dict:
    """The request body as a JSON object, or BadRequestBody saying why not."""
    if nesting_exceeds(text, MAX_BODY_DEPTH):
        raise BadRequestBody(f"the body nests arrays/objects deeper than {MAX_BODY_DEPTH} levels")
    try:
        value = json.loads(text, parse_constant=_no_constant)
    except json.JSONDecodeError as exc:
        raise BadRequestBody(f"the body is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None
    except RecursionError:  # not reached after the scan above; never a 500 all the same
        raise BadRequestBody(f"the body nests arrays/objects deeper than {MAX_BODY_DEPTH} levels") from None
    if not isinstance(value, dict):
        kind = {list: "an array", str: "a string", bool: "a boolean", type(None): "null"}.get(type(value), "a number")
        raise BadRequestBody(f"the body must be a JSON object, not {kind}")
    return value


class StrictHttpEvent(APIGatewayProxyEventV2):
    """The payload v2 event with a strict body decode: bad base64 or bytes that are not UTF-8
    are a BadRequestBody (powertools' own decode would raise binascii.Error /
    UnicodeDecodeError out of the route: a 500)."""

    @cached_property
    def decoded_body(self) -> Optional[str]:
        body = self.body
        if not (self.is_base64_encoded and body):
            return body
        try:
            data = base64.b64decode(body, validate=True)
        except (binascii.Error, ValueError):
            raise BadRequestBody("the body is marked base64-encoded (isBase64Encoded) but is not valid base64") from None
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise BadRequestBody(f"the body is not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start})") from None


class QueryApiResolver(APIGatewayHttpResolver):
    """The HTTP API resolver whose events decode their body strictly (StrictHttpEvent) and
    parse it with parse_body."""

    def __init__(self) -> None:
        super().__init__(enable_validation=True, json_body_deserializer=parse_body)

    def _to_proxy_event(self, event: dict) -> StrictHttpEvent:  # powertools' hook building current_event
        return StrictHttpEvent(event, self._json_body_deserializer)


def _error_json(status: int, message: str, **extra: Any) -> Response:
    return Response(status_code=status, content_type=content_types.APPLICATION_JSON,
                    body={"statusCode": status, "message": message, **extra})


class ForeignTenant(PermissionError):
    """A request that names a tenant other than the caller's (answered 403)."""


class RateLimited(Exception):
    """The caller's tenant is out of tokens (answered 429 with Retry-After)."""

    def __init__(self, retry_after: int) -> None:
        super().__init__(f"too many requests for this tenant: retry after {retry_after} s")
        self.retry_after = retry_after


class BudgetTooLarge(ValueError):
    """A budget over the answer cap with answer=true (answered 422)."""


def make_app(get_engine: Callable[[str], Engine], on_query: Callable | None = None,
             tenant_of: Callable[[dict], str] | None = None, limits: Any = None,
             admit: Callable[[str], Any] | None = None, logger: Any = None,
             mcp: Callable[[dict, bytes, str], tuple[int, dict, str]] | None = None,
             tenants: Callable[[], Any] | None = None) -> APIGatewayHttpResolver:
    """The resolver with every route; ``get_engine(tenant)`` is called per request (the warm
    engine of that tenant: the Lambda container's, or the local server's); ``tenant_of(event)``
    is the caller's tenant from its identity (None: everyone is the default tenant);
    ``on_query`` sees each query response (the Lambda function publishes metrics from it);
    ``limits`` (config.ApiLimits) caps the answer budget; ``admit(tenant)`` takes a token of the
    tenant's bucket (a domain.rate_limit.Decision); ``logger`` (powertools) gets the request's
    tenant, request id and caller as keys; ``mcp(event, body, tenant)`` serves POST /mcp (the MCP
    tools over stateless streamable HTTP: mcp_server.event_response) for the caller's tenant, after
    the same identity, rate limit and logging as every route (None: no such route); ``tenants()``
    lists the store's tenants, so that the Bedrock KB routes (eragraph.entrypoints.bedrock_kb) tell another
    tenant's knowledge base id (403) from an unknown one (404)."""
    from ...bootstrap.identity import TenantForbidden, caller_of
    from ...services import stats as stats_service

    app = QueryApiResolver()

    def caller() -> str:
        event = app.current_event.raw_event
        tenant = tenant_of(event) if tenant_of is not None else ""
        if logger is not None:
            logger.append_keys(tenant=tenant or "(default)", caller=caller_of(event),
                               api_request_id=(event.get("requestContext") or {}).get("requestId", ""))
        if admit is not None:
            decision = admit(tenant)
            if not decision.allowed:
                raise RateLimited(decision.retry_after)
        return tenant

    def engine() -> Engine:
        return get_engine(caller())

    @app.exception_handler(TenantForbidden)
    def no_tenant(exc: TenantForbidden) -> Response:
        return _error_json(403, str(exc))

    @app.exception_handler(ForeignTenant)
    def foreign_tenant(exc: ForeignTenant) -> Response:
        return _error_json(403, str(exc))

    @app.exception_handler(RateLimited)
    def rate_limited(exc: RateLimited) -> Response:
        return Response(status_code=429, content_type=content_types.APPLICATION_JSON,
                        headers={"Retry-After": str(exc.retry_after)},
                        body={"statusCode": 429, "message": str(exc), "retry_after": exc.retry_after})

    @app.exception_handler(BudgetTooLarge)
    def budget_too_large(exc: BudgetTooLarge) -> Response:
        return _error_json(422, str(exc), detail=[{"loc": ["body", "budget"], "type": "less_than_equal"}])

    @app.exception_handler(BadRequestBody)
    def bad_body(exc: BadRequestBody) -> Response:
        return _error_json(400, str(exc))

    @app.exception_handler(RequestValidationError)
    def invalid_request(exc: RequestValidationError) -> Response:
        errors = exc.errors()
        return _error_json(422, describe_all(errors, known=QueryRequest.model_fields),
                           detail=[{"loc": e["loc"], "type": e["type"]} for e in errors])

    @app.exception_handler(RequestUnsupportedContentType)
    def unsupported_type(exc: RequestUnsupportedContentType) -> Response:
        given = app.current_event.headers.get("content-type", "")
        return _error_json(415, f"the body must be JSON: content-type must be application/json (got {given!r})",
                           detail=[{"loc": e["loc"], "type": e["type"]} for e in exc.errors()])

    @app.exception_handler(query_service.BadQueryError)
    def bad_query(exc: query_service.BadQueryError) -> Response:
        return Response(status_code=400, content_type=content_types.APPLICATION_JSON,
                        body={"statusCode": 400, "message": str(exc)})

    @app.exception_handler(ModelCallError)
    def model_failed(exc: ModelCallError) -> Response:
        # a model provider (embedder, reranker, generator) gave up after its retries: the
        # request was sound, an upstream service was not
        return Response(status_code=502, content_type=content_types.APPLICATION_JSON,
                        body={"statusCode": 502, "message": f"a model call failed: {exc}"})

    @app.exception_handler(LexicalIndexMissing)
    def lexical_missing(exc: LexicalIndexMissing) -> Response:
        return Response(status_code=409, content_type=content_types.APPLICATION_JSON,
                        body={"statusCode": 409, "message": str(exc)})

    @app.post("/query")
    def post_query(request: QueryRequest) -> dict:
        cap = getattr(limits, "answer_max_budget", 0)
        if request.answer and cap and request.budget is not None and request.budget > cap:
            raise BudgetTooLarge(f"budget must be at most {cap} when answer is true (got {request.budget})")
        tenant = caller()
        if request.tenant is not None and request.tenant != tenant:
            raise ForeignTenant("the request names another tenant than the caller's: the tenant comes from the "
                                "caller's identity (JWT claim or IAM principal tag), never from the body")
        served = get_engine(tenant)
        budget = request.budget
        if request.answer and cap and budget is None and served.settings.token_budget > cap:
            budget = cap  # the default budget (ERAGRAPH_TOKEN_BUDGET) is capped too, not only an explicit one
        response = query_service.query(served, request.query, mode=request.mode, k=request.k,
                                       budget=budget, p=request.p, answer=request.answer,
                                       where=request.filter, rerank=rerank_spec(request.rerank))
        if on_query is not None:
            on_query(response)
        return response.to_dict()

    @app.get("/documents/<doc_id>")
    def get_document(doc_id: Annotated[str, Path(min_length=1, max_length=512)]) -> dict:
        body = document_json(engine(), doc_id)
        if body is None:
            raise NotFoundError(f"no document {doc_id!r}")
        return body

    @app.get("/documents")
    def list_statuses(prefix: Annotated[str, Query(max_length=1024)] = "",
                      limit: Annotated[int, Query(ge=0, le=1000)] = 100) -> dict:
        """Counts of each status of the caller's documents whose source starts with ``prefix``
        (and Bedrock's ingestion-job statistic names for them), with up to ``limit`` documents."""
        from ...services import doc_status

        counts, views = doc_status.listing(engine(), prefix)
        return {**counts.to_json(), "documents": views[:limit], "truncated": len(views) > limit}

    @app.get("/stats")
    def get_stats() -> dict:
        return stats_service.stats(engine())

    if mcp is not None:
        @app.post("/mcp", summary="MCP (Model Context Protocol) tools over stateless streamable HTTP",
                  description="JSON-RPC 2.0 messages of MCP: tools retrieve, answer (with a generator), "
                              "get_document, stats; JSON responses, no sessions")
        def post_mcp():
            tenant = caller()
            event = app.current_event
            body = event.decoded_body or ""
            status, headers, text = mcp(event.raw_event, body.encode("utf-8"), tenant)
            return Response(status_code=status, content_type=headers.pop("content-type", None), body=text,
                            headers=headers)

    @app.post("/knowledgebases/<knowledgeBaseId>/retrieve", summary="Amazon Bedrock Knowledge Bases Retrieve")
    def post_kb_retrieve(knowledgeBaseId: str):  # noqa: N803 (the service model's name)
        from ..bedrock_kb import runtime as bedrock_kb

        try:
            tenant = bedrock_kb.resolve_tenant(knowledgeBaseId, caller(), tenants)
            body = bedrock_kb.retrieve(get_engine(tenant), app.current_event.json_body or {}, knowledgeBaseId)
        except bedrock_kb.KbError as exc:
            status, headers, text = exc.response()
            return Response(status_code=status, content_type=headers.pop("content-type"), body=text, headers=headers)
        return body

    @app.post("/retrieveAndGenerate", summary="Amazon Bedrock Knowledge Bases RetrieveAndGenerate")
    def post_kb_retrieve_and_generate():
        from ..bedrock_kb import runtime as bedrock_kb

        try:
            body = app.current_event.json_body or {}
            bedrock_kb.validate("RetrieveAndGenerate", body)
            kb_id = bedrock_kb.knowledge_base_config(body)["knowledgeBaseId"]
            tenant = bedrock_kb.resolve_tenant(kb_id, caller(), tenants)
            return bedrock_kb.retrieve_and_generate(get_engine(tenant), body)
        except bedrock_kb.KbError as exc:
            status, headers, text = exc.response()
            return Response(status_code=status, content_type=headers.pop("content-type"), body=text, headers=headers)

    @app.get("/health")
    def health() -> dict:
        return {"status": "ok"}

    return app
