"""The Lambda side of the tests: the real event JSON of tests/events, the handlers loaded from
functions/*/app.py, and a Lambda context. No AWS client is touched here: a handler runs on
whatever engine ``eragraph.bootstrap.aws.LAMBDA_ENGINE`` holds (moto's or a local one).

A loaded handler is held to Lambda's payload limits, as the service holds an invocation: an
event over 6 MB (a synchronous invocation: API Gateway, an SQS event source mapping, Bedrock)
or over 256 KB (an asynchronous one: S3 notifications, EventBridge) is refused with
``RequestEntityTooLargeException``; a synchronous invocation's response over 6 MB fails with
``Function.ResponseSizeTooLarge``. Both raise ``LambdaRefused``. An S3 ObjectRemoved record in the
event (direct, or in an SQS message's body) must be one S3 would send (s3_event_shape)."""

from __future__ import annotations

import functools
import importlib.util
import json
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

import iam_judge
from eragraph.entrypoints.http.lambda_event import LocalContext

ROOT = Path(__file__).resolve().parents[1]
EVENTS = ROOT / "tests" / "events"


def event(name: str) -> dict:
    return json.loads((EVENTS / name).read_text())


SYNC_PAYLOAD = 6 * 1024 * 1024  # request and response of a synchronous invocation
ASYNC_PAYLOAD = 256 * 1024  # the event of an asynchronous one (AWS allows 1 MB since 2025; S3's events are far smaller)
RESPONSE_PAYLOAD = 6 * 1024 * 1024


class LambdaRefused(Exception):
    """What Lambda answers instead of running the handler (``code``: its error type)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code


def asynchronous(event: dict) -> bool:
    """Whether the service that sends ``event`` invokes asynchronously (S3 notifications and
    EventBridge do; API Gateway, SQS event source mappings and Bedrock wait for the answer)."""
    records = event.get("Records") if isinstance(event, dict) else None
    if records and isinstance(records, list) and isinstance(records[0], dict):
        return records[0].get("eventSource") == "aws:s3"
    return isinstance(event, dict) and "detail-type" in event and "source" in event


def payload_bytes(value) -> int:
    return len(json.dumps(value, separators=(",", ":")).encode("utf-8"))


def check_invocation(event) -> None:
    from s3_event_shape import check_removed, removed_records

    for record in removed_records(event):
        check_removed(record)
    limit = ASYNC_PAYLOAD if asynchronous(event) else SYNC_PAYLOAD
    size = payload_bytes(event)
    if size > limit:
        raise LambdaRefused("RequestEntityTooLargeException",
                            f"Request must be smaller than {limit} bytes for the "
                            f"{'InvokeAsync' if limit == ASYNC_PAYLOAD else 'Invoke'} operation ({size} bytes)")


def check_response(event, response) -> None:
    if asynchronous(event) or response is None:
        return
    size = payload_bytes(response)
    if size > RESPONSE_PAYLOAD:
        raise LambdaRefused("Function.ResponseSizeTooLarge",
                            f"Response payload size exceeded maximum allowed payload size ({RESPONSE_PAYLOAD} bytes): "
                            f"{size} bytes")


def held_to_limits(handler):
    """``handler`` as Lambda runs it: its event and its answer within the payload limits."""
    if getattr(handler, "lambda_limits", False):
        return handler

    @functools.wraps(handler)
    def invoke(event, context):
        check_invocation(event)
        response = handler(event, context)
        check_response(event, response)
        return response

    invoke.lambda_limits = True
    return invoke


def load_handler(name: str):
    module_name = f"eragraph_fn_{name}_app"
    if module_name not in sys.modules:
        spec = importlib.util.spec_from_file_location(module_name, ROOT / "functions" / name / "app.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[module_name] = module
        with iam_judge.running_as(name):  # its cold start is the function's too
            spec.loader.exec_module(module)
        if callable(getattr(module, "handler", None)):
            module.handler = held_to_limits(module.handler)
        _flush_one_at_a_time(module)
        iam_judge.attach(name, module)  # its invocations' AWS calls are judged against its role
    return sys.modules[module_name]


_FLUSHING = threading.Lock()


def _flush_one_at_a_time(module) -> None:
    """A Lambda runs one invocation at a time; tests that run a handler on several threads at
    once (the concurrent consumers) share its powertools Metrics, whose flush checks for metrics
    and then serializes them: another thread's flush between the two empties the set and the
    serialization raises. The flushes are held under one lock, as one process's would not overlap."""
    provider = getattr(getattr(module, "metrics", None), "provider", None)
    flush = getattr(provider, "flush_metrics", None)
    if flush is None:
        return

    def flush_metrics(*args, **kwargs):
        with _FLUSHING:
            return flush(*args, **kwargs)

    provider.flush_metrics = flush_metrics


@dataclass
class LambdaContext(LocalContext):
    """The context the handlers read (eragraph serve's), with a Lambda's name and a settable
    remaining time."""

    function_name: str = "eragraph-test"
    memory_limit_in_mb: int = 1024
    invoked_function_arn: str = "arn:aws:lambda:us-east-1:123456789012:function:eragraph-test"
    aws_request_id: str = "c6af9ac6-7b61-11e6-9a41-93e812345678"
    remaining_ms: int = 60_000

    def get_remaining_time_in_millis(self) -> int:
        return self.remaining_ms
