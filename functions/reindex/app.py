"""EventBridge schedule (or a direct invoke) -> audit and repair (services.reindex)."""

import os

from aws_lambda_powertools.metrics import MetricUnit

from eragraph.bootstrap.aws import LAMBDA_ENGINE, powertools
from eragraph.services import reindex

logger, metrics, tracer = powertools()
LAMBDA_ENGINE.cold_start("embedder", "ner", "summarizer")  # fails the init if a provider it uses is missing


@logger.inject_lambda_context
@metrics.log_metrics
@tracer.capture_lambda_handler
def handler(event, context):
    stuck_after = float((event or {}).get("stuck_after_seconds")
                    or os.environ.get("ERAGRAPH_STUCK_AFTER_SECONDS", "3600"))
    report = reindex.run(LAMBDA_ENGINE.get(), stuck_after=stuck_after, drain=False)
    for name, value in report["metrics"].items():
        metrics.add_metric(name, MetricUnit.Count, value)
    logger.info("reindex finished", extra={"report": report})
    return report
