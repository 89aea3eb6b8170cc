"""The content sniffer: a file's kind from its bytes; a name only chooses among text kinds."""

from __future__ import annotations

import random

import pytest
from file_builders import docx_bytes, pdf_bytes, zip_bytes

from eragraph.domain.filekind import kind_of, sniff
from eragraph.domain.model import BadInputError


@pytest.mark.parametrize("name", ["report.pdf", "report.txt", "report.csv", "report", "notes.md"])
def test_a_pdf_is_a_pdf_whatever_its_name_and_an_ascii_one_too(name):
    assert sniff(pdf_bytes(["Hello"]), name).kind == "pdf"
    ascii_pdf = pdf_bytes(["Hello"], ascii_only=True)
    assert ascii_pdf.isascii() and sniff(ascii_pdf, name).kind == "pdf"


def test_a_text_that_mentions_the_pdf_header_stays_text_and_a_pdf_after_junk_is_a_pdf():
    assert sniff(b"# Notes\n\nA PDF starts with `%PDF-1.7` and a binary comment.\n", "notes.md").kind == "text"
    assert sniff(b"junk before the header\n" + pdf_bytes(["Hello"]), "mail-part").kind == "pdf"


def test_docx_by_its_zip_directory_and_other_zips_refused_with_what_they_are():
    assert sniff(docx_bytes(["A paragraph."]), "letter.bin").kind == "docx"
    for entries, what in (({"notes.txt": b"hi"}, "a ZIP archive that is not a DOCX"),
                          ({"xl/workbook.xml": b"<x/>"}, "XLSX"),
                          ({"ppt/presentation.xml": b"<x/>"}, "PPTX")):
        found = sniff(zip_bytes(entries), "file.docx")
        assert found.kind == "" and what in found.reason
    assert sniff(b"PK\x03\x04" + b"\x00" * 40, "broken.docx").reason == "a damaged ZIP archive"


@pytest.mark.parametrize("data,what", [
    (b"\x89PNG\r\n\x1a\n" + bytes(range(256)), "a PNG image"),
    (b"\xff\xd8\xff\xe0" + bytes(64), "a JPEG image"),
    (b"\x1f\x8b\x08\x00" + bytes(32), "a gzip archive"),
    (b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + bytes(32), "legacy Office"),
    (random.Random(1).randbytes(4096).replace(b"\x00", b"\x01"), "binary data"),
    (bytes(range(1, 32)) * 20, "binary data (control bytes)"),
])
def test_other_binary_is_refused_with_one_reason_even_named_as_text(data, what):
    for name in ("data.txt", "data.csv", "data.html", "data"):
        found = sniff(data, name)
        assert found.kind == "" and what in found.reason
        with pytest.raises(BadInputError, match=f"^{name}: unsupported binary file: "):
            kind_of(data, name)


def test_text_kinds_by_markup_or_name():
    assert sniff(b"<!DOCTYPE html>\n<html><body><p>x</p></body></html>", "page.txt").kind == "html"
    assert sniff(b"\xef\xbb\xbf  <!-- saved --> <HTML lang=en><p>x</p>", "page").kind == "html"
    assert sniff(b"<p>a fragment</p>", "page.htm").kind == "html"
    assert sniff(b"# Title\n\nSome <b>markdown</b> with a tag.", "notes.md").kind == "text"
    assert sniff(b"id,text\n1,hello\n", "rows.csv").kind == "csv"
    assert sniff(b"id,text\n1,hello\n", "rows.txt").kind == "text"
    assert sniff('{"text": "x"}\n'.encode(), "c.jsonl").kind == "jsonl"
    assert sniff("caf\u00e9 au lait".encode("latin-1"), "latin1.txt").kind == "text"  # decoding says why
    assert sniff(b"", "empty.txt").reason == "empty file"
