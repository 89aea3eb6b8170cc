"""Fixtures of the AWS tests (defined in aws_helpers, shared with the test modules)."""

import os

from aws_helpers import (atomic_requests, audit_queue, aws_engine, few_partitions, lambda_context,  # noqa: F401
                         small_graph_store)

# powertools Metrics read the namespace when a handler module is imported, which a template
# test may do before any fixture sets the environment (the template sets it on every function)
os.environ.setdefault("POWERTOOLS_METRICS_NAMESPACE", "EragraphTest")
