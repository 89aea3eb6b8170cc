"""Fixtures of the AWS tests (defined in aws_helpers, shared with the test modules)."""

from aws_helpers import aws_engine, lambda_context  # noqa: F401
