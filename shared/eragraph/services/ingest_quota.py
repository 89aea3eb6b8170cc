"""A tenant's daily ingestion quota: the bytes it may submit for ingestion a day (UTC), the
setting ``ingest_daily_bytes`` (ERAGRAPH_INGEST_DAILY_BYTES; 0: no quota). Every way in that
submits documents (POST /documents, IngestKnowledgeBaseDocuments, an ingestion job's hand-over:
services.uploads.submit) is charged before anything is stored, and a request that would go past
the quota is refused whole (429, in words), so a tenant cannot run up embedding and summary
spend without bound. The day's total is one record of the tenant's store (``ingest-quota``),
reset when the day changes; two requests at the same instant may both pass the check (the bound
is near, not exact)."""

from __future__ import annotations

import time

from .engine import Engine

KEY = "ingest-quota"


class QuotaExceeded(ValueError):
    """A submission past the tenant's daily quota (services.uploads answers it 429)."""


def charge(engine: Engine, size: int, now: float | None = None) -> None:
    """Count ``size`` bytes against today's quota of the engine's tenant, or QuotaExceeded."""
    limit = engine.settings.ingest_daily_bytes
    if not limit:
        return
    day = time.strftime("%Y-%m-%d", time.gmtime(time.time() if now is None else now))
    record = engine.graph.get_meta(KEY) or {}
    used = int(record.get("bytes", 0)) if record.get("day") == day else 0
    if used + size > limit:
        raise QuotaExceeded(f"this tenant's daily ingestion quota is {limit} bytes (ERAGRAPH_INGEST_DAILY_BYTES); "
                            f"{used} were submitted today (UTC) and these documents are {size} more: submit them "
                            "tomorrow, or ask the operator for a larger quota")
    engine.graph.put_meta(KEY, {"day": day, "bytes": used + size})
