"""Every refusal of the HTTP API, converted to its HTTP answer once.

``ANSWERS`` maps each exception a route may raise to its status and JSON body
(``{"statusCode", "message", ...}``); ``install`` registers them on the API's resolver
(eragraph.entrypoints.http.api), so a route raises and never builds an error response itself:

- 400: a body that is no JSON object (body.BadRequestBody), a bad mode or filter (BadQueryError);
- 400: no tenant chosen on a served root of tenants without a default, an invalid one
  (tenant_choice.TenantNotChosen); 404: a tenant the root does not hold (tenant_choice.UnknownTenant);
- 403: a caller whose identity names no tenant (TenantForbidden), a body or an
  ``x-eragraph-tenant`` header naming another tenant (admission.ForeignTenant);
- a submitted document refused (services.uploads.UploadError: 400, 403, 409 or 413, its reason in
  words), and 404 for the removal of an unknown document (UnknownDocument);
- 409: a lexical mode before its index is built (LexicalIndexMissing);
- 415: a content-type that is not JSON; 422: a body that breaks the request model (its message
  names the field, the rule and the limit), or an answer budget over the cap (``BudgetTooLarge``);
- 429 with Retry-After: a tenant out of tokens (admission.RateLimited);
- 502: a model provider that gave up after its retries (ModelCallError): the request was sound,
  an upstream service was not;
- the OpenAI-compatible chat endpoint's refusals (openai_chat.ChatError: its status, OpenAI's
  ``error`` object beside the ``message``);
- the Bedrock KB routes' modelled errors (bedrock_kb.runtime.KbError: the ``x-amzn-errortype``
  header and a JSON ``message``), whose HTTP form is ``KbError.response``.

The Bedrock KB stream answers the refusals of admission and of the body in the service's
modelled shape instead: ``kb_error`` converts them."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ...bootstrap.identity import TenantForbidden
from ...bootstrap.principals import PrincipalsForbidden
from ...domain.model import LexicalIndexMissing
from ...domain.validation import describe_all
from ...providers.prompts import ModelCallError
from ...services.doc_status import BadCursor
from ...services.query import BadQueryError
from ...services.uploads import UnknownDocument, UploadError
from ..bedrock_kb.runtime import KbError
from ..openai_chat import ChatError
from ..request_log import withheld
from .admission import ForeignTenant, LimitUnavailable, RateLimited
from .body import BadRequestBody, NotJsonBody
from .tenant_choice import TenantNotChosen, UnknownTenant


class BudgetTooLarge(ValueError):
    """A budget over the answer cap with answer=true (answered 422)."""


def error_body(status: int, message: str, **extra: Any) -> dict:
    """The JSON body of every error the API and the local server answer."""
    return {"statusCode": status, "message": message, **extra}


# (status, body, headers) of an exception; the current event is read by the 415 (its content-type)
Answer = tuple[int, Any, dict[str, str]]


def _plain(status: int) -> Callable[[Exception, Any], Answer]:
    return lambda exc, _event: (status, error_body(status, str(exc)), {})


def _details(exc) -> list[dict]:
    return [{"loc": e["loc"], "type": e["type"]} for e in exc.errors()]


def _rate_limited(exc: RateLimited, _event: Any) -> Answer:
    return (429, error_body(429, str(exc), retry_after=exc.retry_after), {"Retry-After": str(exc.retry_after)})


def _limit_unavailable(exc: LimitUnavailable, _event: Any) -> Answer:
    return (503, error_body(503, str(exc), retry_after=exc.retry_after),
            {"Retry-After": str(exc.retry_after)})


def _budget_too_large(exc: BudgetTooLarge, _event: Any) -> Answer:
    return 422, error_body(422, str(exc), detail=[{"loc": ["body", "budget"], "type": "less_than_equal"}]), {}


def _invalid_request(exc, event: Any) -> Answer:
    from .models import DocumentsRequest, DocumentUpload, QueryRequest

    errors = exc.errors()
    model = QueryRequest
    if (event.path or "").rstrip("/") == "/documents":  # POST /documents: its fields, or a document's
        model = DocumentUpload if any(len(e.get("loc", ())) > 3 for e in errors) else DocumentsRequest
    message = describe_all(errors, known=model.model_fields)
    return 422, error_body(422, message, detail=_details(exc)), {}


def _unsupported_type(exc, event: Any) -> Answer:
    given = event.headers.get("content-type", "")
    return 415, error_body(415, f"the body must be JSON: content-type must be application/json (got {given!r})",
                           detail=_details(exc)), {}


def _model_failed(exc: ModelCallError, _event: Any) -> Answer:
    return 502, error_body(502, withheld("a model call failed", exc)), {}


def _kb(exc: KbError, _event: Any) -> Answer:
    status, headers, text = exc.response()
    return status, text, headers


ANSWERS: dict[type[Exception], Callable[[Any, Any], Answer]] = {
    TenantForbidden: _plain(403),
    PrincipalsForbidden: _plain(403),
    ForeignTenant: _plain(403),
    LimitUnavailable: _limit_unavailable,  # before RateLimited, its base
    RateLimited: _rate_limited,
    BudgetTooLarge: _budget_too_large,
    BadRequestBody: _plain(400),
    NotJsonBody: _plain(415),
    BadQueryError: _plain(400),
    TenantNotChosen: _plain(400),
    UnknownTenant: _plain(404),
    ModelCallError: _model_failed,
    LexicalIndexMissing: _plain(409),
    KbError: _kb,
    ChatError: lambda exc, _event: (exc.status, exc.body(), {}),
    UploadError: lambda exc, _event: (exc.status, error_body(exc.status, str(exc)), {}),
    UnknownDocument: _plain(404),
    BadCursor: _plain(400),
}


def refusal(exc: Exception) -> Answer | None:
    """The (status, JSON body, headers) of a refusal of ``ANSWERS`` outside the resolver (the
    streamed routes, before their head); None: ``exc`` is no refusal (a fault: the caller gets
    ``request_log.withheld``'s words)."""
    known = _known(exc, validation=False)
    if known is None:
        return None
    status, body, headers = known(exc, None)
    return status, body if isinstance(body, dict) else {"message": str(body)}, dict(headers)


def validation_answers() -> dict[type[Exception], Callable[[Any, Any], Answer]]:
    """The answers to the resolver's own validation errors (422, 415): powertools' exceptions,
    imported here only, so that the ASGI server imports this module without the ``aws`` extra."""
    from aws_lambda_powertools.event_handler.openapi.exceptions import (
        RequestUnsupportedContentType,
        RequestValidationError,
    )

    return {RequestValidationError: _invalid_request, RequestUnsupportedContentType: _unsupported_type}


def install(app, route_of: Callable[[str, str], Any]) -> None:
    """Register on the resolver ``app`` the answer to each exception of ``ANSWERS`` and
    ``validation_answers``, as a JSON response (a KbError's: its own content-type); then a fault
    no answer names (a bug, a provider's unexpected error) as a 500 in words with the request id,
    its detail logged (request_log.withheld), never the plain "Internal Server Error" of an
    exception left to the runtime. The resolver's own errors (404 of an unknown route or
    document: powertools' ServiceError) keep their status. ``route_of(method, path)``: the
    route table's lookup (a modelled route answers in its service's shape)."""
    from aws_lambda_powertools.event_handler import Response, content_types

    def handle(exc: Exception) -> Response:
        event = app.current_event
        found = route_of(event.http_method, event.path)
        status, body, headers = answer(exc, event, modelled=found is not None and bool(found.modelled))
        headers = dict(headers)
        return Response(status_code=status, content_type=headers.pop("content-type", content_types.APPLICATION_JSON),
                        body=body, headers=headers or None)

    for kind in (*ANSWERS, *validation_answers(), Exception):
        app.exception_handler(kind)(handle)


def _service_error(exc: Exception) -> bool:
    from aws_lambda_powertools.event_handler.exceptions import ServiceError

    return isinstance(exc, ServiceError)


def answer(exc: Exception, event: Any, modelled: bool = False, fault: str = "an internal error") -> Answer:
    """The (status, body, headers) of ``exc`` raised by a request (``event``: its path and headers,
    an API Gateway event or a pipeline.Request): the answer of ``ANSWERS`` or of the validation
    errors; a service error (powertools' NotFoundError) with its status; any other a fault, 500
    with ``fault`` and the request id (request_log.withheld). On a ``modelled`` route (the Bedrock
    KB ones), the service's modelled error whatever was raised."""
    if modelled:
        if isinstance(exc, KbError) or _service_error(exc) or _known(exc) is not None:
            return _kb(kb_error(exc), event)
        return _kb(KbError("InternalServerException", withheld(fault, exc)), event)
    known = _known(exc)
    if known is not None:
        return known(exc, event)
    if _service_error(exc):
        return exc.status_code, error_body(exc.status_code, exc.msg), {}
    return 500, error_body(500, withheld(fault, exc)), {}


def refused(exc: Exception, event: Any, modelled: bool, fault: str = "an internal error") -> tuple[int, dict[str, str], bytes]:
    """``answer`` written as the resolver writes it: status, headers (the content-type with
    them), the body's bytes (JSON, or a KbError's own text)."""
    import json

    status, body, headers = answer(exc, event, modelled=modelled, fault=fault)
    headers = {"content-type": "application/json", **headers}
    payload = body if isinstance(body, str) else json.dumps(body, separators=(",", ":"), default=str)
    return status, headers, payload.encode("utf-8")


def _known(exc: Exception, validation: bool = True) -> Callable[[Any, Any], Answer] | None:
    """The answer of the most specific class of ``exc`` that has one (as the resolver looks its
    exception handlers up), None for a fault."""
    table = {**ANSWERS, **validation_answers()} if validation else ANSWERS
    return next((table[kind] for kind in type(exc).__mro__ if kind in table), None)


# the Bedrock KB service's modelled error of each refusal of a KB route (the stream's before its
# first frame, the resolver's whatever the route raised)
KB_CODES: dict[type[Exception], str] = {
    BadRequestBody: "ValidationException",
    BadQueryError: "ValidationException",
    BudgetTooLarge: "ValidationException",
    LexicalIndexMissing: "ValidationException",
    TenantForbidden: "AccessDeniedException",
    PrincipalsForbidden: "AccessDeniedException",
    ForeignTenant: "AccessDeniedException",
    TenantNotChosen: "ValidationException",
    UnknownTenant: "ResourceNotFoundException",
    RateLimited: "ThrottlingException",
    ModelCallError: "DependencyFailedException",
}


def kb_error(exc: Exception) -> KbError:
    """``exc`` as the service's modelled error: a KbError as it is, a refusal of ``KB_CODES`` as
    its code, the resolver's validation errors as ValidationException in words."""
    if isinstance(exc, KbError):
        return exc
    if isinstance(exc, ModelCallError):
        return KbError("DependencyFailedException", withheld("a model call failed", exc))
    code = next((code for kind, code in KB_CODES.items() if isinstance(exc, kind)), None)
    if code is not None:
        error = KbError(code, str(exc))
        if isinstance(exc, RateLimited):
            error.retry_after = exc.retry_after
        return error
    if type(exc).__name__ == "RequestUnsupportedContentType":
        return KbError("ValidationException", "the body must be JSON: content-type must be application/json")
    if type(exc).__name__ == "RequestValidationError":
        return KbError("ValidationException", describe_all(exc.errors(), known={}))
    return KbError("ValidationException", "the request could not be read")
