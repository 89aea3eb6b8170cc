"""services.uploads with the memory profile's pipeline (its worker thread, services.upload_worker):
submitted documents go received -> done (or failed with the reason), carry their metadata, are
queryable, can be removed; a bad request is refused whole, in words, with nothing stored; a worker
started over a store that a stopped one left finishes its work; GET /documents' cursor pages."""

from __future__ import annotations

import base64

import pytest
from support import make_engine

from eragraph.bootstrap import document_pipeline
from eragraph.services import changes, doc_status, uploads
from eragraph.services.query import query
from eragraph.services.sources import text_key
from eragraph.services.upload_worker import REMOVING, UploadWorker

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4
NOTES = ("The lighthouse keeper logged a storm over the northern reef. The lamp burned all night and the "
         "keeper called the harbour twice. ") * 10
RECIPE = ("Sourdough needs a lively starter, flour, water and salt. Fold the dough every half hour and "
          "bake it hot in a covered pot. ") * 10


@pytest.fixture
def served():
    engine = make_engine()
    pipeline = document_pipeline("memory", None, engine.settings, lambda _tenant: engine)
    assert isinstance(pipeline, UploadWorker)
    pipeline.start([engine])
    yield engine, pipeline
    pipeline.close()


def state(engine, doc_id):
    view = doc_status.read(engine, doc_id)
    return view and view["state"]


def test_documents_go_received_to_done_or_failed_with_the_reason(served):
    engine, pipeline = served
    accepted = uploads.submit(engine, pipeline, [
        uploads.Upload("notes/keeper.md", NOTES.encode(), {"year": 2021, "kind": "log"}),
        uploads.Upload("food/bread.txt", RECIPE.encode()),
        uploads.Upload("img/photo.png", PNG),
        uploads.Upload("empty.txt", b""),
    ])
    assert [a["state"] for a in accepted] == ["received"] * 4
    assert [a["source"] for a in accepted] == ["notes/keeper.md", "food/bread.txt", "img/photo.png", "empty.txt"]
    assert pipeline.wait_idle(60)
    states = {a["source"]: state(engine, a["doc_id"]) for a in accepted}
    assert states == {"notes/keeper.md": "done", "food/bread.txt": "done", "img/photo.png": "failed",
                      "empty.txt": "failed"}
    assert "binary" in doc_status.read(engine, accepted[2]["doc_id"])["reason"]
    assert doc_status.read(engine, accepted[3]["doc_id"])["reason"]
    keeper = engine.graph.get_document(accepted[0]["doc_id"])
    assert keeper.metadata == {"year": 2021, "kind": "log"}
    assert engine.blobs.get("notes/keeper.md") == NOTES.encode()  # the bytes, under the bucket's key
    assert "northern reef" in engine.blobs.get(text_key(keeper.doc_id)).decode()  # eragraph rebuild reads it
    hits = query(engine, "storm over the northern reef", mode="dense", k=3).results
    assert hits and hits[0].doc_id == keeper.doc_id
    filtered = query(engine, "bread", mode="dense", k=3, where={"equals": {"key": "kind", "value": "log"}}).results
    assert {h.doc_id for h in filtered} == {keeper.doc_id}
    records = changes.recent(engine, 50)
    ingested = {s for r in records if r["kind"] == "ingest" for s in r["documents"]}
    assert ingested == {"notes/keeper.md", "food/bread.txt"}
    written = {s for r in records if r["kind"] == "resummarize" for s in r["summaries"]}
    assert written and set(engine.graph.get_nodes(written)) == written  # real summaries of the graph


def test_resubmitting_replaces_attributes_and_settles_unchanged_content(served):
    engine, pipeline = served
    [first] = uploads.submit(engine, pipeline, [uploads.Upload("a.md", NOTES.encode(), {"team": "x"})])
    pipeline.wait_idle(60)
    [again] = uploads.submit(engine, pipeline, [uploads.Upload("a.md", NOTES.encode())])  # same bytes, no metadata
    assert again["doc_id"] == first["doc_id"] and state(engine, first["doc_id"]) == "received"
    pipeline.wait_idle(60)
    assert state(engine, first["doc_id"]) == "done"  # not "received" forever: the content was already in
    assert engine.graph.get_document(first["doc_id"]).metadata == {}  # the earlier sidecar went with it


@pytest.mark.parametrize("docs, status, words", [
    ([], 400, "at least one"),
    ([uploads.Upload(f"d{i}.txt", b"x") for i in range(26)], 400, "at most 25"),
    ([uploads.Upload("ok.txt", b"x"), uploads.Upload("bad.txt", b"x", {"year": {"nested": 1}})], 400, "documents[1].metadata"),
    ([uploads.Upload("../etc/passwd", b"x")], 400, "'..' part"),
    ([uploads.Upload("/abs.txt", b"x")], 400, "relative"),
    ([uploads.Upload("tenants/other/a.txt", b"x")], 400, "reserved"),
    ([uploads.Upload("a.txt.metadata.json", b"{}")], 400, "sidecar"),
    ([uploads.Upload("a.txt", b"x"), uploads.Upload("a.txt", b"y")], 400, "twice"),
    ([uploads.Upload("big.txt", b"x" * 2048)], 413, "ERAGRAPH_MAX_DOCUMENT_BYTES"),
    ([uploads.Upload("t.txt", b"x", {"tenant": "someone"})], 403, "tenant"),
])
def test_a_bad_request_is_refused_whole_in_words(docs, status, words):
    engine = make_engine(max_document_bytes=1024)
    pipeline = UploadWorker(lambda _t: engine)
    with pytest.raises(uploads.UploadError) as info:
        uploads.submit(engine, pipeline, docs)
    assert info.value.status == status and words in str(info.value)
    assert engine.blobs.list() == [] and engine.graph.doc_statuses("") == []  # nothing stored
    assert pipeline._thread is None


def test_decode_refuses_bad_base64_and_two_bodies():
    with pytest.raises(uploads.UploadError, match=r"documents\[0\]\.bytes is not valid base64"):
        uploads.decode([{"source": "a.pdf", "bytes": "not base64!"}])
    with pytest.raises(uploads.UploadError, match="exactly one"):
        uploads.decode([{"source": "a.txt", "text": "x", "bytes": base64.b64encode(b"x").decode()}])
    [ok] = uploads.decode([{"source": "a.png", "bytes": base64.b64encode(PNG).decode()}])
    assert ok.data == PNG


def test_delete_removes_the_document_its_bytes_and_status(served):
    engine, pipeline = served
    with pytest.raises(uploads.UnknownDocument):
        uploads.delete(engine, pipeline, "no-such-doc")
    [a, b] = uploads.submit(engine, pipeline, [uploads.Upload("a.md", NOTES.encode(), {"k": "v"}),
                                               uploads.Upload("b.md", RECIPE.encode())])
    pipeline.wait_idle(60)
    assert uploads.delete(engine, pipeline, a["doc_id"]) == {"doc_id": a["doc_id"], "source": "a.md",
                                                             "state": "deleting"}
    pipeline.wait_idle(60)
    assert engine.graph.get_document(a["doc_id"]) is None and doc_status.read(engine, a["doc_id"]) is None
    assert set(engine.blobs.list()) == {"b.md", text_key(b["doc_id"])}
    assert engine.graph.meta_keys(REMOVING) == []
    assert any(r["kind"] == "remove" and r["documents"] == ["a.md"] for r in changes.recent(engine, 50))
    # a failed document (never stored) is removed too
    [bad] = uploads.submit(engine, pipeline, [uploads.Upload("c.png", PNG)])
    pipeline.wait_idle(60)
    uploads.delete(engine, pipeline, bad["doc_id"])
    pipeline.wait_idle(60)
    assert doc_status.read(engine, bad["doc_id"]) is None and "c.png" not in engine.blobs.list()


def test_a_new_worker_finishes_what_a_stopped_one_accepted():
    engine = make_engine()
    stopped = UploadWorker(lambda _t: engine)
    stopped._thread = object()  # never runs: the process died with its queue
    [a, b] = uploads.submit(engine, stopped, [uploads.Upload("a.md", NOTES.encode()),
                                              uploads.Upload("b.md", RECIPE.encode())])
    assert state(engine, a["doc_id"]) == "received"
    doc_status.record_received(engine, "lost", "lost.md")  # its bytes never reached the store
    worker = UploadWorker(lambda _t: engine).start([engine])
    assert worker.wait_idle(60)
    assert state(engine, a["doc_id"]) == state(engine, b["doc_id"]) == "done"
    assert doc_status.read(engine, "lost")["state"] == "failed"
    stopped._thread = object()
    stopped._recovered.add("")
    uploads.delete(engine, stopped, b["doc_id"])  # accepted, then the process died
    assert engine.graph.get_document(b["doc_id"]) is not None
    again = UploadWorker(lambda _t: engine).start([engine])
    assert again.wait_idle(60)
    assert engine.graph.get_document(b["doc_id"]) is None and engine.graph.meta_keys(REMOVING) == []
    worker.close()
    again.close()


def test_the_status_cursor_pages_every_document_once():
    engine = make_engine()
    for n in range(23):
        doc_status.record_received(engine, f"id{n % 5}-{n}", f"src/{n % 7}.txt")
    seen, cursor = [], ""
    while True:
        counts, page, cursor, more = doc_status.page(engine, "src/", 4, cursor)
        assert counts.to_json()["total"] in (23, 24) and len(page) <= 4 and more is (cursor is not None)
        seen += [(v["source"], v["doc_id"]) for v in page]
        if cursor is None:
            break
        doc_status.record_received(engine, "zz-late", "src/9.txt")  # added meanwhile, after the cursor
    assert seen == sorted(seen) and len(set(seen)) == len(seen) == 24  # the late one too: it sorts last
    assert {d for _s, d in seen} == {f"id{n % 5}-{n}" for n in range(23)} | {"zz-late"}
    with pytest.raises(doc_status.BadCursor, match="next_cursor"):
        doc_status.page(engine, "", 4, "garbage!")
