"""What a file is, from its bytes: one content sniffer for every reader (the CLI's files and
folders, the S3 ingest handler). No I/O: bytes (and a name) in, a kind or a BadInputError out.

Kinds: ``pdf`` (``%PDF-`` magic, whatever the bytes after it look like: an all-ASCII PDF is a
PDF), ``docx`` (a ZIP whose directory holds ``word/document.xml``), ``html`` (markup near the
start, or an .htm/.html name), ``csv`` (a .csv/.tsv name), ``jsonl`` (a .jsonl name) and
``text`` (UTF-8: Markdown, plain text, anything else readable). A name may choose among the
text kinds, never turn binary data into text. Any other binary is refused with one reason that
says what it looks like."""

from __future__ import annotations

import io
import re
import zipfile
from dataclasses import dataclass

from .model import BadInputError
from .refusals import human_size, refused

PDF, DOCX, HTML, CSV, JSONL, TEXT = "pdf", "docx", "html", "csv", "jsonl", "text"

_TEXT_BY_SUFFIX = {".htm": HTML, ".html": HTML, ".xhtml": HTML, ".csv": CSV, ".tsv": CSV, ".jsonl": JSONL}

# magic numbers of common binary formats, for the refusal's wording
_MAGIC = (
    (b"\x89PNG", "a PNG image"),
    (b"\xff\xd8\xff", "a JPEG image"),
    (b"GIF87a", "a GIF image"),
    (b"GIF89a", "a GIF image"),
    (b"II*\x00", "a TIFF image"),
    (b"MM\x00*", "a TIFF image"),
    (b"\x1f\x8b", "a gzip archive"),
    (b"BZh", "a bzip2 archive"),
    (b"\xfd7zXZ\x00", "an xz archive"),
    (b"7z\xbc\xaf\x27\x1c", "a 7-Zip archive"),
    (b"Rar!\x1a\x07", "a RAR archive"),
    (b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1", "a legacy Office (OLE2) file such as .doc or .xls (save it as DOCX)"),
    (b"\x7fELF", "an ELF executable"),
    (b"MZ", "a Windows executable"),
    (b"SQLite format 3\x00", "an SQLite database"),
    (b"ID3", "an MP3 audio file"),
    (b"OggS", "an Ogg media file"),
    (b"fLaC", "a FLAC audio file"),
    (b"%!PS", "a PostScript file"),
    (b"{\\rtf", "an RTF document (save it as DOCX)"),
)
_ZIP_MAGIC = (b"PK\x03\x04", b"PK\x05\x06", b"PK\x07\x08")
_HTML_START = re.compile(rb"^(?:\s|<!--.*?-->|<\?xml[^>]*>)*<(?:!doctype\s+html|html|head|body)[\s>/]",
                         re.IGNORECASE | re.DOTALL)
_SNIFF_BYTES = 8192
_CONTROL = [bytes([c]) for c in range(32) if c not in (9, 10, 12, 13, 27)]  # text has few of these


_PDF_HEADER = re.compile(rb"%PDF-\d\.\d")


def _is_pdf(data: bytes) -> bool:
    """A PDF header first (after a BOM or blank space), or, as readers tolerate, after other
    bytes within the first 1 KiB when the file also ends like a PDF (``%%EOF``): a text that
    merely mentions the header is not a PDF. Whatever follows: an all-ASCII PDF is a PDF."""
    start = data[:1024].removeprefix(b"\xef\xbb\xbf").lstrip()
    if _PDF_HEADER.match(start):
        return True
    return bool(_PDF_HEADER.search(data[:1024])) and b"%%EOF" in data[-1024:]


def _zip_kind(data: bytes) -> tuple[str, str]:
    """(kind, reason) of a ZIP: ("docx", "") or ("", why it is refused)."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            names = set(archive.namelist())
    except (zipfile.BadZipFile, zipfile.LargeZipFile, ValueError, EOFError):
        return "", "a damaged ZIP archive"
    if "word/document.xml" in names:
        return DOCX, ""
    if "xl/workbook.xml" in names:
        return "", "an XLSX workbook (not supported: export it as CSV)"
    if "ppt/presentation.xml" in names:
        return "", "a PPTX presentation (not supported)"
    if "content.xml" in names and "mimetype" in names:
        return "", "an OpenDocument file (not supported: save it as DOCX)"
    return "", "a ZIP archive that is not a DOCX"


def binary_reason(head: bytes) -> str | None:
    """What a file's first bytes look like when they are binary data that no reader takes, or
    None when they may be text or a readable kind."""
    for magic, what in _MAGIC:
        if head.startswith(magic):
            return what
    head = head[:_SNIFF_BYTES]
    if b"\x00" in head:
        return "binary data (NUL bytes)"
    if head and sum(head.count(c) for c in _CONTROL) > len(head) // 10:
        return "binary data (control bytes)"
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as exc:
        high = sum(1 for b in head if b >= 0x80)
        if exc.start < len(head) - 3 and high > len(head) * 3 // 10:  # not a cut-off character
            return "binary data (not text in any encoding read here)"
    return None


@dataclass(frozen=True)
class Sniffed:
    kind: str
    reason: str = ""  # why the bytes are refused, when kind is ""


def sniff(data: bytes, name: str = "") -> Sniffed:
    """The kind of ``data`` (a whole file, or at least its first 8 KiB for a text kind), with
    ``name`` choosing among the text kinds; Sniffed("", reason) for a refused file."""
    if not data:
        return Sniffed("", "empty file")
    head = data[:_SNIFF_BYTES]
    if _is_pdf(data):
        return Sniffed(PDF)
    if head.startswith(_ZIP_MAGIC):
        kind, reason = _zip_kind(data)
        return Sniffed(kind, reason)
    reason = binary_reason(head)
    if reason:
        return Sniffed("", reason)
    suffix = name[name.rfind("."):].lower() if "." in name.rsplit("/", 1)[-1] else ""
    by_name = _TEXT_BY_SUFFIX.get(suffix)
    if by_name:
        return Sniffed(by_name)
    if _HTML_START.match(head.removeprefix(b"\xef\xbb\xbf")[:1024]):
        return Sniffed(HTML)
    return Sniffed(TEXT)


def kind_of(data: bytes, name: str) -> str:
    """sniff(), raising BadInputError("<name>: unsupported binary file: <what it looks like>")
    for a refused file (``empty file`` for no bytes)."""
    found = sniff(data, name)
    if found.kind:
        return found.kind
    if found.reason == "empty file":
        raise refused(BadInputError(f"{name}: empty file"), "empty")
    raise refused(BadInputError(f"{name}: unsupported binary file: {found.reason}"), "binary",
                  what=found.reason.removeprefix("binary data (").removesuffix(")"), size=human_size(len(data)))
