"""The graph store's ports by what callers use: MetaStore (store-wide settings, meta keys, the
cost ledger) and NodeStore (nodes, the code-ordered ref index, layers, segments, regions).
GraphStore combines them with documents.DocumentStore and documents.StatusStore: it is what
an adapter implements and what the engine holds; a service that needs one part types its
parameter with that part."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Protocol, runtime_checkable

from ..domain.model import Document, LshConfig, Node, NodeRef, RefState, RegionApplied, RegionChange, Segment
from ..domain.segment_stats import SegmentStats
from ..domain.scoped import RefCount, count_by_reading
from .documents import DocumentStore, StatusStore


@runtime_checkable
class MetaStore(Protocol):
    # --- store-wide configuration ---
    def get_lsh(self) -> LshConfig | None: ...
    def put_lsh(self, config: LshConfig) -> LshConfig:
        """Store ``config`` unless one is stored already; return the stored one."""
        ...
    def get_meta(self, key: str) -> Any | None: ...
    def put_meta(self, key: str, value: Any) -> None: ...
    def claim_meta(self, key: str, value: Any) -> Any:
        """Store ``value`` under ``key`` unless one is stored already (atomically: of two
        concurrent claims one wins); return the stored one (domain.access's partition indexes)."""
        ...
    def delete_meta(self, key: str) -> None: ...
    def get_metas(self, keys: Sequence[str]) -> dict[str, Any]:
        """The stored ones of ``keys`` (key -> value), read together (DynamoDB: one BatchGetItem
        per 100)."""
        ...
    def delete_meta_if_older(self, key: str, at_most: float) -> None:
        """Delete ``key`` when its value is a time stamp no later than ``at_most`` (a marker
        set again since stays), in one conditional write where the store has them."""
        ...
    def write_meta(self, puts: Sequence[tuple[str, Any]], deletes: Sequence[str],
                   clear: Sequence[tuple[str, float]] = (), present: Sequence[str] = ()) -> list[str]:
        """Store ``puts`` (key, value) and delete ``deletes`` (keys not among them) in one
        request where the store batches writes (DynamoDB: BatchWriteItem, 25 items a request;
        not atomic: each write lands or is re-sent). ``clear``: (key, at most) pairs deleted as
        ``delete_meta_if_older`` does, in the same request where the store can (DynamoDB: one
        TransactWriteItems for a write that fits one and whose clears all hold; else the batch,
        then each conditional delete). ``present``: node ids looked for once the write has
        landed (DynamoDB: a ConditionCheck each in that transaction; when one fails, the write
        goes as without them and the nodes are read); returns those not live: absent, or kept
        outside the index after a write that did not happen (``keep_nodes``), whose vectors
        must go. The writes land either way."""
        ...
    def meta_keys(self, prefix: str) -> list[str]: ...
    def add_within(self, key: str, period: str, amount: int, limit: int, mark: str | None = None) -> int | None:
        """One atomic conditional add to the counter ``key`` (a meta key whose value is
        ``{"period", "total"}``): a stored period other than ``period`` counts as 0; the new
        total, or None (nothing written) when it would pass ``limit``. Two callers at once
        cannot both pass (services.ingest_quota). With ``mark`` (one object version), the mark
        is recorded (domain.expiry.mark_key) in the same atomic write, and a mark charged
        already in this period adds nothing: the total as it stands."""
        ...
    def add_ledger(self, kind: str, calls: int, tokens_in: int, tokens_out: int, seconds: float,
                   at: float | None = None) -> None:
        """Add to the totals of ``kind`` (``<kind>|<model>``: services.cost) and to its hourly
        bucket of time ``at`` (epoch seconds; None: now)."""
        ...
    def ledger(self) -> dict[str, dict[str, float]]: ...
    def ledger_series(self, since: float = 0.0) -> list[tuple[str, int, dict[str, float]]]:
        """The hourly buckets from the hour of ``since`` on: (kind, bucket start in epoch
        seconds, {calls, tokens_in, tokens_out, seconds}) in (kind, start) order. A store written
        before buckets were kept has none for that time (its totals still count it)."""
        ...


@runtime_checkable
class NodeStore(Protocol):
    # --- nodes and the code-ordered ref index ---
    def put_nodes(self, nodes: Sequence[Node], index: bool = True) -> None:
        """Write nodes; with ``index`` each also becomes live in its layer's ref index (a ref
        it had keeps its segment). Summaries are written with ``index=False`` as they are made
        and enter the index with their segment (apply_region), or are written by that apply
        itself (``RegionChange.nodes``)."""
        ...
    def keep_nodes(self, nodes: Sequence[Node]) -> None:
        """Store summary nodes outside the ref index (as ``put_nodes(index=False)``), each only
        where no node of its id is stored: one a concurrent writer stored (and may have made
        live, with its own text and code) stays as it is. What a reconcile made for a write that
        did not happen is kept so (services.summarizing.store_unwritten)."""
        ...
    def check_fits(self, doc: Document | None = None, nodes: Sequence[Node] = ()) -> None:
        """Raise ItemTooLargeError (naming the item) when ``doc`` or one of ``nodes`` would not
        fit one stored item; put_document and put_nodes check the same before writing."""
        ...
    def get_nodes(self, node_ids: Iterable[str]) -> dict[str, Node]: ...
    def delete_nodes(self, node_ids: Iterable[str]) -> None:
        """Delete nodes; a ref that is in a segment stays as a tombstone until its layer is
        reconciled, any other ref goes."""
        ...
    def delete_dead_nodes(self, node_ids: Iterable[str]) -> list[str]:
        """Delete those of the nodes that are not live in their layer, each together with that
        check (one transaction: a node made live again meanwhile stays); their refs go as in
        ``delete_nodes``. Returns the ids not live (deleted now, or not stored), in the order given. ``apply_region`` refuses
        a summary whose node is missing, so of a deletion and an apply that makes the same
        summary id live again exactly one wins."""
        ...
    def prefix_refs(self, layer: int, lo: int, hi: int, limit: int | None = None) -> list[RefState]:
        """Refs of ``layer`` (tombstones included) with lo <= code <= hi, in (code, node id)
        order, at most ``limit``: one range read, never the whole layer for a narrow range."""
        ...
    def count_refs(self, layer: int, lo: int, hi: int, cap: int | None = None) -> RefCount:
        """How many refs of ``layer`` with lo <= code <= hi are in a stored segment (``old``)
        and how many are live (``new``), each exact up to ``cap`` and ``cap + 1`` above it
        (exact when ``cap`` is None): what the scoped reconcile's walk decides from. A store
        that reads the refs to count them returns them when it read them all (``refs``); one
        that counts in place returns none and reads about 2 * cap + 2 index entries per call
        (``RefsCountedByReading`` is the reading one, for a store without a count of its own)."""
        ...
    def refs_page(self, layer: int, after: tuple[int, str] | None, limit: int) -> list[RefState]:
        """Live refs of ``layer`` in (code, node id) order strictly after ``after`` (None: from
        the start), at most ``limit``: one page of a layer, read as a range (never the whole
        layer)."""
        ...
    def layer_refs(self, layer: int) -> list[NodeRef]:
        """Every live node of a layer (audits and rebuilds; never on an insert or query path)."""
        ...
    def layer_sizes(self) -> dict[int, int]:
        """Live nodes per layer, from maintained counters (no count over the nodes)."""
        ...
    def sizes_and_metas(self, keys: Sequence[str], prefixes: Sequence[str]) -> tuple[dict[int, int], dict[str, Any]]:
        """``layer_sizes()`` and the stored values of ``keys`` and of every meta key starting
        with one of ``prefixes`` (key -> value), read together: what a reconcile reads before
        it plans (services.resummarize: its shard's marker and outbox entries, the layer's
        applying marks and swept stamp). DynamoDB: one Query of the counters' partition,
        which holds the copies of the markers, marks and stamps, and one of the outbox's
        partition (``SizesAndMetasByParts`` is the plain composition)."""
        ...
    def repair_layer_counts(self) -> dict[int, int]:
        """Recount every layer's live refs from the ref index and rewrite the counters that
        differ (without losing an update made meanwhile); counters of layers without live refs
        are removed. Returns layer -> correction applied (new - old), only non-zero ones
        (reindex: reads whole layers)."""
        ...

    # --- segments (membership is the ref's ``seg``: a node is in at most one segment) ---
    def get_segments(self, layer: int) -> list[Segment]:
        """Every segment of a layer (audits only)."""
        ...
    def get_segments_by_id(self, layer: int, segment_ids: Iterable[str]) -> dict[str, Segment]: ...
    def read_region(self, layer: int, segment_ids: Iterable[str], node_ids: Iterable[str],
                    keys: Iterable[str]) -> tuple[dict[str, Segment], dict[str, Node], dict[str, Any]]:
        """``get_segments_by_id(layer, segment_ids)``, ``get_nodes(node_ids)`` and
        ``get_metas(keys)`` read together: what a region's re-cut reads (DynamoDB: one
        BatchGetItem per 100 keys of any kind; ``SizesAndMetasByParts`` composes the three)."""
        ...
    def segment_stats(self) -> dict[int, SegmentStats]:
        """Per layer with segments: how many, and the fewest and most members (GET /stats);
        from what the store keeps with its segment writes, not a read of the segments."""
        ...
    def apply_region(self, change: RegionChange) -> RegionApplied:
        """Apply one region's re-cut atomically if its refs are still as read, else raise
        ConflictError and write nothing. An adapter that has to split a large region in
        several writes (DynamoDB) writes a ``domain.model.applying_key`` meta key with the
        first and deletes it with the last, so that a partial apply is seen (and repaired by
        a whole-layer reconcile); a replaced summary's node deletion (``delete_removed``) and
        its kept text go in the write of its ref above. ``change.finish`` (a meta write carried
        from an earlier step) is written with the region, as ``write_meta`` writes it, in the
        same atomic write where the store can (DynamoDB: the region's one transaction, when it
        fits); a condition of it that does not hold never refuses the region. Returns what it
        did above the region, and the nodes of ``finish.present`` not live (``gone``)."""
        ...


class RefsCountedByReading:
    """NodeStore.count_refs from the store's ``prefix_refs`` (domain.scoped.count_by_reading):
    a small limit, raised while it fills and a count is still at most ``cap``; the refs come
    back when the read held them all, so the walk answers the range's sub-ranges from them
    (a store that spreads a layer over partitions pays a query per partition for each read)."""

    def count_refs(self, layer: int, lo: int, hi: int, cap: int | None = None) -> RefCount:
        return count_by_reading(lambda limit: self.prefix_refs(layer, lo, hi, limit), cap)  # type: ignore[attr-defined]


class SizesAndMetasByParts:
    """NodeStore.sizes_and_metas as its parts: ``layer_sizes``, ``meta_keys`` per prefix and one
    ``get_metas``; NodeStore.read_region as its three reads (a store whose reads are local calls)."""

    def read_region(self, layer: int, segment_ids: Iterable[str], node_ids: Iterable[str],
                    keys: Iterable[str]) -> tuple[dict[str, Segment], dict[str, Node], dict[str, Any]]:
        keys = list(keys)
        return (self.get_segments_by_id(layer, segment_ids), self.get_nodes(node_ids),  # type: ignore[attr-defined]
                self.get_metas(keys) if keys else {})  # type: ignore[attr-defined]

    def sizes_and_metas(self, keys: Sequence[str], prefixes: Sequence[str]) -> tuple[dict[int, int], dict[str, Any]]:
        listed = [k for prefix in prefixes for k in self.meta_keys(prefix)]  # type: ignore[attr-defined]
        wanted = list(dict.fromkeys([*keys, *listed]))
        return self.layer_sizes(), (self.get_metas(wanted) if wanted else {})  # type: ignore[attr-defined]


@runtime_checkable
class GraphStore(MetaStore, DocumentStore, StatusStore, NodeStore, Protocol):
    """The whole graph store (every adapter implements it)."""
