"""S3 document events -> ingest/remove: adapters.aws.s3_events parses the envelopes (S3, SNS,
EventBridge; direct or in SQS messages) into ObjectChanges, services.object_events applies them.
An unusable record is logged once with its reason and is a batch-item failure (SQS retries it,
then the DLQ's alarm fires); in a direct invocation it fails the invocation (UnusableEvent). A
document that cannot be read counts in DocumentsRejected, never as a failure."""

from __future__ import annotations

from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.data_classes import SQSRecord

from eragraph.adapters.aws.s3_events import EVENTBRIDGE_TYPES, decode_key, is_sqs_batch, parse_changes  # noqa: F401
from eragraph.bootstrap.aws import LAMBDA_ENGINE, powertools, priced
from eragraph.domain.object_changes import UnusableRecord
from eragraph.services.object_events import METRICS, ObjectEvents, new_counts

logger, metrics, tracer = powertools()
LAMBDA_ENGINE.cold_start("embedder", "ner")  # fails the init if a provider it uses is missing
processor = BatchProcessor(event_type=EventType.SQS)
events = ObjectEvents(LAMBDA_ENGINE, logger)


class UnusableEvent(RuntimeError):
    """A direct invocation carried unusable records (each already logged)."""


def _publish(counts: dict) -> None:
    for name, metric in METRICS.items():
        metrics.add_metric(metric, MetricUnit.Count, counts[name])


def handle_s3_event(event: dict) -> dict:
    """A notification invoked directly (S3 -> Lambda, or an EventBridge rule targeting the function)."""
    counts = new_counts()
    unusable = events.apply(parse_changes(event), counts, delivery="direct")
    _publish(counts)
    if unusable:
        raise UnusableEvent(f"{unusable} unusable record(s) in a direct invocation (see the log)")
    return counts


_BATCH_COUNTS = new_counts()


def record_handler(record: SQSRecord) -> None:
    where = {"message_id": record.message_id, "delivery": "sqs"}
    try:
        payload = record.json_body
    except ValueError as exc:
        payload = UnusableRecord("not-json", f"the SQS message body is not JSON ({exc})")
        events.apply(payload, _BATCH_COUNTS, **where)
        raise payload from None
    try:
        unusable = events.apply(parse_changes(payload), _BATCH_COUNTS, **where)
    except Exception as exc:  # a transient fault (throttling, a timeout...): SQS retries it
        logger.exception("event record failed", extra={"reason": "error", "error": repr(exc), **where})
        raise
    if unusable:
        raise UnusableRecord("unusable", f"{unusable} unusable record(s) in the message")


@logger.inject_lambda_context
@metrics.log_metrics
@priced(metrics, logger)  # the invocation's Bedrock spend, priced from the ledger's table
@tracer.capture_lambda_handler
def handler(event, context):
    if not is_sqs_batch(event):
        return handle_s3_event(event)
    _BATCH_COUNTS.update(new_counts())
    try:
        return process_partial_response(event=event, record_handler=record_handler,
                                        processor=processor, context=context)
    finally:
        _publish(_BATCH_COUNTS)
