"""Document text out of a file's bytes, by the kind domain.filekind sniffed: PDF (pypdf), DOCX
(python-docx), HTML (lxml.html), CSV and other text (UTF-8). Each parser is imported when first
needed, and a missing one is a clear error naming the package to install.

Limits run before parsing and while it runs, each a setting (config.Settings) with a stated
default; exceeding one is a BadInputError naming the file and the limit:

- ``max_document_bytes`` (20 MiB): the byte size, checked by the callers before the body is read
  (stat, S3 ContentLength) and again here;
- ``max_pdf_pages`` (2000): a PDF's page count, read from its page tree before any page's text;
- ``max_unzipped_bytes`` (200 MiB): a DOCX's uncompressed size, summed from the ZIP directory
  before the archive is opened (a zip bomb is refused unread); then each entry is inflated in
  INFLATE_CHUNK pieces, never past the size its directory entry declares, into an archive of
  stored entries that the parser reads (a directory that lies about a size cannot make a read
  inflate more: a bomb declaring 2 KB is refused as damaged, its memory bounded);
- ``extract_seconds`` (120 s): the wall-clock budget of one extraction, checked between pages
  (PDF) and between paragraphs and tables (DOCX). One page that alone takes longer is not
  interrupted (pypdf cannot be): the budget bounds the rest."""

from __future__ import annotations

import io
import time
import zipfile
from collections.abc import Callable
from dataclasses import dataclass

from ..domain import filekind
from ..domain.model import BadInputError
from ..domain.refusals import human_size, refused, sizes
from ..domain.text import check_size, decode_document


# The third-party packages of the readers (import name -> PyPI name): the local install gets
# them from pyproject's dependencies, the ingest function from its DocsLayer.
PACKAGES = {"pypdf": "pypdf", "docx": "python-docx", "lxml": "lxml"}


@dataclass(frozen=True)
class ReadLimits:
    max_bytes: int = 20 * 1024 * 1024
    max_pdf_pages: int = 2000
    max_unzipped_bytes: int = 200 * 1024 * 1024
    extract_seconds: float = 120.0

    @classmethod
    def from_settings(cls, settings) -> ReadLimits:
        return cls(max_bytes=settings.max_document_bytes, max_pdf_pages=settings.max_pdf_pages,
                   max_unzipped_bytes=settings.max_unzipped_bytes, extract_seconds=settings.extract_seconds)


@dataclass(frozen=True)
class Extracted:
    kind: str
    text: str
    title: str = ""  # the file's own title (PDF/DOCX metadata, HTML <title>), "" when none
    # where each page's text begins in ``text``: (offset, page number) pairs (domain.places);
    # empty for a kind without pages (and a DOCX without page breaks)
    pages: tuple[tuple[int, int], ...] = ()


def _need(module: str, package: str, kind: str):
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise RuntimeError(f"reading {kind} files needs the {package!r} package "
                           f"(pip install {package}): {exc}") from None


class _Budget:
    def __init__(self, name: str, seconds: float, clock: Callable[[], float]) -> None:
        self.name, self.seconds, self.clock = name, seconds, clock
        self.start = clock()

    def check(self, where: str) -> None:
        spent = self.clock() - self.start
        if spent > self.seconds:
            raise refused(BadInputError(f"{self.name}: extraction took over the {self.seconds:g}-second limit "
                                        f"({spent:.1f} s, at {where})"), "too_slow", limit=f"{self.seconds:g}")


def _lines(text: str) -> str:
    lines = (" ".join(line.split()) for line in text.splitlines())
    return "\n".join(line for line in lines if line)


def _no_text(name: str, text: str, kind: str, size: int, why: str = "no text in file") -> str:
    if not text.strip():
        if kind == filekind.PDF:
            raise refused(BadInputError(f"{name}: {why}"), "no_text_layer", size=human_size(size))
        raise refused(BadInputError(f"{name}: {why}"), "no_text", kind=kind.upper(), size=human_size(size))
    return text


def pdf_text(data: bytes, name: str, limits: ReadLimits, clock: Callable[[], float] = time.monotonic) -> Extracted:
    """Pages' text joined by blank lines, with where each page's text begins; title from the
    PDF's metadata."""
    pypdf = _need("pypdf", "pypdf", "PDF")
    budget = _Budget(name, limits.extract_seconds, clock)
    try:
        reader = pypdf.PdfReader(io.BytesIO(data), strict=False)
        if reader.is_encrypted:
            try:
                opened = reader.decrypt("")  # an owner-password-only PDF opens with no password
            except (pypdf.errors.DependencyError, NotImplementedError) as exc:
                raise refused(BadInputError(f"{name}: encrypted PDF that cannot be decrypted here ({exc})"),
                              "encrypted_pdf") from None
            if not opened:
                raise refused(BadInputError(f"{name}: encrypted PDF (needs a password)"), "encrypted_pdf")
        pages = len(reader.pages)
    except BadInputError:
        raise
    except Exception as exc:  # pypdf raises many kinds on a damaged file
        raise refused(BadInputError(f"{name}: damaged PDF ({type(exc).__name__}: {exc})"), "damaged",
                      kind="PDF", size=human_size(len(data))) from None
    if pages > limits.max_pdf_pages:
        raise refused(BadInputError(f"{name}: {pages} pages is over the {limits.max_pdf_pages}-page limit"),
                      "too_many_pages", pages=pages, limit=limits.max_pdf_pages)
    if pages == 0:
        raise refused(BadInputError(f"{name}: PDF without pages"), "no_pages")
    parts = []
    for number in range(pages):
        budget.check(f"page {number + 1} of {pages}")
        try:
            parts.append(reader.pages[number].extract_text() or "")
        except Exception as exc:
            raise refused(BadInputError(f"{name}: damaged PDF page {number + 1} ({type(exc).__name__}: {exc})"),
                          "damaged", kind="PDF", size=human_size(len(data))) from None
    budget.check(f"the end of {pages} pages")
    text, starts = paged_text(parts)
    _no_text(name, text, filekind.PDF, len(data), "no text layer (scanned?)")
    try:
        title = (reader.metadata.title if reader.metadata else None) or ""
    except Exception:  # a damaged info dictionary: no title
        title = ""
    return Extracted(filekind.PDF, text, str(title).strip(), starts)


def paged_text(parts: list[str], sep: str = "\n\n") -> tuple[str, tuple[tuple[int, int], ...]]:
    """Pages' texts (page 1 first) joined by ``sep``, blank pages left out, and where each
    kept page begins in the result: (offset, page number)."""
    kept = [(n, p.strip()) for n, p in enumerate(parts, start=1) if p.strip()]
    starts, at = [], 0
    for n, page in kept:
        starts.append((at, n))
        at += len(page) + len(sep)
    return sep.join(page for _, page in kept), tuple(starts)


def unzipped_size(data: bytes) -> int:
    """The uncompressed size a ZIP's directory declares for all its entries (nothing is inflated)."""
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        return sum(info.file_size for info in archive.infolist())


INFLATE_CHUNK = 64 * 1024  # bytes inflated a read (zipfile's read(n) bounds the inflate to n)


def inflated(data: bytes, cap: int) -> bytes:
    """``data``, a ZIP, as an archive of stored (uncompressed) entries, each inflated in bounded
    pieces and never past its declared size (zipfile stops there and checks the CRC): at most
    ``cap`` bytes in all. Only stored and deflated entries (a DOCX's); ValueError otherwise,
    zipfile.BadZipFile for a damaged entry (a CRC that does not match)."""
    out, total = io.BytesIO(), 0
    with zipfile.ZipFile(io.BytesIO(data)) as source, zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as target:
        for info in source.infolist():
            if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
                raise ValueError(f"entry {info.filename[:80]!r} is compressed with method {info.compress_type}, "
                                 "not one a DOCX uses")
            pieces = []
            with source.open(info) as entry:
                while piece := entry.read(INFLATE_CHUNK):
                    total += len(piece)
                    if total > cap:
                        raise ValueError(f"the entries inflate past {cap} bytes")
                    pieces.append(piece)
            target.writestr(info.filename, b"".join(pieces))
    return out.getvalue()


def docx_text(data: bytes, name: str, limits: ReadLimits, clock: Callable[[], float] = time.monotonic) -> Extracted:
    """Paragraphs and tables (a row per line, cells joined by " | ") in document order; title
    from the core properties. Pages where the file marks them (docx_breaks): a line's page is
    the page its block begins on."""
    try:
        size = unzipped_size(data)
    except (zipfile.BadZipFile, ValueError, EOFError) as exc:
        raise refused(BadInputError(f"{name}: damaged DOCX ({exc})"), "damaged", kind="DOCX",
                      size=human_size(len(data))) from None
    if size > limits.max_unzipped_bytes:
        unpacked, limit = sizes(size, limits.max_unzipped_bytes)
        raise refused(BadInputError(f"{name}: DOCX unpacks to {size} bytes, over the "
                                    f"{limits.max_unzipped_bytes}-byte limit (a zip bomb?)"),
                      "unzips_too_large", size=unpacked, limit=limit)
    docx = _need("docx", "python-docx", "DOCX")
    from docx.table import Table

    budget = _Budget(name, limits.extract_seconds, clock)
    try:
        document = docx.Document(io.BytesIO(inflated(data, limits.max_unzipped_bytes)))
        lines: list[str] = []
        rendered = bool(document.element.body.xpath(".//w:lastRenderedPageBreak"))
        page, line_pages = 1, []  # the page each line begins on
        for n, block in enumerate(document.iter_inner_content()):
            if n % 64 == 0:
                budget.check(f"block {n}")
            before, after = docx_breaks(block._element, rendered)
            page += before
            first = len(lines)
            if isinstance(block, Table):
                for row in block.rows:
                    cells = [" ".join(c.text.split()) for c in row.cells]
                    cells = [c for i, c in enumerate(cells) if c and (i == 0 or c != cells[i - 1])]  # merged cells repeat
                    if cells:
                        lines.append(" | ".join(cells))
            else:
                line = " ".join(block.text.split())
                if line:
                    lines.append(line)
            line_pages += [page] * (len(lines) - first)
            page += after
        title = document.core_properties.title or ""
    except BadInputError:
        raise
    except Exception as exc:
        raise refused(BadInputError(f"{name}: damaged DOCX ({type(exc).__name__}: {exc})"), "damaged",
                      kind="DOCX", size=human_size(len(data))) from None
    text = _no_text(name, "\n".join(lines), filekind.DOCX, len(data))
    starts, at = [], 0
    for line, number in zip(lines, line_pages):
        if not starts or number > starts[-1][1]:
            starts.append((at, number))
        at += len(line) + 1
    paged = page > 1  # a file that marks no page break: no pages (its pagination is the reader's)
    return Extracted(filekind.DOCX, text, title.strip(), tuple(starts) if paged else ())


_W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"


def docx_breaks(element, rendered: bool) -> tuple[int, int]:
    """The page breaks a DOCX block marks (a paragraph's or a table's XML element): (those before
    its first text, those after). ``rendered``: the file carries the page breaks Word rendered
    when it last saved it (``w:lastRenderedPageBreak``), which count every page; else the
    hard ones (``w:br w:type="page"``, ``w:pageBreakBefore``) are all the file knows."""
    before = after = 0
    seen_text = False
    for el in element.iter():
        tag = el.tag
        if tag == f"{_W}t" and (el.text or "").strip():
            seen_text = True
            continue
        if rendered:
            hit = tag == f"{_W}lastRenderedPageBreak"
        else:
            hit = (tag == f"{_W}br" and el.get(f"{_W}type") == "page") or (
                tag == f"{_W}pageBreakBefore" and el.get(f"{_W}val", "true") not in ("0", "false", "off"))
        if hit:
            if seen_text:
                after += 1
            else:
                before += 1
    return before, after


_DROP = ("script", "style", "nav", "noscript", "template", "iframe", "svg", "head")
_BLOCK = ("p", "div", "br", "li", "dt", "dd", "tr", "td", "th", "h1", "h2", "h3", "h4", "h5", "h6",
          "section", "article", "main", "aside", "header", "footer", "pre", "blockquote", "table",
          "ul", "ol", "dl", "figure", "figcaption", "caption", "hr", "address", "form", "fieldset", "title")


def html_text(text: str, name: str = "page.html") -> Extracted:
    """Visible text of an HTML page through lxml.html: script, style, nav and head dropped,
    each block (headings, paragraphs, list items, table rows...) a line; title from <title>."""
    lxml_html = _need("lxml.html", "lxml", "HTML")
    try:
        root = lxml_html.document_fromstring(text.encode("utf-8"),
                                             parser=lxml_html.HTMLParser(encoding="utf-8", remove_comments=True))
    except Exception as exc:  # lxml's ParserError on a document with no elements
        raise refused(BadInputError(f"{name}: HTML without content ({exc})"), "no_text", kind="HTML",
                      size=human_size(len(text.encode("utf-8")))) from None
    title = " ".join((root.findtext(".//title") or "").split())
    for element in list(root.iter(*_DROP)):
        if element.getparent() is not None:
            element.drop_tree()
    for element in root.iter(*_BLOCK):
        element.tail = "\n" + (element.tail or "")
        element.text = "\n" + (element.text or "")
    body = _lines(root.text_content())
    return Extracted(filekind.HTML, _no_text(name, body, filekind.HTML, len(text.encode("utf-8"))), title)


def extract(data: bytes, name: str, limits: ReadLimits = ReadLimits(), kind: str | None = None,
            clock: Callable[[], float] = time.monotonic) -> Extracted:
    """The text of one file's bytes (``kind`` as sniffed, or sniffed here). A CSV is one text
    document here; services.sources reads its rows as documents when a column mapping is set."""
    check_size(name, len(data), limits.max_bytes)
    kind = kind or filekind.kind_of(data, name)
    if kind == filekind.PDF:
        return pdf_text(data, name, limits, clock)
    if kind == filekind.DOCX:
        return docx_text(data, name, limits, clock)
    text = decode_document(data, name, max_bytes=limits.max_bytes)
    if kind == filekind.HTML:
        return html_text(text, name)
    return Extracted(kind, text)
