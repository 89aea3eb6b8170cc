"""A failed document's reason is the owner's words (domain.refusals): a fixed vocabulary plus the
file's kind and size, never an exception's text, its type, a path or an account id; the detail
stays in the logs. Through the documents pipeline (services.uploads + its worker) and each reader."""

from __future__ import annotations

import re

import pytest
from file_builders import docx_bytes, encrypted_pdf, pdf_bytes, zip_bytes
from support import make_engine

from eragraph.bootstrap import document_pipeline
from eragraph.domain.doc_status import DocStatus
from eragraph.domain.model import BadInputError
from eragraph.domain.refusals import VOCABULARY, human_size, is_vocabulary, reason_of
from eragraph.providers.extractors import ReadLimits
from eragraph.services import doc_status, uploads
from eragraph.services.sources import read_document

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4
LIMITS = ReadLimits(max_bytes=20 * 1024 * 1024, max_pdf_pages=3, max_unzipped_bytes=2_000_000)
# what no reason may carry: a type name, a traceback's words, a path of the server, an ARN
INTERNAL = re.compile(r"Error\b|Exception|Traceback|<class|/tmp/|/home/|arn:aws|\d{12}|secret-key-9")


def _reason(data: bytes, name: str) -> str:
    with pytest.raises(BadInputError) as caught:
        list(read_document(data, name, name, "t", LIMITS, []))
    return reason_of(caught.value)


@pytest.mark.parametrize(("data", "name", "expected"), [
    (PNG, "photo.txt", "not a readable text file (binary content: a PNG image; 1 KB)"),
    (b"ab\x00cd" * 64, "log.txt", "not a readable text file (binary content: NUL bytes; 320 bytes)"),
    (b"", "empty.txt", "empty file"),
    (b"   \n\t\n", "blank.md", "no text in the file (text; 6 bytes)"),
    (b"%PDF-1.4 this is no PDF at all", "broken.pdf", "damaged PDF file (30 bytes)"),
    (pdf_bytes(["one", "two", "three", "four"]), "long.pdf", "too many pages: 4, the limit is 3"),
    (encrypted_pdf("a secret plan"), "locked.pdf", "encrypted PDF"),
    (zip_bytes({"word/document.xml": b"x" * 3_000_000}), "bomb.docx", "DOCX unpacks to 2.9 MB, the limit is 1.9 MB "
                                                                      "(a zip bomb?)"),
    (docx_bytes([]), "blank.docx", None),  # no text: its size varies with the builder
    (b"<html><body><script>x()</script></body></html>", "page.html", "no text in the file (HTML; 46 bytes)"),
])
def test_each_reader_s_refusal_is_a_reason_in_words(data, name, expected):
    why = _reason(data, name)
    assert is_vocabulary(why) and not INTERNAL.search(why) and name not in why
    if expected is not None:
        assert why == expected
    else:
        assert why.startswith("no text in the file (DOCX; ")


def test_sizes_read_as_a_person_reads_them():
    assert [human_size(n) for n in (1, 320, 1536, 25 * 1024 * 1024, 3 * 1024 ** 3)] == \
        ["1 byte", "320 bytes", "1.5 KB", "25 MB", "3 GB"]
    with pytest.raises(BadInputError) as caught:
        list(read_document(b"x" * 100, "big.txt", "big.txt", "t", ReadLimits(max_bytes=99), []))
    assert reason_of(caught.value) == "too large: 100 bytes, the limit is 99 bytes"
    from eragraph.domain.text import check_size

    with pytest.raises(BadInputError) as caught:
        check_size("huge.bin", 25 * 1024 * 1024, 20 * 1024 * 1024)
    assert reason_of(caught.value) == "too large: 25 MB, the limit is 20 MB"
    with pytest.raises(BadInputError) as caught:  # rounding alike: the exact bytes
        check_size("edge.bin", 20 * 1024 * 1024 + 1, 20 * 1024 * 1024)
    assert reason_of(caught.value) == "too large: 20971521 bytes, the limit is 20971520 bytes"


def test_an_unexpected_exception_is_the_internal_reason_never_its_text():
    exc = PermissionError("AccessDenied: arn:aws:iam::123456789012:role/eragraph-ingest at /tmp/x")
    assert reason_of(exc) == VOCABULARY["internal"]
    assert is_vocabulary(reason_of(BadInputError("/srv/store/blob: ValueError at line 3"))) 
    assert not INTERNAL.search(reason_of(BadInputError("/srv/store/blob: ValueError at line 3")))


@pytest.fixture
def served():
    engine = make_engine()
    pipeline = document_pipeline("memory", None, engine.settings, lambda _tenant: engine)
    pipeline.start([engine])
    yield engine, pipeline
    pipeline.close()


def test_statuses_from_the_pipeline_hold_words_and_the_logs_the_detail(served, monkeypatch, caplog):
    engine, pipeline = served
    embed = engine.embedder.embed

    def broken(texts):  # a fault deep inside the ingest, with internals in its text
        if any("lighthouse" in t for t in texts):
            raise RuntimeError("secret-key-9 at arn:aws:bedrock:us-east-1:123456789012:model/x in /home/ops/venv")
        return embed(texts)

    monkeypatch.setattr(engine.embedder, "embed", broken)
    accepted = uploads.submit(engine, pipeline, [
        uploads.Upload("img/photo.png", PNG),
        uploads.Upload("notes/light.md", b"The lighthouse keeper logged a storm over the reef. " * 5),
        uploads.Upload("empty.txt", b""),
    ])
    assert pipeline.wait_idle(60)
    reasons = {a["source"]: doc_status.read(engine, a["doc_id"])["reason"] for a in accepted}
    assert reasons == {"img/photo.png": "not a readable text file (binary content: a PNG image; 1 KB)",
                       "notes/light.md": VOCABULARY["internal"], "empty.txt": "empty file"}
    _, listed = doc_status.listing(engine, "")
    assert all(is_vocabulary(v["reason"]) and not INTERNAL.search(v["reason"]) for v in listed)
    logged = " ".join(f"{r.getMessage()} {r.__dict__.get('error', '')} {r.exc_text or ''}" for r in caplog.records)
    assert "secret-key-9" in logged and "a PNG image" in logged  # the detail is the log's


def test_a_reason_recorded_before_the_vocabulary_is_never_served():
    engine = make_engine()
    engine.graph.put_doc_status(DocStatus(doc_id="d1", source="a.txt", state="failed",
                                          reason="ingest error: ClientError: arn:aws:iam::123456789012:role/x"))
    view = doc_status.read(engine, "d1")
    assert view["reason"] == VOCABULARY["earlier"] and not INTERNAL.search(view["reason"])
