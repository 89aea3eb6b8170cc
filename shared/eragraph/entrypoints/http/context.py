"""What a route handler of the HTTP API reads besides its own parameters (eragraph.entrypoints.http.handlers):
the request being served and what ``make_app`` was given. A handler is a function whose first
parameter is this context; ``make_app`` binds it, so that the resolver sees the handler's own
parameters only (it validates them and documents them in the OpenAPI schema)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ...services.engine import Engine
from .admission import Admission
from .admission import ForeignTenant
from .errors import BudgetTooLarge


AS_HEADER = "x-eragraph-as"  # the principals a local operator asks as (RouteContext.asking)


@dataclass
class RouteContext:
    """``app``: the resolver (its ``current_event`` is the request, unless ``request`` is given); ``admission``: the caller's
    tenant and rate limit; ``get_engine(tenant)``: that tenant's warm engine; ``limits``
    (config.ApiLimits) caps the answer budget; ``on_query`` sees each query response;
    ``mcp(event, body, tenant, caller)`` serves POST /mcp; ``tenants()`` lists the store's tenants (a
    foreign knowledge base id is then a 403, not a 404); ``choice``: under ``eragraph serve``, how
    a request's tenant is chosen (tenant_choice: GET /tenants lists its choices); ``uploads``
    (ports.uploads.DocumentPipeline) takes the documents submitted through POST /documents,
    written with ``write_engine(tenant)`` (where the read path's engine of an unregistered tenant
    is an empty one)."""

    app: Any
    admission: Admission
    get_engine: Callable[[str], Engine]
    limits: Any = None
    on_query: Callable | None = None
    mcp: Callable[[dict, bytes, str, Any], tuple[int, dict, str]] | None = None
    tenants: Callable[[], Any] | None = None
    choice: Any = None
    uploads: Any = None  # ports.uploads.DocumentPipeline: POST/DELETE /documents (None: not served)
    write_engine: Callable[[str], Engine] | None = None  # a write's engine of a tenant (None: get_engine)
    request: Any = None  # the request being served by the pipeline (request.Request; None: the resolver's event)
    principals: Callable[[Any], Any] | None = None  # the caller's domain.access.Caller (bootstrap.principals)
    # eragraph serve on a local store: the operator may ask as other principals (the console's
    # "ask as" field sends them in AS_HEADER); the store's access default (tenant | deny), None: off
    operator_switch: str | None = None

    @property
    def event(self):
        """The request being served: the pipeline's (request.Request), else the resolver's
        current event (api.StrictHttpEvent)."""
        return self.request if self.request is not None else self.app.current_event

    def caller(self) -> str:
        """The caller's tenant, once admitted (admission.Admission)."""
        return self.admission.caller(self.event.raw_event)

    def asking(self):
        """Who is asking, from its identity (a domain.access.Caller; None: the operator, when
        principals are off); PrincipalsForbidden when they are on and it names none. An operator
        of a local ``eragraph serve`` (``operator_switch``) asks as the principals of the
        AS_HEADER header when it sends one (a caller whose identity names principals never
        switches); a malformed one is refused in words (AccessError, 400)."""
        who = None if self.principals is None else self.principals(self.event.raw_event)
        if who is None and self.operator_switch is not None:
            asked = (getattr(self.event, "headers", None) or {}).get(AS_HEADER) or ""
            if asked.strip():
                from ...domain.access import AccessError, caller, parse_principals
                from ...services.summary_search import BadQueryError

                try:
                    return caller(parse_principals(asked, AS_HEADER), self.operator_switch)
                except AccessError as exc:
                    raise BadQueryError(str(exc)) from None
        return who

    def engine(self) -> Engine:
        """The caller's tenant's engine."""
        return self.get_engine(self.caller())

    def writer(self) -> Engine:
        """The caller's tenant's engine for a write (``write_engine``, else ``get_engine``)."""
        return (self.write_engine or self.get_engine)(self.caller())


def check_budget(limits: Any, requested: int | None) -> None:
    """BudgetTooLarge (422) for an answer's ``requested`` budget over the cap (config.ApiLimits)."""
    cap = getattr(limits, "answer_max_budget", 0)
    if cap and requested is not None and requested > cap:
        raise BudgetTooLarge(f"budget must be at most {cap} when answer is true (got {requested})")


def answer_budget(limits: Any, engine: Engine, requested: int | None = None) -> int | None:
    """The evidence budget of a generated answer on every path that generates (POST /query, its
    stream, the KB routes, MCP's answer, the chat endpoint): ``requested`` (over the cap:
    BudgetTooLarge), else the store's default capped at ``limits.answer_max_budget`` (None: the
    default, under the cap or with none)."""
    check_budget(limits, requested)
    if requested is not None:
        return requested
    cap = getattr(limits, "answer_max_budget", 0)
    return cap if cap and engine.settings.token_budget > cap else None


def check_tenant(named: str | None, caller: str) -> None:
    """ForeignTenant (403) for a body whose ``tenant`` names another tenant than the caller's."""
    if named is not None and named != caller:
        raise ForeignTenant("the request names another tenant than the caller's: the tenant comes from the "
                            "caller's identity (JWT claim or IAM principal tag), never from the body")
