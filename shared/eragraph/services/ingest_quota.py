"""A tenant's daily ingestion quota: the bytes it may submit for ingestion a day (UTC), the
setting ``ingest_daily_bytes``
(ERAGRAPH_INGEST_DAILY_BYTES; 0: no quota). Every way in is charged:

- a submission (POST /documents, IngestKnowledgeBaseDocuments, an ingestion job's hand-over:
  services.uploads.submit) before anything is stored; one that would go past the quota is
  refused whole (429, in words);
- an object put straight into the documents bucket (not through the API) when the ingest
  function takes its event, by the size the event gives, before the object is read: over the
  quota it is not ingested, its status is ``failed`` with the reason in words, and the object is
  left where it is (a later put of it, or a sync, takes it once the quota allows).

The day's total is one counter of the tenant's store (``ingest-quota``), added to by one atomic
conditional write (MetaStore.add_within: DynamoDB's UpdateItem ADD with a condition, a SQLite
write transaction): two requests at the same instant cannot both pass the bound."""

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
    if engine.graph.add_within(KEY, day, size, limit) is None:
        record = engine.graph.get_meta(KEY) or {}
        used = int(record.get("total", 0)) if record.get("period") == day else 0
        raise QuotaExceeded(f"this tenant's daily ingestion quota is {limit} bytes (ERAGRAPH_INGEST_DAILY_BYTES); "
                            f"{used} were submitted today (UTC) and these documents are {size} more: submit them "
                            "tomorrow, or ask the operator for a larger quota")
