"""The documents bucket's notification filter, as template.yaml writes it, applied by moto's S3:
under the default parameters both key layouts reach the ingest queue (docs/... for the default
tenant, tenants/<id>/... for tenant <id>); a narrower DocumentPrefix keeps the other out."""

from __future__ import annotations

import json
from urllib.parse import unquote_plus

import pytest
from aws_helpers import REGION

from contract.aws_factories import bucket_notifications, fake_credentials, load_template

TEMPLATE = load_template()
BUCKET = "eragraph-notify-docs"


@pytest.fixture
def s3_to_sqs():
    fake_credentials()
    import boto3
    from moto import mock_aws

    with mock_aws():
        s3 = boto3.client("s3", region_name=REGION)
        sqs = boto3.client("sqs", region_name=REGION)
        url = sqs.create_queue(QueueName="eragraph-notify-ingest")["QueueUrl"]
        arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        s3.create_bucket(Bucket=BUCKET)

        def configure(parameters: dict | None = None) -> None:
            s3.put_bucket_notification_configuration(
                Bucket=BUCKET, NotificationConfiguration=bucket_notifications(TEMPLATE, arn, parameters))

        def received() -> list[tuple[str, str]]:
            """(event name, key) of every S3 record on the queue (test events skipped)."""
            out = []
            while True:
                got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", [])
                if not got:
                    return sorted(out)
                for m in got:
                    for r in json.loads(m["Body"]).get("Records", []):
                        out.append((r["eventName"].split(":")[0], unquote_plus(r["s3"]["object"]["key"])))
                    sqs.delete_message(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"])

        yield s3, configure, received


KEYS = ["docs/a.txt", "tenants/acme/b.txt", "tenants/globex/sub/c.md"]


def test_default_parameters_notify_both_key_layouts(s3_to_sqs):
    s3, configure, received = s3_to_sqs
    configure()
    for key in KEYS:
        s3.put_object(Bucket=BUCKET, Key=key, Body=b"text")
    s3.delete_object(Bucket=BUCKET, Key="tenants/acme/b.txt")
    got = received()
    assert sorted(k for e, k in got if e == "ObjectCreated") == KEYS
    assert [k for e, k in got if e == "ObjectRemoved"] == ["tenants/acme/b.txt"]


def test_a_docs_prefix_keeps_tenant_keys_out(s3_to_sqs):
    """The single-tenant setting: the filter moto applies is the template's (this is what the
    default used to be, and why tenants' uploads were never ingested)."""
    s3, configure, received = s3_to_sqs
    configure({"DocumentPrefix": "docs/"})
    for key in KEYS:
        s3.put_object(Bucket=BUCKET, Key=key, Body=b"text")
    assert [k for _, k in received()] == ["docs/a.txt"]


def test_the_suffix_filter_applies_too(s3_to_sqs):
    s3, configure, received = s3_to_sqs
    configure({"DocumentSuffix": ".md"})
    for key in KEYS:
        s3.put_object(Bucket=BUCKET, Key=key, Body=b"text")
    assert [k for _, k in received()] == ["tenants/globex/sub/c.md"]


def test_the_default_prefix_is_a_prefix_of_both_layouts():
    from eragraph.domain.tenants import KEY_PREFIX

    prefix = TEMPLATE["Parameters"]["DocumentPrefix"]["Default"]
    assert "docs/a.txt".startswith(prefix) and f"{KEY_PREFIX}acme/x.txt".startswith(prefix)
    # the EventBridge mode's wildcard is built from the same parameters
    rule = TEMPLATE["Resources"]["DocumentEventsRule"]["Properties"]["EventPattern"]["detail"]["object"]["key"]
    assert rule == [{"wildcard": {"Fn::Sub": "${DocumentPrefix}*${DocumentSuffix}"}}]
