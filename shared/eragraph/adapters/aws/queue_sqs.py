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

Tenants: a tenant's queue adapter adds ``"tenant": "<id>"`` to each body (and a ``tenant``
attribute), and its groups are ``<tenant>:layer-<l>-<shard>``: one tenant's bulk load queues in
its own groups, which SQS FIFO delivers alongside every other tenant's, so it cannot hold
another's re-summarization behind it. The summarize function reads the tenant from the body
(``tenant_of``) and reconciles in that tenant's engine. ``receive`` (drains from a terminal)
returns its own tenant's messages and hides every other one for a few seconds (then SQS
delivers it again to whoever asks: a drain of its tenant, or the summarize function).

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


TENANT_FIELD = "tenant"
FOREIGN_HIDE_SECONDS = 10  # another tenant's message met by ``receive``: hidden this long


def tenant_of(body: dict[str, Any]) -> str:
    """The tenant a message body belongs to ("" the default); a malformed one raises ValueError."""
    from ...domain.tenants import TenantError, check_tenant

    tenant = body.get(TENANT_FIELD, "") if isinstance(body, dict) else ""
    if tenant == "":
        return ""
    try:
        return check_tenant(tenant)
    except TenantError as exc:
        raise ValueError(str(exc)) from None


def dedup_id(message: SegmentsAffected, tenant: str = "") -> str:
    if message.op:
        body = f"{message.op}|{message.layer}|{message.group}"
        if tenant:
            body = f"{tenant}|{body}"
    else:  # a message built by hand: its body
        body = json.dumps(message.to_dict(), sort_keys=True)
    return hashlib.sha256(body.encode()).hexdigest()


def group_id(message: SegmentsAffected, tenant: str = "") -> str:
    group = f"layer-{message.layer}" if message.group is None else f"layer-{message.layer}-{message.group}"
    return f"{tenant}:{group}" if tenant else group


def message_entry(index: int, message: SegmentsAffected, fifo: bool, tenant: str = "") -> dict[str, Any]:
    body = message.to_dict()
    attributes = {
        "type": {"DataType": "String", "StringValue": "SegmentsAffected"},
        "layer": {"DataType": "Number", "StringValue": str(message.layer)},
    }
    if tenant:
        body[TENANT_FIELD] = tenant
        attributes[TENANT_FIELD] = {"DataType": "String", "StringValue": tenant}
    entry: dict[str, Any] = {
        "Id": str(index),
        "MessageBody": json.dumps(body, separators=(",", ":")),
        "MessageAttributes": attributes,
    }
    if fifo:
        entry["MessageGroupId"] = group_id(message, tenant)
        entry["MessageDeduplicationId"] = dedup_id(message, tenant)
    return entry


class SqsQueue:
    def __init__(self, queue_url: str, client: Any = None, wait_seconds: int = 0, tenant: str = "") -> None:
        if client is None:
            import boto3

            client = boto3.client("sqs")
        self.url = queue_url
        self.client = client
        self.fifo = queue_url.endswith(".fifo")
        self.wait_seconds = wait_seconds
        self.tenant = tenant
        self.skipped = 0

    def send(self, messages: Sequence[SegmentsAffected]) -> None:
        for start in range(0, len(messages), SQS_BATCH):
            chunk = messages[start:start + SQS_BATCH]
            entries = [message_entry(i, m, self.fifo, self.tenant) for i, m in enumerate(chunk)]
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
        self.skipped = 0  # other tenants' messages this receive set aside
        for m in response.get("Messages", ()):
            body = json.loads(m["Body"])
            if tenant_of(body) != self.tenant:  # another tenant's work: set aside for a few seconds,
                # so the next receive reaches this tenant's groups behind it (at once, it would
                # be handed back first again)
                self.client.change_message_visibility(QueueUrl=self.url, ReceiptHandle=m["ReceiptHandle"],
                                                      VisibilityTimeout=FOREIGN_HIDE_SECONDS)
                self.skipped += 1
                continue
            out.append((m["ReceiptHandle"], SegmentsAffected.from_dict(body)))
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
