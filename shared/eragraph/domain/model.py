"""The records the engine keeps: documents, nodes, segments, the LSH configuration, messages."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any


class EragraphError(Exception):
    """Base class of the errors Eragraph reports to its users."""


class EmbedderMismatchError(EragraphError):
    """A store built with one embedder was opened with another."""


class ConflictError(EragraphError):
    """A conditional write lost against a concurrent writer; retry."""


class BadInputError(EragraphError):
    """A document could not be read (empty, binary, not UTF-8, too large...)."""

    refusal = "unreadable"  # its failed status's reason (domain.refusals) when none is attached


DELETED = "deleted"  # the status of a tombstone: a document removed by a versioned delete


class ItemTooLargeError(BadInputError):
    """A document or node would not fit one item of the store (DynamoDB: 400 KB)."""

    refusal = "too_large_to_store"


class LexicalIndexMissing(EragraphError):
    """The store was built before it had a lexical (BM25) index; `eragraph reindex` builds it."""

    def __init__(self, where: str = "this store") -> None:
        super().__init__(f"{where} has no lexical (BM25) index yet (built before it existed): "
                         "run `eragraph reindex` to build it")


@dataclass(frozen=True)
class Document:
    """A document, or (``status == DELETED``) the tombstone a versioned delete leaves: its
    source and ``version`` only, so that an older event arriving later is recognized as stale.

    ``version`` orders the writes of one source: the S3 ``sequencer`` of the event that wrote it
    (domain.sequencer compares them), empty when the source has none (local files: the last
    call wins)."""

    doc_id: str
    source: str
    content_hash: str
    title: str = ""
    chunk_ids: tuple[str, ...] = ()
    status: str = "indexed"
    meta: dict[str, Any] = field(default_factory=dict)
    version: str = ""
    # the user's attributes (domain.filters.check_metadata): what filters select on, with the
    # built-in source, doc_id and title; ``meta`` above is the engine's own bookkeeping
    metadata: dict[str, Any] = field(default_factory=dict)

    @property
    def is_tombstone(self) -> bool:
        return self.status == DELETED

    def stamp(self) -> tuple[str, str, str]:
        """What a conditional write compares: (content hash, version, status)."""
        return (self.content_hash, self.version, self.status)


class _AnyVersion:
    def __repr__(self) -> str:
        return "ANY_VERSION"


ANY_VERSION: Any = _AnyVersion()  # put_document(expected=ANY_VERSION): an unconditional write


@dataclass(frozen=True)
class Node:
    """A node of the summary graph: a chunk (layer 0) or a summary (layer >= 1)."""

    node_id: str
    layer: int
    text: str
    tokens: int
    code: int
    doc_id: str = ""
    source: str = ""
    children: tuple[str, ...] = ()
    # a chunk's place in its document (domain.places): () unknown or a summary, (start, end),
    # or (start, end, first page, last page)
    place: tuple[int, ...] = ()

    @property
    def is_summary(self) -> bool:
        return self.layer > 0


@dataclass(frozen=True)
class NodeRef:
    """The part of a node that partitioning needs."""

    node_id: str
    code: int


@dataclass(frozen=True)
class RefState:
    """A node's entry in a layer's code-ordered index, as the scoped reconcile reads it.

    ``seg`` is the stored segment the node belongs to (None: added since that layer was last
    reconciled); ``live`` is False for a tombstone (removed since; kept until the reconcile
    that takes it out of its segment). So one read gives both the node set the stored segments
    partition (``old``) and the current one (``live``)."""

    node_id: str
    code: int
    seg: str | None = None
    live: bool = True

    @property
    def old(self) -> bool:
        return self.seg is not None

    @property
    def changed(self) -> bool:
        return not (self.live and self.old)  # added, removed, or added and removed


@dataclass(frozen=True)
class Segment:
    """A group of nodes of one layer; it owns exactly one summary node in the layer above."""

    segment_id: str
    layer: int
    members: tuple[str, ...]
    summary_id: str


@dataclass(frozen=True)
class MetaWrite:
    """A meta write one step leaves for a later write to carry: MetaStore.write_meta's
    arguments (``puts`` (key, value), ``deletes``, ``clear`` (key, at most), ``present`` node
    ids). A reconcile's end (its change record, its finished outbox entries, its shard's
    marker) rides with its announce to the layer above, whose first region write carries it
    (RegionChange.finish): one write fewer a layer (services.resummarize)."""

    puts: tuple[tuple[str, Any], ...] = ()
    deletes: tuple[str, ...] = ()
    clear: tuple[tuple[str, float], ...] = ()
    present: tuple[str, ...] = ()

    @property
    def empty(self) -> bool:
        return not (self.puts or self.deletes or self.clear or self.present)

    @property
    def items(self) -> int:
        return len(self.puts) + len(self.deletes) + len(self.clear) + len(self.present)

    def merged(self, other: MetaWrite | None) -> MetaWrite:
        if other is None or other.empty:
            return self
        clear: dict[str, float] = {}
        for key, at_most in self.clear + other.clear:  # one clear a key (a write names an item once):
            clear[key] = max(at_most, clear.get(key, at_most))  # either end alone would delete up to its own
        puts = dict(self.puts)
        puts.update(other.puts)
        return MetaWrite(tuple(puts.items()), tuple(dict.fromkeys(self.deletes + other.deletes)),
                         tuple(clear.items()), tuple(dict.fromkeys(self.present + other.present)))

    def to_dict(self) -> dict[str, Any]:
        return {"puts": [[k, v] for k, v in self.puts], "deletes": list(self.deletes),
                "clear": [[k, at] for k, at in self.clear], "present": list(self.present)}

    @classmethod
    def from_dict(cls, data: Any) -> MetaWrite:
        """Checked as a message's part is (ValueError), in time linear in its size."""
        if not isinstance(data, dict):
            raise ValueError("bad carried write in message")
        puts, deletes = data.get("puts", []), data.get("deletes", [])
        clear, present = data.get("clear", []), data.get("present", [])
        if not all(isinstance(x, list) for x in (puts, deletes, clear, present)) or \
                len(puts) + len(deletes) + len(clear) + len(present) > MAX_CARRIED:
            raise ValueError("bad carried write in message")
        # only what a reconcile's end writes: its change records, its finished outbox entries and
        # retired texts, its shard's marker (a message names no other key)
        if any(not (isinstance(p, list) and len(p) == 2 and isinstance(p[0], str)
                    and p[0].startswith(CARRIED_PUTS)) for p in puts) or \
                any(not (isinstance(k, str) and k.startswith(CARRIED_DELETES)) for k in deletes) or \
                any(not isinstance(i, str) for i in present) or \
                any(not (isinstance(c, list) and len(c) == 2 and isinstance(c[0], str) and c[0].startswith(CARRIED_CLEARS)
                         and isinstance(c[1], int | float) and not isinstance(c[1], bool)) for c in clear):
            raise ValueError("bad carried write in message")
        return cls(tuple((k, v) for k, v in puts), tuple(deletes), tuple((k, float(at)) for k, at in clear),
                   tuple(present))


MAX_CARRIED = 100  # items a message may carry (a reconcile carries at most services.resummarize.CARRY_ITEMS)
CARRIED_PUTS, CARRIED_DELETES, CARRIED_CLEARS = ("change:",), ("outbox:", "retired:"), ("dirty:",)


@dataclass(frozen=True)
class RegionChange:
    """One region's re-cut, applied atomically by GraphStore.apply_region.

    ``expected``: the region's refs as the reconcile read them; if any of them no longer is so
    (another writer got there first), nothing is written and ConflictError is raised."""

    layer: int
    expected: tuple[RefState, ...]
    assign: tuple[tuple[str, str | None], ...] = ()  # (live node id, its new segment or None)
    drop: tuple[str, ...] = ()  # tombstones to take out of the index
    add: tuple[Segment, ...] = ()
    remove: tuple[str, ...] = ()  # segment ids
    removed: tuple[Segment, ...] = ()  # the stored records of ``remove`` as read (their sizes)
    above_add: tuple[NodeRef, ...] = ()  # summaries of ``add``: live in layer + 1 from now on
    above_remove: tuple[NodeRef, ...] = ()  # summaries of ``remove``: tombstones in layer + 1
    # meta keys stored in the same write as the change (the reconcile's outbox entry and the
    # dirty markers of the layer above), (key, value) pairs: written with it or not at all
    marks: tuple[tuple[str, Any], ...] = ()
    # the node items of the summaries in ``above_remove`` are deleted in the same write (each
    # not live from it on; one made live again later is stored again: apply_region refuses a
    # summary whose node is missing), where delete_dead_nodes deleted them after it
    delete_removed: bool = False
    # (summary id, meta key, value): stored in the same write when that summary of
    # ``above_remove`` stays a tombstone above (a segment there still names it: the text a
    # revision of that segment reads, services.revisions)
    keep_texts: tuple[tuple[str, str, Any], ...] = ()
    # (ledger kind, calls, tokens in, tokens out, seconds): added to the cost ledger by the
    # same write (what the region's summaries cost; MetaStore.add_ledger's rows)
    ledger: tuple[tuple[str, int, int, int, float], ...] = ()
    # summary nodes of ``above_add`` stored by the same write (as put_nodes(index=False), before
    # their refs name them), not by an earlier one: the new summaries of a region that made few
    # (services.summarizing.FOLDED_SUMMARIES); apply_region refuses any other of ``above_add``
    # whose node is missing
    nodes: tuple[Node, ...] = ()
    # a meta write carried by this one (a reconcile's end below: MetaWrite), in the same write
    # where the store can; its conditions never refuse the region (a clear that does not hold
    # leaves its key; a ``present`` node not stored comes back in RegionApplied.gone)
    finish: MetaWrite | None = None

    @property
    def empty(self) -> bool:
        return not (self.assign or self.drop or self.add or self.remove or self.above_add
                    or self.above_remove)


@dataclass(frozen=True)
class RegionApplied:
    """What GraphStore.apply_region did above the region: the summaries of ``above_remove``
    whose node items it deleted (``RegionChange.delete_removed``), and those it left as
    tombstones (a segment above still names them)."""

    deleted: tuple[str, ...] = ()
    tombstoned: tuple[str, ...] = ()
    gone: tuple[str, ...] = ()  # nodes of ``finish.present`` not live when it was written


# Meta key prefix of a region apply that takes several writes (DynamoDB: a region larger than
# one transaction): ``applying:<layer>:<token>`` is written with the first write and deleted
# with the last, so while it is there the layer may hold part of a re-cut (services.resummarize
# then re-cuts the whole layer).
APPLYING = "applying:"


def applying_key(layer: int, token: str) -> str:
    return f"{APPLYING}{layer}:{token}"


# An ``applying:`` mark of a whole-layer pass applied region by region
# (domain.scoped.stream_regions): ``applying:<layer>:stream-<token>`` is written before its first
# region and deleted after its last, so while it is there the layer may hold part of a re-cut,
# and any reconcile of it walks the layer again (the regions done before find nothing to
# change) instead of holding it whole. It shares the prefix so that one read finds both kinds.
STREAM_TOKEN = "stream-"


def streaming_key(layer: int, token: str) -> str:
    return applying_key(layer, STREAM_TOKEN + token)


def is_streaming(key: str) -> bool:
    return key.rpartition(":")[2].startswith(STREAM_TOKEN)


@dataclass(frozen=True)
class LshConfig:
    """Hyperplanes drawn once and reused for every layer and every later insert."""

    embedder_id: str
    dim: int
    n_planes: int
    seed: int
    planes: tuple[tuple[float, ...], ...]


@dataclass(frozen=True)
class SegmentsAffected:
    """Message: the node set of ``layer`` changed; reconcile its segments."""

    layer: int
    added: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    reason: str = ""
    # LSH codes of the changed nodes: where to look (empty: everywhere); a tuple, or
    # the in-process queue's code_list.CodeList (8 bytes a code)
    codes: Sequence[int] = ()
    group: int | None = None  # the code-prefix shard these codes fall in (FIFO message group)
    op: str = ""  # the operation that sent it: names the message for deduplication
    # when it was sent (epoch seconds; 0: not said, a message of an older version): a
    # whole-layer pass that started later saw its change (services.resummarize.covered)
    at: float = 0.0
    # what the reconcile that sent it left to write (its change record, finished outbox entries
    # and marker): written by this message's reconcile with its first region write or its own end
    after: MetaWrite | None = None

    @property
    def scoped(self) -> bool:
        """True when the message says where the layer changed (else the whole layer is
        reconciled: reindex requeues, messages of older versions)."""
        return bool(self.codes)

    def dedup_key(self) -> str:
        """Pending messages for the same layer and shard coalesce: one reconcile covers them."""
        return f"layer:{self.layer}" if self.group is None else f"layer:{self.layer}:{self.group}"

    def merged(self, other: SegmentsAffected) -> SegmentsAffected:
        """One message that covers both (same dedup key); a whole-layer one absorbs a scoped one."""
        scoped = self.scoped and other.scoped
        return SegmentsAffected(
            layer=self.layer,
            added=tuple(dict.fromkeys(self.added + other.added)),
            removed=tuple(dict.fromkeys(self.removed + other.removed)),
            reason=self.reason if self.reason == other.reason else f"{self.reason}+{other.reason}",
            codes=tuple(sorted(set(self.codes) | set(other.codes))) if scoped else (),
            group=self.group if self.group == other.group else None,
            op=self.op,
            at=max(self.at, other.at) if self.at and other.at else 0.0,
            after=other.after if self.after is None else self.after.merged(other.after),
        )

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "type": "SegmentsAffected",
            "layer": self.layer,
            "added": list(self.added),
            "removed": list(self.removed),
            "reason": self.reason,
        }
        if self.codes:
            out["codes"] = list(self.codes)
        if self.group is not None:
            out["group"] = self.group
        if self.op:
            out["op"] = self.op
        if self.at:
            out["at"] = self.at
        if self.after is not None and not self.after.empty:
            out["after"] = self.after.to_dict()
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SegmentsAffected:
        if not isinstance(data, dict) or data.get("type") != "SegmentsAffected":
            raise ValueError("not a SegmentsAffected message")
        layer = data.get("layer")
        if not isinstance(layer, int) or isinstance(layer, bool) or layer < 0:
            raise ValueError(f"bad layer in message: {layer!r}")
        codes = data.get("codes", ())
        if not isinstance(codes, list | tuple) or any(
                not isinstance(c, int) or isinstance(c, bool) or c < 0 for c in codes):
            raise ValueError("bad codes in message")
        group = data.get("group")
        if group is not None and (not isinstance(group, int) or isinstance(group, bool) or group < 0):
            raise ValueError(f"bad group in message: {group!r}")
        at = data.get("at", 0.0)
        if not isinstance(at, int | float) or isinstance(at, bool) or not 0 <= at < 1e11:
            raise ValueError(f"bad time in message: {at!r}")
        return cls(
            layer=layer,
            added=tuple(str(x) for x in data.get("added", ())),
            removed=tuple(str(x) for x in data.get("removed", ())),
            reason=str(data.get("reason", "")),
            codes=tuple(int(c) for c in codes),
            group=group,
            op=str(data.get("op", "")),
            at=float(at),
            after=MetaWrite.from_dict(data["after"]) if "after" in data else None,
        )
