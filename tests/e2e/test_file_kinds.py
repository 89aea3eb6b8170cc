"""Every file kind through the readers (services.sources: the CLI's path; the S3 handler reads
through the same read_document) into a store: a real PDF and DOCX built by the test, an HTML
page, CSV rows with a column mapping, and the refusals (a ZIP that is not a DOCX, random
binary, an encrypted PDF, a PDF without a text layer, each limit), each one error entry while
the rest of the batch is ingested."""

from __future__ import annotations

import itertools
import random

import pytest
from file_builders import docx_bytes, encrypted_pdf, pdf_bytes, zip_bytes
from support import load_sources, make_engine

from eragraph.cli.app import main
from eragraph.domain.model import BadInputError
from eragraph.providers.extractors import ReadLimits, extract
from eragraph.services import invariants
from eragraph.services.ingest import ingest
from eragraph.services.resummarize import drain
from eragraph.services.sources import CsvMapping

PAGE1 = "The comet passed the planet Jupiter. Astronomers at Kepler Observatory watched it."
PAGE2 = "A second page describes the telescope mirror and its polishing."


def doc_text(engine, source_end: str) -> tuple[str, str]:
    doc = next(d for d in engine.graph.list_documents() if d.source.endswith(source_end))
    return doc.title, " ".join(n.text for n in engine.graph.get_nodes(doc.chunk_ids).values())


def test_each_kind_read_by_content_and_the_bad_ones_refused_with_one_reason(tmp_path):
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "report.pdf").write_bytes(pdf_bytes([PAGE1, PAGE2], title="Comet Report"))
    (folder / "ascii-pdf.txt").write_bytes(pdf_bytes([PAGE1], ascii_only=True))  # named as text: read as PDF
    (folder / "letter.docx").write_bytes(docx_bytes(
        ["Dear committee,", "The bridge over the Vltava reopened in May."],
        table=[["City", "River"], ["Prague", "Vltava"]], after_table=["Yours, Ada"]))
    (folder / "page.html").write_text(
        "<!DOCTYPE html><html><head><title>Harbour news</title><style>p{}</style></head><body>"
        "<nav><a href='/'>Home</a> | <a href='/x'>Archive</a></nav><h1>Ferries</h1>"
        "<p>The ferry to Hel runs <b>twice</b> a day.</p><script>track()</script></body></html>", encoding="utf-8")
    (folder / "notes.md").write_text("# Notes\n\nGlaciers retreat every summer.", encoding="utf-8")
    (folder / "archive.zip").write_bytes(zip_bytes({"a.txt": b"hello"}))
    (folder / "fake.docx").write_bytes(zip_bytes({"a.txt": b"hello"}))
    (folder / "noise.txt").write_bytes(random.Random(7).randbytes(5000))
    (folder / "locked.pdf").write_bytes(encrypted_pdf(PAGE1))
    (folder / "scan.pdf").write_bytes(pdf_bytes([""]))
    (folder / "torn.pdf").write_bytes(pdf_bytes([PAGE1])[:300])

    docs, errors, _ = load_sources([folder])
    why = {e["source"].rsplit("/", 1)[-1]: e["error"] for e in errors}
    assert why == {
        "archive.zip": "unsupported binary file: a ZIP archive that is not a DOCX",
        "fake.docx": "unsupported binary file: a ZIP archive that is not a DOCX",
        "noise.txt": why["noise.txt"],
        "locked.pdf": "encrypted PDF (needs a password)",
        "scan.pdf": "no text layer (scanned?)",
        "torn.pdf": why["torn.pdf"],
    }
    assert why["noise.txt"].startswith("unsupported binary file: binary data")
    assert why["torn.pdf"].startswith("damaged PDF") or why["torn.pdf"] == "no text layer (scanned?)"

    engine = make_engine()
    report = ingest(engine, docs)
    drain(engine)
    assert report.documents_added == 5 and not report.errors
    title, text = doc_text(engine, "report.pdf")
    assert title == "Comet Report" and "Kepler Observatory" in text and "telescope mirror" in text
    title, text = doc_text(engine, "ascii-pdf.txt")
    assert title == "ascii-pdf" and "Kepler Observatory" in text and "endobj" not in text and "/Type" not in text
    title, text = doc_text(engine, "letter.docx")
    assert title == "letter" and "Vltava reopened" in text and "Prague | Vltava" in text
    assert text.index("Dear committee") < text.index("Prague | Vltava") < text.index("Yours, Ada")  # in order
    title, text = doc_text(engine, "page.html")
    assert title == "Harbour news" and "ferry to Hel runs twice a day" in text and "Ferries" in text
    assert "Home" not in text and "track" not in text
    assert invariants.check(engine).ok


def test_docx_title_and_paragraph_lines_from_extract():
    got = extract(docx_bytes(["One.", "Two."], title="Minutes"), "m.docx")
    assert (got.kind, got.title, got.text) == ("docx", "Minutes", "One.\nTwo.")


def test_limits_run_before_parsing():
    pdf = pdf_bytes([PAGE1, PAGE2, PAGE1])
    with pytest.raises(BadInputError, match="3 pages is over the 2-page limit"):
        extract(pdf, "long.pdf", ReadLimits(max_pdf_pages=2))
    bomb = docx_bytes(["Small visible text."])
    import io
    import zipfile
    buf = io.BytesIO(bomb)
    with zipfile.ZipFile(buf, "a", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("word/media/padding.bin", b"\x00" * (8 << 20))  # 8 MiB of zeros, ~8 KB packed
    bomb = buf.getvalue()
    assert len(bomb) < 100_000
    with pytest.raises(BadInputError, match="unpacks to .* over the 4194304-byte limit"):
        extract(bomb, "bomb.docx", ReadLimits(max_unzipped_bytes=4 << 20))
    with pytest.raises(BadInputError, match="over the 1000-byte limit"):
        extract(pdf, "big.pdf", ReadLimits(max_bytes=1000))
    ticks = itertools.count(0.0, 0.6)  # each page "takes" 0.6 s against a 1-second budget
    with pytest.raises(BadInputError, match=r"over the 1-second limit .*page 2 of 3"):
        extract(pdf, "slow.pdf", ReadLimits(extract_seconds=1.0), clock=lambda: next(ticks))


def test_a_file_over_the_size_limit_is_refused_before_it_is_read(tmp_path, monkeypatch):
    big = tmp_path / "big.txt"
    big.write_text("word " * 1000, encoding="utf-8")
    from pathlib import Path
    read = Path.read_bytes
    monkeypatch.setattr(Path, "read_bytes", lambda self: pytest.fail(f"{self} was read") if self == big else read(self))
    docs, errors, _ = load_sources([big], max_bytes=100)
    assert docs == [] and errors == [{"source": str(big), "error": "5000 bytes is over the 100-byte limit"}]


CSV = ("id,headline,body,extra\n"
       "r1,Flood,\"The river rose, and the town of Ulm closed its bridges.\",x\n"
       "r2,Drought,,y\n"
       "r3,Harvest,\"Farmers near Lyon reported a record grape harvest.\",z\n")


def test_csv_rows_as_documents_with_a_mapping_else_one_text_document(tmp_path):
    path = tmp_path / "news.csv"
    path.write_text(CSV, encoding="utf-8")
    docs, errors, _ = load_sources([path], csv_mapping=CsvMapping(text="body", id="id", title="headline"))
    assert [(d.doc_id, d.title) for d in docs] == [("r1", "Flood"), ("r3", "Harvest")]
    assert docs[0].text == "Flood\n\nThe river rose, and the town of Ulm closed its bridges."
    assert errors == [{"source": f"{path}:3", "error": "row 2 has no text in column 'body'"}]
    docs, errors, _ = load_sources([path], csv_mapping=CsvMapping(text="content"))
    assert docs == [] and "no column 'content' in the CSV header (columns: id, headline, body, extra)" in errors[0]["error"]
    docs, errors, _ = load_sources([path])
    assert len(docs) == 1 and docs[0].text == CSV and not errors


def test_cli_csv_flags_and_settings(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("ERAGRAPH_EMBEDDER", "hash")
    monkeypatch.setenv("ERAGRAPH_CSV_TITLE_COLUMN", "headline")
    path = tmp_path / "news.csv"
    path.write_text(CSV, encoding="utf-8")
    store = tmp_path / "store"
    assert main(["ingest", str(path), "--store", str(store), "--csv-text", "body", "--csv-id", "id",
                 "--json", "--quiet"]) == 3  # partial: one row skipped
    capsys.readouterr()
    main(["stats", "--store", str(store), "--json"])
    import json
    assert json.loads(capsys.readouterr().out)["documents"] == 2
    assert main(["ingest", str(path), "--store", str(store), "--csv-id", "id", "--quiet"]) == 2  # no text column
    assert "needs the text column" in capsys.readouterr().err
