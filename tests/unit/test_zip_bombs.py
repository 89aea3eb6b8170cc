"""A DOCX whose ZIP directory lies about its document's size: ``word/document.xml`` declares
2 KB and inflates to 128 MiB. The directory's sum passes the 200 MiB check, so the entries are
inflated in bounded pieces, never past what each declares: the file is refused as damaged, and
the extraction's peak memory stays a few MiB (reading it whole inflated everything first)."""

from __future__ import annotations

import io
import struct
import tracemalloc
import zipfile

import pytest
from file_builders import docx_bytes

from eragraph.domain.model import BadInputError
from eragraph.providers.extractors import ReadLimits, extract, inflated

INFLATES_TO = 128 * 1024 * 1024
DECLARED = 2048


def lying_docx() -> bytes:
    """A real DOCX whose document.xml is a valid start followed by 128 MiB of spaces (deflated to
    about 128 KB), its declared uncompressed size patched to 2 KB in both headers."""
    honest = zipfile.ZipFile(io.BytesIO(docx_bytes(["The ferry log."])))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        for info in honest.infolist():
            if info.filename != "word/document.xml":
                archive.writestr(info.filename, honest.read(info))
                continue
            start = honest.read(info)
            with archive.open("word/document.xml", "w", force_zip64=False) as entry:
                entry.write(start)
                block = b" " * (1 << 20)
                for _ in range(INFLATES_TO >> 20):
                    entry.write(block)
    data = bytearray(out.getvalue())
    name = b"word/document.xml"
    central = data.find(b"PK\x01\x02")
    while central != -1:  # patch the central directory's and the local header's uncompressed size
        length = struct.unpack_from("<H", data, central + 28)[0]
        if bytes(data[central + 46:central + 46 + length]) == name:
            struct.pack_into("<I", data, central + 24, DECLARED)
            local = struct.unpack_from("<I", data, central + 42)[0]
            struct.pack_into("<I", data, local + 22, DECLARED)
        central = data.find(b"PK\x01\x02", central + 4)
    return bytes(data)


def test_a_lying_zip_directory_is_refused_with_bounded_memory():
    data = lying_docx()
    assert len(data) < 2 * 1024 * 1024
    with zipfile.ZipFile(io.BytesIO(data)) as archive:  # the lie: the directory says 2 KB
        assert archive.getinfo("word/document.xml").file_size == DECLARED
    tracemalloc.start()
    try:
        with pytest.raises(BadInputError, match="damaged DOCX"):
            extract(data, "bomb.docx", ReadLimits())
        _now, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 16 * 1024 * 1024, f"peak {peak / 2**20:.0f} MiB"


def test_an_honest_docx_reads_as_before():
    data = docx_bytes(["The harbour master keeps the ferry log."], table=[["a", "b"]], title="Log")
    got = extract(data, "log.docx", ReadLimits())
    assert "ferry log" in got.text and "a | b" in got.text and got.title == "Log"


def test_entries_past_the_cap_and_other_compressions_are_refused():
    data = docx_bytes(["x " * 5000])
    with pytest.raises(ValueError, match="inflate past"):
        inflated(data, 4096)
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_BZIP2) as archive:
        archive.writestr("word/document.xml", b"<w/>" * 100)
    with pytest.raises(ValueError, match="method 12"):
        inflated(out.getvalue(), 1 << 20)
