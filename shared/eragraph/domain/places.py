"""Where a chunk sits in its document, so that a citation can be checked: its character offsets
in the document's extracted text and, for a paged document (a PDF; a DOCX with page breaks),
the pages it spans.

A place is a tuple of integers kept on the chunk's node: ``()`` when unknown (a chunk stored
before places were recorded), ``(start, end)`` for a document without pages, ``(start, end,
first_page, last_page)`` for a paged one. ``start``/``end`` are a half-open character range
of the document's text (``text[start:end]`` is the chunk's text); pages count from 1.

A document's pages are given as ``page_starts``: (offset, page number) pairs in increasing
offset order, the offset where that page's text begins in the document's text (a page
without text has no entry)."""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Sequence
from typing import Any

Place = tuple[int, ...]
PageStarts = Sequence[tuple[int, int]]

NO_PLACE_NOTE = ("some results are chunks stored before chunk places were recorded (their place is null): "
                 "`eragraph migrate places` gives them offsets (and pages where the source can be read "
                 "again), or ingest their documents again")


def page_at(offset: int, page_starts: PageStarts) -> int:
    """The page holding character ``offset`` (the page whose text begins last at or before it;
    the first page listed for an offset before every page's start)."""
    i = bisect_right([s for s, _ in page_starts], offset) - 1
    return page_starts[max(i, 0)][1]


def place_of(start: int, end: int, page_starts: PageStarts = ()) -> Place:
    """The place of the text ``[start, end)`` of a document whose pages begin at
    ``page_starts`` (empty: a document without pages)."""
    if not page_starts:
        return (start, end)
    return (start, end, page_at(start, page_starts), page_at(max(end - 1, start), page_starts))


def check_page_starts(page_starts: PageStarts, length: int) -> tuple[tuple[int, int], ...]:
    """``page_starts`` as a tuple, or ValueError when they are not increasing offsets within a
    text of ``length`` characters with increasing positive page numbers."""
    out = tuple((int(o), int(p)) for o, p in page_starts)
    for i, (offset, page) in enumerate(out):
        if not 0 <= offset <= length or page < 1:
            raise ValueError(f"page start {i} ({offset}, {page}) is outside the text or not a page number")
        if i and (offset <= out[i - 1][0] or page <= out[i - 1][1]):
            raise ValueError(f"page starts must increase (entry {i})")
    return out


def describe(place: Sequence[int] | None) -> dict[str, Any] | None:
    """A place as the API shows it: ``{"start", "end"}`` and, when paged, ``"page"`` (the first)
    and ``"pages"`` ([first, last]); None when unknown."""
    if not place or len(place) < 2:
        return None
    out: dict[str, Any] = {"start": int(place[0]), "end": int(place[1])}
    if len(place) >= 4:
        out["page"] = int(place[2])
        out["pages"] = [int(place[2]), int(place[3])]
    return out


LOCATE_SLACK = 256  # characters a chunk's search window reaches past twice its length


def locate(text: str, chunks: Sequence[str]) -> list[tuple[int, int] | None]:
    """Each chunk's ``[start, end)`` in ``text``, the chunks given in document order (they may
    overlap, as a token window's overlap makes them): a chunk is looked for from just after
    where the one before it began, within a window of twice its length (plus LOCATE_SLACK, plus
    the length of the chunks not found since, at most eight times its own); None when it is
    not there (the text changed, or the chunk was made from another text). Each search reads at
    most its window, so the whole is linear in the chunks' total length, never in the text's
    length times the number of chunks."""
    out: list[tuple[int, int] | None] = []
    at, missed = 0, 0
    for chunk in chunks:
        size = len(chunk)
        i = text.find(chunk, at, at + min(missed, 8 * size) + 2 * size + LOCATE_SLACK) if size else -1
        if i < 0:
            out.append(None)
            missed += size
            continue
        out.append((i, i + size))
        at, missed = i + 1, 0
    return out
