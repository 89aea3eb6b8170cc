"""The entity graph in the DynamoDB graph table (same table as the graph store, own key prefixes,
see ``models``):

    ENT#<e>      ENT              entity item, ``freq`` = occurrences over live chunks (ADD)
    ENT#<e>      CHUNK#<chunk>    posting, ``weight`` = occurrences of e in the chunk
    ENT#<e>      SENT#<sentence>  mention
    ENT#<e>      COOC#<e2>        co-occurrence, ``weight`` = sentences mentioning e and e2 (ADD);
                                  written in both directions so a neighbourhood is one Query
    CHUNK#<c>    ENTITIES         the chunk's sentences and entities (what removal must undo)
    META         ENTITY#GEN       generation (ADD 1 per change)
    META         ENTITY#COUNT     number of entities (ADD on creation / deletion)

Writes. A chunk's own items (its record, postings, mentions) belong to that chunk only and go
through BatchWriteItem. Counts that several chunks share (an entity's frequency, a pair's
co-occurrence weight) are UpdateItem ``ADD`` deltas, aggregated per call, so concurrent ingests
never lose an increment. A decrement that leaves a count at or below 0 deletes the item under the
condition ``count <= 0``: an increment that lands in between keeps it alive. An entity counts as
new when the ``ADD`` created its item (the old image has no ``freq``); an entity is gone when the
conditional delete of its item succeeded.

Reads are key lookups: BatchGetItem of entity or chunk items (frequencies, existing,
chunk_entities, sentences), one Query per entity on its own partition (postings, co-occurrences,
mentions), run on a small thread pool. No per-query read scans the table, hence
``can_export = False`` (graph retrieval then walks neighbourhoods with push-style PPR).
``export()`` is a full Scan of the table (cached per generation), for reindexing, audits and
debugging, never for answering a query.

Not idempotent: a writer that dies between the chunk record and the last counter update leaves
counts that a re-ingest of the same chunk does not repair (it subtracts the full record); the
same holds for a removal that dies between its counter updates and the deletion of the record
(which comes last). ``export()`` compared with a recount of the chunk records detects drift.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from pynamodb.constants import ALL_NEW, UPDATED_OLD
from pynamodb.exceptions import DeleteError

from ...ports_entity import ChunkEntities, EntityMatrices, Sentence, SentenceMentions, build_matrices
from .dynamodb import BATCH_GET, _is_condition_failure
from .models import TableModels, build_models

T = TypeVar("T")
R = TypeVar("R")

ENT = "ENT#"
CHUNK = "CHUNK#"
SENT = "SENT#"
COOC = "COOC#"
GEN_KEY = ("META", "ENTITY#GEN")
COUNT_KEY = ("META", "ENTITY#COUNT")


def _chunk_to_json(chunk: ChunkEntities) -> str:
    return json.dumps({"s": [[s.text, list(s.entities)] for s in chunk.sentences]}, ensure_ascii=False)


def _chunk_from_json(chunk_id: str, raw: str) -> ChunkEntities:
    data = json.loads(raw)
    return ChunkEntities(chunk_id, tuple(SentenceMentions(t, tuple(e)) for t, e in data["s"]))


def _number(attrs: dict[str, Any] | None, name: str) -> float | None:
    value = (attrs or {}).get(name)
    return None if value is None else float(value["N"])


class DynamoEntityStore:
    can_export = False  # export() scans the table: reindex/debug only

    def __init__(self, table_name: str, region: str | None = None, host: str | None = None,
                 models: TableModels | None = None, workers: int = 8, consistent_reads: bool = True) -> None:
        self.models = models or build_models(table_name, region, host)
        self.Item = self.models.item
        self.workers = max(1, int(workers))
        self.consistent = consistent_reads
        self._cache: EntityMatrices | None = None

    # ------------------------------------------------------------ helpers
    def _map(self, fn: Callable[[T], R], items: Sequence[T]) -> list[R]:
        if len(items) <= 1 or self.workers == 1:
            return [fn(x) for x in items]
        with ThreadPoolExecutor(max_workers=min(self.workers, len(items))) as pool:
            return list(pool.map(fn, items))

    def _batch_get(self, keys: Sequence[tuple[str, str]]) -> list[Any]:
        keys = list(dict.fromkeys(keys))
        out: list[Any] = []
        for start in range(0, len(keys), BATCH_GET):
            out += list(self.Item.batch_get(keys[start:start + BATCH_GET], consistent_read=self.consistent))
        return out

    def _query(self, pk: str, prefix: str) -> list[Any]:
        return list(self.Item.query(pk, self.Item.SK.startswith(prefix), consistent_read=self.consistent))

    def _add(self, key: tuple[str, str], attr, delta: int, return_values: str) -> dict[str, Any] | None:
        """UpdateItem ``ADD attr delta``; the raw attributes of ``return_values``."""
        connection = self.Item._get_connection()
        response = connection.update_item(key[0], range_key=key[1], actions=[attr.add(delta)],
                                          return_values=return_values)
        return response.get("Attributes")

    def _decrement(self, key: tuple[str, str], attr, delta: int) -> bool:
        """Subtract ``delta``; delete the item when its count reached 0. True if it was deleted."""
        attrs = self._add(key, attr, -delta, ALL_NEW)
        left = _number(attrs, attr.attr_name)
        if left is None or left > 0:
            return False
        try:
            self.Item(PK=key[0], SK=key[1]).delete(condition=attr <= 0)
        except DeleteError as exc:
            if _is_condition_failure(exc):
                return False  # a concurrent ingest raised it again
            raise
        return True

    def _records(self, chunk_ids: Iterable[str]) -> dict[str, ChunkEntities]:
        items = self._batch_get([(f"{CHUNK}{c}", "ENTITIES") for c in dict.fromkeys(chunk_ids)])
        return {i.PK[len(CHUNK):]: _chunk_from_json(i.PK[len(CHUNK):], i.value) for i in items}

    def _bump_generation(self) -> None:
        self._add(GEN_KEY, self.Item.version, 1, UPDATED_OLD)

    # ------------------------------------------------------------ writes
    def add_chunks(self, chunks: Sequence[ChunkEntities]) -> list[str]:
        if not chunks:
            return []
        unique = list({c.chunk_id: c for c in chunks}.values())
        known = self._records(c.chunk_id for c in unique)
        if known:
            self._remove(known)
        freq: dict[str, int] = {}
        cooc: dict[tuple[str, str], int] = {}
        with self.Item.batch_write() as batch:
            for chunk in unique:
                batch.save(self.Item(PK=f"{CHUNK}{chunk.chunk_id}", SK="ENTITIES", value=_chunk_to_json(chunk)))
                for e, n in chunk.counts().items():
                    freq[e] = freq.get(e, 0) + n
                    batch.save(self.Item(PK=f"{ENT}{e}", SK=f"{CHUNK}{chunk.chunk_id}", weight=n))
                for sid, s in zip(chunk.sentence_ids(), chunk.sentences):
                    for e in dict.fromkeys(s.entities):
                        batch.save(self.Item(PK=f"{ENT}{e}", SK=f"{SENT}{sid}"))
                for pair, w in chunk.cooccurrences().items():
                    cooc[pair] = cooc.get(pair, 0) + w
        pairs = [(a, b, w) for (a, b), w in cooc.items()] + [(b, a, w) for (a, b), w in cooc.items()]
        self._map(lambda p: self._add((f"{ENT}{p[0]}", f"{COOC}{p[1]}"), self.Item.weight, p[2], UPDATED_OLD),
                  pairs)
        entities = list(freq)
        olds = self._map(lambda e: self._add((f"{ENT}{e}", "ENT"), self.Item.freq, freq[e], UPDATED_OLD), entities)
        new = [e for e, old in zip(entities, olds) if _number(old, "freq") is None]
        if new:
            self._add(COUNT_KEY, self.Item.version, len(new), UPDATED_OLD)
        self._bump_generation()
        return new

    def remove_chunks(self, chunk_ids: Iterable[str]) -> list[str]:
        records = self._records(chunk_ids)
        if not records:
            return []
        return self._remove(records)

    def _remove(self, records: dict[str, ChunkEntities]) -> list[str]:
        freq: dict[str, int] = {}
        cooc: dict[tuple[str, str], int] = {}
        with self.Item.batch_write() as batch:
            for cid, chunk in records.items():
                for e, n in chunk.counts().items():
                    freq[e] = freq.get(e, 0) + n
                    batch.delete(self.Item(PK=f"{ENT}{e}", SK=f"{CHUNK}{cid}"))
                for sid, s in zip(chunk.sentence_ids(), chunk.sentences):
                    for e in dict.fromkeys(s.entities):
                        batch.delete(self.Item(PK=f"{ENT}{e}", SK=f"{SENT}{sid}"))
                for pair, w in chunk.cooccurrences().items():
                    cooc[pair] = cooc.get(pair, 0) + w
        pairs = [(a, b, w) for (a, b), w in cooc.items()] + [(b, a, w) for (a, b), w in cooc.items()]
        self._map(lambda p: self._decrement((f"{ENT}{p[0]}", f"{COOC}{p[1]}"), self.Item.weight, p[2]), pairs)
        entities = list(freq)
        deleted = self._map(lambda e: self._decrement((f"{ENT}{e}", "ENT"), self.Item.freq, freq[e]), entities)
        gone = [e for e, d in zip(entities, deleted) if d]
        # the chunk record goes last: until then a retry can still find what to undo
        with self.Item.batch_write() as batch:
            for cid in records:
                batch.delete(self.Item(PK=f"{CHUNK}{cid}", SK="ENTITIES"))
        if gone:
            self._add(COUNT_KEY, self.Item.version, -len(gone), UPDATED_OLD)
        self._bump_generation()
        return gone

    # ------------------------------------------------------------ reads
    def sentence_ids_of_chunks(self, chunk_ids: Iterable[str]) -> list[str]:
        chunk_ids = list(chunk_ids)
        records = self._records(chunk_ids)
        return [sid for c in dict.fromkeys(chunk_ids) if c in records for sid in records[c].sentence_ids()]

    def _per_entity(self, entities: Iterable[str], prefix: str, only_existing: bool) -> dict[str, list[Any]]:
        names = list(dict.fromkeys(entities))
        if only_existing:
            live = self.existing(names)
            names = [e for e in names if e in live]
        rows = self._map(lambda e: self._query(f"{ENT}{e}", prefix), names)
        return dict(zip(names, rows))

    def postings(self, entities: Iterable[str]) -> dict[str, dict[str, int]]:
        rows = self._per_entity(entities, CHUNK, only_existing=False)
        return {e: {i.SK[len(CHUNK):]: int(i.weight) for i in items} for e, items in rows.items() if items}

    def chunk_entities(self, chunk_ids: Iterable[str]) -> dict[str, dict[str, int]]:
        chunk_ids = list(chunk_ids)
        records = self._records(chunk_ids)
        return {c: records[c].counts() for c in dict.fromkeys(chunk_ids) if c in records}

    def cooccurring(self, entities: Iterable[str]) -> dict[str, dict[str, int]]:
        rows = self._per_entity(entities, COOC, only_existing=True)
        return {e: {i.SK[len(COOC):]: int(i.weight) for i in items} for e, items in rows.items()}

    def sentences_of(self, entities: Iterable[str]) -> dict[str, list[str]]:
        rows = self._per_entity(entities, SENT, only_existing=True)
        return {e: sorted(i.SK[len(SENT):] for i in items) for e, items in rows.items()}

    def get_sentences(self, sentence_ids: Iterable[str]) -> dict[str, Sentence]:
        wanted = []
        for sid in dict.fromkeys(sentence_ids):
            cid, _, idx = sid.rpartition("#s")
            if cid and idx.isdigit():
                wanted.append((sid, cid, int(idx)))
        records = self._records(cid for _, cid, _ in wanted)
        out = {}
        for sid, cid, idx in wanted:
            chunk = records.get(cid)
            if chunk is None or idx >= len(chunk.sentences):
                continue
            s = chunk.sentences[idx]
            out[sid] = Sentence(sid, cid, s.text, tuple(dict.fromkeys(s.entities)))
        return out

    def frequencies(self, entities: Iterable[str]) -> dict[str, int]:
        items = self._batch_get([(f"{ENT}{e}", "ENT") for e in entities])
        return {i.PK[len(ENT):]: int(i.freq) for i in items if i.freq is not None and i.freq > 0}

    def existing(self, entities: Iterable[str]) -> set[str]:
        return set(self.frequencies(entities))

    def entity_count(self) -> int:
        try:
            item = self.Item.get(*COUNT_KEY, consistent_read=True)
        except self.Item.DoesNotExist:
            return 0
        return int(item.version or 0)

    def generation(self) -> int:
        try:
            item = self.Item.get(*GEN_KEY, consistent_read=True)
        except self.Item.DoesNotExist:
            return 0
        return int(item.version or 0)

    def chunk_ids(self) -> set[str]:
        """Every chunk with an entity record (a Scan: audits and tests only)."""
        items = self.Item.scan(self.Item.PK.startswith(CHUNK) & (self.Item.SK == "ENTITIES"),
                               consistent_read=True, attributes_to_get=["PK", "SK"])
        return {i.PK[len(CHUNK):] for i in items}

    def export(self) -> EntityMatrices:
        """The whole entity graph as matrices, from one paginated Scan of the entity items (its
        cost grows with the table: reindex, audits and debugging only, never per query)."""
        generation = self.generation()
        if self._cache is not None and self._cache.generation == generation:
            return self._cache
        postings, mentions, cooc = [], [], []
        for item in self.Item.scan(self.Item.PK.startswith(ENT), consistent_read=True):
            entity, sk = item.PK[len(ENT):], item.SK
            if sk.startswith(CHUNK):
                postings.append((entity, sk[len(CHUNK):], int(item.weight)))
            elif sk.startswith(SENT):
                mentions.append((sk[len(SENT):], entity))
            elif sk.startswith(COOC) and entity < sk[len(COOC):]:
                cooc.append((entity, sk[len(COOC):], int(item.weight)))
        self._cache = build_matrices(generation, postings, mentions, cooc)
        return self._cache

