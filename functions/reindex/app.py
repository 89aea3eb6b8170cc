"""The reindex (services.reindex: audit and repair), in pieces that scale with the tenants
(services.reindex_schedule). The schedule (or a direct ``{}``) fans out: one TenantAudit message
per tenant on the reindex FIFO queue (adapters.aws.reindex_queue), and the TenantsNotAudited24h /
OldestAuditAgeSeconds metrics. The queue's records each audit one tenant until the Lambda
deadline minus a margin, then send a continuation saying where to resume; a finished audit
records its time. ``{"tenant": "acme"}`` audits that tenant whole now; ``{"delete_tenant":
"acme"}`` removes all it owns (bootstrap.tenancy), idempotent. A bad event or message is an
error naming the field and the rule, before any work."""

from __future__ import annotations

from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.batch import SqsFifoPartialProcessor, process_partial_response

from eragraph.adapters.aws.reindex_event import InvalidReindexEvent, ReindexRequest, parse_event, run_id  # noqa: F401
from eragraph.adapters.aws.reindex_queue import audit_message, is_sqs_event, parse_body
from eragraph.bootstrap.aws import LAMBDA_ENGINE, powertools, priced, reindex_queue
from eragraph.config import ProcessSettings
from eragraph.services import reindex, reindex_schedule

logger, metrics, tracer = powertools()
LAMBDA_ENGINE.cold_start("embedder", "ner", "summarizer")  # fails the init if a provider it uses is missing
processor = SqsFifoPartialProcessor(skip_group_on_error=True)  # one group per tenant
processor.raise_on_entire_batch_failure = False  # BatchSize 1: a poison record is a failure item, redriven to the DLQ


def stuck_after(request: ReindexRequest) -> float:
    if request.stuck_after_seconds is not None:
        return request.stuck_after_seconds
    return ProcessSettings.from_env().stuck_after_seconds


def publish(report: dict) -> None:
    for name, value in report["metrics"].items():
        metrics.add_metric(name, MetricUnit.Seconds if name.endswith("Seconds") else MetricUnit.Count, value)


def audit_record(record, lambda_context=None) -> None:
    message = parse_body(record.body)  # a poison body raises -> a failure item, then the DLQ
    tenant, tenancy = message.tenant, LAMBDA_ENGINE.tenancy
    if not tenancy.exists(tenant):
        logger.warning("dropped: the tenant was deleted", extra={"reason": "tenant-deleted", "tenant": tenant})
        return
    remaining = lambda_context.get_remaining_time_in_millis() / 1000.0 if lambda_context is not None else None
    report = reindex_schedule.audit_piece(
        LAMBDA_ENGINE.get(tenant, register=False), tenant, message.stuck_after_seconds, message.audit_progress(),
        reindex_schedule.deadline(remaining), record=tenancy.registry().record_audit,
        send=lambda p: reindex_queue().send([audit_message(tenant, message.stuck_after_seconds, p)]))
    publish(report)
    metrics.add_metric("TenantAuditsContinued" if "resume" in report else "TenantAuditsCompleted", MetricUnit.Count, 1)
    logger.info("tenant audit " + ("continued" if "resume" in report else "finished"), extra={"report": report})


@logger.inject_lambda_context
@metrics.log_metrics
@priced(metrics, logger)  # the invocation's Bedrock spend, priced from the ledger's table
@tracer.capture_lambda_handler
def handler(event, context):
    if is_sqs_event(event):
        return process_partial_response(event=event, record_handler=audit_record, processor=processor, context=context)
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
    if request.tenant:
        report = reindex.run_tenants(lambda tenant: LAMBDA_ENGINE.get(tenant, register=False), [request.tenant],
                                     stuck_after(request), named=True)
    else:
        wait = stuck_after(request)
        report = reindex_schedule.fan_out(LAMBDA_ENGINE.tenancy.registry(), run_id(event, context.aws_request_id),
                                          lambda audits: reindex_queue().send([audit_message(t, wait, p) for t, p in audits]))
    publish(report)
    logger.info("reindex finished" if request.tenant else "reindex fanned out", extra={"report": report})
    return report
