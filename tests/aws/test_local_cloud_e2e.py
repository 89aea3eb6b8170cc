"""Local-cloud end to end: moto's server on 127.0.0.1 with a real S3 -> SQS notification.
Put an object, receive its notification, run the ingest handler on it, drain the summarize
FIFO queue through the summarize handler, query through the API handler; re-deliver the
notification (no duplicate chunks); delete the object and see it gone from the results."""

from __future__ import annotations

import json

import pytest
from aws_helpers import (BUCKET, REGION, aws_environment, fake_credentials, fake_opensearch_module, identity_from,
                         load_handler)

from contract.aws_factories import create_graph_table

TEXT = ("The lighthouse keeper on Marrow Island logs every passing ship. "
        "His oldest logbook names the schooner Quillfeather as the last ship of the season. ")
OTHER = ("Bakers in the valley roast chestnuts and bake rye bread with caraway and butter. "
         "The bakery oven is fired with beech wood every morning before dawn. ")


@pytest.fixture
def cloud(monkeypatch):
    fake_credentials()
    import boto3
    from moto.server import ThreadedMotoServer

    from eragraph.bootstrap.aws import LAMBDA_ENGINE, build_aws_engine

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    try:
        s3 = boto3.client("s3", region_name=REGION, endpoint_url=endpoint)
        sqs = boto3.client("sqs", region_name=REGION, endpoint_url=endpoint)
        ddb = boto3.client("dynamodb", region_name=REGION, endpoint_url=endpoint)
        s3.create_bucket(Bucket=BUCKET)
        # the caller the API events name (assumed-role/reader), under TenantPrincipalPath: the
        # query role may read its tags (untagged: the default tenant, TenantRequired false)
        boto3.client("iam", region_name=REGION, endpoint_url=endpoint).create_role(
            Path="/eragraph/", RoleName="reader", AssumeRolePolicyDocument="{}")
        notify_url = sqs.create_queue(QueueName="eragraph-test-ingest")["QueueUrl"]
        notify_arn = sqs.get_queue_attributes(QueueUrl=notify_url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        s3.put_bucket_notification_configuration(Bucket=BUCKET, NotificationConfiguration={"QueueConfigurations": [
            {"QueueArn": notify_arn, "Events": ["s3:ObjectCreated:*", "s3:ObjectRemoved:*"]}]})
        summarize_url = sqs.create_queue(QueueName="eragraph-test-summarize.fifo",
                                         Attributes={"FifoQueue": "true", "VisibilityTimeout": "30"})["QueueUrl"]
        env = aws_environment(summarize_url, endpoint=endpoint)
        create_graph_table(ddb, env["ERAGRAPH_TABLE"])
        for k, v in env.items():
            monkeypatch.setenv(k, v)
        identity_from(env, monkeypatch)  # a query handler loaded by an earlier test read another environment
        engine = build_aws_engine(environ=env, opensearch_client=fake_opensearch_module().FakeOpenSearch(),
                                  refresh=True)
        LAMBDA_ENGINE.set(engine)
        yield {"s3": s3, "sqs": sqs, "notify_url": notify_url, "summarize_url": summarize_url, "engine": engine}
    finally:
        LAMBDA_ENGINE.set(None)
        server.stop()


def sqs_event(messages, arn):
    return {"Records": [{"messageId": m["MessageId"], "receiptHandle": m["ReceiptHandle"], "body": m["Body"],
                         "attributes": m.get("Attributes", {}), "messageAttributes": {},
                         "md5OfBody": m["MD5OfBody"], "eventSource": "aws:sqs", "eventSourceARN": arn,
                         "awsRegion": REGION} for m in messages]}


def receive(cloud, url, wanted=1):
    got = []
    for _ in range(20):
        got += cloud["sqs"].receive_message(QueueUrl=url, MaxNumberOfMessages=10, AttributeNames=["All"],
                                            WaitTimeSeconds=0).get("Messages", [])
        if len(got) >= wanted:
            break
    return got


def run_lambda(cloud, url, handler, ctx, arn):
    """What the SQS event source mapping does: deliver a batch, delete what succeeded."""
    messages = receive(cloud, url)
    if not messages:
        return 0
    out = handler(sqs_event(messages, arn), ctx)
    failed = {f["itemIdentifier"] for f in out["batchItemFailures"]}
    assert not failed, out
    for m in messages:
        cloud["sqs"].delete_message(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"])
    return len(messages)


def drain_summarize(cloud, ctx):
    summarize = load_handler("summarize")
    layers = []
    for _ in range(40):
        messages = receive(cloud, cloud["summarize_url"])
        if not messages:
            return layers
        layers += [json.loads(m["Body"])["layer"] for m in messages]
        out = summarize.handler(sqs_event(messages, "arn:aws:sqs:us-east-1:123456789012:s.fifo"), ctx)
        assert out["batchItemFailures"] == []
        for m in messages:
            cloud["sqs"].delete_message(QueueUrl=cloud["summarize_url"], ReceiptHandle=m["ReceiptHandle"])
    raise AssertionError("summarize queue did not drain")


def ask(text, ctx, mode="dense"):
    query = load_handler("query")
    event = json.loads((__import__("aws_helpers").EVENTS / "api_query_valid.json").read_text())
    event["body"] = json.dumps({"query": text, "k": 5, "mode": mode})
    out = query.handler(event, ctx)
    assert out["statusCode"] == 200, out
    return json.loads(out["body"])["results"]


def test_s3_drop_to_query_and_delete(cloud, lambda_context):
    ingest = load_handler("ingest")
    arn = "arn:aws:sqs:us-east-1:123456789012:eragraph-test-ingest"
    s3, engine = cloud["s3"], cloud["engine"]
    for i in range(6):
        s3.put_object(Bucket=BUCKET, Key=f"docs/bakery {i}.txt", Body=(OTHER + f" Loaf number {i}.") .encode())
    s3.put_object(Bucket=BUCKET, Key="docs/light house.txt", Body=TEXT.encode())
    notes = receive(cloud, cloud["notify_url"], wanted=7)
    bodies = [json.loads(m["Body"]) for m in notes]
    assert any("light+house.txt" in b["Records"][0]["s3"]["object"]["key"] for b in bodies if "Records" in b)
    out = ingest.handler(sqs_event(notes, arn), lambda_context)
    assert out["batchItemFailures"] == []
    for m in notes:
        cloud["sqs"].delete_message(QueueUrl=cloud["notify_url"], ReceiptHandle=m["ReceiptHandle"])
    assert len(engine.graph.list_documents()) == 7
    layers = drain_summarize(cloud, lambda_context)
    assert 0 in layers
    results = ask("Which schooner did the lighthouse keeper log last?", lambda_context)
    assert results[0]["source"] == f"s3://{BUCKET}/docs/light house.txt"
    assert "Quillfeather" in results[0]["text"]

    # the same notification delivered again adds nothing
    chunks, vectors = engine.graph.layer_sizes()[0], engine.vectors.count()
    again = ingest.handler(sqs_event(notes, arn), lambda_context)
    assert again["batchItemFailures"] == []
    assert engine.graph.layer_sizes()[0] == chunks and engine.vectors.count() == vectors

    # deleting the object removes it from the results
    s3.delete_object(Bucket=BUCKET, Key="docs/light house.txt")
    assert run_lambda(cloud, cloud["notify_url"], ingest.handler, lambda_context, arn) >= 1
    drain_summarize(cloud, lambda_context)
    assert engine.graph.find_documents(f"s3://{BUCKET}/docs/light house.txt") == []
    assert len(engine.graph.layer_sizes()) >= 1
    for r in ask("Which schooner did the lighthouse keeper log last?", lambda_context, mode="collapsed"):
        assert "Quillfeather" not in r["text"]
        assert r["source"] != f"s3://{BUCKET}/docs/light house.txt"
    from eragraph.services import invariants
    assert invariants.check(engine).ok
