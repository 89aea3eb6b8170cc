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
"""

from __future__ import annotations

import json
import time
from typing import Any

from pynamodb.exceptions import PutError

from ...domain.ledger import bucket_start
from ...domain.model import LshConfig
from .ref_layout import REF_LAYOUT_VERSION
from .dynamodb_table import DynamoTable, _is_condition_failure


LEDGER_HOURS = "LEDGER#HOURS"  # the ledger's hourly buckets (the totals are under LEDGER)
DAY = 86_400
LEDGER_HOURS_TTL = 100 * DAY  # an hourly bucket's life (GET /ledger reads 92 days back at most; the totals stay)
# meta keys DynamoDB's TTL deletes this long after their last write (``expires_at``): an ingestion
# job (services.kb_jobs: saved at every step, so a running one never expires) and a clientToken's
# record (services.kb_sources: a retry comes within minutes, not weeks)
EXPIRING_META = {"kb-job:": 90 * DAY, "kb-token:": DAY}  # a token lapses after a day (services.idempotency)
META_SHARDS = 16  # partitions of each metadata kind written on every insert
SHARDED_META = ("dirty", "outbox", "retired", "followup")  # keys <kind>:<layer>:<shard>:... (followup:<token>)
SINGLE_META = ("applying", "swept")  # rare writes: one partition each
GROUPED_META = ("dirty", "outbox")  # sharded by the message group in the key (the others by a hash)
META_QUERY_THREADS = 8  # meta_keys over many partitions


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
            # a store created now has the current ref layout from its first ref on
            self.Item(PK="META", SK="LSH", value=_lsh_to_json(config), version=REF_LAYOUT_VERSION).save(
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
        item = self._get(meta_partition(key), f"KEY#{key}")
        return None if item is None else json.loads(item.value)

    def put_meta(self, key: str, value: Any) -> None:
        life = next((t for prefix, t in EXPIRING_META.items() if key.startswith(prefix)), None)
        expires = None if life is None else int(time.time()) + life
        self.Item(PK=meta_partition(key), SK=f"KEY#{key}", value=json.dumps(value), expires_at=expires).save()

    def claim_meta(self, key: str, value: Any) -> Any:
        try:
            self.Item(PK=meta_partition(key), SK=f"KEY#{key}", value=json.dumps(value)).save(
                condition=self.Item.PK.does_not_exist())
        except PutError as exc:
            if not _is_condition_failure(exc):
                raise
        return self.get_meta(key)

    def delete_meta(self, key: str) -> None:
        self.Item(PK=meta_partition(key), SK=f"KEY#{key}").delete()

    def meta_keys(self, prefix: str) -> list[str]:
        def keys_in(pk: str) -> list[str]:
            items = self.Item.query(pk, self.Item.SK.startswith(f"KEY#{prefix}"),
                                    consistent_read=True, attributes_to_get=["PK", "SK"])
            return [i.SK[len("KEY#"):] for i in items]

        partitions = list(dict.fromkeys(meta_partitions(prefix)))
        if len(partitions) <= 2:
            found = [keys_in(pk) for pk in partitions]
        else:  # a listing over many partitions (reindex, stats): queried side by side, after a
            # first query on this thread has made the connection's client (botocore does not
            # create clients safely from several threads at once)
            from concurrent.futures import ThreadPoolExecutor

            found = [keys_in(partitions[0])]
            with ThreadPoolExecutor(max_workers=min(META_QUERY_THREADS, len(partitions) - 1)) as pool:
                found += pool.map(keys_in, partitions[1:])
        return sorted({k for keys in found for k in keys})

    def add_ledger(self, kind: str, calls: int, tokens_in: int, tokens_out: int, seconds: float,
                   at: float | None = None) -> None:
        """Two UpdateItems (atomic ADDs): the totals of ``kind`` and its hour's bucket
        (``LEDGER#HOURS``, sort key ``<hour start>#<kind>``: a time range is one Query)."""
        hour = bucket_start(time.time() if at is None else at)
        for item, hourly in ((self.Item(PK="LEDGER", SK=f"KIND#{kind}"), False),
                             (self.Item(PK=LEDGER_HOURS, SK=f"{hour:012d}#{kind}"), True)):
            actions = [self.Item.calls.add(calls), self.Item.tokens_in.add(tokens_in),
                       self.Item.tokens_out.add(tokens_out),
                       # 0.1 ms steps: a plain decimal (json writes 7e-05 for smaller values)
                       self.Item.seconds.add(round(float(seconds), 4))]
            if hourly:  # an hourly bucket expires; the totals do not
                actions.append(self.Item.expires_at.set(hour + LEDGER_HOURS_TTL))
            item.update(actions=actions)

    def ledger(self) -> dict[str, dict[str, float]]:
        out = {}
        for i in self.Item.query("LEDGER", self.Item.SK.startswith("KIND#"), consistent_read=True):
            out[i.SK[len("KIND#"):]] = _ledger_row(i)
        return out

    def ledger_series(self, since: float = 0.0) -> list[tuple[str, int, dict[str, float]]]:
        rows = []
        for i in self.Item.query(LEDGER_HOURS, self.Item.SK >= f"{bucket_start(since):012d}#", consistent_read=True):
            hour, _, kind = i.SK.partition("#")
            rows.append((kind, int(hour), _ledger_row(i)))
        return sorted(rows, key=lambda r: (r[0], r[1]))


def _ledger_row(item) -> dict[str, float]:
    return {"calls": int(item.calls or 0), "tokens_in": int(item.tokens_in or 0),
            "tokens_out": int(item.tokens_out or 0), "seconds": float(item.seconds or 0.0)}
