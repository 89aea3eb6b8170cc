"""The titles migration (services.title_migration, `eragraph migrate titles`) on a store built
with the earlier behaviour (every leaf vector the embedding of the chunk's own text, no format
mark): afterwards every leaf vector is the embedding of its titled text; a run stopped after any
page (or killed mid-page) is resumed, by a new engine over the same store, and each chunk is
embedded once (a killed page once more); a re-run reads nothing; a new store is marked at once.
On the memory and local profiles; `tests/aws/test_title_migration_aws.py` runs it on moto."""

from __future__ import annotations

import json

import pytest
from support import make_engine
from title_support import Recording, assert_titled, leaves, make_old, migrate_page_by_page, titled_docs

from eragraph.bootstrap import build_engine
from eragraph.config import settings_from_env
from eragraph.domain.filters import Cond
from eragraph.domain.lsh import hash_vectors
from eragraph.domain.text import embedding_text
from eragraph.cli.app import main
from eragraph.services import title_migration
from eragraph.services.engine import EMBED_FORMAT
from eragraph.services.ingest import ingest
from eragraph.services.title_migration import CURSOR, migrate_titles, migrated

LOCAL = {"ERAGRAPH_EMBEDDER": "hash", "ERAGRAPH_SUMMARIZER": "extractive", "ERAGRAPH_GENERATOR": "none",
         "ERAGRAPH_EMBED_CACHE": "false", "ERAGRAPH_S_MIN": "3", "ERAGRAPH_S_MAX": "5", "ERAGRAPH_N_PLANES": "12",
         "ERAGRAPH_CHUNK_TOKENS": "20", "ERAGRAPH_CHUNK_OVERLAP": "4", "ERAGRAPH_SUMMARY_TOKENS": "30"}


def test_a_new_store_is_marked_and_its_migration_reads_nothing(monkeypatch):
    engine = make_engine()
    ingest(engine, titled_docs(3))
    assert migrated(engine)
    monkeypatch.setattr(engine.graph, "prefix_refs", lambda *a: pytest.fail("a marked store was read"))
    out = migrate_titles(engine)
    assert out["already"] and out["complete"] and out["run"]["reembedded"] == 0


def test_an_old_empty_store_is_marked():
    engine = make_engine()
    engine.lsh()
    engine.graph.delete_meta(EMBED_FORMAT)
    out = migrate_titles(engine)
    assert out["complete"] and not out["already"] and out["totals"]["seen"] == 0 and migrated(engine)


def test_memory_migration_embeds_the_continuation_chunks_with_their_title():
    engine = make_engine(chunk_tokens=20, chunk_overlap=4)
    ingest(engine, titled_docs())
    todo = make_old(engine)
    chunks = leaves(engine)
    codes = {i: n.code for i, (n, _) in chunks.items()}
    firsts = [d.chunk_ids[0] for d in engine.graph.list_documents() if d.title]
    assert todo and not set(firsts) & set(todo)  # the first chunks begin with the title
    assert not migrated(engine)
    engine.embedder = Recording(engine.embedder)
    out = migrate_titles(engine, page=5)
    assert out["complete"] and not out["already"]
    assert out["run"] == out["totals"]
    assert out["totals"]["reembedded"] == len(todo) and out["totals"]["seen"] == len(chunks)
    assert out["totals"]["skipped"] == len(chunks) - len(todo)
    assert sorted(engine.embedder.texts) == sorted(embedding_text(chunks[i][1].title, chunks[i][0].text)
                                                   for i in todo)
    engine.embedder = engine.embedder.inner
    assert_titled(engine)
    after = engine.graph.get_nodes(list(chunks))
    assert {i: n.code for i, n in after.items()} == codes  # every chunk keeps its code
    lsh = engine.lsh()
    moved = sum(int(hash_vectors(lsh, engine.embedder.embed([embedding_text(chunks[i][1].title, chunks[i][0].text)]))[0])
                != codes[i] for i in todo)
    assert out["totals"]["would_rehash"] == moved
    # the vector meta is what ingest writes (a filter on the title still selects them)
    _, doc = chunks[todo[0]]
    where = Cond("equals", "title", doc.title)
    found = {h.node_id for h in engine.vectors.search(engine.embedder.embed(["x"])[0], 100, where=where)}
    assert set(doc.chunk_ids) <= found
    assert migrated(engine) and engine.graph.get_meta(CURSOR) is None
    again = migrate_titles(engine)
    assert again["already"] and again["run"]["reembedded"] == 0


def _local(path):
    return build_engine("local", path, settings_from_env(LOCAL))


def test_local_migration_stopped_after_every_page_resumes_each_chunk_once(tmp_path):
    store = tmp_path / "kb"
    engine = _local(store)
    ingest(engine, titled_docs())
    todo = make_old(engine)
    total = len(leaves(engine))
    embedded, runs = migrate_page_by_page(lambda: _local(store))  # a new engine a run, one page each
    assert len(runs) >= total // 4 and [r["complete"] for r in runs] == [False] * (len(runs) - 1) + [True]
    engine = _local(store)
    chunks = leaves(engine)
    assert sorted(embedded) == sorted(embedding_text(chunks[i][1].title, chunks[i][0].text) for i in todo)
    assert runs[-1]["totals"]["reembedded"] == len(todo) and runs[-1]["totals"]["seen"] == total
    assert sum(r["run"]["reembedded"] for r in runs) == len(todo)
    assert_titled(engine)
    assert migrate_titles(engine)["already"]


def test_a_run_killed_mid_page_resumes_from_the_last_saved_page(tmp_path, monkeypatch):
    store = tmp_path / "kb"
    engine = _local(store)
    ingest(engine, titled_docs())
    todo = make_old(engine)
    engine = _local(store)
    pages, upsert = [], engine.vectors.upsert

    def dying(ids, vectors, metas):
        if len(pages) == 2:
            raise RuntimeError("killed")
        pages.append(list(ids))
        upsert(ids, vectors, metas)

    monkeypatch.setattr(engine.vectors, "upsert", dying)
    with pytest.raises(RuntimeError):
        migrate_titles(engine, page=4)
    saved = engine.graph.get_meta(CURSOR)
    assert saved is not None and saved["reembedded"] == sum(len(p) for p in pages)
    monkeypatch.undo()
    engine = _local(store)
    engine.embedder = Recording(engine.embedder)
    out = migrate_titles(engine, page=4)
    assert out["complete"] and out["totals"]["reembedded"] == len(todo)
    done_before = {i for p in pages for i in p}
    chunks = leaves(engine)
    again = {embedding_text(chunks[i][1].title, chunks[i][0].text) for i in done_before}
    assert not again & set(engine.embedder.texts)  # the saved pages are not embedded again
    engine.embedder = engine.embedder.inner
    assert_titled(engine)


def test_cli_migrate_titles_on_a_local_store(tmp_path, capsys, monkeypatch):
    for k, v in LOCAL.items():
        monkeypatch.setenv(k, v)
    store = tmp_path / "kb"
    engine = _local(store)
    ingest(engine, titled_docs())
    todo = make_old(engine)
    del engine
    assert main(["migrate", "titles", "--store", str(store), "--json"]) == 0
    captured = capsys.readouterr()
    out = json.loads(captured.out)
    assert out["complete"] and out["run"]["reembedded"] == len(todo)
    assert "migrate titles" in captured.err  # the progress bar
    assert_titled(_local(store))
    assert main(["migrate", "titles", "--store", str(store), "--no-progress"]) == 0
    captured = capsys.readouterr()
    assert "already migrated" in captured.out and captured.err == ""
    assert main(["migrate", "titles", "--store", str(tmp_path / "none")]) == 1
    assert "no store at" in capsys.readouterr().err


def test_cli_migrate_titles_reports_its_counts_in_words(tmp_path, capsys, monkeypatch):
    for k, v in LOCAL.items():
        monkeypatch.setenv(k, v)
    store = tmp_path / "kb"
    engine = _local(store)
    ingest(engine, titled_docs(4))
    todo = make_old(engine)
    monkeypatch.setattr(title_migration, "PAGE", 3)
    assert main(["migrate", "titles", "--store", str(store), "--quiet"]) == 0
    captured = capsys.readouterr()
    assert f"re-embedded {len(todo)} chunks" in captured.out and "skipped" in captured.out
    assert "would hash to another LSH code" in captured.out and captured.err == ""
