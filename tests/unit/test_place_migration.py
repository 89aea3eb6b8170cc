"""Places for stores built before chunk places (services.place_migration): each chunk found in
its document's text in linear time (domain.places.locate), offsets from the kept text, pages
when the source can be read again, idempotent and resumable; and `eragraph migrate places` on a
local store whose chunks have none."""

from __future__ import annotations

import sqlite3
import time
from dataclasses import replace

import pytest
from file_builders import pdf_bytes
from support import make_engine

from eragraph.domain.places import locate
from eragraph.domain.text import chunk_text, regex_offsets
from eragraph.providers.extractors import ReadLimits
from eragraph.services import ingest
from eragraph.services.place_migration import CURSOR, MARK, migrate_places
from eragraph.services.query import query
from eragraph.services.sources import keep_texts, read_document

NOTES = "The keeper of Skarvik writes the ship log every night, and the harbour master reads it. " * 12


# --- locating --------------------------------------------------------------------------------------

def test_overlapping_chunks_are_located_at_their_offsets_and_a_missing_one_is_none():
    text = " ".join(f"word{i}," for i in range(300))
    chunks = chunk_text(text, regex_offsets, size=20, overlap=6)
    assert len(chunks) > 4
    texts = [c.text for c in chunks]
    texts[2] = "a chunk made from another text"
    found = locate(text, texts)
    assert found[2] is None
    assert [f for i, f in enumerate(found) if i != 2] == [(c.start, c.end) for i, c in enumerate(chunks) if i != 2]


def test_repeated_text_is_placed_in_document_order_on_equal_text():
    text = "same words here. " * 40
    chunks = chunk_text(text, regex_offsets, size=9, overlap=3)
    found = locate(text, [c.text for c in chunks])
    assert all(text[s:e] == c.text for (s, e), c in zip(found, chunks))
    assert [s for s, _ in found] == sorted({s for s, _ in found})  # in document order, never the same start


def test_the_stores_own_chunker_places_repeated_passages_exactly():
    from eragraph.services.place_migration import spans

    engine = make_engine()
    chunks = chunk_text(NOTES, engine.tokenizer.offsets, engine.settings.chunk_tokens, engine.settings.chunk_overlap)
    assert locate(NOTES, [c.text for c in chunks]) != [(c.start, c.end) for c in chunks]  # ambiguous alone
    assert spans(engine, NOTES, [c.text for c in chunks]) == [(c.start, c.end) for c in chunks]


def test_locating_reads_windows_not_the_whole_text_for_every_chunk():
    text = "x" * 2_000_000
    chunks = ["not in the text at all " * 4] * 5_000
    started = time.perf_counter()
    assert locate(text, chunks) == [None] * 5_000
    assert time.perf_counter() - started < 1.0  # 5,000 whole-text scans would take far longer


# --- the migration ---------------------------------------------------------------------------------

def without_places(engine) -> dict:
    """Every chunk's place, then the chunks written again without one (a store from before)."""
    refs = [r.node_id for r in engine.graph.layer_refs(0)]
    nodes = engine.graph.get_nodes(refs)
    engine.graph.put_nodes([replace(n, place=()) for n in nodes.values()], index=False)
    return {i: n.place for i, n in nodes.items()}


def places(engine) -> dict:
    refs = [r.node_id for r in engine.graph.layer_refs(0)]
    return {i: n.place for i, n in engine.graph.get_nodes(refs).items()}


def test_kept_texts_give_every_chunk_back_its_offsets_and_a_second_run_reads_nothing():
    engine = make_engine()
    docs = [ingest.SourceDoc(source=f"notes{i}.txt", text=NOTES.replace("Skarvik", f"Skarvik {i}")) for i in range(5)]
    ingest.ingest(engine, list(keep_texts(engine, docs)))
    before = without_places(engine)
    assert "places were recorded" in query(engine, "keeper log", mode="dense", k=3).note
    out = migrate_places(engine, page=2)
    assert out["complete"] and not out["already"]
    assert out["run"]["chunks_placed"] == len(before) and out["run"]["no_text"] == 0
    assert places(engine) == before  # exactly what ingest recorded
    assert "places were recorded" not in query(engine, "keeper log", mode="dense", k=3).note
    assert engine.graph.get_meta(MARK) is not None and engine.graph.get_meta(CURSOR) is None
    again = migrate_places(engine)
    assert again["already"] and again["run"]["chunks_placed"] == 0


def test_a_pdf_read_again_gives_pages_and_a_changed_text_gives_nothing(tmp_path):
    engine = make_engine()
    pages = [" ".join(f"p{p}w{i} lighthouse" for i in range(50)) for p in (1, 2, 3)]
    pdf = tmp_path / "log.pdf"
    pdf.write_bytes(pdf_bytes(pages))
    [doc] = read_document(pdf.read_bytes(), "log.pdf", str(pdf), "log", ReadLimits(), [])
    gone = ingest.SourceDoc(source="gone.txt", text=NOTES)
    ingest.ingest(engine, [doc, *keep_texts(engine, [gone])])
    before = without_places(engine)
    engine.blobs.put(f"text/{gone.resolved_id}.txt", b"another text altogether")  # no longer the ingested text
    out = migrate_places(engine)
    after = places(engine)
    pdf_chunks = [i for i in before if before[i] and len(before[i]) == 4]
    assert pdf_chunks and all(after[i] == before[i] for i in pdf_chunks)  # offsets and pages, from the PDF
    assert out["run"]["chunks_paged"] == len(pdf_chunks)
    others = [i for i in before if i not in pdf_chunks]
    assert others and all(after[i] == () for i in others) and out["run"]["no_text"] == len(others)


def test_a_run_out_of_time_resumes_from_its_saved_page():
    engine = make_engine()
    docs = [ingest.SourceDoc(source=f"n{i}.txt", text=NOTES + f" Entry {i}.") for i in range(4)]
    ingest.ingest(engine, list(keep_texts(engine, docs)))
    before = without_places(engine)
    first = migrate_places(engine, page=1, out_of_time=lambda: True)
    assert not first["complete"] and engine.graph.get_meta(CURSOR) is not None
    rest = migrate_places(engine, page=1)
    assert rest["complete"] and rest["totals"]["chunks_placed"] == len(before)
    assert first["run"]["chunks_placed"] + rest["run"]["chunks_placed"] == len(before)
    assert places(engine) == before


def test_eragraph_migrate_places_on_a_local_store_without_places(tmp_path):
    """A local store built by `eragraph ingest` whose chunks lost their places (the column
    emptied, as a store from before places), migrated by the CLI: every chunk placed again."""
    pytest.importorskip("tqdm")
    import json

    from serve_support import eragraph

    folder = tmp_path / "in"
    folder.mkdir()
    for i in range(3):
        (folder / f"n{i}.txt").write_text(NOTES + f" Entry {i}.")
    store = tmp_path / "store"
    assert eragraph("ingest", str(folder), "--store", str(store), "--quiet").returncode == 0
    [graph] = list(store.rglob("graph.sqlite"))
    conn = sqlite3.connect(graph)
    before = dict(conn.execute("SELECT node_id, place FROM nodes WHERE layer = 0"))
    assert before and all(before.values())
    conn.execute("UPDATE nodes SET place = '' WHERE layer = 0")
    conn.commit()
    conn.close()
    done = eragraph("migrate", "places", "--store", str(store), "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["run"]["chunks_placed"] == len(before)
    conn = sqlite3.connect(graph)
    assert dict(conn.execute("SELECT node_id, place FROM nodes WHERE layer = 0")) == before
    conn.close()
    again = json.loads(eragraph("migrate", "places", "--store", str(store), "--json").stdout)
    assert again["already"]
