"""The MetaStore part of the DynamoDB graph store: the hyperplanes, meta keys and the cost
ledger. Hourly ledger buckets, ingestion jobs and clientToken records carry ``expires_at``, the
table's TTL attribute (LEDGER_HOURS_TTL, EXPIRING_META): DynamoDB deletes them after it.

* Metadata (``put_meta``/``get_meta``/``meta_keys``) is spread over partitions by its key
  (``meta_partition``). The services write keys ``<kind>:<layer>:<shard>:...``; the kinds
  written on every insert have 16 partitions each: a dirty marker or an outbox entry goes to
  ``META#<kind>#<its message group mod 16>`` (a whole-layer one to ``META#<kind>#all``), a
  retired summary text or a follow-up record to the partition of a hash of its node id or
  token. Layers share a kind's partitions (the shard, not the layer, is where the write volume
  is, and a listing then never needs to know which layers exist). Applying marks and swept
  stamps (written by multi-transaction applies and whole-layer passes only) and store-wide keys
  (``settings``) have one partition each. A key read by name is one GetItem as before;
  ``meta_keys`` queries only the partitions its prefix can reach: one for a shard's outbox (the
  reconcile of a message), all of a kind's, side by side, for a listing (reindex, stats, a
  whole-layer pass).
* A dirty marker (``dirty:<layer>[:<group>]``), an applying mark and a swept stamp have a copy
  in the ``COUNT`` partition, ``MARK#<key>`` (``shadow_item``), written and deleted with it in
  the same request (a transaction, or a batch of both): GET /stats' one Query of the counters
  lists the markers too, whatever the number of layers, and a reconcile reads its layer's
  sizes, marker, marks and stamp in that one Query (nodes_dynamodb.sizes_and_metas). A key
  stored before its copies were kept is not seen there until it is written again: the
  reconcile a marker asks for still runs, a stamp missed only costs a pass it could have
  skipped, and an applying mark missed (a split apply cut short by the deploy itself) is
  found by the reindex, which lists the marks' own partition.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import Any

from pynamodb.exceptions import DeleteError, PutError, TransactWriteError, UpdateError
from pynamodb.transactions import TransactWrite

from ...domain.expiry import DAY, EXPIRING_META, life_of, mark_key  # noqa: F401 (DAY, EXPIRING_META: the TTLs)
from ...domain.ledger import bucket_start
from ...domain.model import LshConfig
from .ref_counts import PREFIX_COUNTS_VERSION
from .dynamodb_table import DynamoTable, _is_condition_failure


LEDGER_HOURS = "LEDGER#HOURS"  # the ledger's hourly buckets (the totals are under LEDGER)
LEDGER_HOURS_TTL = 100 * DAY  # an hourly bucket's life (GET /ledger reads 92 days back at most; the totals stay)
META_SHARDS = 16  # partitions of each metadata kind written on every insert
# keys <kind>:<layer>:<shard>:... (followup:<token>, session:<id>: by a hash of the rest)
SHARDED_META = ("dirty", "outbox", "retired", "followup", "session")
SINGLE_META = ("applying", "swept")  # rare writes: one partition each
GROUPED_META = ("dirty", "outbox")  # sharded by the message group in the key (the others by a hash)
META_QUERY_THREADS = 8  # meta_keys over many partitions
LEDGER_SHARDS = 16  # items per ledger total and per hourly bucket of a kind (add_ledger)
LEDGER_ATTEMPTS = 5
SHARD_MARK = "\0"  # between a ledger item's kind and its shard
SHADOWED_META = ("dirty", "applying", "swept", "outbox")  # kinds whose keys have a copy in the COUNT partition (shadow_item)
FLAGGED_META = ("outbox",)  # of them, kinds whose copy only says the key is there (flag_only)
SHADOW = "MARK#"  # the copy's sort key prefix


def shadowed(key: str) -> bool:
    return key.partition(":")[0] in SHADOWED_META


def flag_only(key: str) -> bool:
    """A kind whose copy holds no value: an outbox entry can be large (a streamed pass's region
    lists hundreds of summaries), and every reconcile and ``/stats`` read the COUNT partition
    whole; its copy tells a reconcile whether its shard's entries need reading at all."""
    return key.partition(":")[0] in FLAGGED_META


def _hash_shard(text: str) -> int:
    import zlib

    return zlib.crc32(text.encode("utf-8")) % META_SHARDS


def _shards(kind: str) -> list[str]:
    return [str(s) for s in range(META_SHARDS)] + (["all"] if kind in GROUPED_META else [])


def meta_partition(key: str) -> str:
    """The partition key of a metadata key (see the module docstring)."""
    kind, sep, rest = key.partition(":")
    if not sep or kind not in SHARDED_META + SINGLE_META:
        return "META"
    if kind in SINGLE_META:
        return f"META#{kind}"
    if kind not in GROUPED_META:
        return f"META#{kind}#{_hash_shard(rest)}"
    parts = rest.split(":")  # dirty:<layer>[:<group>], outbox:<layer>:<group|all>:<token>
    if len(parts) < 2 or not parts[1]:
        return f"META#{kind}#all"
    return f"META#{kind}#{int(parts[1]) % META_SHARDS if parts[1].isdigit() else parts[1]}"


def meta_partitions(prefix: str) -> list[str]:
    """Every partition that can hold a key starting with ``prefix``: one when the prefix names
    the shard (a shard's outbox), all of a kind's otherwise, all of every kind for a prefix that
    does not name its kind whole."""
    kind, sep, rest = prefix.partition(":")
    if not sep:
        kinds = [k for k in SHARDED_META + SINGLE_META if k.startswith(kind)]
        return ["META"] + [p for k in kinds for p in meta_partitions(k + ":")]
    if kind in SINGLE_META:
        return [f"META#{kind}"]
    if kind not in SHARDED_META:
        return ["META"]
    parts = rest.split(":")
    if kind in GROUPED_META and len(parts) >= 3:  # <layer>:<shard>: is complete
        return [meta_partition(prefix)]
    return [f"META#{kind}#{s}" for s in _shards(kind)]


def _lsh_to_json(c: LshConfig) -> str:
    return json.dumps({"embedder_id": c.embedder_id, "dim": c.dim, "n_planes": c.n_planes,
                       "seed": c.seed, "planes": [list(p) for p in c.planes]})


def _lsh_from_json(raw: str) -> LshConfig:
    d = json.loads(raw)
    return LshConfig(embedder_id=d["embedder_id"], dim=int(d["dim"]), n_planes=int(d["n_planes"]),
                     seed=int(d["seed"]), planes=tuple(tuple(float(x) for x in p) for p in d["planes"]))


class DynamoMetaStore(DynamoTable):
    def get_lsh(self) -> LshConfig | None:
        """The hyperplanes, read (whether they are stored is how a read path learns that its
        tenant was deleted by another process: never answered from a copy)."""
        item = self._get("META", "LSH")
        self._lsh_cache = None if item is None else _lsh_from_json(item.value)
        return self._lsh_cache

    def known_lsh(self) -> LshConfig | None:
        """The hyperplanes as this process last read them, read only the first time: they are
        written once, on the condition that none are stored, and never changed (only deleted
        with the whole namespace, so a copy may outlive a tenant another process deleted).
        For what only shows them (GET /stats' embedder), so that a warm /stats does not read
        them; a path that must know the tenant still exists calls get_lsh."""
        cached = getattr(self, "_lsh_cache", None)
        return cached if cached is not None else self.get_lsh()

    def put_lsh(self, config: LshConfig) -> LshConfig:
        try:
            # a store created now has the current ref layout, and its prefix counts
            # (ref_counts), from its first ref on
            self.Item(PK="META", SK="LSH", value=_lsh_to_json(config), version=PREFIX_COUNTS_VERSION).save(
                condition=self.Item.PK.does_not_exist())
        except PutError as exc:
            if not _is_condition_failure(exc):
                raise
        else:  # a new namespace: every status it will hold is counted (status_dynamodb)
            self.Item(PK="COUNT", SK="STATUS").update(actions=[self.Item.counted.set(1)])
        stored = self.get_lsh()
        assert stored is not None
        return stored

    def get_meta(self, key: str) -> Any | None:
        return _meta_value(self._get(meta_partition(key), f"KEY#{key}"))

    def get_metas(self, keys: Sequence[str]) -> dict[str, Any]:
        """BatchGetItem of their items, 100 a request (consistent reads)."""
        from .dynamodb_table import BATCH_GET

        wanted = list(dict.fromkeys(keys))
        out = {}
        for start in range(0, len(wanted), BATCH_GET):
            part = wanted[start:start + BATCH_GET]
            for item in self.Item.batch_get([(meta_partition(k), f"KEY#{k}") for k in part], consistent_read=True):
                value = _meta_value(item)
                if value is not None:
                    out[item.SK[len("KEY#"):]] = value
        return out

    def delete_meta_if_older(self, key: str, at_most: float) -> None:
        """One DeleteItem on the condition that the item is absent or its ``stamp`` is at most
        ``at_most``; a marker stored before stamps were kept (no ``stamp``) fails it and is
        then read and compared as before (GetItem, DeleteItem)."""
        item = self.Item(PK=meta_partition(key), SK=f"KEY#{key}")
        if not self._delete_if(key, item, self.Item.PK.does_not_exist() | (self.Item.stamp <= float(at_most))):
            return
        stored = self._get(meta_partition(key), f"KEY#{key}")
        if stored is not None and stored.stamp is None and stored.value is not None \
                and float(json.loads(stored.value)) <= at_most:
            # set again meanwhile (now with a stamp): it stays
            self._delete_if(key, item, self.Item.stamp.does_not_exist())

    def _delete_if(self, key: str, item: Any, condition: Any) -> bool:
        """Delete ``item`` on ``condition`` (with its copy in COUNT, in one transaction, when
        ``key`` has one); whether the condition failed."""
        try:
            if not shadowed(key):
                item.delete(condition=condition)
                return False
            self._transact_retrying(lambda tx: (tx.delete(item, condition=condition),
                                   tx.delete(self.Item(PK="COUNT", SK=f"{SHADOW}{key}"))))
            return False
        except (DeleteError, TransactWriteError) as exc:
            if not _is_condition_failure(exc):
                raise
            return True


    def put_meta(self, key: str, value: Any) -> None:
        if not shadowed(key):
            self.meta_item(key, value).save()
            return
        self._transact_retrying(lambda tx: (tx.save(self.meta_item(key, value)), tx.save(self.shadow_item(key, value))))

    def _transact_retrying(self, build) -> None:
        """One TransactWriteItems that ``build(tx)`` makes, made and sent again when another
        transaction held one of its items (TransactionConflict: a put of the same marker, a
        ledger shard another writer held), up to LEDGER_ATTEMPTS times."""
        for attempt in range(LEDGER_ATTEMPTS):
            try:
                with TransactWrite(connection=self._connection()) as tx:
                    build(tx)
                return
            except TransactWriteError as exc:
                reasons = getattr(exc, "cancellation_reasons", None) or []
                if attempt + 1 == LEDGER_ATTEMPTS or not any(
                        r is not None and r.code == "TransactionConflict" for r in reasons):
                    raise

    def shadow_item(self, key: str, value: Any) -> Any:
        """The copy of a dirty marker in the COUNT partition (its value and stamp; of an outbox
        entry, ``true``: flag_only), written in the same request as the marker (put_meta,
        write_meta, a region's marks)."""
        if flag_only(key):
            return self.Item(PK="COUNT", SK=f"{SHADOW}{key}", value="true")
        item = self.meta_item(key, value)
        return self.Item(PK="COUNT", SK=f"{SHADOW}{key}", value=item.value, stamp=item.stamp)

    def meta_item(self, key: str, value: Any) -> Any:
        """The item that stores ``value`` under ``key`` (put_meta; a region's marks, written in
        its transaction by nodes_dynamodb.apply_region)."""
        life = life_of(key)  # DynamoDB's TTL deletes the item after it
        expires = None if life is None else int(time.time()) + life
        stamp = float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None
        return self.Item(PK=meta_partition(key), SK=f"KEY#{key}", value=json.dumps(value), expires_at=expires,
                         stamp=stamp)

    def add_within(self, key: str, period: str, amount: int, limit: int, mark: str | None = None) -> int | None:
        """UpdateItems, each atomic: ADD to this period's total on the condition that the
        period is stored and the total stays within ``limit``; failing that, SET a new period's
        total on the condition that another period (or none) is stored; failing that too (a
        caller started the period meanwhile), the ADD once more. The counter expires two days
        after its period starts. With ``mark``, each is one TransactWriteItems with the put of
        the mark's item under ``attribute_not_exists`` (a mark there already: nothing added)."""
        item = self.Item(PK=meta_partition(key), SK=f"KEY#{key}")
        marked = None if mark is None else mark_key(key, period, mark)

        def write(actions, condition) -> bool | None:
            """True: written; False: the counter's condition failed; None: the mark is there."""
            try:
                if marked is None:
                    item.update(actions=actions, condition=condition)
                    return True
                with TransactWrite(connection=self._connection()) as tx:
                    tx.update(item, actions=actions, condition=condition)
                    tx.save(self.Item(PK=meta_partition(marked), SK=f"KEY#{marked}", value="1",
                                      expires_at=int(time.time()) + 2 * DAY), condition=self.Item.PK.does_not_exist())
                return True
            except (UpdateError, TransactWriteError) as exc:
                if not _is_condition_failure(exc):
                    raise
                reasons = getattr(exc, "cancellation_reasons", None) or []
                # pynamodb sends the puts before the updates: the mark's reason comes first
                if len(reasons) == 2 and reasons[0] is not None and reasons[0].code == "ConditionalCheckFailed":
                    return None
                return False

        def total() -> int:
            stored = self._get(meta_partition(key), f"KEY#{key}")
            return int(stored.total or 0) if stored is not None and stored.period == period else 0

        def add() -> bool | None:
            return write([self.Item.total.add(amount)],
                         (self.Item.period == period) & (self.Item.total <= limit - amount))

        done = add()
        if done is None:
            return total()
        if done:
            return total() if marked is not None else int(item.total)
        if amount > limit:
            return None
        done = write([self.Item.period.set(period), self.Item.total.set(amount),
                      self.Item.expires_at.set(int(time.time()) + 2 * DAY),
                      self.Item.value.remove()],  # a record of the read-then-write quota
                     self.Item.period.does_not_exist() | (self.Item.period != period))
        if done is None:
            return total()
        if done:
            return amount
        done = add()
        if done is None:
            return total()
        return (total() if marked is not None else int(item.total)) if done else None

    def claim_meta(self, key: str, value: Any) -> Any:
        try:
            self.Item(PK=meta_partition(key), SK=f"KEY#{key}", value=json.dumps(value)).save(
                condition=self.Item.PK.does_not_exist())
        except PutError as exc:
            if not _is_condition_failure(exc):
                raise
        return self.get_meta(key)

    def delete_meta(self, key: str) -> None:
        if not shadowed(key):
            self.Item(PK=meta_partition(key), SK=f"KEY#{key}").delete()
            return
        self.write_meta([], [key])

    def write_meta(self, puts: Sequence[tuple[str, Any]], deletes: Sequence[str],
                   clear: Sequence[tuple[str, float]] = (), present: Sequence[str] = ()) -> list[str]:
        """One BatchWriteItem per 25 items (pynamodb re-sends the unprocessed ones). With
        ``clear`` or ``present``: one TransactWriteItems of everything when it fits one (each
        clear a Delete on its condition, with its copy; each node looked for a ConditionCheck),
        else, or when a condition fails (a marker set again since: it stays; a node gone), the
        batch, then each ``delete_meta_if_older``, then one BatchGetItem of the nodes."""
        if set(deletes) & {key for key, _ in puts}:
            raise ValueError("write_meta: a key both stored and deleted")
        present = list(dict.fromkeys(present))
        held: dict[str, float] = {}
        for key, at_most in clear:  # one clear a key (a transaction names an item once)
            held[key] = max(at_most, held.get(key, at_most))
        clear = list(held.items())
        if clear or present:
            from .dynamodb_table import TRANSACT_LIMIT

            deletes = list(dict.fromkeys(deletes))
            size = self.meta_write_width(puts, deletes, clear, present)
            if size <= TRANSACT_LIMIT and not {k for k, _ in clear} & ({k for k, _ in puts} | set(deletes)):
                try:
                    self._write_and_clear(puts, deletes, clear, present)
                    return []
                except TransactWriteError as exc:
                    if not _is_condition_failure(exc):
                        raise
            self.write_meta(puts, deletes)
            for key, at_most in clear:
                self.delete_meta_if_older(key, at_most)
            if not present:
                return []
            live = {item.PK[len("NODE#"):] for item in self._batch_get([(f"NODE#{i}", "NODE") for i in present])
                    if item.live is None}  # a kept node (keep_nodes: live 0) is not live
            return [i for i in present if i not in live]
        with self.Item.batch_write() as batch:
            for key, value in puts:
                batch.save(self.meta_item(key, value))
                if shadowed(key):
                    batch.save(self.shadow_item(key, value))
            for key in dict.fromkeys(deletes):
                batch.delete(self.Item(PK=meta_partition(key), SK=f"KEY#{key}"))
                if shadowed(key):
                    batch.delete(self.Item(PK="COUNT", SK=f"{SHADOW}{key}"))
        return []

    def _write_and_clear(self, puts: Sequence[tuple[str, Any]], deletes: Sequence[str],
                         clear: Sequence[tuple[str, float]], present: Sequence[str] = ()) -> None:
        """write_meta's one transaction (a TransactionConflict: sent again)."""
        self._transact_retrying(lambda tx: self.meta_write_parts(tx, puts, deletes, clear, present))

    @staticmethod
    def meta_write_width(puts: Sequence[tuple[str, Any]], deletes: Sequence[str],
                         clear: Sequence[tuple[str, float]], present: Sequence[str]) -> int:
        """The items ``meta_write_parts`` adds to a transaction."""
        return (sum(1 + shadowed(k) for k, _ in puts) + sum(1 + shadowed(k) for k in deletes)
                + sum(1 + shadowed(k) for k, _ in clear) + len(present))

    def meta_write_parts(self, tx: Any, puts: Sequence[tuple[str, Any]], deletes: Sequence[str],
                         clear: Sequence[tuple[str, float]], present: Sequence[str]) -> None:
        """write_meta's items in the transaction ``tx`` (its own, or a region's apply carrying
        a reconcile's end: RegionChange.finish)."""
        for key, value in puts:
            tx.save(self.meta_item(key, value))
            if shadowed(key):
                tx.save(self.shadow_item(key, value))
        for key in deletes:
            tx.delete(self.Item(PK=meta_partition(key), SK=f"KEY#{key}"))
            if shadowed(key):
                tx.delete(self.Item(PK="COUNT", SK=f"{SHADOW}{key}"))
        for key, at_most in clear:
            tx.delete(self.Item(PK=meta_partition(key), SK=f"KEY#{key}"),
                      condition=self.Item.PK.does_not_exist() | (self.Item.stamp <= float(at_most)))
            if shadowed(key):
                tx.delete(self.Item(PK="COUNT", SK=f"{SHADOW}{key}"))
        for node_id in present:  # read by the caller's checks after its vector writes: stored, not kept
            tx.condition_check(self.Item, f"NODE#{node_id}", "NODE",
                               condition=self.Item.PK.exists() & self.Item.live.does_not_exist())

    def meta_keys(self, prefix: str) -> list[str]:
        def keys_in(pk: str) -> list[str]:
            items = self.Item.query(pk, self.Item.SK.startswith(f"KEY#{prefix}"),
                                    consistent_read=True, attributes_to_get=["PK", "SK", "expires_at"])
            return [i.SK[len("KEY#"):] for i in items if i.expires_at is None or i.expires_at >= now]

        now = time.time()  # a record past its TTL is not listed (DynamoDB deletes it within days)

        partitions = list(dict.fromkeys(meta_partitions(prefix)))
        if len(partitions) <= 2:
            found = [keys_in(pk) for pk in partitions]
        else:  # a listing over many partitions (reindex, stats): queried side by side, after a
            # first query on this thread has made the connection's client (botocore does not
            # create clients safely from several threads at once)
            from .round_trips import fan_out

            found = [keys_in(partitions[0])]
            found += fan_out(keys_in, partitions[1:], META_QUERY_THREADS)
        return sorted({k for keys in found for k in keys})

    def metas_under(self, prefixes: Sequence[str]) -> dict[str, Any]:
        """The stored values of every key starting with one of ``prefixes``: ``meta_keys``'
        Queries, each returning the items whole (a shard's outbox entries with their values,
        where listing the keys and reading each would cost a request more per entry)."""
        def items_in(pk: str, prefix: str) -> dict[str, Any]:
            found = {}
            for item in self.Item.query(pk, self.Item.SK.startswith(f"KEY#{prefix}"), consistent_read=True):
                value = _meta_value(item)
                if value is not None:
                    found[item.SK[len("KEY#"):]] = value
            return found

        reads = list(dict.fromkeys((pk, p) for p in prefixes for pk in meta_partitions(p)))
        if len(reads) <= 2:
            parts = [items_in(pk, p) for pk, p in reads]
        else:  # as meta_keys: the first on this thread, the rest side by side
            from .round_trips import fan_out

            parts = [items_in(*reads[0])] + fan_out(lambda r: items_in(*r), reads[1:], META_QUERY_THREADS)
        return {k: v for part in parts for k, v in part.items()}

    def meta_present(self, keys: list[str]) -> set[str]:
        """Which of ``keys`` are stored, by name: BatchGetItem of their items (keys only), 100
        a request, the requests side by side (GET /stats' dirty markers: one request for the
        markers of up to five layers, where listing them queried every partition of the kind)."""
        from .dynamodb_table import BATCH_GET
        from .round_trips import fan_out

        wanted = list(dict.fromkeys(keys))
        if not wanted:
            return set()
        parts = [wanted[i:i + BATCH_GET] for i in range(0, len(wanted), BATCH_GET)]

        def present(part: list[str]) -> list[str]:
            found = self.Item.batch_get([(meta_partition(k), f"KEY#{k}") for k in part], consistent_read=True,
                                        attributes_to_get=["PK", "SK"])
            return [i.SK[len("KEY#"):] for i in found]

        return {k for found in fan_out(present, parts, META_QUERY_THREADS) for k in found}

    def add_ledger(self, kind: str, calls: int, tokens_in: int, tokens_out: int, seconds: float,
                   at: float | None = None) -> None:
        """One TransactWriteItems of two atomic ADDs: the totals of ``kind`` and its hour's
        bucket (``LEDGER#HOURS``, sort key ``<hour start>#<kind>``: a time range is one Query),
        each on one of LEDGER_SHARDS items picked at random (``<kind>\0<shard>``), so that
        writers of one kind at once rarely hold the same item; a transaction that met another
        one on its items (TransactionConflict) is sent again on other shards. The readers sum
        the shards (and an item written before shards were kept, which has no suffix)."""
        self._transact_retrying(lambda tx: self.ledger_updates(tx, kind, calls, tokens_in, tokens_out, seconds, at))

    def ledger_updates(self, tx: Any, kind: str, calls: int, tokens_in: int, tokens_out: int, seconds: float,
                       at: float | None = None) -> None:
        """add_ledger's two ADDs into the transaction ``tx`` (add_ledger's own, or a region's
        apply: RegionChange.ledger), on a shard picked at random each time."""
        import random

        hour = bucket_start(time.time() if at is None else at)
        actions = [self.Item.calls.add(calls), self.Item.tokens_in.add(tokens_in),
                   self.Item.tokens_out.add(tokens_out),
                   # 0.1 ms steps: a plain decimal (json writes 7e-05 for smaller values)
                   self.Item.seconds.add(round(float(seconds), 4))]
        shard = random.randrange(LEDGER_SHARDS)  # another one each time it is sent again
        tx.update(self.Item(PK="LEDGER", SK=f"KIND#{kind}{SHARD_MARK}{shard}"), actions=actions)
        # an hourly bucket expires; the totals do not
        tx.update(self.Item(PK=LEDGER_HOURS, SK=f"{hour:012d}#{kind}{SHARD_MARK}{shard}"),
                  actions=[*actions, self.Item.expires_at.set(hour + LEDGER_HOURS_TTL)])

    def ledger(self) -> dict[str, dict[str, float]]:
        out: dict[str, dict[str, float]] = {}
        for i in self.Item.query("LEDGER", self.Item.SK.startswith("KIND#"), consistent_read=True):
            _sum_into(out, _unsharded(i.SK[len("KIND#"):]), _ledger_row(i))
        return out

    def ledger_series(self, since: float = 0.0) -> list[tuple[str, int, dict[str, float]]]:
        rows: dict[tuple[str, int], dict[str, float]] = {}
        for i in self.Item.query(LEDGER_HOURS, self.Item.SK >= f"{bucket_start(since):012d}#", consistent_read=True):
            hour, _, kind = i.SK.partition("#")
            _sum_into(rows, (_unsharded(kind), int(hour)), _ledger_row(i))
        return sorted(((kind, hour, row) for (kind, hour), row in rows.items()), key=lambda r: (r[0], r[1]))


def _unsharded(kind: str) -> str:
    return kind.split(SHARD_MARK, 1)[0]


def _sum_into(out: dict, key: Any, row: dict[str, float]) -> None:
    held = out.get(key)
    out[key] = row if held is None else {f: round(held[f] + row[f], 4) if f == "seconds" else held[f] + row[f]
                                         for f in row}


def _meta_value(item) -> Any | None:
    """A meta item's value (None: absent or expired)."""
    if item is not None and item.value is None and item.period is not None:  # a counter (add_within)
        return {"period": item.period, "total": int(item.total or 0)}
    if item is not None and item.expires_at is not None and item.expires_at < time.time():
        return None  # expired: DynamoDB's TTL deletes it within days, a read sees it gone at once
    return None if item is None else json.loads(item.value)


def _ledger_row(item) -> dict[str, float]:
    return {"calls": int(item.calls or 0), "tokens_in": int(item.tokens_in or 0),
            "tokens_out": int(item.tokens_out or 0), "seconds": float(item.seconds or 0.0)}
