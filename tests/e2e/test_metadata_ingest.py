"""Document metadata through an ingest (memory profile): stored on the document and, with the
built-in source/doc_id/title, in every leaf chunk's vector meta; a change of the metadata alone
re-tags the chunks from their stored vectors (no embedding, no chunking, no summary work), at
the crash-safe order (vectors, then the record), and resolves races with other writers."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from support import make_engine, synthetic_docs

from eragraph.adapters.memory.graph_memory import MemoryGraphStore
from eragraph.domain.filters import chunk_attrs, matches, parse_expression
from eragraph.domain.ids import content_hash
from eragraph.domain.ranking import rank_key
from eragraph.ports.records import Hit
from eragraph.providers.hashing import HashingEmbedder
from eragraph.services import reindex, resummarize
from eragraph.services.ingest import SourceDoc, ingest


class CountingEmbedder(HashingEmbedder):
    """The hashing embedder, counting the texts it is asked to embed."""

    def __init__(self, dim: int = 128) -> None:
        super().__init__(dim)
        self.texts = 0

    def embed(self, texts):
        self.texts += len(texts)
        return super().embed(texts)


def with_metadata(docs, n_changed: int = 0, seed: int = 0) -> list[SourceDoc]:
    """The synthetic docs with metadata; the first ``n_changed`` of them with other values."""
    out = []
    for i, d in enumerate(docs):
        year = 2000 + (i * 7 + seed * (i < n_changed)) % 25
        tags = ["even" if i % 2 == 0 else "odd"] + (["changed"] if i < n_changed and seed else [])
        out.append(replace(d, metadata={"year": year, "tags": tags, "topic": d.title.split()[0],
                                        "reviewed": bool((i + seed * (i < n_changed)) % 3)}))
    return out


def engine_with_counter(**kw):
    engine = make_engine(**kw)
    engine.embedder = CountingEmbedder()
    return engine


def leaves(engine) -> list[str]:
    return sorted(r.node_id for r in engine.graph.layer_refs(0))


def stored_attrs(engine) -> dict[str, dict]:
    """Each leaf chunk's ``attrs`` as the vector index holds them."""
    return {c: engine.vectors._metas[c].get("attrs") for c in leaves(engine)}


def expected_attrs(engine) -> dict[str, dict]:
    """Each leaf chunk's attributes from its document's record (what the index must hold)."""
    out = {}
    for doc in engine.graph.list_documents():
        for c in doc.chunk_ids:
            out[c] = chunk_attrs(doc.metadata, doc.source, doc.doc_id, doc.title)
    return out


def summary_graph(engine) -> dict:
    """Everything above the leaves, and every vector: what a re-tag must not change."""
    top = max(engine.graph.layer_sizes())
    out = {}
    for layer in range(0, top + 1):
        ids = sorted(r.node_id for r in engine.graph.layer_refs(layer))
        segments = sorted((s.segment_id, tuple(s.members), s.summary_id) for s in engine.graph.get_segments(layer))
        out[layer] = (ids, segments, {i: n.text for i, n in engine.graph.get_nodes(ids).items()} if layer else None)
    vectors = engine.vectors.get_vectors(sorted(engine.vectors.ids()))
    return {"graph": out, "vectors": {i: v.tobytes() for i, v in vectors.items()}}


def assert_filters_agree(engine, expressions) -> None:
    """The stored attrs are the documents', and a filtered search of the vector index returns
    the brute-force top-k over the chunks whose document's attributes match."""
    assert stored_attrs(engine) == expected_attrs(engine)
    attrs = expected_attrs(engine)
    ids = sorted(attrs)
    vectors = engine.vectors.get_vectors(ids)
    query = engine.embedder.embed(["planet telescope recipe oven guitar"])[0]
    for text in expressions:
        f = parse_expression(text)
        allowed = [Hit(i, float(vectors[i] @ query)) for i in ids if matches(f, attrs[i])]
        for k in (3, len(ids)):
            want = [h.node_id for h in sorted(allowed, key=rank_key)[:k]]
            got = [h.node_id for h in engine.vectors.search(query, k, layers=[0], where=f)]
            assert got == want, text


EXPRESSIONS = ["year>=2010", "tags=changed", "reviewed=true", "topic in [astronomy,music]",
               "tags!=even", "year<2005"]


def test_metadata_reaches_documents_and_every_leaf_chunk():
    engine = engine_with_counter()
    docs = with_metadata(synthetic_docs(24, seed=3))
    report = ingest(engine, docs, batch_docs=7)
    assert report.documents_added == len(docs) and report.errors == []
    resummarize.drain(engine)
    for src in docs:
        assert engine.graph.get_document(src.doc_id).metadata == src.metadata
    assert_filters_agree(engine, EXPRESSIONS)
    summaries = [i for i, m in engine.vectors._metas.items() if m["layer"] > 0]
    # a summary carries no document's metadata, only its partition's readers (domain.access)
    assert summaries and all(engine.vectors._metas[i]["attrs"] == {"readers": ["*"]} for i in summaries)


def test_a_metadata_only_change_retags_without_embedding_or_summarizing():
    engine = engine_with_counter()
    docs = synthetic_docs(30, seed=5)
    ingest(engine, with_metadata(docs))
    resummarize.drain(engine)
    before = summary_graph(engine)
    embedded = engine.embedder.texts

    # same content, same metadata: a no-op as ever
    again = ingest(engine, with_metadata(docs))
    assert (again.documents_unchanged, again.documents_retagged) == (len(docs), 0)
    assert engine.embedder.texts == embedded and engine.queue.pending() == 0

    n_changed = 11
    changed = with_metadata(docs, n_changed=n_changed, seed=9)
    report = ingest(engine, changed, batch_docs=4)
    assert report.documents_retagged == n_changed
    assert report.documents_unchanged == len(docs) - n_changed
    assert report.documents_added == report.documents_replaced == report.chunks_added == 0
    assert engine.embedder.texts == embedded  # not one text embedded
    assert engine.queue.pending() == 0  # nothing announced: no reconcile, no summary call
    drained = resummarize.drain(engine)
    assert drained.cost.summarize_calls == 0
    assert summary_graph(engine) == before  # nodes, segments, summaries and every vector as they were
    for src in changed:
        assert engine.graph.get_document(src.doc_id).metadata == src.metadata
    assert_filters_agree(engine, EXPRESSIONS)


def test_a_title_change_alone_retags_too():
    engine = engine_with_counter()
    [doc] = synthetic_docs(1)
    ingest(engine, [doc])
    embedded, pending = engine.embedder.texts, engine.queue.pending()
    chunks = engine.graph.get_document(doc.doc_id).chunk_ids
    report = ingest(engine, [replace(doc, title="A better title")])
    # its chunks are embedded again (each with the title: domain.text.embedding_text), and
    # only they: nothing re-chunked, nothing announced
    assert report.documents_retagged == 1 and engine.embedder.texts == embedded + len(chunks)
    assert engine.queue.pending() == pending
    assert engine.graph.get_document(doc.doc_id).title == "A better title"
    assert_filters_agree(engine, ["title=A better title"])


def test_bad_metadata_from_a_library_caller_is_that_documents_error():
    engine = engine_with_counter()
    good, bad = synthetic_docs(2)
    report = ingest(engine, [replace(good, metadata={"year": 2020}), replace(bad, metadata={"doc_id": "x"})])
    assert report.documents_added == 1
    assert [e["source"] for e in report.errors] == [bad.source] and "reserved" in report.errors[0]["error"]


@pytest.mark.parametrize("version,outcome", [("0C", "retagged"), ("0B", "retagged"), ("0A", "stale")])
def test_versions_order_metadata_changes(version, outcome):
    """Stored at 0B: a newer event records its version and metadata, the same event's object
    again (a sidecar's refresh) re-tags at 0B, an older one is stale."""
    engine = engine_with_counter()
    [doc] = synthetic_docs(1)
    ingest(engine, [replace(doc, version="0B", metadata={"year": 1})])
    report = ingest(engine, [replace(doc, version=version, metadata={"year": 2})])
    stored = engine.graph.get_document(doc.doc_id)
    if outcome == "stale":
        assert report.documents_stale == 1 and (stored.version, stored.metadata) == ("0B", {"year": 1})
    else:
        assert report.documents_retagged == 1 and (stored.version, stored.metadata) == (version, {"year": 2})
    assert_filters_agree(engine, ["year=2"])


class FlakyGraphStore(MemoryGraphStore):
    """Runs ``before_write(doc)`` just before each conditional document write, and
    ``after_read()`` once, just after the next document read (what an ingest decides on)."""

    before_write = None
    after_read = None

    def put_document(self, doc, *args, **kwargs):
        if self.before_write is not None:
            self.before_write(doc)
        return super().put_document(doc, *args, **kwargs)

    def get_document(self, *args, **kwargs):
        got = super().get_document(*args, **kwargs)
        run, self.after_read = self.after_read, None
        if run is not None:
            run()
        return got


class Killed(RuntimeError):
    pass


def test_killed_between_the_vectors_and_the_record_a_rerun_retags():
    engine = engine_with_counter()
    engine.graph = FlakyGraphStore()
    docs = synthetic_docs(6, seed=2)
    ingest(engine, with_metadata(docs))
    changed = with_metadata(docs, n_changed=3, seed=4)

    def die(doc):
        raise Killed("killed before the record")

    engine.graph.before_write = die
    with pytest.raises(Killed):
        ingest(engine, changed)
    engine.graph.before_write = None
    # the vectors went first: the records still say the old metadata, a rerun sees the change
    assert all(engine.graph.get_document(d.doc_id).metadata == o.metadata
               for d, o in zip(changed, with_metadata(docs)))
    embedded = engine.embedder.texts
    report = ingest(engine, changed)
    assert report.documents_retagged == 3 and engine.embedder.texts == embedded
    assert_filters_agree(engine, EXPRESSIONS)


def test_a_retag_that_loses_to_a_newer_writer_leaves_the_winners_attributes():
    engine = engine_with_counter()
    engine.graph = FlakyGraphStore()
    [doc] = synthetic_docs(1)
    ingest(engine, [replace(doc, version="0A", metadata={"year": 1})])

    # the newer writer commits after this one read the record: this one's vectors come last
    engine.graph.after_read = lambda: ingest(engine, [replace(doc, version="0C", metadata={"year": 3})])
    report = ingest(engine, [replace(doc, version="0B", metadata={"year": 2})])
    assert report.documents_stale == 1
    stored = engine.graph.get_document(doc.doc_id)
    assert (stored.version, stored.metadata) == ("0C", {"year": 3})
    assert_filters_agree(engine, ["year=3", "year=2"])


def test_a_retag_that_loses_to_other_content_it_supersedes_ingests_in_full():
    """Stored: A at 0A. The newest event (0C) carries A with new metadata, but an event in
    between (0B, content B) commits first: 0C must put A back, with its metadata."""
    engine = engine_with_counter()
    engine.graph = FlakyGraphStore()
    first, second = synthetic_docs(2)
    other = replace(second, doc_id=first.doc_id, source=first.source)
    ingest(engine, [replace(first, version="0A", metadata={"year": 1})])

    # B commits (dropping A's chunks) after this one read A: this one re-tags chunks that are gone
    engine.graph.after_read = lambda: ingest(engine, [replace(other, version="0B", metadata={"year": 2})])
    report = ingest(engine, [replace(first, version="0C", metadata={"year": 3})])
    stored = engine.graph.get_document(first.doc_id)
    assert (stored.content_hash, stored.version, stored.metadata) == (content_hash(first.text), "0C", {"year": 3})
    assert report.documents_replaced == 1
    assert set(stored.chunk_ids) == set(leaves(engine)) == set(engine.vectors.ids()) - {
        i for i, m in engine.vectors._metas.items() if m["layer"] > 0}
    assert_filters_agree(engine, ["year=3"])


def test_reindex_reembeds_a_missing_leaf_vector_with_its_attributes():
    engine = engine_with_counter()
    docs = with_metadata(synthetic_docs(8, seed=1))
    ingest(engine, docs)
    resummarize.drain(engine)
    lost = leaves(engine)[::3]
    engine.vectors.delete(lost)
    out = reindex.run(engine)
    assert out["vectors_missing_reembedded"] == len(lost)
    assert_filters_agree(engine, EXPRESSIONS)
    assert all(engine.vectors._metas[c]["text"] == engine.graph.get_nodes([c])[c].text for c in lost)


def test_vectors_of_a_retag_are_the_stored_ones():
    engine = engine_with_counter()
    docs = synthetic_docs(4, seed=8)
    ingest(engine, with_metadata(docs))
    before = engine.vectors.get_vectors(leaves(engine))
    ingest(engine, with_metadata(docs, n_changed=4, seed=1))
    after = engine.vectors.get_vectors(leaves(engine))
    assert before.keys() == after.keys() and all(np.array_equal(before[k], after[k]) for k in before)


def test_cli_ingest_reads_sidecars_and_jsonl_metadata_and_retags_on_a_sidecar_change(tmp_path, monkeypatch, capsys):
    """The local profile end to end: `eragraph ingest` twice more after editing a sidecar
    re-tags just that document, then finds everything unchanged; rebuild keeps the metadata."""
    import json

    from eragraph.bootstrap import build_engine
    from eragraph.cli.app import main
    from eragraph.config import settings_from_env

    monkeypatch.setenv("ERAGRAPH_EMBEDDER", "hash")
    monkeypatch.delenv("ERAGRAPH_STORE", raising=False)
    docs, store = tmp_path / "docs", tmp_path / "store"
    docs.mkdir()
    (docs / "danube.txt").write_text("The Danube rises in the Black Forest and flows to the Black Sea.",
                                     encoding="utf-8")
    (docs / "vistula.md").write_text("# Rivers\n\nThe Vistula is the longest river in Poland.", encoding="utf-8")
    rows = [{"id": "nile", "text": "The Nile flows north into the Mediterranean.", "metadata": {"continent": "Africa"}},
            {"id": "amazon", "text": "The Amazon carries more water than any other river."}]
    (docs / "rivers.jsonl").write_text("\n".join(json.dumps(r) for r in rows), encoding="utf-8")
    sidecar = docs / "danube.txt.metadata.json"

    def ingest_json(attrs) -> dict:
        sidecar.write_text(json.dumps({"metadataAttributes": attrs}), encoding="utf-8")
        assert main(["ingest", str(docs), "--store", str(store), "--json", "--quiet"]) == 0
        return json.loads(capsys.readouterr().out)

    def metadata(path) -> dict:
        engine = build_engine("local", path, settings_from_env())
        return {d.doc_id if d.source.startswith("rivers") else d.source.rsplit("/", 1)[-1]: d.metadata
                for d in engine.graph.list_documents()}

    first = ingest_json({"continent": "Europe", "length_km": 2850})
    assert first["documents_added"] == 4 and first["errors"] == []
    second = ingest_json({"continent": "Europe", "length_km": 2857})
    assert (second["documents_retagged"], second["documents_unchanged"], second["chunks_added"]) == (1, 3, 0)
    assert second["summarize_calls"] == 0
    third = ingest_json({"continent": "Europe", "length_km": 2857})
    assert (third["documents_retagged"], third["documents_unchanged"]) == (0, 4)
    want = {"danube.txt": {"continent": "Europe", "length_km": 2857}, "vistula.md": {},
            "nile": {"continent": "Africa"}, "amazon": {}}
    assert metadata(store) == want

    def sources_found(*filters) -> set[str]:
        argv = ["query", "Which river flows to the Black Sea?", "--store", str(store), "--json", "--mode", "dense",
                "--k", "8"]
        assert main(argv + [a for f in filters for a in ("--filter", f)]) == 0
        return {r["source"].rsplit("/", 1)[-1] for r in json.loads(capsys.readouterr().out)["results"]}

    assert sources_found("length_km=2857") == {"danube.txt"}  # the re-tagged chunks, in the FAISS index
    assert sources_found("length_km=2850") == set()
    assert sources_found("continent=Africa") == {"rivers.jsonl#nile"}
    assert main(["rebuild", "--store", str(store), "--into", str(tmp_path / "rebuilt"), "--json", "--quiet"]) == 0
    capsys.readouterr()
    assert metadata(tmp_path / "rebuilt") == want
