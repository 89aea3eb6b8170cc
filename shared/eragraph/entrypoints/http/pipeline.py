"""The request pipeline of ``eragraph serve``: a request (request.Request) goes from the route
table (routes.ROUTES) to its handler with no API Gateway event in between.

- **Match**: the route whose method and path the request has, with the path rule the Lambda
  resolver compiles (powertools' own), so both find the same route and the same parameters.
- **Bind, once**: the handler's parameters (path, query, the body's model) validated by
  powertools' own validation of the handler's signature, the body parsed once
  (``Request.json_body``): a refusal is the resolver's 422 with the same message.
- **Pool, once**: ``Call.pool``, from the registry entry (services.modes ``pool``) of the mode the
  validated request names: ``slow`` for the entity-graph modes, else ``fast``.
- **Answer**: the handler's result as the resolver writes it (a dict: 200 JSON; a powertools
  ``Response``: its status, headers and body), a raised refusal as errors.answer converts it.

The Lambda function keeps powertools' resolver (api.make_app) over the same routes and handlers."""

from __future__ import annotations

import dataclasses
import inspect
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from types import MethodType
from typing import Any
from urllib.parse import parse_qsl

from aws_lambda_powertools.event_handler import APIGatewayHttpResolver, Response
from aws_lambda_powertools.event_handler.exceptions import NotFoundError
from aws_lambda_powertools.event_handler.openapi.dependant import get_dependant
from aws_lambda_powertools.event_handler.openapi.exceptions import RequestValidationError
from aws_lambda_powertools.shared.json_encoder import Encoder

from ...services.modes import MODES
from .context import RouteContext
from .errors import refused
from .request import Request
from .routes import API, ROUTES, Route, route_of

_SERIALIZE = partial(json.dumps, separators=(",", ":"), cls=Encoder)  # the resolver's
Answer = tuple[int, dict[str, str], bytes]


def pool_of(values: dict[str, Any]) -> str:
    """The pool of a bound request: the one its mode's registry entry names (``fast`` when it
    names no mode, or an unknown one: the service refuses that with a 400)."""
    for value in values.values():
        mode = getattr(value, "mode", None)
        if isinstance(mode, str) and mode in MODES:
            return MODES[mode].pool
    return "fast"


@dataclass
class Entry:
    """A route the pipeline serves: its path rule (powertools'), and the handler's parameters as
    powertools reads them (``dependant``), the route context bound first when it asks for one."""

    route: Route
    rule: re.Pattern
    dependant: Any
    takes_context: bool

    @classmethod
    def of(cls, route: Route) -> Entry:
        handler = route.handler
        takes_context = next(iter(inspect.signature(handler).parameters), None) == "ctx"
        signature_of = MethodType(handler, object()) if takes_context else handler  # the parameters the resolver sees
        return cls(route, APIGatewayHttpResolver._compile_regex(route.rule),  # noqa: SLF001 (the resolver's own rule)
                   get_dependant(path=route.path, call=signature_of), takes_context)


@dataclass
class Call:
    """A request bound to its handler, to be run in ``pool``."""

    run: Callable[[], Answer]
    pool: str = "fast"


class Pipeline:
    """The API routes of the route table that ``ctx`` (context.RouteContext) can serve (a route
    whose ``needs`` it lacks is no route here, as in the resolver)."""

    def __init__(self, ctx: RouteContext, routes: tuple[Route, ...] = ROUTES) -> None:
        self.ctx = ctx
        self.entries = [Entry.of(r) for r in routes
                        if API in r.on and r.handler is not None and not (r.needs and getattr(ctx, r.needs, None) is None)]

    def prepare(self, request: Request) -> Call:
        """The request matched and bound (its pool chosen), or the call answering its refusal."""
        found = route_of(request.method, request.path)
        modelled = found is not None and bool(found.modelled)
        try:
            entry, params = self.match(request)
            request.params = params
            values = self.bind(entry, request)
        except Exception as exc:  # noqa: BLE001 (every refusal is answered, never uvicorn's 500)
            return Call(partial(refused, exc, request, modelled))
        return Call(lambda: self.call(entry, request, values, modelled), pool_of(values))

    def match(self, request: Request) -> tuple[Entry, dict[str, str]]:
        for entry in self.entries:
            if entry.route.method == request.method:
                found = entry.rule.match(request.path)
                if found:
                    return entry, found.groupdict()
        raise NotFoundError()  # the resolver's 404 of a request no route takes

    @staticmethod
    def bind(entry: Entry, request: Request) -> dict[str, Any]:
        """The handler's parameters validated (RequestValidationError: the resolver's 422)."""
        from aws_lambda_powertools.event_handler.middlewares import openapi_validation as v

        dependant = entry.dependant
        values, errors_ = v._request_params_to_args(dependant.path_params, request.params)  # noqa: SLF001
        if dependant.query_params:
            raw = {k: value.split(",") for k, value in request.query_values.items()}  # as the HTTP API's event
            names = [k for k, _ in parse_qsl(request.query, keep_blank_values=True)]
            repeated = {k for k in raw if names.count(k) > 1}
            query, query_errors = v._request_params_to_args(  # noqa: SLF001
                dependant.query_params, v._normalize_multi_params(raw, dependant.query_params,  # noqa: SLF001
                                                                  multi_value_params=repeated))
            values.update(query)
            errors_ += query_errors
        if dependant.body_params:
            body, body_errors = v._request_body_to_args(dependant.body_params, request.json_body)  # noqa: SLF001
            values.update(body)
            errors_ += body_errors
        if errors_:
            raise RequestValidationError(v._normalize_errors(errors_))  # noqa: SLF001
        return values

    def call(self, entry: Entry, request: Request, values: dict[str, Any], modelled: bool) -> Answer:
        handler = entry.route.handler
        try:
            if entry.takes_context:
                result = handler(dataclasses.replace(self.ctx, request=request), **values)
            else:
                result = handler(**values)
        except Exception as exc:  # noqa: BLE001 (as the resolver's exception handlers: errors.install)
            return refused(exc, request, modelled)
        if not isinstance(result, Response):
            result = Response(status_code=200, content_type="application/json", body=result)
        return encoded(result)



def encoded(response: Response) -> Answer:
    """``response`` as the resolver serializes it: status, headers, the body's bytes."""
    body = response.body
    if response.is_json() and not isinstance(body, (str, bytes)):
        body = _SERIALIZE(body)
    if isinstance(body, str):
        body = body.encode("utf-8")
    headers = {k: (", ".join(v) if isinstance(v, list) else str(v)) for k, v in (response.headers or {}).items()}
    return response.status_code, headers, body if body is not None else b""

