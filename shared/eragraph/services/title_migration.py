"""The titles migration: a store whose leaf chunks were embedded with their own text only (before
domain.text.embedding_text) gets every chunk whose embedding text a title changes (the
continuation chunks of titled documents) embedded again, so its vectors are what ingest writes
today. ``eragraph migrate titles`` runs it; nothing runs it on its own (the scheduled reindex
never re-embeds a whole corpus unasked).

It reads the layer-0 refs a page at a time in (code, node id) order (GraphStore.prefix_refs, as
services.reindex.reembed_missing: never the whole layer), the page's nodes and their documents
(a document's title and chunk ids say which chunks change: one its record no longer lists is
left to the reindex, which removes it), embeds the changed ones and upserts their vectors with
the meta ingest writes (ingest.leaf_meta). After each page the vectors are flushed and then the
cursor saved in the store's meta (``CURSOR``), so a run that stops (its ``out_of_time``, a kill)
is resumed by the next from the page after the last one saved (a page cut by a kill before its
cursor was saved is embedded again: the same vectors). At the end the store is marked with the
embedding format (engine.EMBED_FORMAT) and the cursor removed: a run on a marked store does
nothing. A store made by this version is marked when it is created (Engine.lsh).

A migrated chunk keeps its LSH code: the bucket it was hashed into from its untitled vector,
which places it in its layer's segments. Nothing checks that a chunk's code is the hash of its
vector, and moving it would re-partition and re-summarize its layer; the run counts how many
migrated chunks would hash to another code now (``would_rehash``), which says how far the
buckets of a migrated store differ from a store built anew (`eragraph rebuild`)."""

from __future__ import annotations

from collections.abc import Callable

from ..domain.access import lsh_part, max_code
from ..domain.lsh import hash_vectors
from ..domain.text import EMBED_FORMAT_VERSION, embedding_text
from .engine import EMBED_FORMAT, Engine
from .ingest import leaf_meta
from .ref_pages import ref_pages

CURSOR = "migrate:titles"  # meta key: where a run stopped, and what the runs before counted
PAGE = 256  # layer-0 refs per page
COUNTS = ("seen", "reembedded", "skipped", "would_rehash")


def _never() -> bool:
    return False


def migrated(engine: Engine) -> bool:
    """The store's leaf vectors are in the current embedding format (or it has none yet)."""
    mark = engine.graph.get_meta(EMBED_FORMAT)
    return mark is not None and int(mark) >= EMBED_FORMAT_VERSION


def migrate_titles(engine: Engine, out_of_time: Callable[[], bool] = _never, page: int | None = None,
                   on_page: Callable[[dict], None] | None = None) -> dict:
    """Run (or resume) the migration until it ends or ``out_of_time()`` says so after a page.

    Returns a JSON-able report: ``complete``, ``already`` (the store was marked before this
    run: nothing was read), ``run`` (this run's counts) and ``totals`` (every run's, the ones
    before a resume included): ``seen`` live layer-0 chunks looked at, ``reembedded``,
    ``skipped`` (their embedding text is their own: no title, the first chunk, or a chunk its
    document no longer lists) and ``would_rehash`` (re-embedded chunks whose new vector hashes
    to another code than the one they keep). ``on_page(totals)`` is called after every page."""
    graph = engine.graph
    if migrated(engine):
        zero = dict.fromkeys(COUNTS, 0)
        return {"complete": True, "already": True, "format": EMBED_FORMAT_VERSION, "run": zero, "totals": zero}
    lsh = engine.stored_lsh()  # None: nothing was ever ingested (and a wrong embedder is refused)
    saved = graph.get_meta(CURSOR) or {}
    totals = {k: int(saved.get(k, 0)) for k in COUNTS}
    run = dict.fromkeys(COUNTS, 0)
    code, last = int(saved.get("code", 0)), str(saved.get("last", ""))
    pages = ref_pages(graph, 0, max_code(), (code, last), page or PAGE) if lsh is not None else ()
    for fresh, (code, last), done in pages:
        counts = _migrate_page(engine, lsh, [r.node_id for r in fresh if r.live])
        for key in COUNTS:
            run[key] += counts[key]
            totals[key] += counts[key]
        if done:
            break
        engine.vectors.flush()  # durable before the cursor that says they are done
        graph.put_meta(CURSOR, {"code": code, "last": last, **totals})
        if on_page is not None:
            on_page(dict(totals))
        if out_of_time():
            return {"complete": False, "already": False, "format": EMBED_FORMAT_VERSION, "run": run,
                    "totals": totals}
    engine.vectors.flush()
    graph.put_meta(EMBED_FORMAT, EMBED_FORMAT_VERSION)
    graph.delete_meta(CURSOR)
    if on_page is not None:
        on_page(dict(totals))
    return {"complete": True, "already": False, "format": EMBED_FORMAT_VERSION, "run": run, "totals": totals}


def _migrate_page(engine: Engine, lsh, live: list[str]) -> dict:
    """Re-embed the chunks of ``live`` whose embedding text their document's title changes."""
    counts = dict.fromkeys(COUNTS, 0)
    counts["seen"] = len(live)
    nodes = engine.graph.get_nodes(live)
    docs = {d: engine.graph.get_document(d) for d in {n.doc_id for n in nodes.values()}}
    todo, texts = [], []
    for i in live:
        node = nodes.get(i)
        doc = docs.get(node.doc_id) if node is not None else None
        if doc is None or i not in doc.chunk_ids:
            continue
        text = embedding_text(doc.title, node.text)
        if text != node.text:
            todo.append(node)
            texts.append(text)
    counts["skipped"] = len(live) - len(todo)
    if not todo:
        return counts
    vectors = engine.embedder.embed(texts)
    counts["reembedded"] = len(todo)
    counts["would_rehash"] = sum(int(code) != lsh_part(n.code, lsh.n_planes)
                                 for code, n in zip(hash_vectors(lsh, vectors), todo))
    engine.vectors.upsert([n.node_id for n in todo], vectors,
                          [leaf_meta(n, docs[n.doc_id], engine.tenant) for n in todo])
    # a chunk removed meanwhile (its document re-ingested or deleted) loses the vector put back
    still = engine.graph.get_nodes([n.node_id for n in todo])
    gone = [n.node_id for n in todo if n.node_id not in still]
    if gone:
        engine.vectors.delete(gone)
    return counts
