"""The entity graph in the DynamoDB graph table (same table as the graph store, own key prefixes,
see ``models``):

    ENT#<e>      ENT              entity item, ``freq`` = occurrences over live chunks (ADD)
    ENT#<e>      CHUNK#<chunk>    posting, ``weight`` = occurrences of e in the chunk
    ENT#<e>      SENT#<sentence>  mention
    ENT#<e>      COOC#<e2>        co-occurrence, ``weight`` = sentences mentioning e and e2 (ADD);
                                  written in both directions so a neighbourhood is one Query
    ENT#<e>      SYN#<e2>         synonymy edge, ``weight`` = cosine of the names (both directions,
                                  plain puts: writing an edge again changes nothing); deleted
                                  with either entity (its SYN# items found by one Query)
    CHUNK#<c>    ENTITIES         the chunk's sentences and entities (what removal must undo)
    META         ENTITY#GEN       generation (ADD 1 per change)
    META         ENTITY#COUNT     number of entities (ADD on creation / deletion)

Writes, idempotent per chunk (a writer may die after any single request and be retried):

1. ``CHUNK#<c> PENDING`` is written first: the record being added and a token of this add.
2. The chunk's own items (postings, mentions) are plain puts: writing them twice is harmless.
3. The shared counters (an entity's ``freq``, a pair's co-occurrence ``weight``, both
   directions) are ``ADD`` deltas, so concurrent ingests never lose an increment. They are
   applied in parts of at most 99 updates, each part one TransactWriteItems together with its
   marker ``CHUNK#<c> PART#<k>`` put under ``attribute_not_exists``: a part is applied exactly
   once; a retry finds its marker and skips it.
4. Births: the entity items without ``born`` get this add's token (conditioned on its absence)
   in one transaction with ``ADD n`` to ``META ENTITY#COUNT`` (one failed: each alone, ``ADD 1``),
   so the count rises once per entity; an entity is new to this call when its ``born`` is ours.
5. ``CHUNK#<c> ENTITIES`` (what readers and removals use) is written last, in one transaction
   with the deletion of the PENDING item.

A removal undoes it in the same order: each part's decrements in one transaction with the
deletion of its marker (conditioned on the marker existing), then entity deaths (the entity
item deleted under ``freq <= 0`` in one transaction with ``ADD -1`` to the count), co-occurrence
items at ``weight <= 0`` deleted conditionally, the postings and mentions, and the record last.
An add that finds a PENDING item of another record (an add that died) first rolls that one
back the same way. The parts of a record are computed deterministically from it, so a removal
undoes exactly the parts its add applied. A transaction that collides with a concurrent one
(``TransactionConflict``) is retried with backoff.

Reads are key lookups: BatchGetItem of entity or chunk items (frequencies, existing,
chunk_entities, sentences), one Query per entity on its own partition (postings, co-occurrences,
mentions), run on a small thread pool. No per-query read scans the table, hence
``can_export = False`` (graph retrieval then walks neighbourhoods with push-style PPR).
``export()`` is a full Scan of the table (cached per generation), for reindexing, audits and
debugging, never for answering a query.

Tables written before the part markers: removing such a chunk first gives its record its
markers (all its parts were applied); an entity item without ``born`` would be counted again
by the next add that mentions it, so run a reindex once after upgrading (``repair_counts``
marks the old records and entities and resets the count).

``repair_counts()`` recounts postings, mentions, co-occurrences, frequencies and the entity count
from the chunk records (a Scan: reindex only) and rewrites what drifted.
"""

from __future__ import annotations

import json
import random
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from pynamodb.constants import UPDATED_OLD
from pynamodb.exceptions import DeleteError, TransactWriteError, UpdateError
from pynamodb.transactions import TransactWrite

from ...ports.entity import (
    ChunkEntities,
    EntityMatrices,
    Sentence,
    SentenceMentions,
    build_matrices,
    chunk_of_sentence,
    synonym_pairs,
)
from .dynamodb_table import BATCH_GET, TRANSACT_LIMIT, _is_condition_failure
from .models import TableModels, build_models
from .round_trips import fan_out


ENT = "ENT#"
CHUNK = "CHUNK#"
SENT = "SENT#"
COOC = "COOC#"
SYN = "SYN#"
GEN_KEY = ("META", "ENTITY#GEN")
COUNT_KEY = ("META", "ENTITY#COUNT")
PENDING = "PENDING"
PART = "PART#"
PART_SIZE = 99  # counter updates per transaction, beside the part's marker (limit: 100 items)
TX_ATTEMPTS = 10
LOG_PK = "ENTLOG"  # one item per generation: the chunks it changed (entity_warm reads them)
LOG_TTL = 86_400  # a reader further behind than a day reads the graph again
LOG_BYTES = 300_000  # below the 400 KB item limit


def log_sk(generation: int) -> str:
    return f"{generation:012d}"


RECORD_FORMAT = 2  # records written with per-part markers; older records (no "v") applied all parts


def _chunk_to_json(chunk: ChunkEntities) -> str:
    return json.dumps({"v": RECORD_FORMAT, "s": [[s.text, list(s.entities)] for s in chunk.sentences]},
                      ensure_ascii=False)


def _is_legacy(raw: str) -> bool:
    return json.loads(raw).get("v") != RECORD_FORMAT


def _chunk_from_json(chunk_id: str, raw: str) -> ChunkEntities:
    data = json.loads(raw)
    return ChunkEntities(chunk_id, tuple(SentenceMentions(t, tuple(e)) for t, e in data["s"]))


def _counter_deltas(chunk: ChunkEntities) -> list[tuple[str, str, str, int]]:
    """(PK, SK, attribute, delta) of every shared counter the chunk adds to, in a fixed order."""
    out = [(f"{ENT}{e}", "ENT", "freq", n) for e, n in sorted(chunk.counts().items())]
    for (a, b), w in sorted(chunk.cooccurrences().items()):
        out += [(f"{ENT}{a}", f"{COOC}{b}", "weight", w), (f"{ENT}{b}", f"{COOC}{a}", "weight", w)]
    return out


def _parts(chunk: ChunkEntities) -> list[list[tuple[str, str, str, int]]]:
    deltas = _counter_deltas(chunk)
    return [deltas[i:i + PART_SIZE] for i in range(0, len(deltas), PART_SIZE)]


def _reasons(exc: TransactWriteError) -> set[str]:
    return {r.code for r in (exc.cancellation_reasons or []) if r is not None}


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

    def _records(self, chunk_ids: Iterable[str]) -> dict[str, ChunkEntities]:
        items = self._batch_get([(f"{CHUNK}{c}", "ENTITIES") for c in dict.fromkeys(chunk_ids)])
        return {i.PK[len(CHUNK):]: _chunk_from_json(i.PK[len(CHUNK):], i.value) for i in items}

    def _bump_generation(self, chunk_ids: Iterable[str] | None = None) -> None:
        """ADD 1 to the generation, then log what the new generation changed (``ENTLOG``, sort
        key the generation: the chunks whose records changed, or ``full`` when unknown) for a
        reader that keeps the graph in memory (entity_warm). A writer that dies between the
        two leaves a gap in the log, which such a reader answers with a full read."""
        old = _number(self._add(GEN_KEY, self.Item.version, 1, UPDATED_OLD), "version") or 0
        chunks = None if chunk_ids is None else sorted(dict.fromkeys(chunk_ids))
        if chunks is not None and len(json.dumps(chunks)) > LOG_BYTES:
            chunks = None  # too many to log: readers read everything again
        self.Item(PK=LOG_PK, SK=log_sk(int(old) + 1), value=json.dumps({"chunks": chunks}),
                  expires_at=int(time.time()) + LOG_TTL).save()

    # ------------------------------------------------------------ writes
    def _transact(self, build: Callable[[TransactWrite], None]) -> bool:
        """Run one transaction; False when a condition failed (the step was done already),
        retried with backoff when it collided with a concurrent transaction."""
        connection = self.Item._get_connection().connection
        for attempt in range(TX_ATTEMPTS):
            try:
                with TransactWrite(connection=connection) as tx:
                    build(tx)
                return True
            except TransactWriteError as exc:
                reasons = _reasons(exc)
                if "ConditionalCheckFailed" in reasons:
                    return False
                if not reasons & {"TransactionConflict", "ThrottlingError", "ProvisionedThroughputExceeded"} \
                        or attempt == TX_ATTEMPTS - 1:
                    raise
                time.sleep(min(1.0, 0.02 * 2 ** attempt) * random.random())
        return False

    def _apply_part(self, cid: str, k: int, part: list[tuple[str, str, str, int]], sign: int) -> None:
        """Add (sign 1, marker created) or subtract (sign -1, marker deleted) one part's deltas."""
        Item = self.Item
        marker = Item(PK=f"{CHUNK}{cid}", SK=f"{PART}{k}")

        def build(tx: TransactWrite) -> None:
            if sign > 0:
                tx.save(marker, condition=Item.PK.does_not_exist())
            else:
                tx.delete(marker, condition=Item.PK.exists())
            for pk, sk, attr, delta in part:
                tx.update(Item(PK=pk, SK=sk), actions=[getattr(Item, attr).add(sign * delta)])

        self._transact(build)

    def _births(self, token: str, entities: list[str]) -> list[str]:
        """Claim the entity items without ``born`` for ``token`` (a count each); new: ``born`` is ``token``."""
        Item = self.Item
        items = {i.PK[len(ENT):]: i for i in self._batch_get([(f"{ENT}{e}", "ENT") for e in entities])}
        unborn = [e for e in entities if e not in items or items[e].born is None]

        def claim(tx: TransactWrite, names: list[str]) -> None:
            for e in names:
                tx.update(Item(PK=f"{ENT}{e}", SK="ENT"), actions=[Item.born.set(token)],
                          condition=Item.born.does_not_exist() & Item.PK.exists())
            tx.update(Item(PK=COUNT_KEY[0], SK=COUNT_KEY[1]), actions=[Item.version.add(len(names))])

        if 1 < len(unborn) < TRANSACT_LIMIT and self._transact(lambda tx: claim(tx, unborn)):
            return [e for e in entities if e in unborn or items[e].born == token]
        new = []  # one at a time (one was claimed meanwhile: the transaction wrote nothing)
        for e in entities:
            item = items.get(e)
            born = None if item is None else item.born
            if born is None:
                if self._transact(lambda tx, e=e: claim(tx, [e])):
                    born = token
                else:
                    try:
                        born = Item.get(f"{ENT}{e}", "ENT", consistent_read=True).born
                    except Item.DoesNotExist:
                        born = None
            if born == token:
                new.append(e)
        return new

    def _deaths(self, entities: list[str]) -> list[str]:
        """Delete the entity items whose ``freq`` fell to 0 (one count each); returns them, and
        the ones already gone (an earlier attempt deleted them)."""
        Item = self.Item
        gone = []
        for e in entities:
            def build(tx: TransactWrite, e: str = e) -> None:
                tx.delete(Item(PK=f"{ENT}{e}", SK="ENT"), condition=Item.freq <= 0)
                tx.update(Item(PK=COUNT_KEY[0], SK=COUNT_KEY[1]), actions=[Item.version.add(-1)])

            if self._transact(build) or self._get(f"{ENT}{e}", "ENT") is None:
                gone.append(e)
        self._drop_synonyms(gone)
        return gone

    def _drop_synonyms(self, entities: list[str]) -> None:
        """The synonymy edges of entities that left, both directions (one Query each)."""
        rows = self._per_entity(entities, SYN, only_existing=False)
        with self.Item.batch_write() as batch:
            for e, items in rows.items():
                for item in items:
                    other = item.SK[len(SYN):]
                    batch.delete(self.Item(PK=f"{ENT}{e}", SK=f"{SYN}{other}"))
                    batch.delete(self.Item(PK=f"{ENT}{other}", SK=f"{SYN}{e}"))

    def _get(self, pk: str, sk: str):
        try:
            return self.Item.get(pk, sk, consistent_read=True)
        except self.Item.DoesNotExist:
            return None

    def _own_items(self, cid: str, chunk: ChunkEntities) -> list[Any]:
        items = [self.Item(PK=f"{ENT}{e}", SK=f"{CHUNK}{cid}", weight=n) for e, n in chunk.counts().items()]
        for sid, s in zip(chunk.sentence_ids(), chunk.sentences):
            items += [self.Item(PK=f"{ENT}{e}", SK=f"{SENT}{sid}") for e in dict.fromkeys(s.entities)]
        return items

    def _add_one(self, chunk: ChunkEntities, token: str) -> list[str]:
        cid = chunk.chunk_id
        self.Item(PK=f"{CHUNK}{cid}", SK=PENDING,
                  value=json.dumps({"op": "add", "token": token, "record": _chunk_to_json(chunk)})).save()
        with self.Item.batch_write() as batch:
            for item in self._own_items(cid, chunk):
                batch.save(item)
        for k, part in enumerate(_parts(chunk)):
            self._apply_part(cid, k, part, 1)
        new = self._births(token, sorted(chunk.counts()))
        record = self.Item(PK=f"{CHUNK}{cid}", SK="ENTITIES", value=_chunk_to_json(chunk))
        self._transact(lambda tx: (tx.save(record), tx.delete(self.Item(PK=f"{CHUNK}{cid}", SK=PENDING))))
        return new

    def _upgrade(self, cid: str, chunk: ChunkEntities) -> None:
        """A record written before part markers existed had all its counters applied: give it
        its markers, then mark the record as having them (a crash in between repeats this)."""
        with self.Item.batch_write() as batch:
            for k in range(len(_parts(chunk))):
                batch.save(self.Item(PK=f"{CHUNK}{cid}", SK=f"{PART}{k}"))
        self.Item(PK=f"{CHUNK}{cid}", SK="ENTITIES", value=_chunk_to_json(chunk)).save()

    def _delete_one(self, cid: str, chunk: ChunkEntities, legacy: bool = False) -> list[str]:
        if legacy:
            self._upgrade(cid, chunk)
        for k, part in enumerate(_parts(chunk)):
            self._apply_part(cid, k, part, -1)
        gone = self._deaths(sorted(chunk.counts()))
        for a, b in sorted(chunk.cooccurrences()):
            for x, y in ((a, b), (b, a)):
                try:
                    self.Item(PK=f"{ENT}{x}", SK=f"{COOC}{y}").delete(condition=self.Item.weight <= 0)
                except DeleteError as exc:
                    if not _is_condition_failure(exc):
                        raise
        with self.Item.batch_write() as batch:
            for item in self._own_items(cid, chunk):
                batch.delete(item)
        with self.Item.batch_write() as batch:
            batch.delete(self.Item(PK=f"{CHUNK}{cid}", SK="ENTITIES"))
            batch.delete(self.Item(PK=f"{CHUNK}{cid}", SK=PENDING))
        return gone

    def _state(self, chunk_ids: Iterable[str]) -> tuple[dict[str, ChunkEntities], dict[str, dict], set[str]]:
        """(complete records, pending adds, chunks whose record predates part markers)."""
        keys = [(f"{CHUNK}{c}", sk) for c in dict.fromkeys(chunk_ids) for sk in ("ENTITIES", PENDING)]
        records, pending, legacy = {}, {}, set()
        for i in self._batch_get(keys):
            cid = i.PK[len(CHUNK):]
            if i.SK == "ENTITIES":
                records[cid] = _chunk_from_json(cid, i.value)
                if _is_legacy(i.value):
                    legacy.add(cid)
            else:
                data = json.loads(i.value)
                pending[cid] = {"token": data["token"], "record": _chunk_from_json(cid, data["record"])}
        return records, pending, legacy

    def add_chunks(self, chunks: Sequence[ChunkEntities]) -> list[str]:
        if not chunks:
            return []
        unique = list({c.chunk_id: c for c in chunks}.values())
        records, pending, legacy = self._state(c.chunk_id for c in unique)
        tokens: dict[str, str] = {}
        for chunk in unique:  # first take away what the chunks replace, as in the memory store
            cid = chunk.chunk_id
            if cid in records:  # a complete earlier record
                self._delete_one(cid, records[cid], cid in legacy)
            elif cid in pending:
                if pending[cid]["record"] == chunk:  # the same add died: resume it
                    tokens[cid] = pending[cid]["token"]
                else:  # another add died: undo what it applied
                    self._delete_one(cid, pending[cid]["record"])
        new: list[str] = []
        for chunk in unique:
            for e in self._add_one(chunk, tokens.get(chunk.chunk_id) or uuid.uuid4().hex):
                if e not in new:
                    new.append(e)
        self._bump_generation(c.chunk_id for c in unique)
        return new

    def delete_chunks(self, chunk_ids: Iterable[str]) -> list[str]:
        records, pending, legacy = self._state(chunk_ids)
        for cid, p in pending.items():
            records.setdefault(cid, p["record"])
        if not records:
            return []
        gone: list[str] = []
        for cid, chunk in records.items():
            gone += [e for e in self._delete_one(cid, chunk, cid in legacy) if e not in gone]
        self._bump_generation(records)
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
        rows = fan_out(lambda e: self._query(f"{ENT}{e}", prefix), names, self.workers)
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

    def add_synonyms(self, edges: Iterable[tuple[str, str, float]]) -> int:
        pairs = synonym_pairs(edges)
        if not pairs:
            return 0
        with self.Item.batch_write() as batch:
            for (a, b), w in pairs.items():
                batch.save(self.Item(PK=f"{ENT}{a}", SK=f"{SYN}{b}", weight=w))
                batch.save(self.Item(PK=f"{ENT}{b}", SK=f"{SYN}{a}", weight=w))
        self._bump_generation(())  # no record changed (readers read synonyms from the table)
        return len(pairs)

    def synonyms(self, entities: Iterable[str]) -> dict[str, dict[str, float]]:
        rows = self._per_entity(entities, SYN, only_existing=False)
        return {e: {i.SK[len(SYN):]: float(i.weight) for i in items} for e, items in rows.items() if items}

    def entity_page(self, after: str | None, limit: int) -> tuple[list[str], str | None]:
        """A Scan of the entity items from ``after`` (the raw key where the last page stopped)
        until ``limit`` of them are found: reindex only."""
        Item = self.Item
        found = Item.scan(Item.PK.startswith(ENT) & (Item.SK == "ENT"), limit=max(1, limit),
                          last_evaluated_key=json.loads(after) if after else None, consistent_read=True,
                          attributes_to_get=["PK", "SK"])
        names = [i.PK[len(ENT):] for i in found]
        key = found.last_evaluated_key
        return names, (json.dumps(key) if key and len(names) >= max(1, limit) else None)

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

    def repair_counts(self) -> dict[str, int]:
        """Recount every entity item from the chunk records and rewrite what drifted (two
        Scans: reindex only). A chunk's counters are the parts its markers say were applied
        (all parts of a complete record), so an add that died mid-way and will be resumed or
        rolled back is counted as far as it got. Counters are rewritten conditionally on the
        value the scan saw (a concurrent change wins; the next reindex looks again); the
        postings and mentions of chunks with an add in progress are left alone. Returns the
        number of items fixed per kind."""
        Item = self.Item
        seen_ent, seen_post, seen_ment, seen_cooc = {}, {}, set(), {}
        for item in Item.scan(Item.PK.startswith(ENT), consistent_read=True):  # counters first
            e, sk = item.PK[len(ENT):], item.SK
            if sk == "ENT":
                seen_ent[e] = item
            elif sk.startswith(CHUNK):
                seen_post[(e, sk[len(CHUNK):])] = int(item.weight or 0)
            elif sk.startswith(SENT):
                seen_ment.add((e, sk[len(SENT):]))
            elif sk.startswith(COOC):
                seen_cooc[(e, sk[len(COOC):])] = int(item.weight or 0)
        complete, pending, markers, legacy = {}, {}, {}, set()
        for item in Item.scan(Item.PK.startswith(CHUNK), consistent_read=True):
            cid = item.PK[len(CHUNK):]
            if item.SK == "ENTITIES":
                complete[cid] = _chunk_from_json(cid, item.value)
                if _is_legacy(item.value):
                    legacy.add(cid)
            elif item.SK == PENDING:
                pending[cid] = _chunk_from_json(cid, json.loads(item.value)["record"])
            elif item.SK.startswith(PART):
                markers.setdefault(cid, set()).add(int(item.SK[len(PART):]))
        fixed = {"markers": 0, "postings": 0, "mentions": 0, "cooccurrence": 0, "frequencies": 0, "count": 0}
        for cid in sorted(legacy):
            self._upgrade(cid, complete[cid])
            fixed["markers"] += 1
        want: dict[tuple[str, str], int] = {}
        want_post, want_ment, busy = {}, set(), set()
        for cid, chunk in list(complete.items()) + [(c, r) for c, r in pending.items() if c not in complete]:
            applied = markers.get(cid, set()) if cid in pending and cid not in complete else None
            for k, part in enumerate(_parts(chunk)):
                if applied is None or k in applied:
                    for pk, sk, _, delta in part:
                        want[(pk, sk)] = want.get((pk, sk), 0) + delta
            if cid in pending and cid not in complete:
                busy.add(cid)
                continue
            for item in self._own_items(cid, chunk):
                if item.SK.startswith(CHUNK):
                    want_post[(item.PK[len(ENT):], cid)] = int(item.weight)
                else:
                    want_ment.add((item.PK[len(ENT):], item.SK[len(SENT):]))
        with Item.batch_write() as batch:
            for (e, cid), n in want_post.items():
                if seen_post.get((e, cid)) != n:
                    batch.save(Item(PK=f"{ENT}{e}", SK=f"{CHUNK}{cid}", weight=n))
                    fixed["postings"] += 1
            for (e, cid) in seen_post:
                if (e, cid) not in want_post and cid not in busy:
                    batch.delete(Item(PK=f"{ENT}{e}", SK=f"{CHUNK}{cid}"))
                    fixed["postings"] += 1
            for e, sid in want_ment - seen_ment:
                batch.save(Item(PK=f"{ENT}{e}", SK=f"{SENT}{sid}"))
                fixed["mentions"] += 1
            for e, sid in seen_ment - want_ment:
                if chunk_of_sentence(sid) not in busy:
                    batch.delete(Item(PK=f"{ENT}{e}", SK=f"{SENT}{sid}"))
                    fixed["mentions"] += 1
        seen = {(f"{ENT}{e}", "ENT"): (int(i.freq) if i.freq is not None else None) for e, i in seen_ent.items()}
        seen.update({(f"{ENT}{a}", f"{COOC}{b}"): w for (a, b), w in seen_cooc.items()})
        for key in sorted(set(want) | set(seen)):
            target, observed = want.get(key, 0), seen.get(key)
            if observed == target or (observed is None and target <= 0):
                continue
            kind = "frequencies" if key[1] == "ENT" else "cooccurrence"
            attr = Item.freq if kind == "frequencies" else Item.weight
            condition = attr.does_not_exist() if observed is None else (attr == observed)
            try:
                if target > 0:
                    actions = [attr.set(target)]
                    if kind == "frequencies" and (observed is None or seen_ent[key[0][len(ENT):]].born is None):
                        actions.append(Item.born.set("repair"))
                    Item(PK=key[0], SK=key[1]).update(actions=actions, condition=condition)
                else:
                    Item(PK=key[0], SK=key[1]).delete(condition=condition)
                fixed[kind] += 1
            except (UpdateError, DeleteError) as exc:
                if not _is_condition_failure(exc):
                    raise
        for e, item in seen_ent.items():  # entities written before births were recorded
            if item.born is None and want.get((f"{ENT}{e}", "ENT"), 0) > 0:
                Item(PK=f"{ENT}{e}", SK="ENT").update(actions=[Item.born.set("legacy")])
        alive = sum(1 for (pk, sk), n in want.items() if sk == "ENT" and n > 0)
        if alive != self.entity_count():
            Item(PK=COUNT_KEY[0], SK=COUNT_KEY[1]).update(actions=[Item.version.set(alive)])
            fixed["count"] += 1
        if any(fixed.values()):
            self._bump_generation()
        return fixed

    def export(self) -> EntityMatrices:
        """The whole entity graph as matrices, from one paginated Scan of the entity items (its
        cost grows with the table: reindex, audits and debugging only, never per query)."""
        generation = self.generation()
        if self._cache is not None and self._cache.generation == generation:
            return self._cache
        postings, mentions, cooc, syn = [], [], [], []
        for item in self.Item.scan(self.Item.PK.startswith(ENT), consistent_read=True):
            entity, sk = item.PK[len(ENT):], item.SK
            if sk.startswith(CHUNK):
                postings.append((entity, sk[len(CHUNK):], int(item.weight)))
            elif sk.startswith(SENT):
                mentions.append((sk[len(SENT):], entity))
            elif sk.startswith(COOC) and entity < sk[len(COOC):]:
                cooc.append((entity, sk[len(COOC):], int(item.weight)))
            elif sk.startswith(SYN) and entity < sk[len(SYN):]:
                syn.append((entity, sk[len(SYN):], float(item.weight)))
        self._cache = build_matrices(generation, postings, mentions, cooc, syn)
        return self._cache

