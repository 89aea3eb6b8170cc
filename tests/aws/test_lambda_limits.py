"""Lambda's payload limits and API Gateway's, as the harness holds them (lambda_support,
fake_gateway), and the ObjectRemoved records the tests build, held to the shape S3 sends
(s3_event_shape). Each limit is shown refusing with the service's answer, and the largest
request that passes."""

from __future__ import annotations

import copy
import json
import re
import time

import pytest
import requests
from fake_gateway import FakeHttpApi
from lambda_support import (ASYNC_PAYLOAD, SYNC_PAYLOAD, LambdaRefused, event, held_to_limits, load_handler,
                            payload_bytes)
from s3_event_shape import check_removed, removed_records

MB = 1024 * 1024


def echo(ev, context):
    return {"statusCode": 200, "body": json.dumps({"left_ms": context.get_remaining_time_in_millis()})}


def padded(ev: dict, size: int) -> dict:
    """``ev`` with a field that brings its JSON to ``size`` bytes."""
    out = copy.deepcopy(ev)
    out["pad"] = ""
    out["pad"] = "x" * (size - payload_bytes(out))
    assert payload_bytes(out) == size
    return out


def test_a_synchronous_event_takes_6_mb():
    invoke = held_to_limits(lambda ev, ctx: {"ok": True})
    api = event("api_query_valid.json")
    assert invoke(padded(api, SYNC_PAYLOAD), None) == {"ok": True}
    with pytest.raises(LambdaRefused) as refused:
        invoke(padded(api, SYNC_PAYLOAD + 1), None)
    assert refused.value.code == "RequestEntityTooLargeException"
    sqs = event("sqs_ingest_batch.json")  # an event source mapping invokes synchronously
    with pytest.raises(LambdaRefused):
        invoke(padded(sqs, SYNC_PAYLOAD + 1), None)


def test_an_asynchronous_event_takes_256_kb():
    invoke = held_to_limits(lambda ev, ctx: None)
    for name in ("s3_put.json", "eventbridge_object_created.json"):
        invoke(padded(event(name), ASYNC_PAYLOAD), None)
        with pytest.raises(LambdaRefused) as refused:
            invoke(padded(event(name), ASYNC_PAYLOAD + 1), None)
        assert refused.value.code == "RequestEntityTooLargeException"


def test_a_synchronous_answer_takes_6_mb():
    size = {"n": 0}
    invoke = held_to_limits(lambda ev, ctx: padded({}, size["n"]))
    size["n"] = SYNC_PAYLOAD
    invoke(event("api_health.json"), None)
    size["n"] = SYNC_PAYLOAD + 1
    with pytest.raises(LambdaRefused) as refused:
        invoke(event("api_health.json"), None)
    assert refused.value.code == "Function.ResponseSizeTooLarge"
    invoke(event("s3_put.json"), None)  # an asynchronous invocation's answer goes nowhere


def test_every_function_handler_is_held_to_the_limits(tmp_path, monkeypatch):
    """load_handler wraps each function's handler (a function folder of its own here: the real
    ones take most of a minute to import)."""
    import sys

    import lambda_support

    (tmp_path / "functions" / "tiny").mkdir(parents=True)
    (tmp_path / "functions" / "tiny" / "app.py").write_text("def handler(event, context):\n    return event\n")
    monkeypatch.setattr(lambda_support, "ROOT", tmp_path)
    try:
        handler = load_handler("tiny").handler
        assert handler({"a": 1}, None) == {"a": 1}
        with pytest.raises(LambdaRefused):
            handler(padded(event("api_health.json"), SYNC_PAYLOAD + 1), None)
    finally:
        sys.modules.pop("eragraph_fn_tiny_app", None)


@pytest.fixture
def gateway():
    def serve(handler):
        api = FakeHttpApi(handler, mode="jwt", tokens={"t": {"sub": "someone"}})
        url = api.start()
        apis.append(api)
        return api, url

    apis: list[FakeHttpApi] = []
    yield serve
    for api in apis:
        api.stop()


def post(url: str, body: bytes) -> requests.Response:
    return requests.post(url + "/query", data=body, headers={"authorization": "Bearer t"}, timeout=60)


def test_the_gateway_takes_10_mb_and_lambda_6(gateway):
    ran: list[int] = []

    def handler(ev, ctx):
        ran.append(len(ev.get("body") or ""))
        return echo(ev, ctx)

    _, url = gateway(handler)
    too_big = post(url, b"x" * (10 * MB + 1))
    assert (too_big.status_code, too_big.json()) == (413, {"message": "Request Entity Too Large"})
    # under the gateway's 10 MB, over Lambda's 6 MB once in the event: the integration fails
    assert post(url, b"x" * (7 * MB)).status_code == 413
    assert ran == []  # neither reached the function
    assert post(url, b"x" * (5 * MB)).status_code == 200 and ran == [5 * MB]


def test_an_answer_over_6_mb_is_the_gateways_500(gateway):
    _, url = gateway(lambda ev, ctx: {"statusCode": 200, "body": "y" * (6 * MB + 1)})
    answer = post(url, b"{}")
    assert (answer.status_code, answer.json()) == (500, {"message": "Internal Server Error"})


def test_the_gateway_waits_29_seconds_and_the_handler_knows(gateway):
    api, url = gateway(echo)
    assert api.timeout_s == 29.0
    assert post(url, b"{}").json() == {"left_ms": 29_000}

    def slow(ev, ctx):
        time.sleep(0.3)
        return echo(ev, ctx)

    api, url = gateway(slow)
    api.timeout_s = 0.1  # the same rule as 29 s, without waiting for it
    answer = post(url, b"{}")
    assert (answer.status_code, answer.json()) == (503, {"message": "Service Unavailable"})


# ----- S3 ObjectRemoved notifications -----
def test_the_removal_event_file_is_one_s3_sends():
    [record] = removed_records(event("s3_delete.json"))
    check_removed(record)
    wrapped = {"Records": [{"eventSource": "aws:sqs", "body": json.dumps(event("s3_delete.json"))}]}
    assert removed_records(wrapped) == [record]


@pytest.mark.parametrize("change, what", [
    (lambda o: o.update(size=120), "no ['size']"),
    (lambda o: o.update(eTag="0123"), "no ['eTag']"),
    (lambda o: o.update(key="docs/Field Notes (draft).txt"), "URL-encoded"),
    (lambda o: o.update(sequencer="not-hex"), "sequencer"),
    (lambda o: o.pop("sequencer"), "sequencer"),
])
def test_a_removal_s3_would_not_send_is_refused(change, what):
    ev = event("s3_delete.json")
    change(ev["Records"][0]["s3"]["object"])
    with pytest.raises(AssertionError, match=re.escape(what)):
        check_removed(ev["Records"][0])
    with pytest.raises(AssertionError, match=re.escape(what)):  # at the handler's door, in an SQS message too
        held_to_limits(lambda e, c: None)({"Records": [{"eventSource": "aws:sqs", "body": json.dumps(ev)}]}, None)


def test_a_delete_marker_names_its_version():
    ev = event("s3_delete.json")
    ev["Records"][0]["eventName"] = "ObjectRemoved:DeleteMarkerCreated"
    with pytest.raises(AssertionError, match="versionId"):
        check_removed(ev["Records"][0])
    ev["Records"][0]["s3"]["object"]["versionId"] = "1QW9g1Z99LUNbvaaYVpW9xDlOLU.qxgF"
    check_removed(ev["Records"][0])


def test_moto_notifies_a_removal_as_s3_does():
    """moto's own notification (S3 -> SQS), as the ingest function reads it: S3's record."""
    import boto3
    from moto import mock_aws

    from contract.aws_factories import REGION, fake_credentials

    fake_credentials()
    with mock_aws():
        s3, sqs = boto3.client("s3", region_name=REGION), boto3.client("sqs", region_name=REGION)
        url = sqs.create_queue(QueueName="notify")["QueueUrl"]
        arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        s3.create_bucket(Bucket="notified-docs")
        s3.put_bucket_notification_configuration(Bucket="notified-docs", NotificationConfiguration={"QueueConfigurations": [
            {"QueueArn": arn, "Events": ["s3:ObjectCreated:*", "s3:ObjectRemoved:*"]}]})
        s3.put_object(Bucket="notified-docs", Key="docs/light house (1).txt", Body=b"x")
        s3.delete_object(Bucket="notified-docs", Key="docs/light house (1).txt")
        bodies = [json.loads(m["Body"]) for m in sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)["Messages"]]
    created, removed = [b["Records"][0] for b in bodies if "Records" in b]
    check_removed(removed)
    assert removed["s3"]["object"]["key"] == "docs/light+house+%281%29.txt"
    assert {"size", "eTag"} <= set(created["s3"]["object"]) and created["s3"]["object"]["sequencer"] < \
        removed["s3"]["object"]["sequencer"]
