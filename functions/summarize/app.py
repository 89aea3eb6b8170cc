"""SegmentsAffected messages (FIFO, grouped per layer) -> reconcile that layer."""

import json

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.batch import SqsFifoPartialProcessor, process_partial_response

from eragraph.bootstrap.aws import LAMBDA_ENGINE
from eragraph.domain.model import SegmentsAffected
from eragraph.services import resummarize

logger, metrics, tracer = Logger(), Metrics(), Tracer()
# FIFO: a failed record fails the rest of its message group (layer) in this batch, so a layer's
# messages are never handled out of order; other layers go on.
processor = SqsFifoPartialProcessor(skip_group_on_error=True)


def record_handler(record) -> None:
    message = SegmentsAffected.from_dict(json.loads(record.body))  # a poison body raises -> failure item
    engine = LAMBDA_ENGINE.get()
    report = resummarize.reconcile(engine, message.layer)
    engine.vectors.flush()
    for layer, n in report.segments_resummarized.items():
        metrics.add_metric(f"SegmentsResummarizedLayer{layer}", MetricUnit.Count, n)
    metrics.add_metric("SummarizeCalls", MetricUnit.Count, report.cost.summarize_calls)


@logger.inject_lambda_context
@metrics.log_metrics
@tracer.capture_lambda_handler
def handler(event, context):
    return process_partial_response(event=event, record_handler=record_handler,
                                    processor=processor, context=context)
