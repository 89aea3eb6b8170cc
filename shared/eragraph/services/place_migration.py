"""The places migration: a store whose chunks were written before chunk places were recorded
(domain.places) gets them where the stored text allows. ``eragraph migrate places`` runs it;
nothing runs it on its own.

It reads the documents a page at a time (DocumentStore.documents_page: never the whole store),
and for a document with a leaf chunk that has no place, its text:

1. the document's source read again and extracted, when it can be read (an S3 source through
   the store's blob store, a local file by its path) and extracts to the very text that was
   ingested (its content hash): offsets, and pages for a paged document (a PDF; a DOCX that
   marks its page breaks);
2. else the text ingest kept in the blob store (services.sources.text_key: `eragraph ingest`
   and the API's uploads keep it), when it is still the ingested text: offsets only;
3. else nothing: the chunks keep no place (counted ``no_text``) and queries still say so.

The text is cut again with the store's chunker and settings; when that gives the document's
very chunks their offsets are exact (``spans``), else each chunk is found in the text in
document order (domain.places.locate: linear in the chunks' length; a passage the text repeats
may be placed at an equal copy of it). Its node written again with its place (``put_nodes(index=False)``: the
ref index is not touched, nothing is embedded). A chunk whose text is not found where it
should be keeps none (``unlocated``). A text larger than the store's document limit
(ERAGRAPH_MAX_DOCUMENT_BYTES) is not read. Chunks that have a place are left alone, so a run
is idempotent, and one that stops is resumed from the page after the last one saved
(``CURSOR``); at the end the store is marked (``MARK``) and a run on a marked store reads
nothing. A document replaced while its page is migrated keeps the new version's chunks: the
node of a chunk its record no longer lists is deleted again after the write."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from ..domain.ids import content_hash
from ..domain.model import BadInputError, Document, Node
from ..domain.places import PageStarts, locate, place_of
from ..domain.text import chunk_text
from ..providers.extractors import ReadLimits
from .engine import Engine
from .sources import read_document, text_key

CURSOR = "migrate:places"   # meta key: where a run stopped, and what the runs before counted
MARK = "places_migrated"    # meta key: the store's chunks have the places their texts allow
PAGE = 64                   # documents per page
COUNTS = ("documents", "chunks_placed", "chunks_paged", "unlocated", "no_text")

Reader = Callable[[Document], bytes | None]


def _never() -> bool:
    return False


def read_source(engine: Engine) -> Reader:
    """The bytes of a document's source when they can be had: an ``s3://bucket/key`` source
    from the engine's blob store (the bucket it ingests from), a local file by its path; None
    otherwise, or when larger than the document limit."""
    limit = engine.settings.max_document_bytes

    def read(doc: Document) -> bytes | None:
        source = doc.source
        try:
            if source.startswith("s3://"):
                if engine.blobs is None or source.count("/") < 3:
                    return None
                _, _, bucket, key = source.split("/", 3)
                if getattr(engine.blobs, "bucket", bucket) != bucket:  # another bucket's object: not ours to read
                    return None
                return engine.blobs.get(key) if engine.blobs.size(key) <= limit else None
            path = Path(source)
            if path.is_file() and path.stat().st_size <= limit:
                return path.read_bytes()
        except (KeyError, OSError, ValueError):
            return None
        return None

    return read


def document_text(engine: Engine, doc: Document, reader: Reader) -> tuple[str, PageStarts] | None:
    """The text ``doc`` was ingested from and its page starts (see the module: the source read
    again, else the kept text); None when neither is the ingested text any more."""
    data = reader(doc)
    if data is not None:
        try:
            [got] = read_document(data, doc.source, doc.source, doc.title, ReadLimits.from_settings(engine.settings), [])
        except (BadInputError, ValueError):
            got = None
        if got is not None and content_hash(got.text) == doc.content_hash:
            return got.text, got.pages
    if engine.blobs is None:
        return None
    key = text_key(doc.doc_id)
    try:
        if engine.blobs.size(key) > engine.settings.max_document_bytes:
            return None
        text = engine.blobs.get(key).decode("utf-8")
    except (KeyError, UnicodeDecodeError):
        return None
    return (text, ()) if content_hash(text) == doc.content_hash else None


def spans(engine: Engine, text: str, chunks: list[str]) -> list[tuple[int, int] | None]:
    """Each chunk's ``[start, end)`` in its document's ``text``: the text cut again with the
    store's chunker and settings, when that gives these very chunks (exact, repeated passages
    included); else each chunk found in order (domain.places.locate: a passage the text repeats
    may be placed at an equal copy of it)."""
    settings = engine.settings
    pieces = chunk_text(text, engine.tokenizer.offsets, settings.chunk_tokens, settings.chunk_overlap)
    if len(pieces) == len(chunks) and all(p.text == c for p, c in zip(pieces, chunks)):
        return [(p.start, p.end) for p in pieces]
    return locate(text, chunks)


def _migrate_page(engine: Engine, docs: list[Document], reader: Reader) -> dict:
    counts = dict.fromkeys(COUNTS, 0)
    nodes = engine.graph.get_nodes(c for d in docs for c in d.chunk_ids)
    placed: list[Node] = []
    for doc in docs:
        chunks = [nodes[c] for c in doc.chunk_ids if c in nodes]
        missing = [n for n in chunks if n.layer == 0 and not n.place]
        if not missing:
            continue
        counts["documents"] += 1
        found = document_text(engine, doc, reader)
        if found is None:
            counts["no_text"] += len(missing)
            continue
        text, pages = found
        for node, span in zip(chunks, spans(engine, text, [n.text for n in chunks])):
            if node.place:
                continue
            if span is None:
                counts["unlocated"] += 1
                continue
            placed.append(replace(node, place=place_of(span[0], span[1], pages)))
            counts["chunks_paged"] += bool(pages)
    counts["chunks_placed"] = len(placed)
    if placed:
        engine.graph.put_nodes(placed, index=False)
        still = {c for d in docs for c in (_listed(engine, d.doc_id))}
        gone = [n.node_id for n in placed if n.node_id not in still]
        if gone:  # replaced meanwhile: the node written back is no chunk of the document any more
            engine.graph.delete_nodes(gone)
    return counts


def _listed(engine: Engine, doc_id: str) -> tuple[str, ...]:
    doc = engine.graph.get_document(doc_id)
    return doc.chunk_ids if doc is not None else ()


def migrated(engine: Engine) -> bool:
    return engine.graph.get_meta(MARK) is not None


def migrate_places(engine: Engine, out_of_time: Callable[[], bool] = _never, page: int | None = None,
                   on_page: Callable[[dict], None] | None = None, reader: Reader | None = None) -> dict:
    """Run (or resume) the migration until it ends or ``out_of_time()`` says so after a page.

    Returns a JSON-able report: ``complete``, ``already`` (the store was marked before: nothing
    was read), ``run`` (this run's counts) and ``totals`` (every run's): ``documents`` with a
    chunk without a place, ``chunks_placed`` (``chunks_paged`` of them with pages),
    ``unlocated`` (a chunk whose text is not in its document's text) and ``no_text`` (chunks of
    documents whose text could not be had). ``reader``: a document's source bytes (default
    read_source)."""
    graph = engine.graph
    zero = dict.fromkeys(COUNTS, 0)
    if migrated(engine):
        return {"complete": True, "already": True, "run": zero, "totals": zero}
    reader = reader or read_source(engine)
    saved = graph.get_meta(CURSOR) or {}
    totals = {k: int(saved.get(k, 0)) for k in COUNTS}
    run = dict(zero)
    after = saved.get("after") or None
    while True:
        docs, after = graph.documents_page(after, page or PAGE)
        counts = _migrate_page(engine, docs, reader)
        for key in COUNTS:
            run[key] += counts[key]
            totals[key] += counts[key]
        if after is None:
            break
        graph.put_meta(CURSOR, {"after": after, **totals})
        if on_page is not None:
            on_page(dict(totals))
        if out_of_time():
            return {"complete": False, "already": False, "run": run, "totals": totals}
    graph.put_meta(MARK, 1)
    graph.delete_meta(CURSOR)
    if on_page is not None:
        on_page(dict(totals))
    return {"complete": True, "already": False, "run": run, "totals": totals}
