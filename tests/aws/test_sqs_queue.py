"""SqsQueue on moto: FIFO groups per layer, content dedup ids, batches of ten, attributes."""

from __future__ import annotations

import json

from aws_helpers import REGION, fake_credentials

from eragraph.adapters.aws.sqs import SqsQueue, dedup_id, message_entry
from eragraph.domain.model import SegmentsAffected


def make_queue():
    import boto3

    sqs = boto3.client("sqs", region_name=REGION)
    url = sqs.create_queue(QueueName="q.fifo", Attributes={"FifoQueue": "true"})["QueueUrl"]
    return SqsQueue(url, client=sqs), sqs


def test_entries_group_by_layer_and_dedup_by_content():
    a = SegmentsAffected(layer=2, added=("x",), reason="ingest")
    e = message_entry(0, a, fifo=True)
    assert e["MessageGroupId"] == "layer-2"
    assert e["MessageDeduplicationId"] == dedup_id(SegmentsAffected(layer=2, added=("x",), reason="ingest"))
    assert e["MessageDeduplicationId"] != dedup_id(SegmentsAffected(layer=2, added=("y",), reason="ingest"))
    assert e["MessageAttributes"]["layer"] == {"DataType": "Number", "StringValue": "2"}
    assert SegmentsAffected.from_dict(json.loads(e["MessageBody"])) == a
    # requeues without ids are told apart by the minute they were sent
    empty = SegmentsAffected(layer=1, reason="requeue")
    assert dedup_id(empty, now=0) != dedup_id(empty, now=120)
    assert "MessageGroupId" not in message_entry(0, a, fifo=False)


def test_send_receive_ack_in_batches_and_duplicates_collapse():
    fake_credentials()
    from moto import mock_aws

    with mock_aws():
        queue, _ = make_queue()
        msgs = [SegmentsAffected(layer=i % 3, added=(f"n{i}",)) for i in range(23)]
        queue.send(msgs)
        queue.send(msgs[:5])  # a retried send: same dedup ids, dropped by SQS
        got = []
        while True:
            batch = queue.receive(10)
            if not batch:
                break
            got += batch
            queue.ack([r for r, _ in batch])
        assert sorted(m.added for _, m in got) == sorted(m.added for m in msgs)
        for layer in range(3):  # FIFO within a group
            assert [m for _, m in got if m.layer == layer] == [m for m in msgs if m.layer == layer]
        assert queue.pending() == 0
