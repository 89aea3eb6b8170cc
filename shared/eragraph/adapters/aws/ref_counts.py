"""A layer's ref counts by code prefix on its counter (domain.prefix_counts), kept exact by the
transactions that write the refs.

The counter item ``COUNT``/``LAYER#<layer>`` already takes an ADD (or a ConditionCheck) in
every transaction that writes a ref of its layer (nodes_dynamodb, region_dynamodb). Those
transactions now also ADD each write's change to ``ho<group>`` (refs in a stored segment)
and ``hn<group>`` (live refs) of the ref's depth-bit group, and 1 to ``hw`` (the counts'
writes, which a repair's condition pins), top-level numbers because DynamoDB's ADD takes no
nested path. So the counts move exactly with the refs, under the same conditions, without a
request or an item more; the item grows to at most 512 small numbers (~6 KB: a few write
units more a transaction). The reconcile reads them with the layer sizes
(GraphStore.sizes_and_metas, one Query of the ``COUNT`` partition it makes anyway), and
answers a count of a group at most PREFIX_BITS deep from them (services.layer_reads).

Only a store created with the counts (its hyperplane record's ``version`` at least
PREFIX_COUNTS_VERSION) keeps and reads them: a store created before has layers whose refs
were never counted, and counts as before (its ``migrate_ref_layout`` stamps layout version 2,
never this one). ``repair_layer_counts`` recounts them with the layer counter and rewrites
them, conditioned on ``hw`` as read.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from typing import Any

from pynamodb.attributes import NumberAttribute

from ...domain.model import RefState
from ...domain.prefix_counts import PrefixCounts, tally

PREFIX_COUNTS_VERSION = 3  # the hyperplane record's ``version`` of a store that keeps the counts
WRITES = "hw"  # the counts' writes (ADD 1 with each change)
_KINDS = {"old": "ho", "new": "hn"}
_NAMES = {v: k for k, v in _KINDS.items()}


def attribute(kind: str, group: int) -> str:
    return f"{_KINDS[kind]}{group:x}"


def counts_of_raw(raw: dict[str, Any], n_bits: int) -> PrefixCounts:
    """The counts held on a counter item as DynamoDB returned it (its raw attributes)."""
    held: dict[tuple[str, int], int] = {}
    for name, value in raw.items():
        kind = _NAMES.get(name[:2])
        if kind is None or "N" not in value:
            continue
        try:
            group = int(name[2:], 16)
        except ValueError:
            continue
        held[(kind, group)] = int(value["N"])
    return PrefixCounts.of(n_bits, held)


class RefCounts:
    """Mixed into DynamoNodeStore: whether the store keeps the counts, each ref write's changes,
    the counts the last ``sizes_and_metas`` of this thread read, and their check."""

    code_bits: int
    Item: Any

    def prefix_counted(self) -> bool:
        """The store keeps the counts (its hyperplane record says so). Cached once known either
        way; a store without hyperplanes yet is asked again."""
        known = getattr(self, "_prefix_counted", None)
        if known is not None:
            return known
        item = self._get("META", "LSH")  # type: ignore[attr-defined]
        if item is None:
            return False
        known = self._prefix_counted = item.version is not None and int(item.version) >= PREFIX_COUNTS_VERSION
        return known

    def ref_tally(self, counted: bool, code: int, before: RefState | None, after: tuple[bool, bool] | None) -> dict:
        """The counts' changes of one ref write (``after``: (old, live); None: deleted) in a
        store that keeps them (``counted``: ``prefix_counted()``, asked once a write)."""
        if not counted:
            return {}
        was = (False, False) if before is None else (before.old, before.live)
        return tally(code, self.code_bits, was, after or (False, False))

    @staticmethod
    def count_actions(changes: dict) -> list:
        """The ADDs of ``changes`` (("old" | "new", group) -> delta) on a counter item."""
        actions = [NumberAttribute(attr_name=attribute(kind, group)).add(delta)
                   for (kind, group), delta in sorted(changes.items()) if delta]
        return actions + [NumberAttribute(attr_name=WRITES).add(1)] if actions else []

    # ----- what a reconcile read -----
    def _held(self) -> dict[int, PrefixCounts]:
        local = getattr(self, "_held_local", None)
        if local is None:
            local = self._held_local = threading.local()
        if not hasattr(local, "counts"):
            local.counts = {}
        return local.counts

    def hold_counts(self, raws: dict[int, dict[str, Any]]) -> None:
        """Keep the counts of the counter items just read (layer -> raw item), for this thread."""
        held = self._held()
        held.clear()
        if raws and self.prefix_counted():
            held.update({layer: counts_of_raw(raw, self.code_bits) for layer, raw in raws.items()})

    def held_prefix_counts(self, layer: int, codes: Iterable[int] = ()) -> PrefixCounts | None:
        """The counts of ``layer`` as this thread's last ``sizes_and_metas`` read them (None: not
        kept, or the layer had no counter then: an empty layer counts nothing worth keeping).
        The top level alone: ``codes`` (whose deeper counts SQLite adds) asks nothing here."""
        return self._held().get(layer)

    def raw_counter(self, layer: int) -> dict[str, Any] | None:
        """The counter item of ``layer`` with every attribute (the model drops the counts)."""
        return self._raw_get("COUNT", f"LAYER#{layer}")  # type: ignore[attr-defined]

    def prefix_counts_drift(self, layer: int, refs: list[RefState]) -> list[str]:
        """How the held counts of ``layer`` differ from those of ``refs`` (its every ref,
        tombstones included): nothing in a store that keeps them right, or keeps none."""
        if not self.prefix_counted():
            return []
        raw = self.raw_counter(layer) or {}
        return counts_of_raw(raw, self.code_bits).differences(PrefixCounts.of_refs(refs, self.code_bits))

    def recount_actions(self, raw: dict[str, Any] | None, refs: list[RefState]) -> tuple[list, Any]:
        """The actions that set the counts to those of ``refs`` on a counter held as ``raw``, and
        the condition that pins the counts read (``hw``); ([], None) when they already agree."""
        if not self.prefix_counted():
            return [], None
        held = counts_of_raw(raw or {}, self.code_bits)
        want = PrefixCounts.of_refs(refs, self.code_bits)
        if not held.differences(want):
            return [], None
        actions = []
        for kind, values in (("old", want.old), ("new", want.new)):
            for group, n in enumerate(values):
                name = attribute(kind, group)
                if n:
                    actions.append(NumberAttribute(attr_name=name).set(n))
                elif raw and name in raw:
                    actions.append(NumberAttribute(attr_name=name).remove())
        writes = NumberAttribute(attr_name=WRITES)
        seen = (raw or {}).get(WRITES, {}).get("N")
        condition = writes.does_not_exist() if seen is None else writes == int(seen)
        return actions + [writes.add(1)], condition
