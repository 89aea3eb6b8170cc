"""EventBridge schedule (or a direct invoke) -> audit and repair (services.reindex).

The event (adapters.aws.reindex_event) is a ReindexRequest, directly or as the ``detail`` of
the schedule's EventBridge event; a bad one is an error naming the field and the rule, before
any work. An absent ``stuck_after_seconds`` falls back to ERAGRAPH_STUCK_AFTER_SECONDS
(config.ProcessSettings); 0 is 0 (everything counts as stuck).

Tenants: the schedule audits the default tenant and every registered tenant, each in its own
engine (``{"tenant": "acme"}`` audits one). ``{"delete_tenant": "acme"}`` removes everything
the tenant owns (bootstrap.tenancy.Tenancy.delete: its objects, items and vectors), counted
before and after in the report; it is idempotent, so a run cut short is finished by the next."""

from __future__ import annotations

from aws_lambda_powertools.metrics import MetricUnit

from eragraph.adapters.aws.reindex_event import InvalidReindexEvent, ReindexRequest, parse_event  # noqa: F401
from eragraph.bootstrap.aws import LAMBDA_ENGINE, powertools
from eragraph.config import ProcessSettings
from eragraph.services import reindex

logger, metrics, tracer = powertools()
LAMBDA_ENGINE.cold_start("embedder", "ner", "summarizer")  # fails the init if a provider it uses is missing


def stuck_after(request: ReindexRequest) -> float:
    if request.stuck_after_seconds is not None:
        return request.stuck_after_seconds
    return ProcessSettings.from_env().stuck_after_seconds


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
    report = reindex.run_tenants(lambda tenant: LAMBDA_ENGINE.get(tenant, register=False), tenants,
                                 stuck_after(request), named=bool(request.tenant))
    for name, value in report["metrics"].items():
        metrics.add_metric(name, MetricUnit.Count, value)
    logger.info("reindex finished", extra={"report": report})
    return report
