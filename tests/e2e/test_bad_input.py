"""Bad input at the service level: each unreadable file gets a clear message naming it, the
rest of the batch is ingested, and nothing already stored is lost."""

from __future__ import annotations

import json

import pytest

from support import load_sources, make_engine, synthetic_docs
from eragraph.domain.model import BadInputError
from eragraph.domain.text import decode_document
from eragraph.services import invariants
from eragraph.services.ingest import ingest
from eragraph.services.resummarize import drain

GOOD = "The comet passed the planet. Astronomers watched it through a telescope."


@pytest.mark.parametrize("data,reason", [
    (b"", "empty file"),
    (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", "binary file"),
    (b"na\xefve caf\xe9", "not valid UTF-8"),
    (b"a" * 2048, "over the 1024-byte limit"),
    (b"  \n\n \t", "no text"),
])
def test_decode_document_says_why(data, reason):
    with pytest.raises(BadInputError) as info:
        decode_document(data, "input.txt", max_bytes=1024)
    assert str(info.value).startswith("input.txt: ")
    assert reason in str(info.value)


def test_bad_files_reported_rest_ingested_nothing_lost(tmp_path):
    engine = make_engine()
    ingest(engine, synthetic_docs(30))
    drain(engine)
    before = {d.doc_id for d in engine.graph.list_documents()}

    folder = tmp_path / "batch"
    folder.mkdir()
    (folder / "empty.txt").write_bytes(b"")
    (folder / "binary.txt").write_bytes(b"GIF89a\x00\x01\x02\x03" * 10)
    (folder / "latin1.md").write_bytes("Café au lait, crème brûlée.".encode("latin-1"))
    (folder / "huge.txt").write_bytes(b"word " * 400)
    (folder / "picture.png").write_bytes(b"\x89PNG")
    (folder / "good.txt").write_text(GOOD, encoding="utf-8")
    (folder / "page.html").write_text("<html><script>bad()</script><p>Orbit of the moon.</p></html>",
                                      encoding="utf-8")
    (folder / "corpus.jsonl").write_text(
        json.dumps({"id": "j1", "title": "J1", "text": "Recipe with flour and butter."}) + "\n"
        + "{not json\n"
        + json.dumps({"id": "j2", "text": ""}) + "\n"
        + json.dumps({"id": "j3", "title": "J3", "text": "A striker scored a penalty goal."}) + "\n",
        encoding="utf-8")

    docs, errors, _raw = load_sources([folder, tmp_path / "missing.txt"], max_bytes=1000)
    by_source = {e["source"].rsplit("/", 1)[-1]: e["error"] for e in errors}
    assert by_source["empty.txt"] == "empty file"
    assert "binary" in by_source["binary.txt"]
    assert "UTF-8" in by_source["latin1.md"]
    assert "limit" in by_source["huge.txt"]
    assert "unsupported" in by_source["picture.png"]
    assert "not JSON" in by_source["corpus.jsonl:2"]
    assert "text" in by_source["corpus.jsonl:3"]
    assert "no such file" in by_source["missing.txt"]
    assert len(errors) == 8

    report = ingest(engine, docs)
    drain(engine)
    assert report.documents_added == 4  # good.txt, page.html, j1, j3
    after = {d.doc_id for d in engine.graph.list_documents()}
    assert before <= after and {"j1", "j3"} <= after and len(after) == len(before) + 4
    page = next(d for d in engine.graph.list_documents() if d.source.endswith("page.html"))
    page_text = " ".join(n.text for n in engine.graph.get_nodes(page.chunk_ids).values())
    assert page_text == "Orbit of the moon." and "bad()" not in page_text
    assert invariants.check(engine).ok
