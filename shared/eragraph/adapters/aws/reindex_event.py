"""The reindex function's event, validated with pydantic on powertools' EventBridge model: a
direct invoke is ReindexRequest itself (``{"stuck_after_seconds": 600}``, or ``{}``); the
schedule's event is an EventBridge envelope whose ``detail`` is one (the schedule sends
``{}``). Unknown keys, wrong types or a negative value are an error naming the field and the
rule (eragraph.domain.validation), before any work."""

from __future__ import annotations

from typing import Optional

from aws_lambda_powertools.utilities.parser.models import EventBridgeModel
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ...domain.tenants import ID_PATTERN, MAX_LENGTH
from ...domain.validation import describe_all

TENANT_ID = f"^{ID_PATTERN}$"


class ReindexRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    stuck_after_seconds: Optional[float] = Field(
        None, ge=0, allow_inf_nan=False,
        description="Work older than this is stuck and repaired (default: ERAGRAPH_STUCK_AFTER_SECONDS)")
    tenant: Optional[str] = Field(None, min_length=1, max_length=MAX_LENGTH, pattern=TENANT_ID,
                                  description="Audit this tenant only (default: every tenant)")
    delete_tenant: Optional[str] = Field(None, min_length=1, max_length=MAX_LENGTH, pattern=TENANT_ID,
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


def run_id(event, request_id: str) -> str:
    """The id of a reindex run: the schedule's EventBridge event id (the same on its retries, so
    the audits they queue are deduplicated), else the invocation's request id."""
    if isinstance(event, dict) and "detail-type" in event and isinstance(event.get("id"), str):
        return event["id"]
    return request_id
