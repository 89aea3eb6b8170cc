"""The entity graph kept in memory by a warm reader (the query function), brought up to date
once per question from what the writers log, so that a graph walk reads no item per entity.

``WarmEntityReads`` wraps a ``DynamoEntityStore``: writes, synonyms, counts and the generation
go to the store; the walk's reads (postings, chunk_entities, cooccurring, sentences_of,
get_sentences, frequencies, existing, sentence_ids_of_chunks) are answered from the chunks'
entity records (``CHUNK#<c> ENTITIES``) held in memory, with the indexes a walk needs (postings,
mentions, frequencies) derived from them; an entity's co-occurrences are counted from its
sentences when first asked and kept until a change touches it. Everything those reads return is a
function of the complete records, so the answers are the store's own (a record is written
after its counters and postings, and deleted before them; what a reader may see differently
is an add or removal still under way, which the store's reads would show half done).

Reads are answered from memory only inside ``reading()`` (services.graph_query wraps each walk
in it: a ``refresh()`` first); outside it (an ingest's or a removal's reads, in a process that
also writes) they go to the store, as without this class.

``refresh()``:

1. one GetItem of the generation (``META ENTITY#GEN``): unchanged, nothing else is read;
2. one Query of the log (``ENTLOG``, one item per generation, written by the store after its
   ADD): the chunks changed since the generation held, whose records are then read again
   (BatchGetItem, 100 a request, side by side) and replace the held ones;
3. a full read (the first question, a ``full`` entry, the log expired): the layer-0 chunk ids
   (``chunk_ids``, given by the composition root: the graph store's ref index) and their
   records, 100 a BatchGetItem, side by side.

With ``snapshots`` (adapters/aws/entity_snapshot_s3: one S3 object per tenant, written by the
scheduled reindex with ``keep_snapshot``), the first question takes the records from the
object instead of 3, when the object is young enough and not ahead of the store, and goes on
from its generation with 1 and 2.

A generation missing from the log (a writer between its ADD and its log write, or one that
died there) stops the refresh at the generation before it; the next refresh looks again, and
after ``GAP_SECONDS`` of the same gap reads everything.

Memory: the records of every chunk and their indexes, 4.6 to 6.0 KB a chunk held on the four
dev corpora and up to 8.3 KB at the peak of taking a snapshot (bench-results/warm-memory.json;
about 5 GB at 1M chunks); the co-occurrences counted for the questions asked come on top, at
most what an index of them all would hold (6.0 to 7.5 KB a chunk with it:
warm-memory-before.json). ``max_chunks`` bounds it
(``held_chunk_cap``: what a function's memory leaves after its own ``BASELINE_MB``, at
``HELD_BYTES_PER_CHUNK``): a tenant of more chunks (the snapshot's metadata, the layer-0 size
counter before a full read, or the records a refresh leaves) is not held, and its walks read the
store's batched neighbourhoods, as without this class, for the rest of the function's life."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from ...ports.entity import ChunkEntities, Sentence
from .dynamodb_table import BATCH_GET
from .entity_dynamodb import CHUNK, LOG_PK, DynamoEntityStore, _chunk_from_json, log_sk
from .entity_snapshot_s3 import MAX_AGE, S3EntitySnapshots, Snapshot, TooManyChunks, no_cyclic_gc
from .round_trips import fan_out

GAP_SECONDS = 30.0
COOC_MEMO = 100_000  # entities whose co-occurrences are kept once counted (then counted afresh)
REWRITE_AGE = MAX_AGE / 2  # an unchanged tenant's object is written again only once it is this old
READ_LANES = 16  # BatchGetItem requests side by side in a full read
HELD_BYTES_PER_CHUNK = 9 * 1024  # above the largest peak measured (8.3 KB a chunk, MultiHop-RAG: bench warm)
BASELINE_MB = 256  # a function's own memory: the runtime, its libraries and clients, a question

log = logging.getLogger(__name__)


def held_chunk_cap(memory_mb: int | None) -> int | None:
    """The most chunks a function of ``memory_mb`` MB holds (None: no limit known)."""
    if not memory_mb:
        return None
    return max(0, (int(memory_mb) - BASELINE_MB) * 1024 * 1024 // HELD_BYTES_PER_CHUNK)


class WarmEntityReads:
    def __init__(self, store: DynamoEntityStore, chunk_ids: Callable[[], Iterable[str]],
                 clock: Callable[[], float] = time.monotonic, snapshots: S3EntitySnapshots | None = None,
                 wall: Callable[[], float] = time.time, max_chunks: int | None = None,
                 chunk_count: Callable[[], int] | None = None) -> None:
        self.store = store
        self.max_chunks = max_chunks
        self._chunk_count = chunk_count  # the tenant's layer-0 size, read before a full read
        self.over_cap: int | None = None  # the chunks found above max_chunks: nothing is held
        self._chunk_ids = chunk_ids
        self._clock = clock
        self.snapshots = snapshots
        self._wall = wall
        self.generation_held: int | None = None
        self.generation_seen: int | None = None  # the store's, at the last refresh
        self.snapshot_reads = 0
        self._gap: tuple[int, float] | None = None
        self.records: dict[str, ChunkEntities] = {}
        self._post: dict[str, dict[str, int]] = {}
        self._sents: dict[str, set[str]] = {}
        self._cooc: dict[str, dict[str, int]] = {}
        self.full_reads = 0
        self._depth = 0

    def __getattr__(self, name: str) -> Any:  # writes, synonyms, counts: the store's
        if name == "store":
            raise AttributeError(name)
        return getattr(self.store, name)

    @property
    def can_export(self) -> bool:
        return False

    @contextmanager
    def reading(self) -> Iterator[None]:
        """The walk of one question: brought up to date, then answered from memory (from the
        store when the tenant is too large to hold)."""
        self.refresh()
        if self.over_cap is not None:
            yield
            return
        self._depth += 1
        try:
            yield
        finally:
            self._depth -= 1

    # ------------------------------------------------------------ keeping up
    def refresh(self) -> None:
        if self.over_cap is not None:
            return
        current = self.store.generation()
        self.generation_seen = current
        if self.generation_held is None and self.snapshots is not None:
            self._from_snapshot(current)
            if self.over_cap is not None:
                return
        held = self.generation_held
        if held == current:
            return
        if held is None or held > current:
            self._read_all(current)
            return
        Item = self.store.Item
        logged = {int(i.SK): json.loads(i.value).get("chunks") for i in Item.query(
            LOG_PK, Item.SK.between(log_sk(held + 1), log_sk(current)), consistent_read=True)}
        touched: set[str] = set()
        reached = held
        for g in range(held + 1, current + 1):
            if g not in logged:
                break
            if logged[g] is None:
                self._read_all(current)
                return
            touched.update(logged[g])
            reached = g
        if reached < current:  # a gap: up to it now, and everything if it stays
            now = self._clock()
            gap = reached + 1
            if self._gap is not None and self._gap[0] == gap and now - self._gap[1] >= GAP_SECONDS:
                self._read_all(current)
                return
            if self._gap is None or self._gap[0] != gap:
                self._gap = (gap, now)
        else:
            self._gap = None
        fresh = self._read_records(sorted(touched))
        for cid in touched:
            self._set(cid, fresh.get(cid))
        self.generation_held = reached
        if self.max_chunks is not None and len(self.records) > self.max_chunks:
            self._release(len(self.records))

    def _read_records(self, chunk_ids: list[str]) -> dict[str, ChunkEntities]:
        Item = self.store.Item
        parts = [chunk_ids[i:i + BATCH_GET] for i in range(0, len(chunk_ids), BATCH_GET)]

        def read(part: list[str]) -> list[Any]:
            return list(Item.batch_get([(f"{CHUNK}{c}", "ENTITIES") for c in part], consistent_read=True))

        out = {}
        for items in fan_out(read, parts, READ_LANES):
            for i in items:
                cid = i.PK[len(CHUNK):]
                out[cid] = _chunk_from_json(cid, i.value)
        return out

    def _from_snapshot(self, current: int) -> None:
        """The records of the tenant's snapshot, when it is young enough for the log to hold
        every generation after it and not ahead of the store."""
        try:
            snapshot = self.snapshots.load(self.max_chunks) if self.snapshots is not None else None
        except TooManyChunks as exc:
            self._release(exc.chunks)
            return
        if snapshot is None or snapshot.generation > current or self._wall() - snapshot.taken_at >= MAX_AGE:
            return
        self._hold(snapshot.records, snapshot.generation)
        self.snapshot_reads += 1

    def keep_snapshot(self) -> dict:
        """Bring the records up to date (from the previous snapshot and the log, or from
        everything) and write them as the tenant's snapshot (the scheduled reindex's step). A
        gap in the log is not waited for here: everything is read. An object of the store's
        generation younger than ``REWRITE_AGE`` is left as it is (its metadata read, not its
        body). What it did, for the report."""
        if self.snapshots is None:
            return {}
        taken_at = self._wall()  # before the generation is read: every later one is logged after it
        head = self.snapshots.head()
        if head is not None and head.generation == self.store.generation() and taken_at - head.taken_at < REWRITE_AGE:
            # nothing changed since it was written, and readers will take it for a while yet
            return {"generation": head.generation, "chunks": head.chunks, "bytes": 0,
                    "read": "unchanged: the object is of the store's generation"}
        full_reads = self.full_reads
        self.generation_held, self.over_cap = None, None  # start from the object, as a cold reader would
        self.refresh()
        if self.over_cap is None and self.generation_held != self.generation_seen:
            self._read_all(int(self.generation_seen or 0))
        if self.over_cap is not None:
            # more than this function holds: no object (a reader would refuse it or run short of
            # memory); its walks read the store's neighbourhoods
            self.snapshots.delete()
            return {"generation": int(self.generation_seen or 0), "chunks": self.over_cap, "bytes": 0,
                    "read": f"not written: {self.over_cap} chunks, above the {self.max_chunks} this function holds"}
        snapshot = Snapshot(int(self.generation_held or 0), taken_at, dict(self.records))
        size = self.snapshots.save(snapshot)
        if self.store.generation() < snapshot.generation:
            # the generation went back: the tenant was deleted meanwhile (its deletion removes the
            # object after its items, so one of the two removes it), and a tenant made again with
            # its id must not find its predecessor's graph
            self.snapshots.delete()
            return {"generation": snapshot.generation, "chunks": 0, "bytes": 0, "read": "removed: the tenant is gone"}
        return {"generation": snapshot.generation, "chunks": len(snapshot.records), "bytes": size,
                "read": "everything" if self.full_reads > full_reads else "snapshot and log"}

    def _read_all(self, current: int) -> None:
        if self.max_chunks is not None and self._chunk_count is not None:
            counted = int(self._chunk_count())
            if counted > self.max_chunks:
                self._release(counted)
                return
        ids = sorted(set(self._chunk_ids()))
        if self.max_chunks is not None and len(ids) > self.max_chunks:
            self._release(len(ids))
            return
        self._hold(self._read_records(ids), current)
        self.full_reads += 1

    def _release(self, chunks: int) -> None:
        """Hold nothing: the tenant's ``chunks`` are more than ``max_chunks``."""
        self.records, self._post, self._sents, self._cooc = {}, {}, {}, {}
        self.generation_held, self._gap, self.over_cap = None, None, chunks
        log.warning("entity graph of %d chunks not held in memory (this function holds at most %d): "
                    "its walks read the table", chunks, self.max_chunks)

    def _hold(self, records: dict[str, ChunkEntities], generation: int) -> None:
        """Hold exactly ``records``, as of ``generation`` (a full read's or a snapshot's)."""
        self.records, self._post, self._sents, self._cooc = {}, {}, {}, {}
        with no_cyclic_gc():
            for cid, record in records.items():
                self._set(cid, record)
        self.generation_held = generation
        self._gap = None

    def _set(self, cid: str, record: ChunkEntities | None) -> None:
        old = self.records.pop(cid, None)
        if old is not None:
            self._index(old, -1)
        if record is not None:
            self.records[cid] = record
            self._index(record, 1)

    def _index(self, record: ChunkEntities, sign: int) -> None:
        cid = record.chunk_id
        for e, n in record.counts().items():
            row = self._post.setdefault(e, {})
            if sign > 0:
                row[cid] = n
            else:
                row.pop(cid, None)
                if not row:
                    del self._post[e]
        for sid, s in zip(record.sentence_ids(), record.sentences):
            for e in set(s.entities):
                if sign > 0:
                    self._sents.setdefault(e, set()).add(sid)
                else:
                    self._sents.get(e, set()).discard(sid)
                    if not self._sents.get(e, True):
                        del self._sents[e]
        for e in record.counts():  # their co-occurrences are counted again when asked
            self._cooc.pop(e, None)

    # ------------------------------------------------------------ reads
    def frequencies(self, entities: Iterable[str]) -> dict[str, int]:
        if not self._depth:
            return self.store.frequencies(entities)
        out = {}
        for e in entities:
            row = self._post.get(e)
            if row:
                out[e] = sum(row.values())
        return out

    def existing(self, entities: Iterable[str]) -> set[str]:
        if not self._depth:
            return self.store.existing(entities)
        return {e for e in entities if e in self._post}

    def postings(self, entities: Iterable[str]) -> dict[str, dict[str, int]]:
        if not self._depth:
            return self.store.postings(entities)
        return {e: dict(self._post[e]) for e in dict.fromkeys(entities) if e in self._post}

    def chunk_entities(self, chunk_ids: Iterable[str]) -> dict[str, dict[str, int]]:
        if not self._depth:
            return self.store.chunk_entities(chunk_ids)
        return {c: self.records[c].counts() for c in dict.fromkeys(chunk_ids) if c in self.records}

    def cooccurring(self, entities: Iterable[str]) -> dict[str, dict[str, int]]:
        if not self._depth:
            return self.store.cooccurring(entities)
        out = {}
        for e in dict.fromkeys(entities):
            if e not in self._post:
                continue
            row = self._cooc.get(e)
            if row is None:  # the sentences that mention e, each counting its other entities once
                row = {}
                for sid in self._sents.get(e, ()):
                    cid, _, idx = sid.rpartition("#s")
                    for x in set(self.records[cid].sentences[int(idx)].entities):
                        if x != e:
                            row[x] = row.get(x, 0) + 1
                if len(self._cooc) >= COOC_MEMO:
                    self._cooc.clear()
                self._cooc[e] = row
            out[e] = dict(row)
        return out

    def sentences_of(self, entities: Iterable[str]) -> dict[str, list[str]]:
        if not self._depth:
            return self.store.sentences_of(entities)
        return {e: sorted(self._sents.get(e, ())) for e in dict.fromkeys(entities) if e in self._post}

    def sentence_ids_of_chunks(self, chunk_ids: Iterable[str]) -> list[str]:
        if not self._depth:
            return self.store.sentence_ids_of_chunks(chunk_ids)
        return [sid for c in dict.fromkeys(chunk_ids) if c in self.records for sid in self.records[c].sentence_ids()]

    def get_sentences(self, sentence_ids: Iterable[str]) -> dict[str, Sentence]:
        if not self._depth:
            return self.store.get_sentences(sentence_ids)
        out = {}
        for sid in dict.fromkeys(sentence_ids):
            cid, _, idx = sid.rpartition("#s")
            record = self.records.get(cid)
            if not cid or not idx.isdigit() or record is None or int(idx) >= len(record.sentences):
                continue
            s = record.sentences[int(idx)]
            out[sid] = Sentence(sid, cid, s.text, tuple(dict.fromkeys(s.entities)))
        return out

