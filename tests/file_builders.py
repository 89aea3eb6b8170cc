"""Real files of each kind, built in the test (no committed binaries): PDFs with fpdf2 (plain,
all-ASCII, image-only, encrypted with pypdf), DOCX with python-docx, a ZIP that is not a DOCX."""

from __future__ import annotations

import io
import zipfile


def pdf_bytes(pages: list[str], title: str = "", ascii_only: bool = False, compress: bool = True) -> bytes:
    from fpdf import FPDF

    pdf = FPDF()
    pdf.set_compression(compress and not ascii_only)
    if title:
        pdf.set_title(title)
    pdf.set_font("Helvetica", size=11)
    for text in pages:
        pdf.add_page()
        if text:
            pdf.multi_cell(0, 6, text)
        else:
            pdf.rect(20, 20, 100, 60, style="F")  # a page with no text: as a scan's image
    data = bytes(pdf.output())
    if ascii_only:  # fpdf2's second line is a binary comment; same-length ASCII keeps the xref
        head, rest = data.split(b"\n", 1)
        comment, tail = rest.split(b"\n", 1)
        data = head + b"\n%" + b"a" * (len(comment) - 1) + b"\n" + tail
        assert data.isascii()
    return data


def encrypted_pdf(text: str, password: str = "secret") -> bytes:
    import pypdf

    writer = pypdf.PdfWriter(clone_from=pypdf.PdfReader(io.BytesIO(pdf_bytes([text]))))
    writer.encrypt(password, algorithm="AES-128")
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def docx_bytes(paragraphs: list[str], table: list[list[str]] | None = None, title: str = "",
               after_table: list[str] = ()) -> bytes:
    import docx

    document = docx.Document()
    if title:
        document.core_properties.title = title
    for p in paragraphs:
        document.add_paragraph(p)
    if table:
        grid = document.add_table(rows=len(table), cols=len(table[0]))
        for r, row in enumerate(table):
            for c, cell in enumerate(row):
                grid.cell(r, c).text = cell
    for p in after_table:
        document.add_paragraph(p)
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def zip_bytes(entries: dict[str, bytes]) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name, data in entries.items():
            archive.writestr(name, data)
    return out.getvalue()
