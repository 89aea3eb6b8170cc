"""GraphStore contract: every backend in factories.GRAPH_STORE_FACTORIES behaves like memory."""

from __future__ import annotations

from dataclasses import replace

import pytest

from eragraph.domain.doc_status import FAILED, INDEXED, RECEIVED, DocStatus
from eragraph.domain.lsh import draw_hyperplanes
from eragraph.domain.model import (DELETED, ConflictError, Document, MetaWrite, Node, NodeRef, RefState,
                                   RegionChange, Segment)

NESTED = {"s_min": 3, "ratio": 0.25, "flags": [True, False, None], "name": "café ✓",
          "deep": {"a": [1, {"b": [2.5, "x"]}], "empty": {}, "none": None}, "big": 2 ** 53}


def node(node_id: str, layer: int = 0, code: int = 0, doc_id: str = "d", children: tuple = ()) -> Node:
    return Node(node_id=node_id, layer=layer, text=f"text of {node_id}", tokens=len(node_id) + 3,
                code=code, doc_id=doc_id, source=f"mem://{doc_id}", children=children)


def seg(segment_id: str, layer: int, members: tuple[str, ...]) -> Segment:
    return Segment(segment_id=segment_id, layer=layer, members=members, summary_id=f"sum-{segment_id}")


# --- store-wide configuration ---------------------------------------------------------------

def test_put_lsh_first_writer_wins(graph_store):
    assert graph_store.get_lsh() is None
    first = draw_hyperplanes("hash-128", 16, 12, seed=1)
    second = draw_hyperplanes("other", 16, 12, seed=2)
    assert graph_store.put_lsh(first) == first
    assert graph_store.put_lsh(second) == first
    assert graph_store.get_lsh() == first


def test_meta_round_trips_nested_json(graph_store):
    assert graph_store.get_meta("settings") is None
    graph_store.put_meta("settings", NESTED)
    got = graph_store.get_meta("settings")
    assert got == NESTED
    got["deep"]["a"].append("mutated")  # a returned value is a copy
    assert graph_store.get_meta("settings") == NESTED
    for value in (3, 1.5, "text", [1, 2], None, True):
        graph_store.put_meta("scalar", value)
        assert graph_store.get_meta("scalar") == value
    graph_store.put_meta("settings", {"replaced": 1})
    assert graph_store.get_meta("settings") == {"replaced": 1}


def test_add_within_adds_up_to_its_limit_and_starts_each_period_again(graph_store):
    """MetaStore.add_within (services.ingest_quota's counter): a sum past the limit is refused
    with nothing written, to the limit exactly passes, another period starts from 0."""
    assert graph_store.add_within("ingest-quota", "2031-01-01", 60, 100) == 60
    assert graph_store.add_within("ingest-quota", "2031-01-01", 41, 100) is None
    assert graph_store.add_within("ingest-quota", "2031-01-01", 40, 100) == 100
    assert graph_store.get_meta("ingest-quota") == {"period": "2031-01-01", "total": 100}
    assert graph_store.add_within("ingest-quota", "2031-01-02", 101, 100) is None
    assert graph_store.add_within("ingest-quota", "2031-01-02", 7, 100) == 7
    assert graph_store.get_meta("ingest-quota") == {"period": "2031-01-02", "total": 7}


def test_add_within_charges_a_mark_once_a_period(graph_store):
    """A marked add (one object version: services.ingest_quota) is recorded with the mark in the
    same atomic write: the same mark again adds nothing and answers the total, even past the
    limit; a new period, or another mark, is charged."""
    mark = "s3://docs/a.txt@0055AED6DCD90281E5"
    assert graph_store.add_within("ingest-quota", "2031-01-01", 60, 100, mark=mark) == 60
    assert graph_store.add_within("ingest-quota", "2031-01-01", 60, 100, mark=mark) == 60
    assert graph_store.add_within("ingest-quota", "2031-01-01", 30, 100, mark=mark + "0") == 90
    assert graph_store.add_within("ingest-quota", "2031-01-01", 30, 100, mark="another") is None
    assert graph_store.get_meta("ingest-quota") == {"period": "2031-01-01", "total": 90}
    assert graph_store.add_within("ingest-quota", "2031-01-02", 60, 100, mark=mark) == 60
    assert graph_store.add_within("ingest-quota", "2031-01-02", 60, 100, mark=mark) == 60
    assert graph_store.get_meta("ingest-quota") == {"period": "2031-01-02", "total": 60}


def test_claim_meta_keeps_the_first_claim(graph_store):
    assert graph_store.claim_meta("access-index:7", "pA") == "pA"
    assert graph_store.claim_meta("access-index:7", "pB") == "pA"  # taken: the owner is returned
    assert graph_store.get_meta("access-index:7") == "pA"
    assert graph_store.claim_meta("access-index:8", {"k": [1]}) == {"k": [1]}


def test_meta_keys_and_delete(graph_store):
    for key in ("dirty:2", "dirty:0", "dirtyx", "settings", "dirty:10"):
        graph_store.put_meta(key, 1.0)
    assert graph_store.meta_keys("dirty:") == ["dirty:0", "dirty:10", "dirty:2"]
    assert graph_store.meta_keys("") == ["dirty:0", "dirty:10", "dirty:2", "dirtyx", "settings"]
    assert graph_store.meta_keys("zzz") == []
    graph_store.delete_meta("dirty:0")
    graph_store.delete_meta("never-there")
    assert graph_store.get_meta("dirty:0") is None
    assert graph_store.meta_keys("dirty:") == ["dirty:10", "dirty:2"]


def test_get_metas_reads_the_stored_ones_of_many_keys(graph_store):
    graph_store.put_meta("dirty:0:3", 5.0)
    graph_store.put_meta("swept:0", 9.5)
    graph_store.put_meta("settings", {"a": [1, 2]})
    keys = ["dirty:0:3", "swept:0", "never-there", "settings"] + [f"dirty:1:{g}" for g in range(120)]
    assert graph_store.get_metas(keys) == {"dirty:0:3": 5.0, "swept:0": 9.5, "settings": {"a": [1, 2]}}
    assert graph_store.get_metas([]) == {}


def test_sizes_and_metas_reads_the_sizes_the_keys_and_the_prefixes_together(graph_store):
    # what a reconcile reads before it plans: the layer sizes, its shard's marker, the layer's
    # swept stamp, its applying marks and its shard's outbox entries (another shard's or
    # layer's are not asked for, so not returned)
    graph_store.put_nodes([node("a", code=1), node("b", code=2), node("s", layer=1, code=3)])
    graph_store.put_meta("dirty:0:3", 5.0)
    graph_store.put_meta("dirty:0:4", 6.0)
    graph_store.put_meta("swept:0", 9.5)
    graph_store.put_meta("applying:0:t1", 7.0)
    graph_store.put_meta("applying:1:t2", 8.0)
    graph_store.put_meta("outbox:0:3:x", {"made": [["s", 3]]})
    graph_store.put_meta("outbox:0:4:y", {"made": []})
    sizes, held = graph_store.sizes_and_metas(["dirty:0:3", "swept:0", "dirty:0:9"], ["outbox:0:3:", "applying:0:"])
    assert sizes == graph_store.layer_sizes() == {0: 2, 1: 1}
    assert held == {"dirty:0:3": 5.0, "swept:0": 9.5, "applying:0:t1": 7.0, "outbox:0:3:x": {"made": [["s", 3]]}}
    graph_store.delete_meta_if_older("dirty:0:3", 6.0)
    graph_store.delete_meta("applying:0:t1")
    graph_store.write_meta([], ["outbox:0:3:x"])
    graph_store.delete_nodes(["b"])
    assert graph_store.sizes_and_metas(["dirty:0:3", "swept:0"], ["outbox:0:3:", "applying:0:"]) == (
        {0: 1, 1: 1}, {"swept:0": 9.5})
    assert graph_store.sizes_and_metas([], []) == ({0: 1, 1: 1}, {})


def test_write_meta_stores_and_deletes_together(graph_store):
    graph_store.put_meta("followup:abc", {"gone": {}})
    graph_store.put_meta("outbox:0:3:t", {"made": []})
    graph_store.write_meta([("change:001:x", {"kind": "ingest"})] + [(f"retired:0:n{i}", f"t{i}") for i in range(30)],
                           ["followup:abc", "outbox:0:3:t", "never-there"])
    assert graph_store.get_meta("change:001:x") == {"kind": "ingest"}
    assert len(graph_store.get_metas([f"retired:0:n{i}" for i in range(30)])) == 30  # past one batch of 25
    assert graph_store.get_meta("followup:abc") is None and graph_store.get_meta("outbox:0:3:t") is None
    graph_store.write_meta([], [])


def test_write_meta_clears_the_markers_no_newer_than_asked_with_its_write(graph_store):
    graph_store.put_meta("dirty:0:3", 100.0)
    graph_store.put_meta("dirty:0:4", 200.0)  # set again since: stays
    graph_store.put_meta("outbox:0:3:t", {"made": []})
    graph_store.write_meta([("change:001:x", {"kind": "resummarize"})], ["outbox:0:3:t"],
                           clear=[("dirty:0:3", 150.0), ("dirty:0:4", 150.0), ("dirty:0:9", 150.0)])
    assert graph_store.get_meta("change:001:x") == {"kind": "resummarize"}
    assert graph_store.get_meta("outbox:0:3:t") is None
    assert graph_store.meta_keys("dirty:") == ["dirty:0:4"]
    graph_store.write_meta([], [], clear=[("dirty:0:4", 200.0)])  # alone, at most: equal goes
    assert graph_store.meta_keys("dirty:") == []


def test_write_meta_names_the_nodes_asked_for_that_are_gone_and_writes_either_way(graph_store):
    graph_store.put_nodes([node("s1", layer=1, code=3), node("s2", layer=1, code=4)])
    graph_store.put_meta("dirty:0:3", 100.0)
    graph_store.put_meta("outbox:0:3:t", {"made": []})
    assert graph_store.write_meta([("change:001:a", {"kind": "resummarize"})], ["outbox:0:3:t"],
                                  clear=[("dirty:0:3", 150.0)], present=["s1", "s2"]) == []
    assert graph_store.get_meta("change:001:a") == {"kind": "resummarize"}
    assert graph_store.meta_keys("dirty:") == [] and graph_store.get_meta("outbox:0:3:t") is None
    graph_store.delete_nodes(["s2"])  # a concurrent reconcile removed it
    graph_store.put_meta("dirty:0:3", 200.0)  # set again since: stays
    graph_store.put_meta("outbox:0:3:u", {"made": []})
    assert graph_store.write_meta([("change:001:b", {"kind": "resummarize"})], ["outbox:0:3:u"],
                                  clear=[("dirty:0:3", 150.0)], present=["s1", "s2", "s1"]) == ["s2"]
    assert graph_store.get_meta("change:001:b") == {"kind": "resummarize"}
    assert graph_store.get_meta("outbox:0:3:u") is None and graph_store.meta_keys("dirty:") == ["dirty:0:3"]
    assert graph_store.write_meta([], [], present=["s2", "never"]) == ["s2", "never"]  # nothing else to write
    assert graph_store.write_meta([("k:1", 1)], []) == []


def test_write_meta_reads_the_nodes_it_looks_for_once_however_many(graph_store):
    # a whole-layer pass looks for every summary it made (thousands): one read, not one each
    graph_store.put_nodes([node(f"s{i}", layer=1, code=i % 200) for i in range(300)])
    reads = []
    get_nodes = graph_store.get_nodes
    graph_store.get_nodes = lambda ids: reads.append(1) or get_nodes(ids)
    gone = graph_store.write_meta([("change:001:c", {"kind": "resummarize"})], [],
                                  present=[f"s{i}" for i in range(300)] + ["lost"])
    assert gone == ["lost"] and len(reads) <= 1


def test_delete_meta_if_older_keeps_a_marker_set_again_since(graph_store):
    graph_store.put_meta("dirty:0:3", 100.0)
    graph_store.put_meta("dirty:0:4", 200.0)
    graph_store.put_meta("dirty:0:5", 150)  # an int stamp compares as a number too
    for key in ("dirty:0:3", "dirty:0:4", "dirty:0:5", "dirty:0:9"):  # :9 was never set
        graph_store.delete_meta_if_older(key, 150.0)
    assert graph_store.meta_keys("dirty:") == ["dirty:0:4"]
    assert graph_store.get_meta("dirty:0:4") == 200.0
    graph_store.delete_meta_if_older("dirty:0:4", 200.0)  # at most: equal goes
    assert graph_store.meta_keys("dirty:") == []


def test_ledger_accumulates_per_kind(graph_store):
    assert graph_store.ledger() == {}
    graph_store.add_ledger("summarize", 1, 100, 20, 0.5)
    graph_store.add_ledger("summarize", 2, 50, 10, 0.25)
    graph_store.add_ledger("generate", 1, 7, 3, 1.0)
    ledger = graph_store.ledger()
    assert set(ledger) == {"summarize", "generate"}
    assert ledger["summarize"]["calls"] == 3
    assert ledger["summarize"]["tokens_in"] == 150
    assert ledger["summarize"]["tokens_out"] == 30
    assert ledger["summarize"]["seconds"] == pytest.approx(0.75)
    assert ledger["generate"] == {"calls": 1, "tokens_in": 7, "tokens_out": 3, "seconds": pytest.approx(1.0)}
    ledger["generate"]["calls"] = 99
    assert graph_store.ledger()["generate"]["calls"] == 1


def test_ledger_keeps_hourly_buckets_beside_the_totals(graph_store):
    assert graph_store.ledger_series() == []
    hour = 1_700_000_000 // 3600 * 3600
    graph_store.add_ledger("summarize|m", 1, 100, 20, 0.5, at=hour + 10)
    graph_store.add_ledger("summarize|m", 2, 50, 10, 0.25, at=hour + 3599)
    graph_store.add_ledger("summarize|m", 1, 5, 1, 0.125, at=hour + 3600)
    graph_store.add_ledger("embed|e", 4, 40, 0, 0.0625, at=hour - 1)
    series = graph_store.ledger_series()
    assert [(kind, t) for kind, t, _ in series] == [("embed|e", hour - 3600), ("summarize|m", hour),
                                                   ("summarize|m", hour + 3600)]
    assert series[1][2] == {"calls": 3, "tokens_in": 150, "tokens_out": 30, "seconds": pytest.approx(0.75)}
    assert series[2][2] == {"calls": 1, "tokens_in": 5, "tokens_out": 1, "seconds": pytest.approx(0.125)}
    # ``since`` keeps the buckets from its hour on; the totals hold every call
    assert [(kind, t) for kind, t, _ in graph_store.ledger_series(since=hour + 1800)] == [
        ("summarize|m", hour), ("summarize|m", hour + 3600)]
    assert graph_store.ledger_series(since=hour + 7200) == []
    assert graph_store.ledger()["summarize|m"]["calls"] == 4
    graph_store.add_ledger("generate|g", 1, 7, 3, 1.0)  # no time given: now's bucket
    (kind, t, row), = [r for r in graph_store.ledger_series() if r[0] == "generate|g"]
    assert t > hour and t % 3600 == 0 and row["calls"] == 1


# --- documents -------------------------------------------------------------------------------

def test_documents_put_get_replace_delete(graph_store):
    doc = Document(doc_id="d1", source="s3://bucket/a.txt", content_hash="h1", title="A",
                   chunk_ids=("c1", "c2"), status="indexed", meta={"bytes": 10, "tags": ["x"], "n": {"k": None}})
    assert graph_store.get_document("d1") is None
    graph_store.put_document(doc)
    assert graph_store.get_document("d1") == doc
    newer = Document(doc_id="d1", source="s3://bucket/a.txt", content_hash="h2", chunk_ids=("c3",))
    graph_store.put_document(newer)
    assert graph_store.get_document("d1") == newer
    graph_store.delete_document("d1")
    graph_store.delete_document("d1")
    assert graph_store.get_document("d1") is None
    assert graph_store.list_documents() == []


def test_documents_page_through_every_live_document_once(graph_store):
    docs = [Document(doc_id=f"d{i}", source=f"s{i}.txt", content_hash=f"h{i}", chunk_ids=(f"c{i}",))
            for i in range(7)]
    for d in docs:
        graph_store.put_document(d)
    graph_store.put_document(Document(doc_id="d9", source="gone.txt", content_hash="", status=DELETED, version="2"))
    seen, after, pages = [], None, 0
    while True:
        page, after = graph_store.documents_page(after, 3)
        assert len(page) <= 3
        seen += page
        pages += 1
        if after is None:
            break
        assert pages < 10, "the cursor does not advance"
    assert sorted(d.doc_id for d in seen) == [f"d{i}" for i in range(7)]  # once each, no tombstone
    assert {d.doc_id: d for d in seen}["d4"] == docs[4]
    assert pages >= 3


def test_get_documents_reads_the_live_ones_of_a_batch(graph_store):
    """get_documents: the live documents of the ids asked, in the order asked, metadata included;
    missing and deleted ids left out; past one DynamoDB batch (100 keys)."""
    docs = [Document(doc_id=f"d{i:03d}", source=f"s{i}.txt", content_hash=f"h{i}",
                     metadata={"access": [f"group:g{i % 3}"]} if i % 2 else {}) for i in range(130)]
    for d in docs:
        graph_store.put_document(d)
    graph_store.put_document(Document(doc_id="gone", source="gone.txt", content_hash="", status=DELETED, version="2"))
    asked = ["d129", "nope", "gone", "d000", "d057", "d000"] + [f"d{i:03d}" for i in range(1, 120)]
    got = graph_store.get_documents(asked)
    assert list(got) == list(dict.fromkeys(i for i in asked if i.startswith("d")))
    assert got["d129"] == docs[129] and got["d057"].metadata == {"access": ["group:g0"]}
    assert graph_store.get_documents([]) == {}


def test_documents_by_source_and_listing_sorted(graph_store):
    docs = [Document(doc_id=i, source=src, content_hash=f"h{i}")
            for i, src in [("d3", "a.txt"), ("d1", "b.txt"), ("d2", "a.txt"), ("d0", "c.txt")]]
    for d in docs:
        graph_store.put_document(d)
    assert [d.doc_id for d in graph_store.find_documents("a.txt")] == ["d2", "d3"]
    assert graph_store.find_documents("missing.txt") == []
    assert [d.doc_id for d in graph_store.list_documents()] == ["d0", "d1", "d2", "d3"]
    assert graph_store.list_documents()[2] == docs[2]


def test_put_document_is_conditional_on_the_stored_version(graph_store):
    v1 = Document(doc_id="d1", source="s3://b/a.txt", content_hash="h1", chunk_ids=("c1",), version="0A01")
    with pytest.raises(ConflictError):  # expects a stored document that is not there
        graph_store.put_document(v1, expected=v1)
    graph_store.put_document(v1, expected=None)
    with pytest.raises(ConflictError):  # a second creator loses
        graph_store.put_document(replace(v1, content_hash="hx"), expected=None)
    v2 = replace(v1, content_hash="h2", chunk_ids=("c2",), version="0A02")
    graph_store.put_document(v2, expected=v1)
    assert graph_store.get_document("d1") == v2
    # the writer that also read v1 loses, whether its content, version or status differ
    for stale in (v1, replace(v2, content_hash="h1"), replace(v2, version="0A01"), replace(v2, version=""),
                  replace(v2, status=DELETED)):
        with pytest.raises(ConflictError):
            graph_store.put_document(replace(v1, content_hash="h3", version="0A03"), expected=stale)
    assert graph_store.get_document("d1") == v2
    unversioned = Document(doc_id="d2", source="a.txt", content_hash="h")  # local files: no version
    graph_store.put_document(unversioned, expected=None)
    graph_store.put_document(replace(unversioned, content_hash="g"), expected=unversioned)
    with pytest.raises(ConflictError):
        graph_store.put_document(unversioned, expected=unversioned)
    graph_store.put_document(replace(unversioned, title="unconditional"))  # no expected: always
    assert graph_store.get_document("d2").title == "unconditional"


def test_tombstones_are_conditional_and_hidden(graph_store):
    doc = Document(doc_id="d1", source="s3://b/a.txt", content_hash="h1", chunk_ids=("c1",), version="0A01")
    graph_store.put_document(doc, expected=None)
    tomb = Document(doc_id="d1", source="s3://b/a.txt", content_hash="", status=DELETED, version="0A02")
    graph_store.put_document(tomb, expected=doc)
    assert graph_store.get_document("d1") is None
    assert graph_store.get_document("d1", include_deleted=True) == tomb
    assert graph_store.find_documents("s3://b/a.txt") == []
    assert graph_store.list_documents() == []
    with pytest.raises(ConflictError):  # an older put that read the live document loses
        graph_store.put_document(replace(doc, version="0A03"), expected=doc)
    with pytest.raises(ConflictError):
        graph_store.put_document(replace(doc, version="0A03"), expected=None)
    again = replace(doc, content_hash="h3", version="0A03")
    graph_store.put_document(again, expected=tomb)
    assert graph_store.find_documents("s3://b/a.txt") == [again]
    graph_store.delete_document("d1")
    assert graph_store.get_document("d1", include_deleted=True) is None


METADATA = {"lang": "en", "year": 2020, "score": 0.5, "draft": True, "tags": ["a", "é ✓"], "big": 2 ** 53,
            "empty": "", "none_yet": []}


def test_document_metadata_round_trips(graph_store):
    """A document's metadata (domain.filters.check_metadata: strings, numbers, booleans, lists
    of strings) comes back equal, with its types, from every read; a returned copy is the
    caller's; a conditional write and a replacement carry it."""
    doc = Document(doc_id="d1", source="s3://b/a.txt", content_hash="h1", title="A", chunk_ids=("c1",),
                   version="0A01", metadata=METADATA)
    graph_store.put_document(doc, expected=None)
    for got in (graph_store.get_document("d1"), graph_store.find_documents("s3://b/a.txt")[0],
                graph_store.list_documents()[0]):
        assert got == doc
        assert {k: type(v) for k, v in got.metadata.items()} == {k: type(v) for k, v in METADATA.items()}
    got = graph_store.get_document("d1")
    got.metadata["tags"].append("mutated")
    got.metadata["new"] = 1
    assert graph_store.get_document("d1").metadata == METADATA
    changed = replace(doc, metadata={"lang": "de"}, version="0A02")
    graph_store.put_document(changed, expected=doc)  # a metadata-only change, conditional
    assert graph_store.get_document("d1").metadata == {"lang": "de"}
    graph_store.put_document(replace(changed, metadata={}))
    assert graph_store.get_document("d1").metadata == {}
    plain = Document(doc_id="d2", source="b.txt", content_hash="h")
    graph_store.put_document(plain)
    assert graph_store.get_document("d2").metadata == {}


# --- nodes -----------------------------------------------------------------------------------

def test_document_statuses_by_id_and_by_source_prefix(graph_store):
    ok = DocStatus(doc_id="d1", source="s3://b/docs/a.txt", state=INDEXED, received_at=1.0,
                   updated_at=2.0, pending_shards=(3, 7), content_hash="h1")
    bad = DocStatus(doc_id="d2", source="s3://b/docs/b.bin", state=FAILED, reason="binary file")
    other = DocStatus(doc_id="d3", source="s3://b/other/c.txt", state=RECEIVED)
    weird = DocStatus(doc_id="d4", source="s3://b/docs%_x", state=RECEIVED)  # LIKE wildcards
    assert graph_store.get_doc_status("d1") is None
    assert graph_store.doc_statuses("") == []
    for status in (other, bad, ok, weird):
        graph_store.put_doc_status(status)
    assert graph_store.get_doc_status("d1") == ok
    assert graph_store.get_doc_status("d2").reason == "binary file"
    assert [s.doc_id for s in graph_store.doc_statuses("s3://b/docs/")] == ["d1", "d2"]
    assert [s.doc_id for s in graph_store.doc_statuses("s3://b/docs%")] == ["d4"]
    assert [s.doc_id for s in graph_store.doc_statuses("")] == ["d4", "d1", "d2", "d3"]  # by source: "%" sorts before "/"
    assert graph_store.doc_statuses("s3://c/") == []
    # a record replaced under a new source is listed under the new source only
    moved = replace(ok, source="s3://b/other/a.txt", state=FAILED, reason="extraction error: x")
    graph_store.put_doc_status(moved)
    assert graph_store.get_doc_status("d1") == moved
    assert [s.doc_id for s in graph_store.doc_statuses("s3://b/docs/")] == ["d2"]
    assert [s.doc_id for s in graph_store.doc_statuses("s3://b/other/")] == ["d1", "d3"]
    graph_store.delete_doc_status("d1")
    graph_store.delete_doc_status("never-there")
    assert graph_store.get_doc_status("d1") is None
    assert [s.doc_id for s in graph_store.doc_statuses("s3://b/other/")] == ["d3"]


def test_status_pages_read_in_listing_order_and_resume_after_the_cursor(graph_store):
    statuses = [DocStatus(doc_id=f"d{i:02d}", source=f"s3://b/docs/{i % 7}-{i:02d}.txt", state=RECEIVED)
                for i in range(23)] + [DocStatus(doc_id="o1", source="s3://b/other/x.txt", state=RECEIVED)]
    for status in statuses:
        graph_store.put_doc_status(status)
    want = [s.doc_id for s in sorted(statuses[:23], key=lambda s: (s.source, s.doc_id))]
    got, after = [], None
    while True:
        page, after = graph_store.doc_statuses_page("s3://b/docs/", after, 5)
        assert len(page) <= 5
        got += [s.doc_id for s in page]
        if after is None:
            break
        assert after == (page[-1].source, page[-1].doc_id)
    assert got == want
    whole, after = graph_store.doc_statuses_page("s3://b/docs/", None, 23)
    assert len(whole) == 23 and after is None  # exactly the rest: no next page
    assert graph_store.doc_statuses_page("s3://b/docs/", None, 0) == ([], None)
    assert graph_store.doc_statuses_page("s3://c/", None, 5) == ([], None)
    # a cursor outside the prefix: before it reads from its first, past it reads nothing
    assert [s.doc_id for s in graph_store.doc_statuses_page("s3://b/other/", ("s3://a", "z"), 5)[0]] == ["o1"]
    assert graph_store.doc_statuses_page("s3://b/docs/", ("s3://b/other/", ""), 5) == ([], None)


def test_status_counters_follow_every_write_per_directory(graph_store):
    graph_store.put_lsh(draw_hyperplanes("hash-128", 16, 12, seed=1))  # a store as an engine makes it
    assert graph_store.status_counts("") == {}
    a = DocStatus(doc_id="a", source="s3://b/docs/a.txt", state=RECEIVED)
    b = DocStatus(doc_id="b", source="s3://b/docs/sub/b.txt", state=FAILED, reason="binary file")
    for status in (a, b, a):  # a written twice: counted once
        graph_store.put_doc_status(status)
    assert graph_store.status_counts("") == {RECEIVED: 1, FAILED: 1}
    assert graph_store.status_counts("s3://b/docs/") == {RECEIVED: 1, FAILED: 1}
    assert graph_store.status_counts("s3://b/docs/sub/") == {FAILED: 1}
    assert graph_store.status_counts("s3://b/docs/a") is None  # not a directory: no counter
    graph_store.put_doc_status(replace(a, state=INDEXED, pending_shards=(1, 3)))
    graph_store.put_doc_status(replace(b, state=INDEXED, reason=""))  # no shards: done already
    assert graph_store.status_counts("s3://b/docs/") == {INDEXED: 1, "done": 1}
    graph_store.put_doc_status(replace(a, source="s3://b/else/a.txt"))  # moved, received again
    assert graph_store.status_counts("s3://b/docs/") == {"done": 1}
    assert graph_store.status_counts("s3://b/else/") == {RECEIVED: 1}
    assert graph_store.status_counts("") == {RECEIVED: 1, "done": 1}
    graph_store.delete_doc_status("a")
    graph_store.delete_doc_status("a")  # gone already: nothing counted
    assert graph_store.status_counts("") == {"done": 1} and graph_store.status_counts("s3://b/else/") == {}


def test_nodes_put_get_delete(graph_store):
    nodes = [node("c2", code=5), node("c1", code=2 ** 61 + 7), node("s1", layer=1, children=("c1", "c2"))]
    graph_store.put_nodes(nodes)
    got = graph_store.get_nodes(i for i in ["c1", "missing", "s1"])  # any iterable
    assert got == {"c1": nodes[1], "s1": nodes[2]}
    assert list(got) == ["c1", "s1"]
    assert graph_store.get_nodes([]) == {}
    graph_store.delete_nodes(["c1", "missing"])
    graph_store.delete_nodes([])
    assert graph_store.get_nodes(["c1", "c2"]) == {"c2": nodes[0]}


def test_chunk_places_round_trip(graph_store):
    """A chunk's place (domain.places) comes back as written: offsets alone, offsets and pages
    (a 2000-page PDF's), none (a summary, or a chunk stored before places existed)."""
    nodes = [replace(node("p1"), place=(0, 120)), replace(node("p2"), place=(100, 20_000_000, 1999, 2000)),
             node("p3"), node("s1", layer=1, children=("p1",))]
    graph_store.put_nodes(nodes)
    got = graph_store.get_nodes(["p1", "p2", "p3", "s1"])
    assert [got[n.node_id].place for n in nodes] == [(0, 120), (100, 20_000_000, 1999, 2000), (), ()]
    assert got == {n.node_id: n for n in nodes}


def test_layer_refs_and_sizes(graph_store):
    graph_store.put_nodes([node("b", code=3), node("a", code=1), node("c", code=2),
                           node("s2", layer=1, code=9), node("s1", layer=1, code=8), node("t", layer=2)])
    assert graph_store.layer_refs(0) == [NodeRef("a", 1), NodeRef("b", 3), NodeRef("c", 2)]
    assert graph_store.layer_refs(1) == [NodeRef("s1", 8), NodeRef("s2", 9)]
    assert graph_store.layer_refs(7) == []
    assert list(graph_store.layer_sizes().items()) == [(0, 3), (1, 2), (2, 1)]
    graph_store.put_nodes([node("t", layer=1)])  # re-put moves a node to another layer
    graph_store.delete_nodes(["a"])
    assert list(graph_store.layer_sizes().items()) == [(0, 2), (1, 3)]


def test_large_node_batches(graph_store):
    nodes = [node(f"n{i:05d}", layer=i % 3, code=i) for i in range(1500)]
    graph_store.put_nodes(nodes)
    got = graph_store.get_nodes(n.node_id for n in nodes)
    assert len(got) == 1500 and got["n01499"] == nodes[1499]
    assert graph_store.layer_sizes() == {0: 500, 1: 500, 2: 500}
    graph_store.delete_nodes([n.node_id for n in nodes[:1000]])
    assert sum(graph_store.layer_sizes().values()) == 500


# --- the ref index and segments ----------------------------------------------------------------

def refs(store, layer=0, lo=0, hi=2 ** 62):
    return store.prefix_refs(layer, lo, hi)


def test_prefix_refs_are_code_ranges_in_order_with_limits(graph_store):
    graph_store.put_nodes([node("b", code=5), node("a", code=5), node("c", code=2), node("d", code=9),
                           node("s", layer=1, code=5)])
    assert [r.node_id for r in refs(graph_store)] == ["c", "a", "b", "d"]
    assert [r.node_id for r in graph_store.prefix_refs(0, 3, 8)] == ["a", "b"]
    assert [r.node_id for r in graph_store.prefix_refs(0, 0, 100, limit=2)] == ["c", "a"]
    assert graph_store.prefix_refs(0, 10, 20) == []
    assert refs(graph_store, 1) == [RefState("s", 5, None, True)]
    assert all(r.live and r.seg is None for r in refs(graph_store))


def test_count_refs_counts_old_and_live_refs_of_a_range_capped(graph_store):
    graph_store.put_nodes([node(f"n{i}", code=4 + i % 3) for i in range(9)] + [node("far", code=40),
                                                                            node("up", layer=1, code=5)])
    counted = graph_store.count_refs(0, 0, 100)
    assert (counted.old, counted.new) == (0, 10)  # nothing in a segment yet: every ref is new
    in_seg = [r for r in refs(graph_store) if r.node_id in ("n0", "n1", "n2", "n3")]
    graph_store.apply_region(RegionChange(layer=0, expected=tuple(in_seg),
                                          assign=tuple((r.node_id, "sg") for r in in_seg),
                                          add=(seg("sg", 0, tuple(r.node_id for r in in_seg)),)))
    graph_store.delete_nodes(["n0", "n4"])  # n0 a tombstone (in a segment), n4 gone
    assert [(c.old, c.new) for c in (graph_store.count_refs(0, 0, 100), graph_store.count_refs(0, 4, 6),
                                     graph_store.count_refs(0, 5, 5), graph_store.count_refs(0, 41, 99),
                                     graph_store.count_refs(1, 0, 100), graph_store.count_refs(3, 0, 100))] == [
        (4, 8), (4, 7), (1, 2), (0, 0), (0, 1), (0, 0)]
    capped = graph_store.count_refs(0, 0, 100, cap=2)
    assert (capped.old, capped.new) == (3, 3)  # cap + 1: more than the cap
    assert (graph_store.count_refs(0, 0, 100, cap=7).old, graph_store.count_refs(0, 0, 100, cap=7).new) == (4, 8)
    whole = graph_store.count_refs(0, 4, 6).refs
    assert whole is None or list(whole) == graph_store.prefix_refs(0, 4, 6)  # refs, when given, are the range's


def test_refs_page_walks_a_layer_in_code_order_from_a_cursor(graph_store):
    far = 1 << 60  # another partition of the ref index where the store shards it by code
    graph_store.put_nodes([node("b", code=5), node("a", code=5), node("e", code=5), node("c", code=2),
                           node("d", code=far), node("s", layer=1, code=5), node("gone", code=5)])
    graph_store.apply_region(RegionChange(layer=0, expected=tuple(r for r in refs(graph_store) if r.node_id == "gone"),
                                          assign=(("gone", "sg"),), add=(seg("sg", 0, ("gone",)),)))
    graph_store.delete_nodes(["gone"])  # a tombstone now (it is in a segment): never on a page
    assert any(not r.live for r in refs(graph_store))
    assert [r.node_id for r in graph_store.refs_page(0, None, 10)] == ["c", "a", "b", "e", "d"]
    pages, after = [], None
    while True:
        page = graph_store.refs_page(0, after, 2)
        if not page:
            break
        pages.append([r.node_id for r in page])
        after = (page[-1].code, page[-1].node_id)
    assert pages == [["c", "a"], ["b", "e"], ["d"]]  # ties on one code split across pages
    assert graph_store.refs_page(0, (5, "b"), 1) == [RefState("e", 5, None, True)]
    assert graph_store.refs_page(0, (far, "d"), 5) == []
    assert [r.node_id for r in graph_store.refs_page(1, None, 5)] == ["s"]
    assert graph_store.refs_page(0, None, 0) == [] and graph_store.refs_page(7, None, 5) == []


def test_summaries_written_outside_the_index_enter_it_with_their_segment(graph_store):
    graph_store.put_nodes([node("a", code=1), node("b", code=2)])
    graph_store.put_nodes([node("s1", layer=1, code=7, children=("a", "b"))], index=False)
    assert graph_store.get_nodes(["s1"])  # stored (progress survives) ...
    assert refs(graph_store, 1) == [] and graph_store.layer_sizes() == {0: 2}  # ... but not in layer 1
    sg = Segment("sg", 0, ("a", "b"), "s1")
    graph_store.apply_region(RegionChange(layer=0, expected=tuple(refs(graph_store)),
                                          assign=(("a", "sg"), ("b", "sg")), add=(sg,),
                                          above_add=(NodeRef("s1", 7),)))
    assert refs(graph_store) == [RefState("a", 1, "sg", True), RefState("b", 2, "sg", True)]
    assert refs(graph_store, 1) == [RefState("s1", 7, None, True)]
    assert graph_store.get_segments(0) == [sg]
    assert graph_store.get_segments_by_id(0, ["sg", "nope"]) == {"sg": sg}
    assert graph_store.layer_sizes() == {0: 2, 1: 1}


def test_segment_stats_follow_the_regions_applied(graph_store):
    from eragraph.domain.segment_stats import SegmentStats

    assert graph_store.segment_stats() == {}
    graph_store.put_nodes([node(x, code=i) for i, x in enumerate("abcdef")])
    three, two = seg("s3", 0, ("a", "b", "c")), seg("s2", 0, ("d", "e"))
    graph_store.apply_region(RegionChange(layer=0, expected=tuple(refs(graph_store)),
                                          assign=(("a", "s3"), ("b", "s3"), ("c", "s3"), ("d", "s2"), ("e", "s2")),
                                          add=(three, two)))
    assert graph_store.segment_stats() == {0: SegmentStats(2, 2, 3)}
    # a re-cut: the pair and the free node become one segment of three
    wide = seg("w3", 0, ("d", "e", "f"))
    region = [r for r in refs(graph_store) if r.node_id in "def"]
    graph_store.apply_region(RegionChange(layer=0, expected=tuple(region), remove=("s2",),
                                          assign=(("d", "w3"), ("e", "w3"), ("f", "w3")), add=(wide,)))
    assert graph_store.segment_stats() == {0: SegmentStats(2, 3, 3)}


def test_deletes_leave_tombstones_only_for_members_of_segments(graph_store):
    graph_store.put_nodes([node("a", code=1), node("b", code=2), node("c", code=3)])
    graph_store.apply_region(RegionChange(layer=0, expected=tuple(refs(graph_store)[:2]),
                                          assign=(("a", "sg"), ("b", "sg")), add=(seg("sg", 0, ("a", "b")),)))
    graph_store.delete_nodes(["a", "c"])
    assert refs(graph_store) == [RefState("a", 1, "sg", False), RefState("b", 2, "sg", True)]
    assert graph_store.layer_refs(0) == [NodeRef("b", 2)]
    assert graph_store.layer_sizes() == {0: 1}
    graph_store.put_nodes([node("a", code=1)])  # back before its layer was reconciled
    assert refs(graph_store)[0] == RefState("a", 1, "sg", True)  # it keeps its segment
    graph_store.delete_nodes(["a"])
    graph_store.apply_region(RegionChange(layer=0, expected=tuple(refs(graph_store)), assign=(("b", None),),
                                          drop=("a",), remove=("sg",)))
    assert refs(graph_store) == [RefState("b", 2, None, True)] and graph_store.get_segments(0) == []


def test_a_region_replacing_its_summary_removes_the_old_one_above(graph_store):
    """above_remove: the summary of a segment the region re-cut leaves layer 1 (its ref gone and
    counted, or kept as a tombstone while a segment of layer 1 still names it)."""
    graph_store.put_nodes([node("a", code=1), node("b", code=2), node("c", code=3)])
    graph_store.put_nodes([node("s-old", layer=1, code=4, children=("a", "b")),
                           node("s-kept", layer=1, code=6, children=("c",))])
    graph_store.apply_region(RegionChange(layer=1, expected=tuple(refs(graph_store, 1)),
                                          assign=(("s-kept", "sg1"),), add=(seg("sg1", 1, ("s-kept",)),)))
    assert graph_store.layer_sizes() == {0: 3, 1: 2}
    new = Segment("sg", 0, ("a", "b", "c"), "s-new")
    graph_store.put_nodes([node("s-new", layer=1, code=5, children=("a", "b", "c"))], index=False)
    graph_store.apply_region(RegionChange(layer=0, expected=tuple(refs(graph_store)),
                                          assign=(("a", "sg"), ("b", "sg"), ("c", "sg")), add=(new,),
                                          above_add=(NodeRef("s-new", 5),),
                                          above_remove=(NodeRef("s-old", 4), NodeRef("s-kept", 6))))
    assert refs(graph_store, 1) == [RefState("s-new", 5, None, True), RefState("s-kept", 6, "sg1", False)]
    assert graph_store.layer_refs(1) == [NodeRef("s-new", 5)]
    assert graph_store.layer_sizes() == {0: 3, 1: 1}


def test_a_region_deletes_the_summaries_it_replaces_and_keeps_the_text_of_the_tombstones(graph_store):
    """delete_removed: the replaced summaries' nodes go in the region's write; keep_texts: the
    text of each that stays a tombstone above (a segment there still names it) is stored with
    it, none for one whose ref went; the result says which were deleted and which stay."""
    graph_store.put_nodes([node("a", code=1), node("b", code=2), node("c", code=3)])
    graph_store.put_nodes([node("s-old", layer=1, code=4, children=("a", "b")),
                           node("s-kept", layer=1, code=6, children=("c",))])
    graph_store.apply_region(RegionChange(layer=1, expected=tuple(refs(graph_store, 1)),
                                          assign=(("s-kept", "sg1"),), add=(seg("sg1", 1, ("s-kept",)),)))
    new = Segment("sg", 0, ("a", "b", "c"), "s-new")
    graph_store.put_nodes([node("s-new", layer=1, code=5, children=("a", "b", "c"))], index=False)
    done = graph_store.apply_region(RegionChange(
        layer=0, expected=tuple(refs(graph_store)), assign=(("a", "sg"), ("b", "sg"), ("c", "sg")), add=(new,),
        above_add=(NodeRef("s-new", 5),), above_remove=(NodeRef("s-old", 4), NodeRef("s-kept", 6)),
        delete_removed=True, keep_texts=(("s-old", "retired:1:s-old", "old text"),
                                         ("s-kept", "retired:1:s-kept", "kept text"))))
    assert (sorted(done.deleted), done.tombstoned) == (["s-kept", "s-old"], ("s-kept",))
    assert set(graph_store.get_nodes(["s-old", "s-kept", "s-new"])) == {"s-new"}
    assert refs(graph_store, 1) == [RefState("s-new", 5, None, True), RefState("s-kept", 6, "sg1", False)]
    assert graph_store.get_metas(["retired:1:s-old", "retired:1:s-kept"]) == {"retired:1:s-kept": "kept text"}
    assert graph_store.layer_sizes() == {0: 3, 1: 1}


def test_a_region_that_loses_its_condition_deletes_no_summary_and_keeps_no_text(graph_store):
    graph_store.put_nodes([node("a", code=1), node("s-old", layer=1, code=4, children=("a",))])
    read = tuple(refs(graph_store))
    graph_store.delete_nodes(["a"])  # changed since read
    with pytest.raises(ConflictError):
        graph_store.apply_region(RegionChange(layer=0, expected=read, above_remove=(NodeRef("s-old", 4),),
                                              delete_removed=True,
                                              keep_texts=(("s-old", "retired:1:s-old", "old text"),)))
    assert set(graph_store.get_nodes(["s-old"])) == {"s-old"} and graph_store.layer_sizes().get(1) == 1
    assert graph_store.get_meta("retired:1:s-old") is None


def test_a_region_adds_what_its_summaries_cost_to_the_ledger_with_its_write_or_not_at_all(graph_store):
    graph_store.put_nodes([node("a", code=1)])
    graph_store.put_nodes([node("s-a", layer=1, code=1, children=("a",))], index=False)
    read = tuple(refs(graph_store))
    change = RegionChange(layer=0, expected=read, assign=(("a", "sg"),), add=(Segment("sg", 0, ("a",), "s-a"),),
                          above_add=(NodeRef("s-a", 1),), ledger=(("summarize|m", 2, 300, 40, 0.5),))
    graph_store.put_nodes([node("b", code=2)])  # not in the region: no conflict
    graph_store.apply_region(change)
    assert graph_store.ledger() == {"summarize|m": {"calls": 2, "tokens_in": 300, "tokens_out": 40, "seconds": 0.5}}
    with pytest.raises(ConflictError):  # the same region again: its refs changed since read
        graph_store.apply_region(change)
    assert graph_store.ledger()["summarize|m"]["calls"] == 2


def test_read_region_reads_segments_nodes_and_metas_together(graph_store):
    graph_store.put_nodes([node("a", code=1), node("b", code=2)])
    graph_store.apply_region(RegionChange(layer=0, expected=tuple(refs(graph_store)), assign=(("a", "sg"),),
                                          add=(seg("sg", 0, ("a",)),)))
    graph_store.put_meta("retired:0:gone", "its text")
    segs, nodes, metas = graph_store.read_region(0, ["sg", "never"], ["a", "b", "nobody"],
                                                 ["retired:0:gone", "retired:0:other"])
    assert segs == {"sg": seg("sg", 0, ("a",))}
    assert set(nodes) == {"a", "b"} and nodes["a"] == graph_store.get_nodes(["a"])["a"]
    assert metas == {"retired:0:gone": "its text"}
    assert graph_store.read_region(0, [], [], []) == ({}, {}, {})


def test_a_lost_condition_names_what_changed(graph_store):
    graph_store.put_nodes([node("a", code=1)])
    read = tuple(refs(graph_store))
    graph_store.delete_nodes(["a"])
    with pytest.raises(ConflictError, match="changed concurrently"):
        graph_store.apply_region(RegionChange(layer=0, expected=read, assign=(("a", "sg"),)))
    doc = Document(doc_id="d1", source="s", content_hash="h1")
    graph_store.put_document(doc)
    with pytest.raises(ConflictError, match="document d1 changed concurrently"):
        graph_store.put_document(replace(doc, content_hash="h2"), expected=replace(doc, content_hash="h0"))


def test_a_regions_marks_are_written_with_it_or_not_at_all(graph_store):
    graph_store.put_nodes([node("a", code=1), node("b", code=2)])
    graph_store.put_nodes([node("s1", layer=1, code=7, children=("a", "b"))], index=False)
    marks = (("outbox:0:3:tok", {"made": [["s1", 7]], "gone": [], "drop": [], "at": 1.5}), ("dirty:1:0", 12.5))
    stale = tuple(refs(graph_store))
    graph_store.delete_nodes(["b"])  # another writer, after the read: the apply conflicts
    change = RegionChange(layer=0, expected=stale, assign=(("a", "sg"), ("b", "sg")),
                          add=(Segment("sg", 0, ("a", "b"), "s1"),), above_add=(NodeRef("s1", 7),), marks=marks)
    with pytest.raises(ConflictError):
        graph_store.apply_region(change)
    assert graph_store.get_metas([k for k, _ in marks]) == {}
    graph_store.put_nodes([node("b", code=2)])
    graph_store.apply_region(RegionChange(layer=0, expected=tuple(refs(graph_store)),
                                          assign=(("a", "sg"), ("b", "sg")), add=(Segment("sg", 0, ("a", "b"), "s1"),),
                                          above_add=(NodeRef("s1", 7),), marks=marks))
    assert graph_store.get_metas([k for k, _ in marks]) == dict(marks)
    assert refs(graph_store, 1) == [RefState("s1", 7, None, True)]
    graph_store.delete_meta_if_older("dirty:1:0", 12.5)  # a mark written by the apply is a stamp like any
    assert graph_store.get_meta("dirty:1:0") is None


def test_a_region_whose_summary_node_is_missing_conflicts_and_writes_nothing(graph_store):
    # the summary's node was deleted after the reconcile stored it (a stale outbox entry
    # finished meanwhile: delete_dead_nodes): applying would leave a segment without it
    graph_store.put_nodes([node("a", code=1), node("b", code=2)])
    change = RegionChange(layer=0, expected=tuple(refs(graph_store)), assign=(("a", "sg"), ("b", "sg")),
                          add=(Segment("sg", 0, ("a", "b"), "s1"),), above_add=(NodeRef("s1", 7),),
                          marks=(("outbox:0:all:t", {"made": [["s1", 7]]}),))
    with pytest.raises(ConflictError):
        graph_store.apply_region(change)
    assert graph_store.get_segments(0) == [] and refs(graph_store, 1) == []
    assert graph_store.get_meta("outbox:0:all:t") is None and graph_store.layer_sizes() == {0: 2}
    graph_store.put_nodes([node("s1", layer=1, code=7, children=("a", "b"))], index=False)
    graph_store.apply_region(change)
    assert [s.summary_id for s in graph_store.get_segments(0)] == ["s1"] and graph_store.layer_sizes() == {0: 2, 1: 1}


def test_a_region_writes_the_summary_nodes_it_carries_with_it(graph_store):
    # a region making few summaries hands their nodes to its write instead of storing them first
    graph_store.put_nodes([node("a", code=1), node("b", code=2)])
    s1 = node("s1", layer=1, code=7, children=("a", "b"))
    sg = Segment("sg", 0, ("a", "b"), "s1")
    graph_store.apply_region(RegionChange(layer=0, expected=tuple(refs(graph_store)),
                                          assign=(("a", "sg"), ("b", "sg")), add=(sg,),
                                          above_add=(NodeRef("s1", 7),), nodes=(s1,)))
    assert graph_store.get_nodes(["s1"]) == {"s1": s1}
    assert refs(graph_store, 1) == [RefState("s1", 7, None, True)]
    assert graph_store.get_segments(0) == [sg] and graph_store.layer_sizes() == {0: 2, 1: 1}


def test_keep_nodes_stores_only_the_nodes_not_stored(graph_store):
    # a refused region's summaries are kept so; one another writer stored meanwhile (maybe made
    # live already, with its own text and code) stays as it is
    theirs = node("s1", layer=1, code=6, children=("a",))
    graph_store.put_nodes([theirs], index=False)
    mine = replace(theirs, code=7, text="another text")
    graph_store.keep_nodes([mine, node("s2", layer=1, code=9, children=("b",))])
    stored = graph_store.get_nodes(["s1", "s2"])
    assert stored["s1"] == theirs and stored["s2"].code == 9
    assert refs(graph_store, 1) == []  # outside the index


def test_a_refused_region_writes_none_of_the_summary_nodes_it_carries(graph_store):
    graph_store.put_nodes([node("a", code=1), node("b", code=2)])
    read = tuple(refs(graph_store))
    graph_store.delete_nodes(["b"])  # another writer, after the read
    change = RegionChange(layer=0, expected=read, assign=(("a", "sg"), ("b", "sg")),
                          add=(Segment("sg", 0, ("a", "b"), "s1"),), above_add=(NodeRef("s1", 7),),
                          nodes=(node("s1", layer=1, code=7, children=("a", "b")),))
    with pytest.raises(ConflictError):
        graph_store.apply_region(change)
    assert graph_store.get_nodes(["s1"]) == {} and refs(graph_store, 1) == []
    assert graph_store.get_segments(0) == [] and graph_store.layer_sizes() == {0: 1}


def _carrying(graph_store, finish):
    graph_store.put_nodes([node("a", code=1), node("b", code=2)])
    change = RegionChange(layer=0, expected=tuple(refs(graph_store)), assign=(("a", "sg"), ("b", "sg")),
                          add=(Segment("sg", 0, ("a", "b"), "s1"),), above_add=(NodeRef("s1", 7),),
                          nodes=(node("s1", layer=1, code=7, children=("a", "b")),), finish=finish)
    return graph_store.apply_region(change)


def test_a_region_writes_the_meta_write_it_carries(graph_store):
    # a reconcile's end carried from the layer below (services.resummarize): its record is
    # stored, its finished entries deleted, its shard's marker cleared, its nodes looked for
    graph_store.write_meta([("outbox:0:3:x", {"made": []}), ("dirty:0:3", 10.0)], [])
    graph_store.put_nodes([node("p", layer=1, code=4)])  # live in layer 1
    applied = _carrying(graph_store, MetaWrite(puts=(("change:1", {"kind": "resummarize"}),),
                                               deletes=("outbox:0:3:x",), clear=(("dirty:0:3", 10.0),),
                                               present=("p",)))
    assert applied.gone == ()
    assert graph_store.get_meta("change:1") == {"kind": "resummarize"}
    assert graph_store.get_meta("outbox:0:3:x") is None and graph_store.get_meta("dirty:0:3") is None
    assert graph_store.get_segments(0) == [Segment("sg", 0, ("a", "b"), "s1")]
    assert refs(graph_store, 1) == [RefState("p", 4, None, True), RefState("s1", 7, None, True)]


def test_a_carried_write_whose_conditions_fail_never_refuses_the_region(graph_store):
    # a marker set again since the reconcile began stays, a node gone since comes back as gone:
    # the region and the rest of the carried write land all the same
    graph_store.write_meta([("outbox:0:3:x", {"made": []}), ("dirty:0:3", 20.0)], [])
    applied = _carrying(graph_store, MetaWrite(puts=(("change:1", {"kind": "resummarize"}),),
                                               deletes=("outbox:0:3:x",), clear=(("dirty:0:3", 10.0),),
                                               present=("gone-summary",)))
    assert applied.gone == ("gone-summary",)
    assert graph_store.get_meta("dirty:0:3") == 20.0
    assert graph_store.get_meta("change:1") == {"kind": "resummarize"}
    assert graph_store.get_meta("outbox:0:3:x") is None
    assert graph_store.get_segments(0) == [Segment("sg", 0, ("a", "b"), "s1")]
    assert graph_store.layer_sizes() == {0: 2, 1: 1}


def test_ends_coalesced_with_one_marker_are_written_once_whatever_the_store(graph_store):
    # two reconciles' ends merged by a queue name the same marker: one clear, in the region's write
    graph_store.write_meta([("dirty:0:3", 6.0), ("outbox:0:3:a", {}), ("outbox:0:3:b", {})], [])
    first = MetaWrite(deletes=("outbox:0:3:a",), clear=(("dirty:0:3", 5.0),))
    second = MetaWrite(deletes=("outbox:0:3:b",), clear=(("dirty:0:3", 7.0),))
    _carrying(graph_store, first.merged(second))
    assert graph_store.meta_keys("outbox:") == [] and graph_store.get_meta("dirty:0:3") is None
    graph_store.write_meta([("dirty:0:4", 6.0)], [])
    graph_store.write_meta([], [], clear=[("dirty:0:4", 5.0), ("dirty:0:4", 7.0)])  # and on its own
    assert graph_store.get_meta("dirty:0:4") is None


def test_a_node_kept_outside_the_index_is_not_present_until_an_apply_makes_it_live(graph_store):
    # present asks whether a summary whose vector was written is live: one removed since and
    # kept again by a refused write (keep_nodes) is not, so its vector goes
    graph_store.put_nodes([node("live", layer=1, code=4)])
    graph_store.keep_nodes([node("s1", layer=1, code=7, children=("a", "b"))])
    assert graph_store.write_meta([], [], present=["live", "s1", "absent"]) == ["s1", "absent"]
    graph_store.put_nodes([node("a", code=1), node("b", code=2)])
    graph_store.apply_region(RegionChange(layer=0, expected=tuple(refs(graph_store)),
                                          assign=(("a", "sg"), ("b", "sg")), add=(Segment("sg", 0, ("a", "b"), "s1"),),
                                          above_add=(NodeRef("s1", 7),)))  # the kept node made live
    assert graph_store.write_meta([], [], present=["live", "s1"]) == []
    applied = graph_store.apply_region(RegionChange(
        layer=0, expected=tuple(refs(graph_store)), assign=(("a", None), ("b", None)), remove=("sg",),
        removed=(Segment("sg", 0, ("a", "b"), "s1"),), above_remove=(NodeRef("s1", 7),), delete_removed=True,
        finish=MetaWrite(present=("s1", "live"))))
    assert applied.gone == ("s1",)


def test_a_refused_region_writes_none_of_the_meta_write_it_carries(graph_store):
    graph_store.put_nodes([node("a", code=1), node("b", code=2)])
    graph_store.write_meta([("dirty:0:3", 10.0)], [])
    read = tuple(refs(graph_store))
    graph_store.delete_nodes(["b"])  # another writer, after the read
    change = RegionChange(layer=0, expected=read, assign=(("a", "sg"), ("b", "sg")),
                          add=(Segment("sg", 0, ("a", "b"), "s1"),), above_add=(NodeRef("s1", 7),),
                          nodes=(node("s1", layer=1, code=7, children=("a", "b")),),
                          finish=MetaWrite(puts=(("change:1", {"kind": "resummarize"}),), clear=(("dirty:0:3", 10.0),)))
    with pytest.raises(ConflictError):
        graph_store.apply_region(change)
    assert graph_store.get_meta("change:1") is None and graph_store.get_meta("dirty:0:3") == 10.0


def test_delete_dead_nodes_deletes_only_the_nodes_not_live(graph_store):
    graph_store.put_nodes([node("a", code=1), node("b", code=2), node("c", code=3)])
    graph_store.put_nodes([node("s1", layer=1, code=7, children=("a", "b")), node("s2", layer=1, code=9),
                           node("s3", layer=1, code=5, children=("c",))], index=False)
    graph_store.apply_region(RegionChange(layer=0, expected=tuple(refs(graph_store)),
                                          assign=(("a", "sg"), ("b", "sg"), ("c", "sc")),
                                          add=(Segment("sg", 0, ("a", "b"), "s1"), Segment("sc", 0, ("c",), "s3")),
                                          above_add=(NodeRef("s1", 7), NodeRef("s3", 5))))
    graph_store.apply_region(RegionChange(layer=1, expected=tuple(refs(graph_store, 1)),
                                          assign=(("s1", "t1"), ("s3", "t1")), add=(seg("t1", 1, ("s1", "s3")),)))
    # s3 leaves layer 1 (a tombstone its segment above still names); s2 was never live
    graph_store.apply_region(RegionChange(layer=0, expected=tuple(r for r in refs(graph_store) if r.node_id == "c"),
                                          assign=(("c", None),), remove=("sc",), above_remove=(NodeRef("s3", 5),)))
    assert graph_store.delete_dead_nodes(["s1", "s2", "s3", "absent"]) == ["s2", "s3", "absent"]
    assert set(graph_store.get_nodes(["s1", "s2", "s3"])) == {"s1"}
    assert refs(graph_store, 1) == [RefState("s3", 5, "t1", False), RefState("s1", 7, "t1", True)]
    assert graph_store.layer_sizes()[1] == 1


def test_apply_region_conflicts_and_writes_nothing(graph_store):
    graph_store.put_nodes([node("a", code=1), node("b", code=2), node("s0", layer=1, code=4)])
    read = tuple(refs(graph_store))
    graph_store.delete_nodes(["b"])  # another writer, after the read
    change = RegionChange(layer=0, expected=read, assign=(("a", "sg"), ("b", "sg")),
                          add=(seg("sg", 0, ("a", "b")),), above_add=(NodeRef("s1", 5),),
                          above_remove=(NodeRef("s0", 4),))
    with pytest.raises(ConflictError):
        graph_store.apply_region(change)
    assert refs(graph_store) == [RefState("a", 1, None, True)]
    assert graph_store.get_segments(0) == []
    assert refs(graph_store, 1) == [RefState("s0", 4, None, True)]
    assert graph_store.layer_sizes() == {0: 1, 1: 1}


# --- layer counters ------------------------------------------------------------------------

def set_counter(store, layer: int, value: int | None) -> None:
    """Write a layer counter straight into the adapter's storage (None: remove it), as a
    drift would leave it."""
    from eragraph.adapters.memory.graph_memory import MemoryGraphStore

    if isinstance(store, MemoryGraphStore):
        if value is None:
            store._sizes.pop(layer, None)
        else:
            store._sizes[layer] = value
    elif type(store).__name__ == "SqliteGraphStore":
        import sqlite3

        with sqlite3.connect(store.path) as conn:
            conn.execute("DELETE FROM layer_counts WHERE layer = ?", (layer,))
            if value is not None:
                conn.execute("INSERT INTO layer_counts (layer, live) VALUES (?, ?)", (layer, value))
    else:  # DynamoDB: the COUNT item, through the low-level client
        import boto3

        client = boto3.client("dynamodb", region_name=store.Item.Meta.region)
        key = {"PK": {"S": "COUNT"}, "SK": {"S": f"LAYER#{layer}"}}
        if value is None:
            client.delete_item(TableName=store.Item.Meta.table_name, Key=key)
        else:
            client.put_item(TableName=store.Item.Meta.table_name, Item={**key, "version": {"N": str(value)}})


def stored_counters(store) -> dict[int, int]:
    """Every layer counter in the adapter's storage, zero and negative ones included."""
    from eragraph.adapters.memory.graph_memory import MemoryGraphStore

    if isinstance(store, MemoryGraphStore):
        return dict(store._sizes)
    if type(store).__name__ == "SqliteGraphStore":
        import sqlite3

        with sqlite3.connect(store.path) as conn:
            return {int(a): int(b) for a, b in conn.execute("SELECT layer, live FROM layer_counts")}
    import boto3

    client = boto3.client("dynamodb", region_name=store.Item.Meta.region)
    items = client.query(TableName=store.Item.Meta.table_name, KeyConditionExpression="PK = :pk",
                         ExpressionAttributeValues={":pk": {"S": "COUNT"}}, ConsistentRead=True)["Items"]
    return {int(i["SK"]["S"].split("#")[1]): int(i["version"]["N"]) for i in items
            if i["SK"]["S"].startswith("LAYER#")}


def test_repair_layer_counts_recounts_the_live_refs(graph_store):
    graph_store.put_nodes([node("a", code=1), node("b", code=2), node("c", code=3),
                           node("s1", layer=1, code=4), node("s2", layer=1, code=5)])
    graph_store.apply_region(RegionChange(layer=0, expected=tuple(refs(graph_store)[:2]),
                                          assign=(("a", "sg"), ("b", "sg")), add=(seg("sg", 0, ("a", "b")),)))
    graph_store.delete_nodes(["a"])  # a tombstone: not counted
    assert graph_store.repair_layer_counts() == {}  # nothing drifted
    assert stored_counters(graph_store) == {0: 2, 1: 2}
    set_counter(graph_store, 0, 7)      # over
    set_counter(graph_store, 1, None)   # lost, while the layer has nodes
    set_counter(graph_store, 3, 0)      # a zero counter of an empty layer
    set_counter(graph_store, 4, 3)      # a layer without refs
    set_counter(graph_store, 5, -2)     # below zero
    assert graph_store.repair_layer_counts() == {0: -5, 1: 2, 4: -3, 5: 2}
    assert graph_store.layer_sizes() == {0: 2, 1: 2}
    assert stored_counters(graph_store) == {0: 2, 1: 2}  # counters of layers without refs are gone
    assert graph_store.repair_layer_counts() == {}
    set_counter(graph_store, 1, None)  # the top layer's counter lost: found from its refs
    assert graph_store.repair_layer_counts() == {1: 2}
    graph_store.put_nodes([node("d", code=6), node("a", code=1)])  # the counters go on counting
    graph_store.delete_nodes(["s1"])
    assert graph_store.layer_sizes() == {0: 4, 1: 1}
    assert graph_store.repair_layer_counts() == {}


# --- several handles on one store (persistent backends) -------------------------------------

@pytest.mark.persistent
def test_everything_survives_reopen(graph_store_backend):
    store = graph_store_backend.open()
    lsh = draw_hyperplanes("hash-128", 8, 6, seed=3)
    store.put_lsh(lsh)
    store.put_meta("settings", NESTED)
    store.add_ledger("summarize", 2, 10, 5, 0.5)
    doc = Document(doc_id="d1", source="a.txt", content_hash="h", chunk_ids=("c1",), meta={"k": [1]},
                   metadata=METADATA)
    store.put_document(doc)
    nodes = [node("c1", code=3), node("s1", layer=1, children=("c1",))]
    store.put_nodes(nodes)
    store.apply_region(RegionChange(layer=0, expected=tuple(refs(store)), assign=(("c1", "sg"),),
                                    add=(seg("sg", 0, ("c1",)),)))
    store = graph_store_backend.reopen(store)
    assert store.get_lsh() == lsh
    assert store.get_meta("settings") == NESTED
    assert store.ledger()["summarize"]["tokens_in"] == 10
    assert store.list_documents() == [doc]
    assert store.get_nodes(["c1", "s1"]) == {"c1": nodes[0], "s1": nodes[1]}
    assert store.layer_sizes() == {0: 1, 1: 1}
    assert store.get_segments(0) == [seg("sg", 0, ("c1",))]
    assert refs(store) == [RefState("c1", 3, "sg", True)]


@pytest.mark.persistent
def test_concurrent_writers_one_wins(graph_store_backend):
    one, two = graph_store_backend.open(), graph_store_backend.open()
    one.put_nodes([node("a", code=1)])
    read_one, read_two = tuple(refs(one)), tuple(refs(two))
    one.apply_region(RegionChange(layer=0, expected=read_one, assign=(("a", "from-one"),),
                                  add=(seg("from-one", 0, ("a",)),)))
    with pytest.raises(ConflictError):
        two.apply_region(RegionChange(layer=0, expected=read_two, assign=(("a", "from-two"),),
                                      add=(seg("from-two", 0, ("a",)),)))
    assert [s.segment_id for s in two.get_segments(0)] == ["from-one"]
    assert two.put_lsh(draw_hyperplanes("e2", 4, 3, seed=2)) == one.put_lsh(draw_hyperplanes("e1", 4, 3, seed=1))


# --- SQLite specifics ------------------------------------------------------------------------

def test_sqlite_records_schema_version_and_refuses_newer(tmp_path):
    import sqlite3

    from eragraph.adapters.local.graph_sqlite import SCHEMA_VERSION, SqliteGraphStore
    from eragraph.domain.model import EragraphError

    path = tmp_path / "g.db"
    store = SqliteGraphStore(path)
    assert store.schema_version() == SCHEMA_VERSION
    assert store.meta_keys("") == []  # the schema row is not user metadata
    store.close()
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE store_info SET value = ? WHERE key = 'schema_version'", (str(SCHEMA_VERSION + 1),))
    with pytest.raises(EragraphError):
        SqliteGraphStore(path)


def test_sqlite_uses_wal(tmp_path):
    from eragraph.adapters.local.graph_sqlite import SqliteGraphStore

    store = SqliteGraphStore(tmp_path / "g.db")
    assert store._query("PRAGMA journal_mode")[0][0] == "wal"
    store.close()


def test_sqlite_store_written_before_document_versions_opens(tmp_path):
    """A store whose documents table predates the version and metadata columns gains them on
    open (its documents have no metadata), and takes metadata from then on."""
    import sqlite3

    from eragraph.adapters.local.graph_sqlite import SqliteGraphStore

    path = tmp_path / "old.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE documents (doc_id TEXT PRIMARY KEY, source TEXT NOT NULL, "
                     "content_hash TEXT NOT NULL, title TEXT NOT NULL, chunk_ids TEXT NOT NULL, "
                     "status TEXT NOT NULL, meta TEXT NOT NULL)")
        conn.execute("INSERT INTO documents VALUES ('d1', 'a.txt', 'h', 'A', '[\"c1\"]', 'indexed', '{}')")
    store = SqliteGraphStore(path)
    old = store.get_document("d1")
    assert old == Document(doc_id="d1", source="a.txt", content_hash="h", title="A", chunk_ids=("c1",))
    store.put_document(replace(old, content_hash="h2", version="0A", metadata={"lang": "en"}), expected=old)
    assert store.get_document("d1").version == "0A" and store.get_document("d1").metadata == {"lang": "en"}
    store.close()
    assert SqliteGraphStore(path).list_documents()[0].metadata == {"lang": "en"}
