"""EventBridge schedule (or a direct invoke) -> audit and repair (services.reindex).

The event is validated with pydantic: a direct invoke is ReindexRequest itself
(``{"stuck_after_seconds": 600}``, or ``{}``); the schedule's event is an EventBridge envelope
whose ``detail`` is one (the schedule sends ``{}``). Unknown keys, wrong types or a negative
value are an error naming the field and the rule, before any work. An absent value falls back
to ERAGRAPH_STUCK_AFTER_SECONDS; 0 is 0 (everything counts as stuck).

Tenants: the schedule audits the default tenant and every registered tenant, each in its own
engine (``{"tenant": "acme"}`` audits one). ``{"delete_tenant": "acme"}`` removes everything
the tenant owns (bootstrap.tenancy.Tenancy.delete: its objects, items and vectors), counted
before and after in the report; it is idempotent, so a run cut short is finished by the next."""

from __future__ import annotations

import os
from typing import Optional

from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.parser.models import EventBridgeModel
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from eragraph.bootstrap.aws import LAMBDA_ENGINE, powertools
from eragraph.services import reindex
from eragraph.validation import describe_all

logger, metrics, tracer = powertools()
LAMBDA_ENGINE.cold_start("embedder", "ner", "summarizer")  # fails the init if a provider it uses is missing


class ReindexRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    stuck_after_seconds: Optional[float] = Field(
        None, ge=0, allow_inf_nan=False,
        description="Work older than this is stuck and repaired (default: ERAGRAPH_STUCK_AFTER_SECONDS)")
    tenant: Optional[str] = Field(None, min_length=1, max_length=63, pattern=r"^[a-z0-9][a-z0-9_-]*$",
                                  description="Audit this tenant only (default: every tenant)")
    delete_tenant: Optional[str] = Field(None, min_length=1, max_length=63, pattern=r"^[a-z0-9][a-z0-9_-]*$",
                                         description="Delete this tenant and everything it owns (no audit)")


class ScheduledReindex(EventBridgeModel):
    """The schedule's EventBridge event; its ``detail`` carries the request."""

    detail: ReindexRequest


class InvalidReindexEvent(ValueError):
    pass


def parse_event(event) -> ReindexRequest:
    event = {} if event is None else event
    envelope = isinstance(event, dict) and "detail-type" in event
    try:
        if envelope:
            return ScheduledReindex.model_validate(event).detail
        return ReindexRequest.model_validate(event)
    except ValidationError as exc:
        words = describe_all(exc.errors(), skip=(), known=ReindexRequest.model_fields, whole="the event")
        raise InvalidReindexEvent(f"invalid reindex event: {words}") from None


def stuck_after(request: ReindexRequest) -> float:
    if request.stuck_after_seconds is not None:
        return request.stuck_after_seconds
    return float(os.environ.get("ERAGRAPH_STUCK_AFTER_SECONDS", "3600"))


@logger.inject_lambda_context
@metrics.log_metrics
@tracer.capture_lambda_handler
def handler(event, context):
    try:
        request = parse_event(event)
    except InvalidReindexEvent as exc:
        logger.error("reindex event rejected", extra={"reason": "invalid-event", "error": str(exc)})
        raise
    if request.delete_tenant:
        report = LAMBDA_ENGINE.tenancy.delete(request.delete_tenant)
        logger.info("tenant deleted", extra={"report": report})
        metrics.add_metric("TenantsDeleted", MetricUnit.Count, 1)
        return report
    tenants = [request.tenant] if request.tenant else ["", *LAMBDA_ENGINE.tenancy.tenants()]
    reports = {}
    totals: dict[str, float] = {}
    for tenant in tenants:
        reports[tenant] = reindex.run(LAMBDA_ENGINE.get(tenant, register=False),
                                      stuck_after=stuck_after(request), drain=False)
        for name, value in reports[tenant]["metrics"].items():
            totals[name] = totals.get(name, 0) + value
    for name, value in totals.items():
        metrics.add_metric(name, MetricUnit.Count, value)
    report = dict(reports[tenants[0]])  # the first tenant's report at the top, as before tenants
    report["metrics"] = totals
    if len(tenants) > 1 or request.tenant:
        report["tenants"] = {t or "(default)": r for t, r in reports.items()}
    logger.info("reindex finished", extra={"report": report})
    return report
