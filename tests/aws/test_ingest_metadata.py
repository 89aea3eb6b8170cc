"""The ingest handler reads an object's metadata (moto S3, real event JSON from tests/events):
its user-defined metadata (``x-amz-meta-*``) as string attributes and a sidecar object
``<key>.metadata.json`` over them. A sidecar's own events (created, overwritten, deleted)
re-read its document: only the metadata changed, so its chunks are re-tagged without one text
embedded; a sidecar is never a document."""

from __future__ import annotations

import json
from urllib.parse import quote_plus

import iam_judge
import pytest
from aws_helpers import BUCKET, event, load_handler

from eragraph.domain.filters import chunk_attrs, matches, parse_expression
from eragraph.domain.ids import document_id_for_source

TEXT = ("Lighthouse keepers on the northern cape logged every passing ship in a leather ledger. "
        "The lighthouse is called Farbeacon and the ledger is named Tidewright. ") * 3
KEY = "docs/Harbour Log #1.txt"
SIDECAR = KEY + ".metadata.json"
SOURCE = f"s3://{BUCKET}/{KEY}"


def s3_event(key: str, sequencer: str, template: str = "s3_put.json") -> dict:
    body = event(template)
    obj = body["Records"][0]["s3"]["object"]
    obj["key"], obj["sequencer"] = quote_plus(key), sequencer
    return body


def eventbridge_created(key: str, sequencer: str) -> dict:
    body = event("eventbridge_object_created.json")
    body["detail"]["object"].update(key=quote_plus(key), sequencer=sequencer)
    return body


def put(engine, key: str, body: bytes, **metadata: str) -> None:
    engine.blobs.client.put_object(Bucket=BUCKET, Key=key, Body=body, Metadata=metadata)


def put_sidecar(engine, attributes: dict) -> None:
    put(engine, SIDECAR, json.dumps({"metadataAttributes": attributes}).encode())


class Counting:
    """The engine's embedder, counting the texts it embeds."""

    def __init__(self, inner) -> None:
        self.inner, self.texts = inner, 0

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def embed(self, texts):
        self.texts += len(texts)
        return self.inner.embed(texts)


def stored(engine):
    return engine.graph.get_document(document_id_for_source(SOURCE))


def assert_chunks_filter_as_the_record(engine, expressions) -> None:
    """A filtered search of the vector index finds exactly the document's chunks when its
    record's attributes match, and none otherwise."""
    doc = stored(engine)
    attrs = chunk_attrs(doc.metadata, doc.source, doc.doc_id, doc.title)
    query = engine.vectors.get_vectors([doc.chunk_ids[0]])[doc.chunk_ids[0]]  # no embedder call
    for text in expressions:
        f = parse_expression(text)
        hits = engine.vectors.search(query, 50, layers=[0], where=f)
        assert {h.node_id for h in hits} == (set(doc.chunk_ids) if matches(f, attrs) else set()), text


def test_user_metadata_and_a_sidecar_object_are_the_documents_attributes(aws_engine, lambda_context, caplog):
    engine, _, _ = aws_engine
    ingest = load_handler("ingest")
    put(engine, KEY, TEXT.encode(), year="2020", team="blue", source="forged", **{"9lives": "x"})
    put_sidecar(engine, {"team": {"value": {"type": "STRING", "stringValue": "red"}, "includeForEmbedding": True},
                         "pages": 12, "tags": ["harbour", "ships"]})
    caplog.clear()
    out = ingest.handler(s3_event(KEY, "0A1B2C3D4E5F678901"), lambda_context)
    assert out["ingested"] == 1 and out["rejected"] == 0
    assert stored(engine).metadata == {"year": "2020", "team": "red", "pages": 12, "tags": ["harbour", "ships"]}
    [line] = [r for r in caplog.records if getattr(r, "reason", None) == "metadata-keys-skipped"]
    assert line.keys == ["9lives", "source"] and line.source == SOURCE
    assert {d.source for d in engine.graph.list_documents()} == {SOURCE}  # the sidecar is no document
    assert_chunks_filter_as_the_record(engine, ['year="2020"', "year=2020", "team=red", "team=blue",
                                                "tags=ships", "pages>10", "source^=s3://"])


def test_a_sidecars_events_retag_its_document_without_embedding(aws_engine, lambda_context):
    engine, _, _ = aws_engine
    ingest = load_handler("ingest")
    put(engine, KEY, TEXT.encode(), team="blue")
    put_sidecar(engine, {"team": "red"})
    ingest.handler(s3_event(KEY, "0A1B2C3D4E5F678901"), lambda_context)
    version, chunks = stored(engine).version, stored(engine).chunk_ids
    engine.embedder = Counting(engine.embedder)

    put_sidecar(engine, {"team": "green", "year": 2021})
    out = ingest.handler(eventbridge_created(SIDECAR, "00617F08299329D1A0"), lambda_context)
    assert out["ingested"] == 1 and engine.embedder.texts == 0
    doc = stored(engine)
    assert doc.metadata == {"team": "green", "year": 2021}
    assert (doc.version, doc.chunk_ids) == (version, chunks)  # the document's own version and chunks
    assert_chunks_filter_as_the_record(engine, ["team=green", "team=red", "year>=2021"])

    # the same event again: nothing to do
    out = ingest.handler(eventbridge_created(SIDECAR, "00617F08299329D1A0"), lambda_context)
    assert out["ingested"] == 0 and engine.embedder.texts == 0

    # deleting the sidecar leaves the user metadata, and the document
    engine.blobs.delete(SIDECAR)
    out = ingest.handler(s3_event(SIDECAR, "0A1B2C3D4E5F6789A2", "s3_delete.json"), lambda_context)
    assert out["removed"] == 0 and out["ingested"] == 1 and engine.embedder.texts == 0
    assert stored(engine).metadata == {"team": "blue"}
    assert {d.source for d in engine.graph.list_documents()} == {SOURCE}
    assert_chunks_filter_as_the_record(engine, ["team=blue", "team=green"])


def test_a_sidecars_event_before_its_document_is_left_to_the_documents_own(aws_engine, lambda_context, caplog):
    engine, _, _ = aws_engine
    ingest = load_handler("ingest")
    put(engine, KEY, TEXT.encode())
    put_sidecar(engine, {"team": "red"})
    caplog.clear()
    out = ingest.handler(s3_event(SIDECAR, "0A1B2C3D4E5F678902"), lambda_context)
    assert out["ingested"] == 0 and engine.graph.list_documents() == []
    assert [r.reason for r in caplog.records if getattr(r, "reason", None)] == ["document-not-stored"]
    out = ingest.handler(s3_event(KEY, "0A1B2C3D4E5F678901"), lambda_context)
    assert out["ingested"] == 1 and stored(engine).metadata == {"team": "red"}


def test_a_sidecar_uploaded_while_its_document_is_ingested_is_applied(aws_engine, lambda_context):
    """The document's event reads no sidecar; the sidecar lands before the document is
    written, and its own event (handled meanwhile) found no document: the document's event
    reads the sidecar again once it has written the document, and re-tags it."""
    engine, _, _ = aws_engine
    ingest = load_handler("ingest")
    put(engine, KEY, TEXT.encode())
    blobs = engine.blobs
    size = blobs.size

    def size_then_upload(key):
        if key == SIDECAR and not hasattr(blobs, "uploaded"):
            blobs.uploaded = True
            try:
                return size(key)
            finally:
                with iam_judge.running_as(None):  # the uploader's write, not the ingest function's
                    put_sidecar(engine, {"team": "late"})
        return size(key)

    blobs.size = size_then_upload
    out = ingest.handler(s3_event(KEY, "0A1B2C3D4E5F678901"), lambda_context)
    assert out["ingested"] == 2  # ingested, then re-tagged
    assert stored(engine).metadata == {"team": "late"}
    assert_chunks_filter_as_the_record(engine, ["team=late"])


def test_a_sidecar_event_after_the_content_changed_leaves_it_to_the_contents_event(aws_engine, lambda_context):
    engine, _, _ = aws_engine
    ingest = load_handler("ingest")
    put(engine, KEY, TEXT.encode())
    ingest.handler(s3_event(KEY, "0A1B2C3D4E5F678901"), lambda_context)
    put(engine, KEY, (TEXT + " A new paragraph about the fog horn.").encode())  # its event not handled yet
    put_sidecar(engine, {"team": "red"})
    out = ingest.handler(s3_event(SIDECAR, "0A1B2C3D4E5F678905"), lambda_context)
    assert out["stale"] == 1 and out["ingested"] == 0 and stored(engine).metadata == {}
    out = ingest.handler(s3_event(KEY, "0A1B2C3D4E5F678909"), lambda_context)
    assert out["ingested"] == 1 and stored(engine).metadata == {"team": "red"}
    assert_chunks_filter_as_the_record(engine, ["team=red"])


@pytest.mark.parametrize("body,words", [
    (b"{oops", ["not UTF-8 JSON"]),
    (json.dumps({"metadataAttributes": {"title": "forged"}}).encode(), ["'title' is reserved"]),
])
def test_a_malformed_sidecar_object_rejects_its_document(aws_engine, lambda_context, caplog, body, words):
    engine, _, _ = aws_engine
    ingest = load_handler("ingest")
    put(engine, KEY, TEXT.encode())
    put(engine, SIDECAR, body)
    caplog.clear()
    out = ingest.handler(s3_event(KEY, "0A1B2C3D4E5F678901"), lambda_context)
    assert out["rejected"] == 1 and out["ingested"] == 0 and engine.graph.list_documents() == []
    [line] = [r for r in caplog.records if r.getMessage() == "document rejected"]
    assert line.source == SOURCE and SIDECAR in line.error and all(w in line.error for w in words)
