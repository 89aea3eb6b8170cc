"""Record and read document statuses (domain.doc_status) through the graph store's StatusStore
(ports.documents).

Reasons are the owner's words (domain.refusals: a fixed vocabulary plus the file's kind and
size), never an exception's text; the detail is in the logs.

Writes: the ingest records ``indexed`` (with the layer-0 shards its chunks were announced in)
after the announcement, so the shards' dirty markers exist before the record names them; every
path that refuses a document (a reader's error, the ingest's own, an S3 object rejected)
records ``failed`` with the reason. The summarize pass writes nothing per document: reading
derives ``summaries_pending`` / ``done`` from the dirty markers ``dirty:0:<shard>``
(services.announce), which a reconcile that started after the last announcement clears.

Reads: a document's status is one record read plus one read per shard it touched (at most
2**GROUP_BITS). A page of a listing reads its records (at most ``limit + 1``:
StatusStore.doc_statuses_page) and the layer's markers once; its counts come from the status
counters (domain.status_counts: the tenant or a directory prefix, one read), or, for a prefix
without counters, from one page of that prefix's records (COUNT_PAGE; past it the counts are of
that page only, marked ``approximate``). The counters know ``indexed``
documents, not whether their summaries are built: with no layer-0 shard dirty all are ``done``,
with the whole layer dirty all are ``summaries_pending``; while only some shards are dirty
(between an insert's announcement and its shards' reconcile) the counts leave them as
``indexed`` (each document's own view in the page still says which). Reads never write."""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Iterable, Mapping

from ..domain.doc_status import (DONE, FAILED, INDEXED, RECEIVED, SUMMARIES_PENDING, DocStatus, StatusCounts,
                                 effective_state)
from ..domain import refusals
from ..domain.ids import document_id_for_source
from ..domain.refusals import is_vocabulary
from .announce import dirty_key, shard_of
from .engine import Engine


def _put(engine: Engine, doc_id: str, source: str, state: str, now: float | None = None, count: bool = True,
         **fields) -> DocStatus:
    stamp = time.time() if now is None else now
    before = engine.graph.get_doc_status(doc_id)
    keep = before is not None and before.source == source and before.state == RECEIVED
    status = DocStatus(doc_id=doc_id, source=source, state=state,
                       received_at=before.received_at if keep else stamp, updated_at=stamp, **fields)
    engine.graph.put_doc_status(status, count=count)
    return status


def record_received(engine: Engine, doc_id: str, source: str, now: float | None = None,
                    count: bool = True) -> DocStatus:
    """``count=False``: the API's write (POST /documents), whose role may not write the status
    counters: the ingest counts the record when the object's event arrives (StatusStore)."""
    return _put(engine, doc_id, source, RECEIVED, now, count)


def record_indexed(engine: Engine, doc_id: str, source: str, codes: Iterable[int], content_hash: str = "",
                   now: float | None = None) -> DocStatus:
    shards = tuple(sorted({shard_of(int(c), engine.settings.n_planes) for c in codes}))
    return _put(engine, doc_id, source, INDEXED, now, pending_shards=shards, content_hash=content_hash)


def record_failed(engine: Engine, source: str, reason: str, doc_id: str = "", now: float | None = None,
                  count: bool = True) -> DocStatus:
    return _put(engine, doc_id or document_id_for_source(source), source, FAILED, now, count,
                reason=reason or "failed (no reason given)")


def record_failures(engine: Engine, errors: Iterable[Mapping[str, str]], ids: Mapping[str, str] | None = None,
                    reasons: Mapping[str, str] | None = None) -> int:
    """A ``failed`` status for each ``{"source", "error"}`` entry (a reader's or the ingest's);
    ``ids``: source -> document id where the document named its own; ``reasons``: source -> the
    reason in words (domain.refusals); an entry without one records the error itself only when
    it is the vocabulary's, else the vocabulary's "not readable" (the error is the logs')."""
    n = 0
    for err in errors:
        source = err.get("source", "")
        error = err.get("error", "")
        why = (reasons or {}).get(source) or (error if is_vocabulary(error) else refusals.reason("unreadable"))
        record_failed(engine, source, why, (ids or {}).get(source, ""))
        n += 1
    return n


def settle_received(engine: Engine, doc_id: str, source: str, digest: str) -> DocStatus | None:
    """A document read again with content the store already holds (an upload of the same bytes:
    the ingest changes nothing, so records nothing) is ``indexed`` again, with the shards of its
    stored chunks, rather than ``received`` forever. None when there was nothing to settle."""
    status = engine.graph.get_doc_status(doc_id)
    stored = engine.graph.get_document(doc_id)
    if status is None or status.state != RECEIVED or stored is None or stored.content_hash != digest:
        return None
    codes = [n.code for n in engine.graph.get_nodes(stored.chunk_ids).values()]
    return record_indexed(engine, doc_id, source, codes, digest)


def delete(engine: Engine, doc_id: str) -> None:
    """Delete a document's status record: a removed document has none."""
    engine.graph.delete_doc_status(doc_id)


def _dirty_shards(engine: Engine, shards: Iterable[int] | None = None) -> set[int]:
    if shards is None:
        return {int(k.rsplit(":", 1)[1]) for k in engine.graph.meta_keys("dirty:0:")}
    return {s for s in shards if engine.graph.get_meta(dirty_key(0, s)) is not None}


def _whole_layer_dirty(engine: Engine) -> bool:
    return engine.graph.get_meta(dirty_key(0, None)) is not None


def view(status: DocStatus, dirty: set[int], whole_layer: bool) -> dict:
    state = effective_state(status, set(status.pending_shards) if whole_layer else dirty)
    out = {"state": state, "source": status.source, "received_at": status.received_at,
           "updated_at": status.updated_at}
    if status.reason:  # one recorded before the vocabulary may hold an exception's text: never shown
        out["reason"] = status.reason if is_vocabulary(status.reason) else refusals.reason("earlier")
    return out


def read(engine: Engine, doc_id: str) -> dict | None:
    """The owner's view of one document's status, or None when none is recorded."""
    status = engine.graph.get_doc_status(doc_id)
    if status is None:
        return None
    pending = status.state == INDEXED
    dirty = _dirty_shards(engine, status.pending_shards) if pending else set()
    return view(status, dirty, pending and _whole_layer_dirty(engine))


def listing(engine: Engine, prefix: str = "") -> tuple[StatusCounts, list[dict]]:
    """Counts of each state under ``prefix`` and the documents' views, by source."""
    statuses = engine.graph.doc_statuses(prefix)
    any_indexed = any(s.state == INDEXED for s in statuses)
    dirty = _dirty_shards(engine) if any_indexed else set()
    whole = any_indexed and _whole_layer_dirty(engine)
    views = [{"doc_id": s.doc_id, **view(s, dirty, whole)} for s in statuses]
    return StatusCounts(prefix).add(v["state"] for v in views), views


class BadCursor(ValueError):
    """A ``cursor`` that no page of this listing gave (answered 400)."""


def encode_cursor(source: str, doc_id: str) -> str:
    raw = json.dumps([source, doc_id], separators=(",", ":")).encode("utf-8")
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def decode_cursor(cursor: str) -> tuple[str, str]:
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        source, doc_id = json.loads(raw.decode("utf-8"))
        if not (isinstance(source, str) and isinstance(doc_id, str)):
            raise ValueError("not two strings")
    except (ValueError, TypeError, UnicodeDecodeError):
        raise BadCursor(f"cursor {cursor[:40]!r} is not one this listing gave (pass back its next_cursor "
                        "unchanged, or none for the first page)") from None
    return source, doc_id


COUNT_PAGE = 1000  # records per read when a prefix without counters is counted from its records


class _Markers:
    """The layer-0 dirty markers, read once and only if a status needs them."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._read: tuple[set[int], bool] | None = None

    def get(self) -> tuple[set[int], bool]:
        if self._read is None:
            self._read = (_dirty_shards(self.engine), _whole_layer_dirty(self.engine))
        return self._read


def _views(statuses: list[DocStatus], markers: _Markers) -> list[dict]:
    if not any(s.state == INDEXED for s in statuses):
        return [{"doc_id": s.doc_id, **view(s, set(), False)} for s in statuses]
    dirty, whole = markers.get()
    return [{"doc_id": s.doc_id, **view(s, dirty, whole)} for s in statuses]


def counts(engine: Engine, prefix: str = "", markers: _Markers | None = None) -> StatusCounts:
    """Counts of each state under ``prefix``: from the counters where the prefix has them (see
    the module docstring for ``indexed``), else from the prefix's records."""
    markers = markers or _Markers(engine)
    stored = engine.graph.status_counts(prefix)
    if stored is None:  # one page of records at most, never the whole listing: past it, marked approximate
        statuses, after = engine.graph.doc_statuses_page(prefix, None, COUNT_PAGE)
        out = StatusCounts(prefix, approximate=after is not None)
        return out.add(v["state"] for v in _views(statuses, markers))
    out = StatusCounts(prefix)
    for key in (RECEIVED, DONE, FAILED):
        out.counts[key] += stored.get(key, 0)
    indexed = stored.get(INDEXED, 0)
    if indexed:
        dirty, whole = markers.get()
        out.counts[SUMMARIES_PENDING if whole else INDEXED if dirty else DONE] += indexed
    return out


def page(engine: Engine, prefix: str = "", limit: int = 100, cursor: str = ""
         ) -> tuple[StatusCounts, list[dict], str | None, bool]:
    """``counts`` under ``prefix`` and, of its documents in (source, doc id) order, the
    ``limit`` after ``cursor``, with the cursor of the next page (None: this is the last) and
    whether one follows. The cursor is the last (source, doc id) given, so a page is right
    whatever was added or removed since the one before; a page reads its own records and one
    more (StatusStore.doc_statuses_page), never the rest of the prefix."""
    after = decode_cursor(cursor) if cursor else None
    statuses, next_after = engine.graph.doc_statuses_page(prefix, after, limit)
    markers = _Markers(engine)
    views = _views(statuses, markers)
    more = next_after is not None
    return counts(engine, prefix, markers), views, encode_cursor(*next_after) if more else None, more
