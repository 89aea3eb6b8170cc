"""A tenant's entity graph records in one S3 object, so that a query function's first walk
(adapters/aws/entity_warm) reads one object instead of every chunk's record.

Without it, a cold query function reads the layer-0 refs (a Query, paged) and then every
chunk's ``CHUNK#<c> ENTITIES`` record, 100 a BatchGetItem: about 110 requests at 10k chunks and
ten times that at 100k, on every cold start. With it, the first walk reads the generation (one
GetItem), this object (one GetObject), and the log since the object's generation (one Query, and
the chunks it names, 100 a BatchGetItem).

The object is written by the scheduled reindex (services.reindex, step ``entity_snapshot``):
the reindex function's warm reader is brought up to date from the previous object and the log,
or from everything when there is none, and the records it holds at its generation are written
back. It is a function of the store at that generation, as a warm reader's memory is.

Valid while the log holds every generation after it: the log's items expire ``LOG_TTL`` after
they are written, and every generation after the object's was logged after its ``taken_at``
(the wall time before its generation was read), so a reader takes an object younger than
``MAX_AGE`` and reads everything otherwise. The schedule (every 6 hours by default) keeps it
younger than that. An object of another generation's future (a generation above the store's:
a tenant deleted and created again) is not taken either, and a tenant's deletion removes its
object (bootstrap.aws_profile.delete).

Format: gzip of one JSON document ``{"format", "generation", "taken_at", "records": {chunk id:
[[sentence text, [entities]], ...]}}``, with the number of records, the generation and the time
in the object's metadata (``x-amz-meta-chunks``, ``-generation``, ``-taken-at``: ``head``, which
lets the writer skip an unchanged tenant without reading the object). An object that does not
parse as that is not taken (logged); the reader then reads everything, as without it. An object of more records than the reader may hold
(``load(max_chunks)``, entity_warm.held_chunk_cap) is refused from its metadata, before its body
is read: ``TooManyChunks``."""

from __future__ import annotations

import gc
import gzip
import json
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, NamedTuple

from ...ports.entity import ChunkEntities, SentenceMentions
from .entity_dynamodb import LOG_TTL

FORMAT = 1
MAX_AGE = LOG_TTL - 2 * 3600  # seconds: two hours' margin on the log's expiry
KEY_PREFIX = "entity-graph/"
MAX_BYTES = 2 * 1024 ** 3  # a larger object is not read (a 1M-chunk tenant's is about 300 MB)

log = logging.getLogger(__name__)


class SnapshotHead(NamedTuple):
    """What an object's metadata says of it."""

    generation: int
    taken_at: float
    chunks: int


class TooManyChunks(Exception):
    """The object holds more records than the reader may hold (its ``chunks``)."""

    def __init__(self, chunks: int) -> None:
        super().__init__(f"the entity snapshot holds {chunks} chunks")
        self.chunks = chunks


@dataclass(frozen=True)
class Snapshot:
    generation: int
    taken_at: float
    records: dict[str, ChunkEntities]


@contextmanager
def no_cyclic_gc() -> Iterator[None]:
    """The cyclic collector paused: taking a graph (decoding a snapshot, indexing its records)
    makes millions of objects, none in a cycle, and each full pass of the collector walks every
    one already made (a third of a take's time)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def encode(snapshot: Snapshot) -> bytes:
    doc = {"format": FORMAT, "generation": snapshot.generation, "taken_at": snapshot.taken_at,
           "records": {cid: [[s.text, list(s.entities)] for s in r.sentences]
                       for cid, r in sorted(snapshot.records.items())}}
    return gzip.compress(json.dumps(doc, ensure_ascii=False, separators=(",", ":")).encode("utf-8"), 6)


def decode(data: bytes) -> Snapshot:
    """The snapshot in ``data``; ValueError when it is not one of this format."""
    with no_cyclic_gc():
        return _decode(data)


def _decode(data: bytes) -> Snapshot:
    try:
        doc = json.loads(gzip.decompress(data))
    except (OSError, EOFError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"not a gzip JSON entity snapshot: {exc}") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise ValueError(f"entity snapshot format {doc.get('format') if isinstance(doc, dict) else None!r}, "
                         f"not {FORMAT}")
    generation, taken_at, raw = doc.get("generation"), doc.get("taken_at"), doc.get("records")
    if not isinstance(generation, int) or isinstance(generation, bool) or generation < 0 \
            or not isinstance(taken_at, (int, float)) or not isinstance(raw, dict):
        raise ValueError("entity snapshot without a generation, a time or records")
    records = {}
    for cid, sentences in raw.items():
        try:
            records[cid] = ChunkEntities(cid, tuple(SentenceMentions(str(t), tuple(str(e) for e in ents))
                                                    for t, ents in sentences))
        except (TypeError, ValueError):
            raise ValueError(f"entity snapshot record {cid!r} is not [[text, [entities]], ...]") from None
    return Snapshot(generation, float(taken_at), records)


class S3EntitySnapshots:
    """One tenant's object in the snapshot bucket (``entity-graph/<tenant>/records.json.gz``;
    the default tenant's under ``_default``, which no tenant id can be: domain.tenants)."""

    def __init__(self, bucket: str, client: Any, tenant: str = "") -> None:
        self.bucket = bucket
        self.client = client
        self.key = f"{KEY_PREFIX}{tenant or '_default'}/records.json.gz"

    def load(self, max_chunks: int | None = None) -> Snapshot | None:
        """The tenant's snapshot; None when there is none or it cannot be taken (logged);
        TooManyChunks when it holds more than ``max_chunks`` records (its body is not read)."""
        try:
            response = self.client.get_object(Bucket=self.bucket, Key=self.key)
        except self.client.exceptions.NoSuchKey:
            return None
        except self.client.exceptions.ClientError as exc:
            error = exc.response.get("Error", {})
            if str(error.get("Code")) in ("404", "NotFound"):
                return None
            log.warning("entity snapshot s3://%s/%s not read (%s): reading the records instead",
                        self.bucket, self.key, error.get("Code"))
            return None
        if int(response.get("ContentLength") or 0) > MAX_BYTES:
            log.warning("entity snapshot s3://%s/%s is %s bytes, above %s: reading the records instead",
                        self.bucket, self.key, response.get("ContentLength"), MAX_BYTES)
            return None
        chunks = str((response.get("Metadata") or {}).get("chunks", ""))
        if max_chunks is not None and chunks.isdigit() and int(chunks) > max_chunks:
            response["Body"].close()
            raise TooManyChunks(int(chunks))
        try:
            snapshot = decode(response["Body"].read())
        except ValueError as exc:
            log.warning("entity snapshot s3://%s/%s not taken: %s", self.bucket, self.key, exc)
            return None
        if max_chunks is not None and len(snapshot.records) > max_chunks:  # an object without the metadata
            raise TooManyChunks(len(snapshot.records))
        return snapshot

    def head(self) -> SnapshotHead | None:
        """The object's metadata; None when there is no object or it has none (written before)."""
        try:
            meta = self.client.head_object(Bucket=self.bucket, Key=self.key).get("Metadata") or {}
        except self.client.exceptions.ClientError as exc:
            if str(exc.response.get("Error", {}).get("Code")) in ("404", "NotFound", "NoSuchKey"):
                return None
            raise
        try:
            return SnapshotHead(int(meta["generation"]), float(meta["taken-at"]), int(meta["chunks"]))
        except (KeyError, ValueError):
            return None

    def save(self, snapshot: Snapshot) -> int:
        """Write the tenant's snapshot over the previous one; the object's size in bytes."""
        data = encode(snapshot)
        self.client.put_object(Bucket=self.bucket, Key=self.key, Body=data, ContentType="application/gzip",
                               Metadata={"chunks": str(len(snapshot.records)), "generation": str(snapshot.generation),
                                         "taken-at": repr(float(snapshot.taken_at))})
        return len(data)

    def delete(self) -> None:
        self.client.delete_object(Bucket=self.bucket, Key=self.key)
