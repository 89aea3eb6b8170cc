"""Turning raw bytes into document text, and text into token-based chunks with overlap."""

from __future__ import annotations

import html
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from html.parser import HTMLParser

from .model import BadInputError

MAX_DOCUMENT_BYTES = 20 * 1024 * 1024

TEXT_SUFFIXES = {".txt", ".text", ".md", ".markdown", ".rst", ".htm", ".html", ".jsonl"}


def decode_document(data: bytes, name: str, max_bytes: int = MAX_DOCUMENT_BYTES) -> str:
    """Bytes of a document -> text, or a BadInputError that says why not."""
    if len(data) == 0:
        raise BadInputError(f"{name}: empty file")
    if len(data) > max_bytes:
        raise BadInputError(f"{name}: {len(data)} bytes is over the {max_bytes}-byte limit")
    if b"\x00" in data[:8192]:
        raise BadInputError(f"{name}: binary file (NUL bytes), not text")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise BadInputError(f"{name}: not valid UTF-8 (byte {exc.start})") from None
    if name.lower().endswith((".htm", ".html")):
        text = html_to_text(text)
    if not text.strip():
        raise BadInputError(f"{name}: no text in file")
    return text


class _TextExtractor(HTMLParser):
    _SKIP = {"script", "style", "noscript", "template", "head"}
    _BLOCK = {"p", "div", "br", "li", "tr", "h1", "h2", "h3", "h4", "h5", "h6", "section",
              "article", "pre", "blockquote", "title", "table", "ul", "ol"}

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self._skip = 0

    def handle_starttag(self, tag: str, attrs: list) -> None:
        if tag in self._SKIP:
            self._skip += 1
        elif tag in self._BLOCK:
            self.parts.append("\n")

    def handle_endtag(self, tag: str) -> None:
        if tag in self._SKIP and self._skip:
            self._skip -= 1
        elif tag in self._BLOCK:
            self.parts.append("\n")

    def handle_data(self, data: str) -> None:
        if not self._skip:
            self.parts.append(data)


def html_to_text(markup: str) -> str:
    parser = _TextExtractor()
    parser.feed(markup)
    parser.close()
    text = html.unescape("".join(parser.parts))
    lines = [re.sub(r"[ \t\r\f\v]+", " ", line).strip() for line in text.split("\n")]
    return "\n".join(line for line in lines if line)


@dataclass(frozen=True)
class TextChunk:
    index: int
    text: str
    tokens: int


Offsets = Sequence[tuple[int, int]]


def chunk_text(
    text: str,
    offsets_of: Callable[[str], Offsets],
    size: int,
    overlap: int,
) -> list[TextChunk]:
    """Cut ``text`` into windows of at most ``size`` tokens, consecutive windows sharing
    ``overlap`` tokens. ``offsets_of`` gives the (start, end) character span of every token
    (the embedder's own tokenizer), so a chunk is an exact substring of the text."""
    if size < 1 or overlap < 0 or overlap >= size:
        raise ValueError("need size >= 1 and 0 <= overlap < size")
    spans = [s for s in offsets_of(text) if s[1] > s[0]]
    if not spans:
        return []
    chunks: list[TextChunk] = []
    step = size - overlap
    start = 0
    while True:
        window = spans[start : start + size]
        piece = text[window[0][0] : window[-1][1]].strip()
        if piece:
            chunks.append(TextChunk(index=len(chunks), text=piece, tokens=len(window)))
        if start + size >= len(spans):
            break
        start += step
    return chunks


_WORD = re.compile(r"\w+|[^\w\s]", re.UNICODE)


def regex_offsets(text: str) -> list[tuple[int, int]]:
    """A tokenizer-free fallback: words and punctuation marks (used by tests and fakes)."""
    return [m.span() for m in _WORD.finditer(text)]


# a title before a name ("Dr. Ethan Urquhart") does not end a sentence
_TITLES = ("Dr", "Mr", "Mrs", "Ms", "Prof", "St", "Jr", "Sr", "Mt", "Gen", "Col", "Capt", "Lt", "Sgt",
           "Rev", "Gov", "Sen", "Rep", "vs", "No")
_SENTENCE = re.compile(r"(?<=[.!?])" + "".join(rf"(?<!\b{t}\.)" for t in _TITLES)
                       + r"[\"')\]]*\s+(?=[\"'(\[]?[A-Z0-9])")


def titled_text(title: str, text: str) -> str:
    """A record's text with its title as a first paragraph, as HippoRAG and LinearRAG index
    Wikipedia-style passages ("title" then text): the title names the passage's subject, which
    the text may call by a longer name or a pronoun, and a subject named in both counts twice.
    A blank line keeps the title a sentence of its own for the sentence splitter and for spaCy."""
    title = " ".join((title or "").split())
    return f"{title}\n\n{text}" if title else text


def sentence_key(sentence: str) -> str:
    """A sentence compared across texts: whitespace collapsed, lower case."""
    return " ".join(sentence.split()).lower()


def split_sentences(text: str) -> list[str]:
    """A light sentence splitter for summaries (no model needed)."""
    out = []
    for para in re.split(r"\n\s*\n|\n", text):
        para = para.strip()
        if para:
            out.extend(s.strip() for s in _SENTENCE.split(para) if s.strip())
    return out
