"""Turning raw bytes into document text, and text into token-based chunks with overlap."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from .model import BadInputError
from .refusals import human_size, refused, sizes

MAX_DOCUMENT_BYTES = 20 * 1024 * 1024


def check_size(name: str, size: int, max_bytes: int) -> None:
    """A document of ``size`` bytes is refused over ``max_bytes``: asked before it is read
    (a file's stat, an S3 object's ContentLength) as well as of bytes in hand."""
    if size > max_bytes:
        shown, limit = sizes(size, max_bytes)
        raise refused(BadInputError(f"{name}: {size} bytes is over the {max_bytes}-byte limit"), "too_large",
                      size=shown, limit=limit)


def decode_document(data: bytes, name: str, max_bytes: int = MAX_DOCUMENT_BYTES) -> str:
    """Bytes of a text document (UTF-8) -> text, or a BadInputError that says why not. What kind
    of file the bytes are is domain.filekind's question; other kinds go through
    providers.extractors."""
    if len(data) == 0:
        raise refused(BadInputError(f"{name}: empty file"), "empty")
    check_size(name, len(data), max_bytes)
    if b"\x00" in data[:8192]:
        raise refused(BadInputError(f"{name}: binary file (NUL bytes), not text"), "binary",
                      what="NUL bytes", size=human_size(len(data)))
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise refused(BadInputError(f"{name}: not valid UTF-8 (byte {exc.start})"), "not_utf8",
                      size=human_size(len(data))) from None
    if not text.strip():
        raise refused(BadInputError(f"{name}: no text in file"), "no_text", kind="text", size=human_size(len(data)))
    return text


@dataclass(frozen=True)
class TextChunk:
    index: int
    text: str
    tokens: int
    start: int = 0  # text == document_text[start:end] (domain.places)
    end: int = 0


Offsets = Sequence[tuple[int, int]]

# A token longer than this many characters is cut into pieces of this length (a 1 MiB "word"
# is one [UNK] token to a WordPiece tokenizer, whose own limit per word is 100 characters), and
# a chunk spans at most MAX_CHUNK_CHARS characters (a window ends early when the whitespace
# between its tokens would stretch it further). At 4 bytes a character at most, a chunk's text
# is then under 80 KB: it fits a DynamoDB item (400 KB) and any vector store's metadata.
MAX_TOKEN_CHARS = 100
MAX_CHUNK_CHARS = 20_000


def split_long_spans(spans: Offsets, limit: int = MAX_TOKEN_CHARS) -> list[tuple[int, int]]:
    """``spans`` with every span longer than ``limit`` characters cut into consecutive pieces
    of at most ``limit`` (empty spans dropped)."""
    out: list[tuple[int, int]] = []
    for start, end in spans:
        if end - start <= limit:
            if end > start:
                out.append((start, end))
            continue
        out.extend((s, min(s + limit, end)) for s in range(start, end, limit))
    return out


def chunk_text(
    text: str,
    offsets_of: Callable[[str], Offsets],
    size: int,
    overlap: int,
    max_token_chars: int = MAX_TOKEN_CHARS,
    max_chunk_chars: int = MAX_CHUNK_CHARS,
) -> list[TextChunk]:
    """Cut ``text`` into windows of at most ``size`` tokens, consecutive windows sharing
    ``overlap`` tokens. ``offsets_of`` gives the (start, end) character span of every token
    (the embedder's own tokenizer), so a chunk is an exact substring of the text.

    A token longer than ``max_token_chars`` counts as several tokens of that length, and a
    window stops short of ``size`` tokens where it would span more than ``max_chunk_chars``
    characters (the next one then shares ``overlap`` tokens with it if it holds more, else
    none); so no
    chunk is longer than ``max_chunk_chars`` whatever the text (needs max_token_chars <=
    max_chunk_chars). Text of ordinary words and spacing gets full windows, as before."""
    if size < 1 or overlap < 0 or overlap >= size:
        raise ValueError("need size >= 1 and 0 <= overlap < size")
    if not 1 <= max_token_chars <= max_chunk_chars:
        raise ValueError("need 1 <= max_token_chars <= max_chunk_chars")
    spans = split_long_spans(offsets_of(text), max_token_chars)
    if not spans:
        return []
    chunks: list[TextChunk] = []
    start = 0
    while True:
        end = min(start + size, len(spans))
        first = spans[start][0]
        if spans[end - 1][1] - first > max_chunk_chars:  # rare: find the longest window that fits
            lo, hi = start + 1, end  # spans[lo - 1] alone always fits
            while lo < hi:
                mid = (lo + hi + 1) // 2
                if spans[mid - 1][1] - first <= max_chunk_chars:
                    lo = mid
                else:
                    hi = mid - 1
            end = lo
        window = spans[start:end]
        raw = text[window[0][0] : window[-1][1]]
        piece = raw.strip()
        if piece:
            at = window[0][0] + len(raw) - len(raw.lstrip())
            chunks.append(TextChunk(index=len(chunks), text=piece, tokens=len(window), start=at, end=at + len(piece)))
        if end >= len(spans):
            break
        start = end - overlap if len(window) > overlap else end
    return chunks


_WORD = re.compile(r"\w+|[^\w\s]", re.UNICODE)


def regex_offsets(text: str) -> list[tuple[int, int]]:
    """A tokenizer-free fallback: words and punctuation marks (used by tests and fakes)."""
    return [m.span() for m in _WORD.finditer(text)]


# a title before a name ("Dr. Ethan Urquhart") does not end a sentence
_TITLES = ("Dr", "Mr", "Mrs", "Ms", "Prof", "St", "Jr", "Sr", "Mt", "Gen", "Col", "Capt", "Lt", "Sgt",
           "Rev", "Gov", "Sen", "Rep", "vs", "No")
# nor does an initialism before a number ("Dracula A.D. 1972", "the U.S. 101"), and a
# parenthesis opened after a closing mark continues its sentence ('... "What is
# Enlightenment?" ("Answering the Question ...")')
_SENTENCE = re.compile(r"(?<=[.!?])" + "".join(rf"(?<!\b{t}\.)" for t in _TITLES)
                       + r"(?<!\b[A-Z]\.[A-Z]\.(?=\s\d))"
                       + r"[\"')\]]*\s+(?=[\"'\[]?[A-Z0-9])")


def titled_text(title: str, text: str) -> str:
    """A record's text with its title as a first paragraph, as HippoRAG and LinearRAG index
    Wikipedia-style passages ("title" then text): the title names the passage's subject, which
    the text may call by a longer name or a pronoun, and a subject named in both counts twice.
    A blank line keeps the title a sentence of its own for the sentence splitter and for spaCy."""
    title = " ".join((title or "").split())
    return f"{title}\n\n{text}" if title else text


# The embedding format of leaf chunks a store's vectors are in: 2 = every chunk of a titled
# document embedded with its title (``embedding_text``); 1 (a store without the mark) = each
# chunk's own text. services.title_migration moves a store from 1 to 2.
EMBED_FORMAT_VERSION = 2


def embedding_text(title: str, text: str) -> str:
    """The text a leaf chunk is embedded with: its stored ``text`` unchanged when its document
    has no title or the text already begins with it (the first chunk of a ``titled_text``),
    else the title (whitespace collapsed, as ``titled_text`` writes it) on a line before it, so
    a continuation chunk keeps its passage's subject. Only the vector sees it: the stored text,
    the lexical index and the summaries keep the chunk's own text."""
    title = " ".join((title or "").split())
    if not title or text.startswith(title):
        return text
    return f"{title}\n{text}"


def sentence_key(sentence: str) -> str:
    """A sentence compared across texts: whitespace collapsed, lower case."""
    return " ".join(sentence.split()).lower()


def whole_pieces(text: str, at_start: bool = True, at_end: bool = True) -> list[str]:
    """The sentence pieces of a chunk's text without the ones its token window cut: the first
    when it does not start where its document does, the last when it may not end where its
    document does."""
    pieces = split_sentences(text)
    return pieces[0 if at_start else 1:len(pieces) if at_end else max(len(pieces) - 1, 0)]


def split_sentences(text: str) -> list[str]:
    """A light sentence splitter for summaries (no model needed)."""
    out = []
    for para in re.split(r"\n\s*\n|\n", text):
        para = para.strip()
        if para:
            out.extend(s.strip() for s in _SENTENCE.split(para) if s.strip())
    return out
