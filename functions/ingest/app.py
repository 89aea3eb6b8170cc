"""S3 document events (delivered through the ingest SQS queue, or directly) -> ingest/remove."""

import json
from urllib.parse import unquote_plus

from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response

from eragraph.bootstrap.aws import LAMBDA_ENGINE, powertools
from eragraph.domain import sequencer
from eragraph.domain.model import BadInputError
from eragraph.domain.text import decode_document
from eragraph.services import ingest, remove

logger, metrics, tracer = powertools()
LAMBDA_ENGINE.cold_start("embedder", "ner")  # fails the init if a provider it uses is missing
processor = BatchProcessor(event_type=EventType.SQS)


def _version(record: dict, source: str) -> str:
    """The event's S3 sequencer (orders the events of one key); "" when absent or malformed."""
    try:
        return sequencer.normalize(record["s3"]["object"].get("sequencer"))
    except ValueError:
        logger.warning("ignoring a malformed sequencer", extra={"source": source})
        return ""


def handle_s3_event(event: dict) -> dict:
    """One S3 notification (possibly several records); s3:TestEvent is ignored. Events of one
    key may arrive in any order and more than once: each carries its ``sequencer``, and an
    event older than what the store holds for its key (document or tombstone) is a no-op."""
    counts = {"ingested": 0, "removed": 0, "rejected": 0, "stale": 0}
    if event.get("Event") == "s3:TestEvent":
        return counts
    engine = LAMBDA_ENGINE.get()
    for record in event.get("Records", []):
        bucket, key = record["s3"]["bucket"]["name"], unquote_plus(record["s3"]["object"]["key"])
        source = f"s3://{bucket}/{key}"
        version = _version(record, source)
        if record["eventName"].startswith("ObjectRemoved"):
            report = remove.remove(engine, [source], version=version)
            counts["removed"] += report.documents_removed
            counts["stale"] += report.documents_stale
            continue
        try:
            data = engine.blobs.get(key)
        except KeyError:  # deleted since: the delete's own event decides
            logger.info("object gone before its put event was handled", extra={"source": source})
            counts["stale"] += 1
            continue
        try:
            text = decode_document(data, key, engine.settings.max_document_bytes)
        except BadInputError as exc:  # a bad file is reported, never retried forever
            logger.error("document rejected", extra={"source": source, "error": str(exc)})
            counts["rejected"] += 1
            continue
        report = ingest.ingest(engine, [ingest.SourceDoc(source=source, text=text, title=key.rsplit("/", 1)[-1],
                                                         version=version)])
        counts["ingested"] += report.documents_added + report.documents_replaced
        counts["stale"] += report.documents_stale
    metrics.add_metric("DocumentsIngested", MetricUnit.Count, counts["ingested"])
    metrics.add_metric("DocumentsRemoved", MetricUnit.Count, counts["removed"])
    metrics.add_metric("DocumentsRejected", MetricUnit.Count, counts["rejected"])
    metrics.add_metric("StaleEventsIgnored", MetricUnit.Count, counts["stale"])
    return counts


def record_handler(record) -> dict:
    return handle_s3_event(json.loads(record.body))


@logger.inject_lambda_context
@metrics.log_metrics
@tracer.capture_lambda_handler
def handler(event, context):
    records = event.get("Records") or [{}]
    if "Event" in event or records[0].get("eventSource") == "aws:s3":
        return handle_s3_event(event)  # a direct S3 -> Lambda notification
    return process_partial_response(event=event, record_handler=record_handler,
                                    processor=processor, context=context)
