"""The ref index's partitions grow with the layer: a read costs what it returns.

A layer's refs are spread over 2^bits partitions by the top ``bits`` bits of their code
(``REF#<layer>#b<bits>#<shard>``), and ``bits`` grows with the layer: 0 (one partition) while
the layer holds fewer than 4 * PART_ITEMS refs, then 2, 4, 6 and at most MAX_BITS, each step
when the layer passes 4 times the refs the step below was sized for (``target_bits``). So a
partition holds about PART_ITEMS to 4 * PART_ITEMS refs: a code range's Query with a Limit
fills from the first partition it reads, and a sparse layer is never a Query per empty
partition (the earlier fixed layout, 256 partitions at layer 0, made about 470 Queries of a
single-document insert into a 60-chunk store). Writes still spread: a layer of a million refs
has 256 partitions of ~4,000 (a partition takes ~1,000 writes/s).

Why not an occupancy record beside a fixed layout: a sparse layer's refs still lie in one
partition each (60 refs, ~53 partitions), so a read of the layer stays dozens of Queries. Why
not an index (GSI) on the layer: its reads are eventually consistent, and the reconcile plans
from reads that its conditional writes must then find unchanged.

The layout of a layer lives on its counter (``COUNT``/``LAYER#<layer>``): ``bits``, and
``moving`` (the target) while the layer is being re-partitioned. Every ref write of the layer
is conditioned on that state (NodeStore: the counter's ADD carries the condition, or a
ConditionCheck when the write changes no count), so a write made with a stale layout, or during
a move, is a conflict and re-reads the layout, never a ref in a partition nobody reads.

**A move** (``move_layer``), when a layer's count passes its step, or to migrate a layer:

1. claim: ``moving = target`` on the counter, conditioned on the layout read. From here the
   layer's ref writes fail their condition, so the source partitions hold still;
2. copy every source partition to the target layout (BatchWriteItem), partition by partition,
   the progress (``value``: the next source partition) kept on the counter;
3. flip: ``bits = target``, ``moving`` removed, ``value`` = the source layout to clean,
   conditioned on ``moving = target``;
4. clean: the source partitions' items are deleted, then ``value`` removed.

Every step is idempotent, so whoever finds a move unfinished finishes it (a writer blocked by it
helps rather than waits, and a move killed midway is resumed by the next writer of the layer,
the next migration run or the reindex): there is no lease to expire. Readers read the source
layout until the flip; a read made from a layout cached before a flip is caught by the writes'
conditions, and reads cache a layout for LAYOUT_TTL seconds.

**Existing stores** (the fixed layout: ``REF#<layer>#<shard>`` with 2^(8 - 3 * layer)
partitions) are *legacy*: a counter without ``bits``, or in a store whose hyperplane record
has no ``version`` (``REF_LAYOUT_VERSION``), no counter at all. ``migrate_ref_layout`` (the reindex's first step) moves each legacy
layer to its target layout (the same move, so it is online, resumable and idempotent: a layer
is blocked only while its own move runs), counts each legacy layer's segments into the segment
counters while the layer is claimed (no segment write of the layer can commit meanwhile), and
then stamps the hyperplane record with the version, after which a layer without a counter is a
new, empty one (bits 0). A store created by this code is stamped when its hyperplanes are
written.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass

from pynamodb.exceptions import UpdateError

from ...domain.access import index_bits, index_of, lsh_part, placed
from .dynamodb_table import _is_condition_failure

REF_LAYOUT_VERSION = 2  # the hyperplane record's ``version`` from this layout on
PART_ITEMS = 2048  # about the refs a partition holds (PART_ITEMS .. 4 * PART_ITEMS)
BITS_STEP = 2  # a move multiplies the partitions by 2^BITS_STEP
MAX_BITS = 8  # at most 2^MAX_BITS partitions a layer
LEGACY_BITS = 8  # the fixed layout: 2^(LEGACY_BITS - LEGACY_STEP * layer) partitions
LEGACY_STEP = 3
LAYOUT_TTL = 30.0  # seconds a reader trusts a cached layout (writers are checked by conditions)


@dataclass(frozen=True)
class Layout:
    """Where a layer's refs are: 2^bits partitions, in the legacy key format or the current one;
    ``moving``: the bits a move is taking the layer to (None: no move)."""

    bits: int
    legacy: bool = False
    moving: int | None = None

    def partition(self, layer: int, shard: int) -> str:
        return f"REF#{layer}#{shard}" if self.legacy else f"REF#{layer}#b{self.bits}#{shard}"


def legacy_bits(layer: int) -> int:
    return max(LEGACY_BITS - LEGACY_STEP * layer, 0)


def target_bits(count: int, part_items: int | None = None) -> int:
    """The bits a layer of ``count`` refs should have: the largest step whose partitions would
    still hold PART_ITEMS refs each on average."""
    per = PART_ITEMS if part_items is None else part_items
    bits = 0
    while bits + BITS_STEP <= MAX_BITS and count >= per * (1 << (bits + BITS_STEP)):
        bits += BITS_STEP
    return bits


def layout_of(item, layer: int, store_current: bool) -> Layout:
    """A layer's layout from its counter item (None: absent)."""
    if item is None:
        return Layout(0) if store_current else Layout(legacy_bits(layer), legacy=True)
    moving = None if item.moving is None else int(item.moving)
    if item.bits is None:
        return Layout(legacy_bits(layer), legacy=True, moving=moving)
    return Layout(int(item.bits), moving=moving)


class RefLayouts:
    """The layout part of the DynamoDB NodeStore (mixed into it): each layer's layout, the
    conditions that tie a ref write to it, and the move."""

    def _layout_cache(self) -> dict[int, tuple[float, Layout]]:
        cache = getattr(self, "_layouts", None)
        if cache is None:
            cache = self._layouts = {}
        return cache

    def store_current(self) -> bool:
        """The store uses this layout throughout (its hyperplane record carries the version).
        Once true it stays true (cached); a legacy store's answer is read again each time."""
        if getattr(self, "_store_current", False):
            return True
        item = self._get("META", "LSH")
        current = item is not None and item.version is not None and int(item.version) >= REF_LAYOUT_VERSION
        self._store_current = current
        return current

    def _remember(self, layer: int, item) -> Layout:
        # a store without hyperplanes has no refs yet: its layers are new ones
        current = item is not None or self.store_current()
        layout = layout_of(item, layer, current)
        self._layout_cache()[layer] = (time.monotonic(), layout)
        return layout

    def forget_layouts(self) -> None:
        self._layout_cache().clear()

    def layout(self, layer: int) -> Layout:
        """The layout to read ``layer`` with (cached for LAYOUT_TTL seconds): the source layout
        while a move runs, which stays whole until the flip."""
        held = self._layout_cache().get(layer)
        if held is not None and time.monotonic() - held[0] < LAYOUT_TTL:
            return held[1]
        return self._remember(layer, self._get("COUNT", f"LAYER#{layer}"))

    def write_layout(self, layer: int) -> Layout:
        """The layout to write ``layer`` with: a move found unfinished is finished first."""
        layout = self.layout(layer)
        if layout.moving is not None:
            layout = self.move_layer(layer, layout.moving)
        return layout

    def layout_condition(self, layer: int, layout: Layout):
        """The condition on ``layer``'s counter under which a ref write made with ``layout`` is
        right: the counter still says that layout, and no move has begun."""
        Item = self.Item
        if layout.legacy:
            return Item.bits.does_not_exist() & Item.moving.does_not_exist()
        same = (Item.bits == layout.bits) & Item.moving.does_not_exist()
        return (Item.PK.does_not_exist() | same) if layout.bits == 0 else same

    def layout_actions(self, layout: Layout) -> list:
        """Set with every counter write of the current layout, so that a counter created by
        one says its layout (a counter without ``bits`` is a legacy layer's)."""
        return [] if layout.legacy else [self.Item.bits.set(layout.bits)]

    # ----- the move -----
    def _update_counter(self, layer: int, actions: list, condition) -> bool:
        try:
            self.Item(PK="COUNT", SK=f"LAYER#{layer}").update(actions=actions, condition=condition)
            return True
        except UpdateError as exc:
            if _is_condition_failure(exc):
                return False
            raise

    def move_layer(self, layer: int, to_bits: int) -> Layout:
        """Re-partition ``layer`` to 2^to_bits partitions in the current key format (a legacy
        layer to the current format at any bits), or finish the move that is under way (to its
        own target). Returns the layout the layer has afterwards."""
        Item = self.Item
        for _attempt in range(10):
            item = self._get("COUNT", f"LAYER#{layer}")
            src = layout_of(item, layer, item is not None or self.store_current())
            if item is not None and item.value and item.moving is None:
                self._clean(layer, item)  # a flip whose source was not cleaned yet
                continue
            if src.moving is None:
                if not src.legacy and src.bits == to_bits:
                    return self._remember(layer, item)
                claim = [Item.moving.set(to_bits), Item.value.set(json.dumps({"next": 0}))]
                if item is None:
                    claim.append(Item.version.add(0))
                if not self._update_counter(layer, claim, self.layout_condition(layer, src)):
                    continue  # the layout changed meanwhile: read it again
                src = Layout(src.bits, src.legacy, to_bits)
                if src.legacy:
                    self._count_legacy_segments(layer)
            self._copy(layer, src)
            target = src.moving
            flip = [Item.bits.set(target), Item.moving.remove(),
                    Item.value.set(json.dumps({"clean": {"bits": src.bits, "legacy": src.legacy}}))]
            source = (Item.bits.does_not_exist() if src.legacy else Item.bits == src.bits)
            self._update_counter(layer, flip, (Item.moving == target) & source)
            item = self._get("COUNT", f"LAYER#{layer}")
            if item is not None and item.value and item.moving is None:
                self._clean(layer, item)
                item = self._get("COUNT", f"LAYER#{layer}")
            layout = self._remember(layer, item)
            if layout.moving is None:
                return layout
        raise RuntimeError(f"layer {layer}: the ref layout kept changing while it was being moved")

    def _shard_count(self, layout: Layout) -> int:
        return 1 << min(layout.bits, self.code_bits)

    def _copy(self, layer: int, src: Layout) -> None:
        """Copy the source partitions into the target layout, from the progress kept on the
        counter on; the items hold still (every ref write of the layer fails its condition)."""
        Item = self.Item
        item = self._get("COUNT", f"LAYER#{layer}")
        progress = json.loads(item.value) if item is not None and item.value else {}
        target = Layout(src.moving)
        shards = self._shard_count(src)
        for shard in range(int(progress.get("next", 0)), shards):
            with Item.batch_write() as batch:
                for ref in Item.query(src.partition(layer, shard), consistent_read=True):
                    code = self._code_of(ref.SK.split("#", 1)[0])
                    batch.save(Item(PK=target.partition(layer, self._shard_of(code, target.bits)), SK=ref.SK,
                                    seg=ref.seg, live=ref.live))
            if not self._update_counter(layer, [Item.value.set(json.dumps({"next": shard + 1}))],
                                        Item.moving == src.moving):
                return  # another writer finishing the move flipped it meanwhile

    def _clean(self, layer: int, item) -> None:
        """Delete the partitions a flipped move left (idempotent), then forget them."""
        Item = self.Item
        pending = json.loads(item.value).get("clean")
        if pending is not None:
            src = Layout(int(pending["bits"]), bool(pending["legacy"]))
            for shard in range(self._shard_count(src)):
                with Item.batch_write() as batch:
                    for ref in Item.query(src.partition(layer, shard), consistent_read=True,
                                          attributes_to_get=["PK", "SK"]):
                        batch.delete(ref)
        self._update_counter(layer, [Item.value.remove()], Item.value == item.value)

    def _shard_of(self, code: int, bits: int) -> int:
        """A code's shard by its top LSH bits (a placed code's access partition, above them, is
        not looked at: every partition spreads over the same shards, domain.access)."""
        return lsh_part(code, self.code_bits) >> max(self.code_bits - bits, 0)

    def _code_hex(self, code: int) -> str:
        """A code as its ref's sort-key prefix, in code order: the open partition's codes as
        they always were (hex of code_bits' width), another partition's as ``~`` + its index
        (hex of the index bits' width: 11 digits with 20 hyperplanes) + its LSH code, after
        every open one (``~`` sorts after hex digits)."""
        width = (self.code_bits + 3) // 4
        index = index_of(code, self.code_bits)
        if not index:
            return f"{code:0{width}x}"
        return f"~{index:0{self._index_width}x}{lsh_part(code, self.code_bits):0{width}x}"

    @property
    def _index_width(self) -> int:
        return (index_bits(self.code_bits) + 3) // 4

    def _code_of(self, text: str) -> int:
        if not text.startswith("~"):
            return int(text, 16)
        cut = 1 + self._index_width
        return placed(int(text[cut:], 16), int(text[1:cut], 16), self.code_bits)

    def grow_if_due(self, layer: int, count: int) -> None:
        """Move ``layer`` to more partitions when ``count`` has passed its step."""
        layout = self.layout(layer)
        if layout.legacy or layout.moving is not None:
            return
        want = target_bits(count)
        if want > layout.bits:
            self.move_layer(layer, want)

    def migrate_ref_layout(self) -> dict:
        """Move every legacy layer to the current layout, then stamp the store. Resumable: run
        it again after a kill and it finishes what is left. Returns what it did."""
        moved: dict[int, int] = {}
        if self.store_current():
            return {"moved": moved, "current": True}
        layer = 0
        counters = self._counters()
        top = max(counters, default=-1)
        while layer <= top or self._legacy_refs_exist(layer):
            layout = self.layout(layer)
            if layout.legacy or layout.moving is not None:
                to = layout.moving if layout.moving is not None else target_bits(max(counters.get(layer, 0), 0))
                moved[layer] = self.move_layer(layer, to).bits
            layer += 1
        Item = self.Item
        lsh = Item(PK="META", SK="LSH")
        try:
            lsh.update(actions=[Item.version.set(REF_LAYOUT_VERSION)], condition=Item.PK.exists())
        except UpdateError as exc:
            if not _is_condition_failure(exc):
                raise
        self._store_current = False
        self.forget_layouts()
        return {"moved": moved, "current": self.store_current()}

    def _legacy_refs_exist(self, layer: int) -> bool:
        legacy = Layout(legacy_bits(layer), legacy=True)
        for shard in range(self._shard_count(legacy)):
            if any(True for _ in self.Item.query(legacy.partition(layer, shard), limit=1, consistent_read=True)):
                return True
        return False
