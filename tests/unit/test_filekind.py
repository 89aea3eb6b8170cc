"""The content sniffer: a file's kind from its bytes; a name only chooses among text kinds."""

from __future__ import annotations

import random

import pytest
from file_builders import docx_bytes, pdf_bytes, zip_bytes

from eragraph.domain.filekind import Sniffed, kind_of, sniff
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


def test_a_pdf_header_after_a_bom_or_blank_space_is_a_pdf_without_its_trailer():
    truncated = b"%PDF-1.4\n1 0 obj\n<< /Type /Catalog >>\nendobj\n"  # cut before %%EOF
    for data in (truncated, b"\xef\xbb\xbf" + truncated, b"\n \t" + truncated):
        assert sniff(data, "part.bin").kind == "pdf"


def test_every_refused_zip_says_what_it_is_and_a_docx_is_not_refused():
    assert sniff(docx_bytes(["A paragraph."]), "letter.docx") == Sniffed("docx")
    for entries, reason in (
            ({"xl/workbook.xml": b"<x/>"}, "an XLSX workbook (not supported: export it as CSV)"),
            ({"ppt/presentation.xml": b"<x/>"}, "a PPTX presentation (not supported)"),
            ({"mimetype": b"application/vnd.oasis.opendocument.text", "content.xml": b"<x/>"},
             "an OpenDocument file (not supported: save it as DOCX)"),
            ({"content.xml": b"<x/>"}, "a ZIP archive that is not a DOCX"),
            ({"mimetype": b"text/plain"}, "a ZIP archive that is not a DOCX"),
            ({"notes.txt": b"hi"}, "a ZIP archive that is not a DOCX")):
        assert sniff(zip_bytes(entries), "file.docx") == Sniffed("", reason)
    assert sniff(b"PK\x03\x04" + b"\x00" * 40, "broken.docx") == Sniffed("", "a damaged ZIP archive")


def test_binary_reasons_in_full_and_the_empty_file():
    assert sniff(b"a text with one \x00 in it", "a.txt") == Sniffed("", "binary data (NUL bytes)")
    assert sniff(bytes(range(1, 32)) * 20, "a.txt") == Sniffed("", "binary data (control bytes)")
    assert sniff(b"ab\x80" * 100, "a.txt") == Sniffed("", "binary data (not text in any encoding read here)")
    assert sniff(b"") == Sniffed("", "empty file")
    with pytest.raises(BadInputError) as info:
        kind_of(b"", "a.txt")
    assert str(info.value) == "a.txt: empty file"


def test_up_to_one_control_byte_in_ten_is_text():
    """Form feeds, escape codes and the like appear in logs and terminal captures."""
    assert sniff(b"\x01" * 10 + b"x" * 90, "log.txt").kind == "text"
    assert sniff(b"\x01" * 11 + b"x" * 89, "log.txt").reason == "binary data (control bytes)"


def test_up_to_three_bytes_in_ten_outside_ascii_and_not_utf8_is_text():
    """Latin-1 text (the decoder then says why it is not UTF-8) against binary data; every byte
    from 0x80 up counts."""
    latin1 = "café ".encode("latin-1") * 200  # one byte in five
    assert sniff(latin1, "fr.txt").kind == "text"
    assert sniff(b"\xe9" * 30 + b"x" * 70, "a.txt").kind == "text"
    assert sniff(b"\xe9" * 31 + b"x" * 69, "a.txt").reason == "binary data (not text in any encoding read here)"


def test_utf8_text_cut_inside_its_last_character_is_text_and_a_bad_byte_before_is_not():
    """The sniffer sees the first 8 KiB, which may end inside a character of up to 4 bytes."""
    cjk = "日本語のテキスト".encode() * 400  # 3 bytes a character, every byte non-ASCII
    assert sniff(cjk[:8192], "ja.txt").kind == "text"  # cut after 2 of 3 bytes
    emoji = b"x" + "😀".encode() * 2047 + "😀".encode()[:3]  # 8,192 bytes, the last 3 of 4 bytes
    assert len(emoji) == 8192 and sniff(emoji, "e.txt").kind == "text"
    stray = "😀".encode() * 100 + b"\xff" + b"abc"  # a bad byte 4 bytes before the end
    assert sniff(stray, "e.txt").reason == "binary data (not text in any encoding read here)"


def test_the_name_s_last_suffix_chooses_the_text_kind():
    assert kind_of(b"id,text\n1,hello\n", "rows.2024.csv") == "csv"
    assert kind_of(b"id,text\n1,hello\n", "exports.v2/rows") == "text"
