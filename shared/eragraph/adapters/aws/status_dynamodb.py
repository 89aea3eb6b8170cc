r"""The StatusStore part of the DynamoDB graph store: one record per document status, its copy
in the listing, and the status counters (domain.status_counts).

* The record at STATUS#<doc id> (one GetItem to read); ``counted`` = 1 once it is in the
  counters (every record this code writes; one written before the counters until
  ``migrate_status_counters`` has counted it).
* The listing: a copy under the partition STATUSBY, sort key <source>\0<doc id>, so that a page
  of a prefix is one Query with a Limit (and the last key read as ExclusiveStartKey): it reads
  the page's items and one more, never the rest of the prefix.
* The counters: COUNT / STATUS for the whole namespace, STATUSDIR#<directory> / COUNT for each
  counted directory of a source (one partition each), ``n_<key>`` per counter key. A status
  write is one TransactWriteItems: the record conditioned on the record read (so a concurrent
  writer of the same document cannot count it twice: the loser reads again and retries), its
  listing copy, the old copy's deletion when the source changed, and the counters' ADDs.
  ``COUNT / STATUS`` also carries ``counted`` = 1 once every record of the namespace is counted
  (a new namespace from its hyperplanes' first write, an older one from its migration);
  until then ``status_counts`` answers None and the counts are read from the records.
* A write that may not touch the counters (``put_doc_status(..., count=False)``: the API's
  ``received`` on POST /documents, whose role writes STATUS#, STATUSBY and nothing in the COUNT
  partition, where the layout's counters live) stores the record uncounted, with ``counted_as``:
  the record the counters still hold for that document (none for a new one). The next counted
  write of the record (the ingest's, when the object's event arrives: indexed, failed, or its
  deletion) counts the change from ``counted_as``; so does the migration. Until then a
  directory's counts lag its listing by that document.

Why the listing stays one partition: a page in listing order (source, doc id) from N shards
would read up to N pages and merge them, so GET /documents?limit=100 would read up to N*101
items; a layout sharded by a key range of the source would keep one Query per page but needs a
range map that follows the tenant's sources. One partition takes ~1,000 write units a second:
with one listing write per status change (two when the source changes), a tenant is held to
about 1,000 status changes a second (500 documents a second, each received then indexed),
which is the limit of this layout. The counters' root item is written by every status change
too (its transactional write costs two units), so the same figure holds for it; a tenant past
it needs the root counter split in shards summed on reading (one Query) and the listing split
by source range.
"""

from __future__ import annotations

import json
import random
import threading
import time
from collections.abc import Callable

from pynamodb.exceptions import TransactWriteError

from ...domain.doc_status import DocStatus
from ...domain.model import ConflictError
from ...domain.status_counts import COUNTED_KEYS, deltas, is_counted
from .dynamodb_table import DynamoTable, _is_condition_failure
from .models import namespace_prefix

LISTING = "STATUSBY"
STATUS_WRITE_ATTEMPTS = 10
MIGRATION_PAGE = 100  # listing items read per step of the migration (a checkpoint after each)
MIGRATION_CHECKPOINT = ("COUNT", "STATUSMIGRATION")


_READ = threading.local()  # the last record get_doc_status read on this thread


def _last_read(model, doc_id: str):
    """(doc_id, item) when the last get_doc_status on this thread read ``doc_id``'s record (taken:
    used once). A write planned from it is conditioned on the record being still that one, so
    a stale read costs a retry, never a wrong write."""
    last = getattr(_READ, "last", None)
    _READ.last = None
    if last is None or last[0] is not model or last[1] != doc_id:
        return None
    return last[1], last[2]


def _retryable(exc: TransactWriteError) -> bool:
    """A lost condition or a conflict with another transaction (on a shared counter item)."""
    reasons = getattr(exc, "cancellation_reasons", None) or []
    return _is_condition_failure(exc) or any(r is not None and r.code == "TransactionConflict" for r in reasons)


class DynamoStatusStore(DynamoTable):
    # ----- records -----
    def _status_item(self, doc_id: str):
        return self._get(f"STATUS#{doc_id}", "STATUS")

    def _record_condition(self, item):
        """The stored record is still ``item`` (None: there is none)."""
        Item = self.Item
        if item is None:
            return Item.PK.does_not_exist()
        if item.counted == 1:
            counted = Item.counted == 1
        else:  # uncounted: and what the counters hold for it is still what was read
            counted = Item.counted.does_not_exist() & (
                (Item.counted_as == item.counted_as) if item.counted_as else Item.counted_as.does_not_exist())
        return Item.PK.exists() & (Item.value == item.value) & counted

    def _counter_item(self, prefix: str):
        return self.Item(PK="COUNT", SK="STATUS") if prefix == "" else self.Item(PK=f"STATUSDIR#{prefix}", SK="COUNT")

    def _add_counts(self, tx, changes: dict[str, dict[str, int]]) -> None:
        for prefix, row in changes.items():
            tx.update(self._counter_item(prefix),
                      actions=[getattr(self.Item, f"n_{key}").add(n) for key, n in row.items()])

    def _transact(self, doc_id: str, plan: Callable) -> bool:
        """Read the record, then write ``plan(item, before)``'s operations (``(kind, item,
        keyword arguments)``; None: nothing to write) in one transaction; a lost condition or a
        conflict reads again and retries. Whether a transaction was written."""
        from pynamodb.transactions import TransactWrite

        seen = _last_read(self.Item, doc_id)  # what get_doc_status read just before on this thread, if anything
        for attempt in range(STATUS_WRITE_ATTEMPTS):
            item = seen[1] if attempt == 0 and seen is not None else self._status_item(doc_id)
            before = None if item is None else DocStatus.from_json(json.loads(item.value))
            ops = plan(item, before)
            if not ops:
                return False
            try:
                with TransactWrite(connection=self._connection()) as tx:
                    for kind, target, kwargs in ops:
                        getattr(tx, kind)(target, **kwargs)
                return True
            except TransactWriteError as exc:
                if not _retryable(exc):
                    raise
                time.sleep(random.uniform(0, 0.01 * 2 ** attempt))
        raise ConflictError(f"the status of {doc_id} kept changing concurrently")

    def _count_ops(self, changes: dict[str, dict[str, int]]) -> list:
        return [("update", self._counter_item(prefix),
                 {"actions": [getattr(self.Item, f"n_{key}").add(n) for key, n in row.items()]})
                for prefix, row in changes.items()]

    @staticmethod
    def _counted_as(item, before: DocStatus | None) -> DocStatus | None:
        """The record the counters hold for ``item`` (None: it is not in them)."""
        if item is None:
            return None
        if item.counted == 1:
            return before
        return None if not item.counted_as else DocStatus.from_json(json.loads(item.counted_as))

    def put_doc_status(self, status: DocStatus, count: bool = True) -> None:
        value = json.dumps(status.to_json())

        def plan(item, before: DocStatus | None) -> list:
            held = self._counted_as(item, before)
            record = (self.Item(PK=f"STATUS#{status.doc_id}", SK="STATUS", value=value, counted=1) if count else
                      self.Item(PK=f"STATUS#{status.doc_id}", SK="STATUS", value=value,
                                counted_as=None if held is None else json.dumps(held.to_json())))
            ops = [("save", record, {"condition": self._record_condition(item)}),
                   ("save", self.Item(PK=LISTING, SK=f"{status.source}\0{status.doc_id}", value=value), {})]
            if before is not None and before.source != status.source:
                ops.append(("delete", self.Item(PK=LISTING, SK=f"{before.source}\0{before.doc_id}"), {}))
            return ops + (self._count_ops(deltas(held, status)) if count else [])

        self._transact(status.doc_id, plan)

    def get_doc_status(self, doc_id: str) -> DocStatus | None:
        item = self._status_item(doc_id)
        _READ.last = (self.Item, doc_id, item)  # a write that follows starts from it (_transact)
        return None if item is None else DocStatus.from_json(json.loads(item.value))

    def delete_doc_status(self, doc_id: str) -> None:
        def plan(item, before: DocStatus | None) -> list | None:
            if item is None:
                return None
            return [("delete", self.Item(PK=f"STATUS#{doc_id}", SK="STATUS"),
                     {"condition": self._record_condition(item)}),
                    ("delete", self.Item(PK=LISTING, SK=f"{before.source}\0{doc_id}"), {}),
                    *self._count_ops(deltas(self._counted_as(item, before), None))]

        self._transact(doc_id, plan)

    # ----- the listing -----
    def doc_statuses(self, prefix: str = "") -> list[DocStatus]:
        items = self.Item.query(LISTING, self.Item.SK.startswith(prefix) if prefix else None,
                                consistent_read=True)
        return [DocStatus.from_json(json.loads(i.value)) for i in items]

    def _listing_page(self, prefix: str, after_sk: str | None, limit: int) -> list:
        """Up to ``limit`` listing items of ``prefix`` after the sort key ``after_sk``: one Query
        (Limit = ``limit``, more only if DynamoDB's 1 MB page ends first)."""
        if after_sk is not None and not after_sk.startswith(prefix):
            if after_sk > prefix:
                return []  # past the prefix: nothing follows
            after_sk = None  # before it: from its first
        start = None if after_sk is None else {
            "PK": {"S": namespace_prefix(self.models.tenant) + LISTING}, "SK": {"S": after_sk}}
        return list(self.Item.query(LISTING, self.Item.SK.startswith(prefix) if prefix else None,
                                    consistent_read=True, limit=limit, page_size=limit,
                                    last_evaluated_key=start))

    def doc_statuses_page(self, prefix: str, after: tuple[str, str] | None, limit: int
                          ) -> tuple[list[DocStatus], tuple[str, str] | None]:
        if limit <= 0:
            return [], None
        items = self._listing_page(prefix, None if after is None else f"{after[0]}\0{after[1]}", limit + 1)
        shown = [DocStatus.from_json(json.loads(i.value)) for i in items[:limit]]
        return shown, (shown[-1].source, shown[-1].doc_id) if len(items) > limit else None

    # ----- the counters -----
    def status_counts(self, prefix: str = "") -> dict[str, int] | None:
        """One read (a BatchGetItem of the directory's counter and the root's for a directory)."""
        if not is_counted(prefix):
            return None
        keys = [("COUNT", "STATUS")] + ([] if prefix == "" else [(f"STATUSDIR#{prefix}", "COUNT")])
        found = {(i.PK, i.SK): i for i in self.Item.batch_get(keys, consistent_read=True)}
        root = found.get(("COUNT", "STATUS"))
        if root is None or root.counted != 1:
            if root is None and not self._listing_page("", None, 1):
                return {}  # nothing recorded yet
            return None  # records written before the counters: not counted yet
        mine = found.get(keys[-1])
        return {} if mine is None else {k: int(n) for k in COUNTED_KEYS
                                        if (n := getattr(mine, f"n_{k}") or 0)}

    def mark_statuses_counted(self) -> None:
        """Every record of the namespace is in the counters (a new namespace; the migration's
        end): ``status_counts`` answers from them from now on."""
        self._counter_item("").update(actions=[self.Item.counted.set(1)])

    def migrate_status_counters(self, page: int = MIGRATION_PAGE) -> int:
        """Count the records written before the counters (online, resumable, idempotent).

        Walks the listing in pages from the checkpoint (COUNT / STATUSMIGRATION: the last sort
        key done, rewritten after each page); each record not yet counted is marked counted in
        one transaction with its counters' ADDs, conditioned on the record read, so a writer
        that replaces it meanwhile (and counts it itself) makes this one read again and skip
        it, and a record is never counted twice whichever of a rerun or a writer comes first.
        At the end the root counter is marked complete. Returns the records it counted."""
        done = 0
        root = self._get("COUNT", "STATUS")
        if root is not None and root.counted == 1:
            return 0
        checkpoint = self._get(*MIGRATION_CHECKPOINT)
        after = json.loads(checkpoint.value).get("after") if checkpoint is not None else None
        while True:
            items = self._listing_page("", after, page)
            for listed in items:
                done += self._count_record(listed.SK.rpartition("\0")[2])
            if not items:
                break
            after = items[-1].SK
            self.Item(PK=MIGRATION_CHECKPOINT[0], SK=MIGRATION_CHECKPOINT[1],
                      value=json.dumps({"after": after})).save()
        self.mark_statuses_counted()
        return done

    def _count_record(self, doc_id: str) -> int:
        """Count one record if it is not counted yet; 1 if this call counted it."""
        def plan(item, before: DocStatus | None) -> list | None:
            if item is None or item.counted == 1:
                return None
            return [("update", self.Item(PK=f"STATUS#{doc_id}", SK="STATUS"),
                     {"actions": [self.Item.counted.set(1), self.Item.counted_as.remove()],
                      "condition": self._record_condition(item)}),
                    *self._count_ops(deltas(self._counted_as(item, before), before))]

        return int(self._transact(doc_id, plan))
