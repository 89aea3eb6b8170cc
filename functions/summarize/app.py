"""SegmentsAffected messages (FIFO, grouped per tenant, layer and code-prefix shard) -> reconcile
the part of the layer they name, in the engine of the tenant the message names (adapters.aws.queue_sqs). A run that nears its deadline stops between summaries (all made
so far are stored) and sends the rest of its work as a new message."""

import json

from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.batch import SqsFifoPartialProcessor, process_partial_response

from eragraph.adapters.aws.queue_sqs import tenant_of
from eragraph.bootstrap.aws import LAMBDA_ENGINE, powertools, priced
from eragraph.domain.model import SegmentsAffected
from eragraph.services import resummarize

logger, metrics, tracer = powertools()
LAMBDA_ENGINE.cold_start("embedder", "summarizer")  # fails the init if a provider it uses is missing
# FIFO: a failed record fails the rest of its message group (layer and shard) in this batch, so a
# shard's messages are never handled out of order; other shards go on.
processor = SqsFifoPartialProcessor(skip_group_on_error=True)


def record_handler(record, lambda_context=None) -> None:
    body = json.loads(record.body)
    message = SegmentsAffected.from_dict(body)  # a poison body raises -> failure item
    tenant = tenant_of(body)
    if not LAMBDA_ENGINE.tenancy.exists(tenant):
        logger.warning("dropped: the message's tenant was deleted", extra={"reason": "tenant-deleted", "tenant": tenant})
        return
    engine = LAMBDA_ENGINE.get(tenant, register=False)
    context = lambda_context  # powertools passes the Lambda context: its remaining time is the deadline
    deadline = None if context is None else (lambda: context.get_remaining_time_in_millis() / 1000.0)
    try:
        report = resummarize.reconcile(engine, message, deadline=deadline)
    except resummarize.DeadlineReached as stop:
        engine.vectors.flush()
        logger.info("stopped before the deadline; the rest is re-queued", extra={"reason": str(stop)})
        engine.queue.send([resummarize.continuation(message, stop)])
        metrics.add_metric("ReconcilesContinued", MetricUnit.Count, 1)
        return
    engine.vectors.flush()
    for layer, n in report.segments_resummarized.items():
        metrics.add_metric(f"SegmentsResummarizedLayer{layer}", MetricUnit.Count, n)
    metrics.add_metric("SummarizeCalls", MetricUnit.Count, report.cost.summarize_calls)


@logger.inject_lambda_context
@metrics.log_metrics
@priced(metrics, logger)  # the invocation's Bedrock spend, priced from the ledger's table
@tracer.capture_lambda_handler
def handler(event, context):
    return process_partial_response(event=event, record_handler=record_handler,
                                    processor=processor, context=context)
