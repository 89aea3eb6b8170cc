"""A tenant's daily ingestion quota: the bytes it may submit for ingestion a day (UTC), the
setting ``ingest_daily_bytes``
(ERAGRAPH_INGEST_DAILY_BYTES; 0: no quota). Every way in is charged:

- a submission (POST /documents, IngestKnowledgeBaseDocuments, an ingestion job's hand-over:
  services.uploads.submit) before anything is stored; one that would go past the quota is
  refused whole (429, in words);
- an object put straight into the documents bucket (not through the API) when the ingest
  function takes its event, by the size the event gives, before the object is read: over the
  quota it is not ingested, its status is ``failed`` with the reason in words, and the object is
  left where it is (a later put of it, or a sync, takes it once the quota allows). The charge
  is marked with the object's version (``<source>@<sequencer>``, recorded in the same atomic
  write): a retried event, after the function died between the charge and the ``received``
  status, is not charged again, and a second put of the key while the first is in flight is
  charged for itself. One the API submitted is not charged again: the API notes each document
  it charged (``submitted``: by its source and ``received`` time, a meta key that lapses).

The day's total is one counter of the tenant's store (``ingest-quota``), added to by one atomic
conditional write (MetaStore.add_within: DynamoDB's UpdateItem ADD with a condition, a SQLite
write transaction): two requests at the same instant cannot both pass the bound."""

from __future__ import annotations

import time

from ..domain.expiry import mark_key
from .engine import Engine

KEY = "ingest-quota"


class QuotaExceeded(ValueError):
    """A submission past the tenant's daily quota (services.uploads answers it 429)."""


def _day(at: float | None) -> str:
    return time.strftime("%Y-%m-%d", time.gmtime(time.time() if at is None else at))


def _submitted_mark(source: str, received_at: float) -> str:
    return f"api:{source}@{received_at:.6f}"


def submitted(engine: Engine, source: str, received_at: float) -> None:
    """Note that the API charged ``source``'s document, received at ``received_at`` (the
    ``received`` status it recorded): its object's event is then not charged again."""
    if engine.settings.ingest_daily_bytes:
        engine.graph.put_meta(mark_key(KEY, _day(received_at), _submitted_mark(source, received_at)), 1)


def was_submitted(engine: Engine, source: str, received_at: float) -> bool:
    """Whether the ``received`` status of ``source`` at ``received_at`` is the API's, charged there
    (no read without a quota)."""
    return bool(engine.settings.ingest_daily_bytes) and engine.graph.get_meta(mark_key(KEY, _day(received_at), _submitted_mark(source, received_at))) is not None


def charge(engine: Engine, size: int, now: float | None = None, mark: str | None = None) -> None:
    """Count ``size`` bytes against today's quota of the engine's tenant, or QuotaExceeded. With
    ``mark`` (one object version), once a day: the same mark again is not counted."""
    limit = engine.settings.ingest_daily_bytes
    if not limit:
        return
    day = _day(now)
    if engine.graph.add_within(KEY, day, size, limit, mark=mark) is None:
        record = engine.graph.get_meta(KEY) or {}
        used = int(record.get("total", 0)) if record.get("period") == day else 0
        raise QuotaExceeded(f"this tenant's daily ingestion quota is {limit} bytes (ERAGRAPH_INGEST_DAILY_BYTES); "
                            f"{used} were submitted today (UTC) and these documents are {size} more: submit them "
                            "tomorrow, or ask the operator for a larger quota")
