"""A store as a portable dump, and back: ``eragraph export`` / ``eragraph import``.

A dump is a sequence of JSON records (the CLI writes one a line, gzip-compressed). The first is
the header: ``{"format": "eragraph-dump", "version": DUMP_VERSION, "providers", "settings",
"lsh"}``: the providers the store was built with (services.store_providers), its graph settings
and its hyperplanes. Then, one record each:

- ``document``: a live document (its chunk ids, metadata, version) and its ``stored_text``
  (the blob rebuilds read), when the store keeps it (a target whose blob puts are ingested, the
  AWS documents bucket, does not: the text is not put there);
- ``status``: a document's ingestion status;
- ``node``: a chunk or summary with its vector (``vector``: base64 of little-endian floats,
  ``dtype`` f4 or f8), layer by layer from 0;
- ``segment``: a segment of a layer, its members and its summary;
- ``entity_chunk``: a chunk's entity record (its sentences, the entities each mentions with
  their occurrences);
- ``entity_vector``: an entity-name or sentence vector;
- ``ledger``: a row of the cost ledger; ``meta``: a store mark (``leaf_attrs``);
- ``partition`` (version 2, before the documents): an access partition of the registry
  (services.placement): its ``index`` and canonical ``access`` list. A chunk's code holds its
  partition's index, so the registry is loaded as it was (the same index for the same list),
  and a summary's vector gets its partition's ``readers`` (domain.access).

``load`` writes a dump into an empty store of any profile (the engine's ports) without calling
the embedder or the summarizer: nodes, vectors and summaries are the dump's. A chunk's vector
carries the attributes of its document in the target's tenant. The target is checked first: it
must be empty, and its providers (once the dump's are adopted) the dump's. A dump of another
format, or of a version this code does not read, is refused saying which it is and which it
reads.

Export reads a settled store: run it when no ingest is in flight (the CLI holds the writer
lock); the summaries of a layer still being reconciled are exported as they stand.

``dump(engine, caller)`` is what one caller may read (domain.access; an operator's ``eragraph
export --as``): the partitions it may read and their documents, statuses, chunks, summaries and
segments, the entity records of those chunks and the vectors of the entity names and sentences
they hold; nothing of another partition is read past its ref, and the tenant's cost ledger stays
out. It imports as a store of its own (its partitions are whole, each cut on its own)."""

from __future__ import annotations

import base64
from collections.abc import Iterable, Iterator
from dataclasses import asdict
from typing import Any

import numpy as np

from ..domain.access import ATTRIBUTE, READERS, Caller, index_bits, index_of, partition_of, readers_of
from ..domain.doc_status import DocStatus
from ..domain.model import Document, LshConfig, Node, NodeRef, RefState, RegionChange, Segment
from ..ports.entity import ChunkEntities, SentenceMentions, chunk_of_sentence
from .dump_records import FORMAT, READS, DumpError, check_header, check_record, check_registered  # noqa: F401
from .engine import EMBED_FORMAT, LEAF_ATTRS, NODE_READERS, Engine
from .entity_ids import ENTITY_LAYER, SENTENCE_LAYER, entity_vector_id
from .ingest import leaf_meta
from .placement import INDEX, KEY, partitions, readable
from .sources import text_key
from .store_providers import PROVIDERS_KEY, recorded_providers

MARKS = (LEAF_ATTRS, EMBED_FORMAT, NODE_READERS)  # the store marks a dump carries
DUMP_VERSION = 2  # 2: partition records (a version-1 dump has none: its store had no access lists)
BATCH = 256




def _vector(v: np.ndarray) -> dict[str, str]:
    arr = np.asarray(v)
    dtype = "f4" if arr.dtype == np.float32 else "f8"
    return {"dtype": dtype, "vector": base64.b64encode(arr.astype("<" + dtype).tobytes()).decode("ascii")}


def _array(record: dict) -> np.ndarray:
    return np.frombuffer(base64.b64decode(record["vector"]), dtype="<" + record["dtype"]).astype(np.float32)


def dump(engine: Engine, caller: Caller | None = None) -> Iterator[dict]:
    """The records of ``engine``'s store, header first; with ``caller`` (None: the operator, all),
    only what it may read (the module docstring)."""
    g = engine.graph
    lsh = g.get_lsh()
    yield {"format": FORMAT, "version": DUMP_VERSION, "providers": recorded_providers(g),
           "settings": g.get_meta("settings"), "lsh": None if lsh is None else asdict(lsh)}
    if lsh is None:
        return
    allowed = None if caller is None else readable(engine, caller)  # partition indexes; None: all
    for index, access in sorted(partitions(engine).items()):  # before the documents that name them
        if index and (allowed is None or index in allowed):
            yield {"kind": "partition", "index": index, "access": list(access)}
    kept: set[str] | None = None if allowed is None else set()  # the documents a caller gets
    for doc in g.list_documents():
        if kept is not None:
            if not caller.may_read((doc.metadata or {}).get(ATTRIBUTE)):
                continue
            kept.add(doc.doc_id)
        record: dict[str, Any] = {"kind": "document", **asdict(doc)}
        if engine.blobs is not None:
            try:
                record["stored_text"] = engine.blobs.get(text_key(doc.doc_id)).decode("utf-8")
            except KeyError:
                pass
        yield record
    for status in g.doc_statuses():
        if kept is None or status.doc_id in kept:  # a status without a readable document: not the caller's
            yield {"kind": "status", **asdict(status)}
    layer, chunks = 0, None if allowed is None else set()  # the chunks a caller gets
    while True:
        refs = g.layer_refs(layer)
        if not refs and layer > 0:
            break
        # a caller's: the refs of its partitions only (nothing else is read)
        ids = [r.node_id for r in refs if allowed is None or index_of(r.code, lsh.n_planes) in allowed]
        for start in range(0, len(ids), BATCH):
            part = ids[start:start + BATCH]
            nodes, vectors = g.get_nodes(part), engine.vectors.get_vectors(part)
            for i in part:
                if i in nodes and (kept is None or layer > 0 or nodes[i].doc_id in kept):
                    if chunks is not None and layer == 0:
                        chunks.add(i)
                    extra = _vector(vectors[i]) if i in vectors else {}
                    yield {"kind": "node", **asdict(nodes[i]), **extra}
        shown = None if allowed is None else set(ids)
        for seg in g.get_segments(layer):
            if shown is None or (seg.members and all(m in shown for m in seg.members)):
                yield {"kind": "segment", **asdict(seg)}
        layer += 1
    if engine.entities is not None:
        yield from _entities(engine, chunks)
    for key, row in g.ledger().items() if allowed is None else ():  # the tenant's spend: the operator's
        yield {"kind": "ledger", "key": key, **row}
    for mark in MARKS:  # what the store's leaf vectors are (their attrs, their format)
        if g.get_meta(mark) is not None:
            yield {"kind": "meta", "key": mark, "value": g.get_meta(mark)}


def _entities(engine: Engine, only: set[str] | None = None) -> Iterator[dict]:
    """The entity records of the chunks (``only``: of these), then the vectors of the entity names
    and sentences (``only``: those these chunks hold)."""
    store, vectors = engine.entities.store, engine.entities.vectors
    chunks = sorted(store.chunk_ids() if only is None else only & set(store.chunk_ids()))
    held_names: set[str] = set()
    for record in entity_chunk_records(store, chunks):
        held_names.update(n for _text, held in record["sentences"] for n in held)
        yield record
    ids = sorted(vectors.ids())
    if only is not None:
        named = {entity_vector_id(n) for n in held_names}
        ids = [i for i in ids if i in named or ("#s" in i and chunk_of_sentence(i) in only)]
    for start in range(0, len(ids), BATCH):
        got = vectors.get_vectors(ids[start:start + BATCH])
        for i in ids[start:start + BATCH]:
            if i in got:
                yield {"kind": "entity_vector", "id": i, **_vector(got[i])}


def entity_chunk_records(store: Any, chunks: list[str]) -> Iterator[dict]:
    """The ``entity_chunk`` records of ``chunks`` (each held by the entity ``store``): every
    sentence of the chunk in order (an unread one empty), with the entities it mentions, as the
    AWS profile's store and its snapshot keep them."""
    for start in range(0, len(chunks), BATCH):
        part = chunks[start:start + BATCH]
        counts = store.chunk_entities(part)
        sids = store.sentence_ids_of_chunks(part)
        found = store.get_sentences(sids)
        by_chunk: dict[str, dict[int, Any]] = {}
        for sid, sentence in found.items():
            by_chunk.setdefault(chunk_of_sentence(sid), {})[int(sid.rpartition("#s")[2])] = sentence
        for chunk in part:
            sentences = by_chunk.get(chunk, {})
            extra = dict(counts.get(chunk, {}))
            rows = []
            for index in range(max(sentences, default=-1) + 1):
                s = sentences.get(index)
                names = list(s.entities) if s is not None else []
                for name in names:
                    extra[name] = extra.get(name, 0) - 1
                rows.append([s.text if s is not None else "", names])
            # occurrences beyond one per sentence go to the first sentence that names the entity
            for name, more in extra.items():
                if more > 0:
                    row = next((r for r in rows if name in r[1]), None)
                    if row is None:
                        rows.append(["", [name]])
                        more -= 1
                        row = rows[-1]
                    row[1].extend([name] * more)
            yield {"kind": "entity_chunk", "chunk_id": chunk, "sentences": rows}


def load(engine: Engine, records: Iterable[dict]) -> dict[str, int]:
    """Write a dump into ``engine``'s empty store; counts of what was written."""
    it = iter(records)
    header = check_header(next(it, None))
    g = engine.graph
    if g.get_lsh() is not None or g.list_documents():
        raise DumpError("the target store is not empty: import into a new store (or tenant)")
    _check_providers(engine, header)
    counts: dict[str, int] = {}
    if header.get("lsh") is None:
        return counts
    lsh = header["lsh"]
    g.put_lsh(LshConfig(lsh["embedder_id"], lsh["dim"], lsh["n_planes"], lsh["seed"],
                        tuple(tuple(row) for row in lsh["planes"])))
    if header.get("providers"):
        g.put_meta(PROVIDERS_KEY, header["providers"])
    # a kept text is put only where a put is not ingested as a new document (the AWS documents
    # bucket ingests every key; a deployed stack rebuilds from its objects, not kept texts)
    keep_texts = engine.blobs is not None and not getattr(engine.blobs, "ingested", False)
    docs: dict[str, Document] = {}
    layer_nodes: list[tuple[Node, np.ndarray | None]] = []
    layer_segments: list[Segment] = []  # of the layer being read: applied once the layer above is written
    below: list[Segment] = []  # of the layer below it
    layer, entity_vecs, entity_chunks = 0, [], []
    registry: dict[int, tuple[str, ...]] = {0: ()}  # the access partitions loaded: index -> list
    for number, record in enumerate(it, 2):
        check_record(record, number, engine.tenant, lsh["dim"])
        kind = record.get("kind")
        counts[kind] = counts.get(kind, 0) + 1
        body = {k: v for k, v in record.items() if k not in ("kind", "stored_text", "vector", "dtype")}
        if kind in ("document", "status"):
            _check_source(engine, body.get("source"))
        if kind == "partition":
            registry[body["index"]] = _register(engine, number, body["index"], body["access"], lsh["n_planes"])
        elif kind == "document" and "access" in (body.get("metadata") or {}):
            check_registered(body["metadata"]["access"], {partition_of(a) for a in registry.values()},
                             f"record {number} (document)")
        if kind == "node" and index_of(body["code"], lsh["n_planes"]) not in registry:
            raise DumpError(f"record {number} (node): its code lies in access partition "
                            f"{index_of(body['code'], lsh['n_planes'])}, which the dump's partition records do not name")
        if kind == "document":
            doc = Document(**{**body, "chunk_ids": tuple(body.get("chunk_ids") or ())})
            g.put_document(doc)
            docs[doc.doc_id] = doc
            if "stored_text" in record and keep_texts:
                engine.blobs.put(text_key(doc.doc_id), record["stored_text"].encode("utf-8"))
        elif kind == "status":
            g.put_doc_status(DocStatus(**{**body, "pending_shards": tuple(body.get("pending_shards") or ())}))
        elif kind == "node":
            node = Node(**{**body, "children": tuple(body.get("children") or ()),
                           "place": tuple(body.get("place") or ())})
            if node.layer != layer:
                _write_layer(engine, docs, layer, layer_nodes, below, registry)
                layer, layer_nodes, layer_segments, below = node.layer, [], [], layer_segments
            layer_nodes.append((node, _array(record) if "vector" in record else None))
        elif kind == "segment":
            layer_segments.append(Segment(body["segment_id"], body["layer"], tuple(body["members"]),
                                          body["summary_id"]))
        elif kind == "entity_chunk" and engine.entities is not None:
            entity_chunks.append(ChunkEntities(record["chunk_id"], tuple(
                SentenceMentions(text, tuple(names)) for text, names in record["sentences"])))
            if len(entity_chunks) == BATCH:  # one call a batch: the store reads their state at once
                engine.entities.store.add_chunks(entity_chunks)
                entity_chunks = []
        elif kind == "entity_vector" and engine.entities is not None:
            entity_vecs.append((record["id"], _array(record)))
        elif kind == "ledger":
            g.add_ledger(body["key"], int(body.get("calls", 0)), int(body.get("tokens_in", 0)),
                         int(body.get("tokens_out", 0)), float(body.get("seconds", 0.0)))
        elif kind == "meta" and body.get("key") in MARKS:
            g.put_meta(body["key"], body.get("value"))
    _write_layer(engine, docs, layer, layer_nodes, below, registry)
    if layer_segments:
        raise DumpError(f"the dump's segments of layer {layer} name summaries it does not hold")
    if entity_chunks:
        engine.entities.store.add_chunks(entity_chunks)
    if entity_vecs:
        vectors = engine.entities.vectors
        for start in range(0, len(entity_vecs), BATCH):
            part = entity_vecs[start:start + BATCH]
            node_doc = g.get_nodes({chunk_of_sentence(i) for i, _ in part if "#s" in i})
            metas = [{"layer": SENTENCE_LAYER, "doc_id": getattr(node_doc.get(chunk_of_sentence(i)), "doc_id", "")}
                     if "#s" in i else {"layer": ENTITY_LAYER, "doc_id": ""} for i, _ in part]
            vectors.upsert([i for i, _ in part], np.stack([v for _, v in part]), metas)
        vectors.flush()
    g.repair_layer_counts()
    engine.vectors.flush()
    return counts


def _check_source(engine: Engine, source: Any) -> None:
    """DumpError for a document whose source is an object of the target's shared documents bucket
    outside the target tenant's own prefix: kept, a DELETE of it would name another tenant's
    object (services.uploads.owns_key). Sources of other places (local files, other buckets) are
    kept as they are; a delete of such a document is refused as not of this bucket."""
    blobs = engine.blobs
    if not isinstance(source, str) or blobs is None or not getattr(blobs, "ingested", False):
        return
    from .uploads import owns_key

    head = f"s3://{getattr(blobs, 'bucket', '')}/"
    if source.startswith(head) and not owns_key(engine.tenant, source[len(head):]):
        whose = f"tenant {engine.tenant!r}" if engine.tenant else "the default tenant"
        raise DumpError(f"document source {source[:200]!r} is another tenant's object of the documents bucket, not "
                        f"under {whose}'s own prefix: a dump of a tenant of this stack loads into that tenant only")


def _check_providers(engine: Engine, header: dict) -> None:
    lsh = header.get("lsh")
    if lsh is None:
        return
    from ..domain.lsh import same_embedder

    if not same_embedder(lsh["embedder_id"], engine.embedder.identity) or lsh["dim"] != engine.embedder.dim:
        raise DumpError(f"this dump was built with embedder {lsh['embedder_id']!r} ({lsh['dim']}-d), the target "
                        f"opens with {engine.embedder.identity!r} ({engine.embedder.dim}-d): open the target with "
                        f"the dump's embedder (ERAGRAPH_EMBEDDER={(header.get('providers') or {}).get('embedder', '?')})")


def _register(engine: Engine, number: int, index: int, access: list[str], n_planes: int) -> tuple[str, ...]:
    """Load one access partition into the registry (services.placement) at the dump's index."""
    key = partition_of(access)
    if index >= 1 << index_bits(n_planes):
        raise DumpError(f"record {number} (partition): index {index} is past this store's partition indexes")
    owner = engine.graph.claim_meta(f"{INDEX}{index}", key)
    if owner != key:
        raise DumpError(f"record {number} (partition): index {index} is another partition's in this dump")
    engine.graph.put_meta(KEY + key, {"index": index, "access": sorted(set(access))})
    return tuple(sorted(set(access)))


def _write_layer(engine: Engine, docs: dict[str, Document], layer: int,
                 nodes: list[tuple[Node, np.ndarray | None]], below: list[Segment],
                 registry: dict[int, tuple[str, ...]]) -> None:
    """Write one layer: chunks enter the ref index (layer 0); summaries are written outside it and
    become live there with the segments of the layer below (``below``: each one region, as a
    reconcile applies it); then the layer's vectors (a summary's with its partition's readers,
    from ``registry``: index -> access list)."""
    if not nodes:
        if below:
            raise DumpError(f"the dump's segments of layer {layer - 1} name summaries it does not hold")
        return
    g = engine.graph
    for start in range(0, len(nodes), BATCH):
        g.put_nodes([n for n, _ in nodes[start:start + BATCH]], index=layer == 0)
    if below:
        summaries = {n.node_id: n for n, _ in nodes}
        members = g.get_nodes({m for seg in below for m in seg.members})
        for seg in below:
            summary = summaries.get(seg.summary_id)
            if summary is None or any(m not in members for m in seg.members):
                raise DumpError(f"segment {seg.segment_id} of layer {layer - 1} names nodes the dump does not hold")
            g.apply_region(RegionChange(
                layer=layer - 1, expected=tuple(RefState(m, members[m].code) for m in seg.members),
                assign=tuple((m, seg.segment_id) for m in seg.members), add=(seg,),
                above_add=(NodeRef(summary.node_id, summary.code),)))
    with_vectors = [(n, v) for n, v in nodes if v is not None]
    lsh_planes = g.get_lsh().n_planes
    for start in range(0, len(with_vectors), BATCH):
        part = with_vectors[start:start + BATCH]
        metas = [leaf_meta(n, docs[n.doc_id], engine.tenant) if n.layer == 0 and n.doc_id in docs
                 else {"layer": n.layer, "doc_id": n.doc_id if n.layer == 0 else "",
                       "attrs": {READERS: readers_of(registry[index_of(n.code, lsh_planes)])}} for n, _ in part]
        engine.vectors.upsert([n.node_id for n, _ in part], np.stack([v for _, v in part]), metas)
