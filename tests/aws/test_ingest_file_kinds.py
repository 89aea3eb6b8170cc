"""The ingest handler on files by kind and on inputs that used to end in the DLQ: a 1 MiB
single-word document, objects over the size limit (refused by ContentLength, unread), a PDF and
a DOCX with no telling extension, a ZIP that is not a DOCX, and a document whose record would not
fit one DynamoDB item. Each is ingested or refused with one logged reason; none is a batch-item
failure (so none is retried into the DLQ), and the good records beside it are ingested."""

from __future__ import annotations

from dataclasses import replace

import pytest
from aws_helpers import BUCKET, load_handler
from file_builders import docx_bytes, pdf_bytes, zip_bytes
from test_ingest_events import TEXT, s3_put, sources, sqs_batch

from eragraph.domain.text import MAX_CHUNK_CHARS


def run_batch(engine, lambda_context, objects: dict[str, bytes], caplog):
    ingest = load_handler("ingest")
    keys = ["docs/good one.txt", *objects, "docs/good two.txt"]
    for key in keys:
        engine.blobs.put(key, objects.get(key, TEXT.encode()))
    caplog.clear()
    out = ingest.handler(sqs_batch([s3_put(k, f"0A1B2C3D4E5F6789{n:02d}") for n, k in enumerate(keys)]),
                         lambda_context)
    assert out == {"batchItemFailures": []}  # nothing retried, nothing to the DLQ
    assert {f"s3://{BUCKET}/docs/good one.txt", f"s3://{BUCKET}/docs/good two.txt"} <= sources(engine)
    return {getattr(r, "source", ""): r for r in caplog.records if r.message in ("document rejected", "document read")}


def test_a_one_mib_single_word_document_is_ingested_in_chunks_that_fit(aws_engine, lambda_context, caplog):
    engine, _, _ = aws_engine
    word = "x" * (1 << 20)
    lines = run_batch(engine, lambda_context, {"docs/one word.txt": word.encode()}, caplog)
    line = lines[f"s3://{BUCKET}/docs/one word.txt"]
    assert line.message == "document read" and line.bytes == 1 << 20 and line.chunks > 1
    [doc] = [d for d in engine.graph.list_documents() if d.source.endswith("one word.txt")]
    texts = [n.text for n in engine.graph.get_nodes(doc.chunk_ids).values()]
    assert len(texts) == line.chunks and max(map(len, texts)) <= MAX_CHUNK_CHARS
    assert set("".join(texts)) == {"x"}


def test_files_by_content_and_refusals_with_one_reason(aws_engine, lambda_context, caplog):
    engine, _, _ = aws_engine
    objects = {"docs/scan-0001": pdf_bytes(["The harbour master of Gdynia logged a tall ship."], title="Log"),
               "docs/minutes": docx_bytes(["The council met in Torun on Monday."]),
               "docs/bundle.docx": zip_bytes({"readme.txt": b"hello"}),
               "docs/photo.txt": b"\x89PNG\r\n\x1a\n" + bytes(64)}
    lines = run_batch(engine, lambda_context, objects, caplog)
    assert lines[f"s3://{BUCKET}/docs/scan-0001"].message == "document read"
    assert lines[f"s3://{BUCKET}/docs/minutes"].message == "document read"
    assert "a ZIP archive that is not a DOCX" in lines[f"s3://{BUCKET}/docs/bundle.docx"].error
    assert "a PNG image" in lines[f"s3://{BUCKET}/docs/photo.txt"].error
    by_source = {d.source.rsplit("/", 1)[-1]: d for d in engine.graph.list_documents()}
    assert by_source["scan-0001"].title == "Log" and by_source["minutes"].title == "minutes"
    assert "bundle.docx" not in by_source and "photo.txt" not in by_source


def test_an_object_over_the_size_limit_is_refused_unread(aws_engine, lambda_context, caplog, monkeypatch):
    engine, _, _ = aws_engine
    engine.settings = replace(engine.settings, max_document_bytes=4096)
    get = engine.blobs.get
    monkeypatch.setattr(engine.blobs, "get", lambda key: pytest.fail("read") if "huge" in key else get(key))
    lines = run_batch(engine, lambda_context, {"docs/huge.txt": b"word " * 2000}, caplog)
    assert "10000 bytes is over the 4096-byte limit" in lines[f"s3://{BUCKET}/docs/huge.txt"].error


def test_a_document_too_large_for_one_item_is_refused_whole(aws_engine, lambda_context, caplog, monkeypatch):
    from eragraph.adapters.aws import nodes_dynamodb

    engine, _, _ = aws_engine
    monkeypatch.setattr(nodes_dynamodb, "ITEM_LIMIT", 3000)  # a record of ~150 chunk ids, not 400 KB worth
    long_doc = " ".join(f"Sentence {i} about the lighthouse keeper." for i in range(1000))
    lines = run_batch(engine, lambda_context, {"docs/long.txt": long_doc.encode()}, caplog)
    line = lines[f"s3://{BUCKET}/docs/long.txt"]
    assert line.message == "document rejected" and "over the 3000-byte item limit; nothing was written" in line.error
    assert not any(d.source.endswith("long.txt") for d in engine.graph.list_documents())
    assert {n.source for n in engine.graph.get_nodes(engine.vectors.ids()).values()} == {
        f"s3://{BUCKET}/docs/good one.txt", f"s3://{BUCKET}/docs/good two.txt"}  # no chunk of it written


def test_the_dynamodb_adapter_refuses_an_item_over_400_kb_naming_it_and_writes_nothing(aws_engine):
    from eragraph.domain.model import Document, ItemTooLargeError, Node

    engine, _, _ = aws_engine
    small = Node(node_id="chk-small", layer=0, text="fits", tokens=1, code=1, doc_id="d", source="s")
    huge = Node(node_id="chk-huge", layer=0, text="é" * 210_000, tokens=1, code=2, doc_id="d", source="s")  # 420 KB
    with pytest.raises(ItemTooLargeError, match=r"node chk-huge .* NODE#chk-huge would be about 420\d{3} bytes"):
        engine.graph.put_nodes([small, huge])
    assert engine.graph.get_nodes(["chk-small", "chk-huge"]) == {}  # the batch was refused before any write
    doc = Document(doc_id="d", source="s", content_hash="h", chunk_ids=tuple(f"chk-{i:016x}" for i in range(20_000)))
    with pytest.raises(ItemTooLargeError, match="document d .20000 chunks.: its DynamoDB item DOC#d"):
        engine.graph.put_document(doc)
    assert engine.graph.get_document("d") is None
