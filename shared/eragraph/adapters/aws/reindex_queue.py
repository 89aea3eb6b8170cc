"""The reindex queue (template.yaml ReindexQueue, SQS FIFO): one ``TenantAudit`` message per
tenant, sent by the scheduled fan-out, and a continuation when a worker's deadline comes before
its tenant's audit ends (services.reindex_schedule).

FIFO, grouped by tenant (MessageGroupId ``tenant-<id>``, ``default`` for the default tenant):
two audits of one tenant never run at once (a continuation waits for the piece that sent it to
end; a fan-out that comes while a tenant's audit is still going waits behind it), while
different tenants run side by side up to the event source's MaximumConcurrency. The
deduplication id (the fan-out's run, the tenant, the step and cursor) drops the same piece sent
twice within SQS's five minutes (a retried schedule invoke, a worker retried after it sent its
continuation). A standard queue would run a tenant's duplicates and continuations concurrently.

Bodies are validated with pydantic before any work; a bad one names the field and the rule."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import Any, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ...domain.audit import AuditProgress
from ...domain.tenants import ID_PATTERN, MAX_LENGTH
from ...domain.validation import describe_all

TYPE = "TenantAudit"


class Progress(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    run: str = Field("", max_length=200)
    step: int = Field(0, ge=0, le=100)
    cursor: Optional[tuple[int, int, str]] = None
    metrics: dict[str, int] = {}
    pieces: int = Field(0, ge=0)


class TenantAudit(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    type: Literal["TenantAudit"]
    tenant: str = Field(max_length=MAX_LENGTH, pattern=f"^(|{ID_PATTERN})$", description='"" is the default tenant')
    stuck_after_seconds: float = Field(ge=0, allow_inf_nan=False)
    progress: Progress = Progress()

    def audit_progress(self) -> AuditProgress:
        return AuditProgress.from_dict(self.progress.model_dump())


class InvalidAuditMessage(ValueError):
    pass


def is_sqs_event(event: Any) -> bool:
    return isinstance(event, dict) and isinstance(event.get("Records"), list) and \
        all(isinstance(r, dict) and r.get("eventSource") == "aws:sqs" for r in event["Records"])


def parse_body(body: str) -> TenantAudit:
    try:
        return TenantAudit.model_validate_json(body)
    except ValidationError as exc:
        words = describe_all(exc.errors(), skip=(), known=TenantAudit.model_fields, whole="the message")
        raise InvalidAuditMessage(f"invalid reindex message: {words}") from None


def audit_message(tenant: str, stuck_after: float, progress: AuditProgress) -> TenantAudit:
    fields = progress.to_dict()
    fields["cursor"] = tuple(progress.cursor) if progress.cursor is not None else None
    return TenantAudit(type=TYPE, tenant=tenant, stuck_after_seconds=float(stuck_after), progress=Progress(**fields))


def group_id(tenant: str) -> str:
    return f"tenant-{tenant}" if tenant else "default"


def dedup_id(message: TenantAudit) -> str:
    p = message.progress
    key = json.dumps([message.tenant, p.run, p.step, p.cursor, p.pieces])
    return hashlib.sha256(key.encode()).hexdigest()[:64]


class ReindexQueue:
    """Sends TenantAudit messages to the reindex FIFO queue (batches of ten)."""

    def __init__(self, url: str, client: Any) -> None:
        self.url = url
        self.client = client

    def send(self, messages: Sequence[TenantAudit]) -> int:
        for start in range(0, len(messages), 10):
            entries = [{"Id": str(i), "MessageBody": m.model_dump_json(), "MessageGroupId": group_id(m.tenant),
                        "MessageDeduplicationId": dedup_id(m)} for i, m in enumerate(messages[start:start + 10])]
            out = self.client.send_message_batch(QueueUrl=self.url, Entries=entries)
            if out.get("Failed"):
                raise RuntimeError(f"the reindex queue refused {len(out['Failed'])} message(s): {out['Failed'][:3]}")
        return len(messages)
