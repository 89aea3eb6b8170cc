"""SQS queue of SegmentsAffected messages.

Bodies are the messages' JSON (``SegmentsAffected.to_dict``); attributes carry the type and
layer so a subscription filter or a human in the console can read them without parsing.

FIFO ordering (``.fifo`` queue URLs): MessageGroupId = ``layer-<l>-<shard>``, the layer and
the code-prefix shard the message's codes fall in (services.announce), or ``layer-<l>`` for a
whole-layer reconcile. One shard's messages are delivered in order, one batch in flight at a
time, so two consumers never re-cut the same shard at once; different shards and layers are
reconciled in parallel, and a failing shard blocks only itself. Regions that straddle shards
(large or skewed ones) are guarded by GraphStore.apply_region's conditions: a lost race is a
ConflictError and a re-plan, never a lost update.

MessageDeduplicationId: names the operation, not the body. Every announce stamps its messages
with a fresh operation id (``op``), and the id hashes (op, layer, group): a sender's retry of
the same message collapses into one delivery, while a later operation with an identical body
(a document deleted and ingested again within SQS's five-minute window) is never swallowed.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Sequence
from typing import Any

from ...domain.model import SegmentsAffected

SQS_BATCH = 10


def dedup_id(message: SegmentsAffected) -> str:
    if message.op:
        body = f"{message.op}|{message.layer}|{message.group}"
    else:  # a message built by hand: its body
        body = json.dumps(message.to_dict(), sort_keys=True)
    return hashlib.sha256(body.encode()).hexdigest()


def group_id(message: SegmentsAffected) -> str:
    return f"layer-{message.layer}" if message.group is None else f"layer-{message.layer}-{message.group}"


def message_entry(index: int, message: SegmentsAffected, fifo: bool) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "Id": str(index),
        "MessageBody": json.dumps(message.to_dict(), separators=(",", ":")),
        "MessageAttributes": {
            "type": {"DataType": "String", "StringValue": "SegmentsAffected"},
            "layer": {"DataType": "Number", "StringValue": str(message.layer)},
        },
    }
    if fifo:
        entry["MessageGroupId"] = group_id(message)
        entry["MessageDeduplicationId"] = dedup_id(message)
    return entry


class SqsQueue:
    def __init__(self, queue_url: str, client: Any = None, wait_seconds: int = 0) -> None:
        if client is None:
            import boto3

            client = boto3.client("sqs")
        self.url = queue_url
        self.client = client
        self.fifo = queue_url.endswith(".fifo")
        self.wait_seconds = wait_seconds

    def send(self, messages: Sequence[SegmentsAffected]) -> None:
        for start in range(0, len(messages), SQS_BATCH):
            chunk = messages[start:start + SQS_BATCH]
            entries = [message_entry(i, m, self.fifo) for i, m in enumerate(chunk)]
            for _attempt in range(5):
                result = self.client.send_message_batch(QueueUrl=self.url, Entries=entries)
                failed = {f["Id"] for f in result.get("Failed", ())
                          if not f.get("SenderFault", False)}
                fatal = [f for f in result.get("Failed", ()) if f.get("SenderFault", False)]
                if fatal:
                    raise RuntimeError(f"SQS refused messages: {fatal}")
                if not failed:
                    break
                entries = [e for e in entries if e["Id"] in failed]
                time.sleep(0.2 * (_attempt + 1))
            else:
                raise RuntimeError(f"SQS kept failing {len(entries)} messages")

    def receive(self, max_messages: int = 10) -> list[tuple[str, SegmentsAffected]]:
        response = self.client.receive_message(
            QueueUrl=self.url, MaxNumberOfMessages=max(1, min(max_messages, SQS_BATCH)),
            WaitTimeSeconds=self.wait_seconds, MessageAttributeNames=["All"])
        out = []
        for m in response.get("Messages", ()):
            out.append((m["ReceiptHandle"], SegmentsAffected.from_dict(json.loads(m["Body"]))))
        return out

    def ack(self, receipts: Sequence[str]) -> None:
        for start in range(0, len(receipts), SQS_BATCH):
            entries = [{"Id": str(i), "ReceiptHandle": r}
                       for i, r in enumerate(receipts[start:start + SQS_BATCH])]
            self.client.delete_message_batch(QueueUrl=self.url, Entries=entries)

    def pending(self) -> int:
        attrs = self.client.get_queue_attributes(
            QueueUrl=self.url, AttributeNames=["ApproximateNumberOfMessages"])["Attributes"]
        return int(attrs.get("ApproximateNumberOfMessages", 0))
