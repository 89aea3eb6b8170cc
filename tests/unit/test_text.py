"""Chunking with overlap, document decoding and HTML stripping, sentence splitting."""

from __future__ import annotations

import pytest

from eragraph.domain.model import BadInputError
from eragraph.domain.text import (MAX_CHUNK_CHARS, MAX_TOKEN_CHARS, chunk_text, decode_document, regex_offsets,
                                  split_sentences)
from eragraph.providers.extractors import extract, html_text

TEXT = " ".join(f"word{i}." if i % 7 == 6 else f"word{i}" for i in range(103))


@pytest.mark.parametrize("size,overlap", [(10, 0), (10, 3), (25, 5), (7, 6), (200, 32)])
def test_chunk_sizes_overlap_and_exact_substrings(size, overlap):
    chunks = chunk_text(TEXT, regex_offsets, size, overlap)
    spans = regex_offsets(TEXT)
    assert chunks and all(c.text for c in chunks)
    assert [c.index for c in chunks] == list(range(len(chunks)))
    for c in chunks:
        assert c.text in TEXT
        assert c.text == c.text.strip()
        assert 1 <= c.tokens <= size
        assert c.tokens == len(regex_offsets(c.text))
    # every token is covered; consecutive chunks share exactly `overlap` tokens
    step = size - overlap
    for i, c in enumerate(chunks):
        window = spans[i * step : i * step + size]
        assert c.text == TEXT[window[0][0] : window[-1][1]]
    last = chunks[-1]
    assert TEXT.endswith(last.text)
    if len(chunks) > 1:
        assert all(c.tokens == size for c in chunks[:-1])
        a, b = regex_offsets(chunks[0].text), regex_offsets(chunks[1].text)
        tail = [chunks[0].text[s:e] for s, e in a[-overlap:]] if overlap else []
        head = [chunks[1].text[s:e] for s, e in b[:overlap]] if overlap else []
        assert tail == head


def test_chunk_count():
    n_tokens = len(regex_offsets(TEXT))
    chunks = chunk_text(TEXT, regex_offsets, 20, 5)
    assert len(chunks) == 1 + -(-(n_tokens - 20) // 15)


def test_short_text_is_one_chunk_and_blank_text_none():
    assert [c.text for c in chunk_text("  Hello, world!  ", regex_offsets, 50, 10)] == ["Hello, world!"]
    assert chunk_text("   \n\t ", regex_offsets, 50, 10) == []
    assert chunk_text("", regex_offsets, 50, 10) == []


@pytest.mark.parametrize("size,overlap", [(0, 0), (5, 5), (5, -1), (5, 9)])
def test_chunk_rejects_bad_parameters(size, overlap):
    with pytest.raises(ValueError):
        chunk_text(TEXT, regex_offsets, size, overlap)


def test_decode_plain_utf8_and_bom():
    assert decode_document("héllo wörld".encode(), "a.txt") == "héllo wörld"
    assert decode_document(b"\xef\xbb\xbfhello", "bom.txt") == "hello"


@pytest.mark.parametrize("data,name,needle", [
    (b"", "empty.txt", "empty"),
    (b"   \n\t  ", "blank.txt", "no text"),
    (b"abc\x00\x01\x02def", "blob.bin", "binary"),
    (b"caf\xe9 au lait", "latin1.txt", "UTF-8"),
    (b"<html><script>x()</script></html>", "empty.html", "no text"),
])
def test_decode_errors_name_the_file_and_the_reason(data, name, needle):
    with pytest.raises(BadInputError) as info:
        extract(data, name)
    assert name in str(info.value)
    assert needle.lower() in str(info.value).lower()


def test_decode_too_large():
    with pytest.raises(BadInputError, match="limit"):
        decode_document(b"x" * 101, "big.txt", max_bytes=100)
    assert decode_document(b"x" * 100, "ok.txt", max_bytes=100) == "x" * 100


def test_invalid_utf8_reports_position():
    with pytest.raises(BadInputError, match="byte 4"):
        decode_document(b"abcd\xff", "bad.txt")


def test_html_is_stripped_without_script_or_style():
    page = ("<html><head><title>T</title><style>body{color:red}</style></head><body>"
            "<nav><a href='/'>Home</a></nav>"
            "<h1>Heading</h1><p>First &amp; foremost <b>bold</b> text.</p>"
            "<script>var secret = 1;</script><div>Second   line</div></body></html>")
    got = extract(page.encode(), "page.HTML")
    assert got.kind == "html" and got.title == "T"
    assert got.text.splitlines() == ["Heading", "First & foremost bold text.", "Second line"]
    assert "secret" not in got.text and "color" not in got.text and "Home" not in got.text
    # markup is sniffed by content; a Markdown file with a tag in it stays text
    assert extract(b"<!DOCTYPE html><p>x</p>", "saved-page.txt").kind == "html"
    assert "<p>" in extract(b"# notes\n<p>literal markup</p>", "notes.md").text


def test_html_blocks_become_lines():
    assert html_text("<ul><li>a</li><li>b</li></ul>x<br>y").text == "a\nb\nx\ny"


def test_one_huge_token_is_split_and_no_chunk_exceeds_the_char_cap():
    word = "x" * (1 << 20)  # a 1 MiB "word": one token to any tokenizer
    chunks = chunk_text(word, regex_offsets, 200, 32)
    assert max(len(c.text) for c in chunks) <= MAX_CHUNK_CHARS
    assert all(c.tokens <= 200 for c in chunks)
    assert "".join(c.text[32 * MAX_TOKEN_CHARS if i else 0:] for i, c in enumerate(chunks)) == word


def test_whitespace_gaps_end_a_window_early_and_every_token_is_covered():
    text = "alpha " + " " * 50_000 + "beta gamma " + "\n" * 30_000 + " delta"
    chunks = chunk_text(text, regex_offsets, 200, 32, max_token_chars=10, max_chunk_chars=1000)
    assert all(len(c.text) <= 1000 for c in chunks)
    assert [c.text for c in chunks] == ["alpha", "beta gamma", "delta"]
    # ordinary text is cut exactly as without the caps
    plain = chunk_text(TEXT, regex_offsets, 25, 5)
    assert plain == chunk_text(TEXT, regex_offsets, 25, 5, max_token_chars=10 ** 6, max_chunk_chars=10 ** 7)


def test_split_sentences():
    text = "Dr. Who met Mr. X. Then they left! Did they? Yes.\n\nNew para \"Quoted.\" Next one"
    sents = split_sentences(text)
    assert sents[-1] == "Next one"
    assert "Then they left!" in sents and "Did they?" in sents and "Yes." in sents
    assert sents[0] == "Dr. Who met Mr. X."  # a title before a name ends no sentence
    assert split_sentences("The title character is Dr. Ethan Urquhart, a biologist. He travels.") == \
        ["The title character is Dr. Ethan Urquhart, a biologist.", "He travels."]
    assert all(s == s.strip() and s for s in sents)
    assert split_sentences("line one\nline two") == ["line one", "line two"]


def test_titled_text_opens_with_the_title():
    from eragraph.domain.text import titled_text

    assert titled_text("Giuseppe Verdi", "Giuseppe Fortunino Francesco Verdi was a composer.") == \
        "Giuseppe Verdi\n\nGiuseppe Fortunino Francesco Verdi was a composer."
    assert titled_text("Silene", "Silene is a genus.") == "Silene\n\nSilene is a genus."
    assert titled_text("  ", "Body.") == "Body."
    assert titled_text("A  spaced\ttitle", "Body.").startswith("A spaced title\n\n")


def test_one_token_windows_and_a_cap_of_one_character_are_valid():
    assert [c.text for c in chunk_text("a b c", regex_offsets, 1, 0)] == ["a", "b", "c"]
    chunks = chunk_text("ab cd", regex_offsets, 3, 0, max_token_chars=1, max_chunk_chars=1)
    assert [c.text for c in chunks] == ["a", "b", "c", "d"]


@pytest.mark.parametrize("kw,message", [
    ({"size": 0, "overlap": 0}, "need size >= 1 and 0 <= overlap < size"),
    ({"size": 5, "overlap": 5}, "need size >= 1 and 0 <= overlap < size"),
    ({"max_token_chars": 0}, "need 1 <= max_token_chars <= max_chunk_chars"),
    ({"max_token_chars": 11, "max_chunk_chars": 10}, "need 1 <= max_token_chars <= max_chunk_chars"),
])
def test_bad_chunk_parameters_say_which_rule(kw, message):
    with pytest.raises(ValueError) as info:
        chunk_text(TEXT, regex_offsets, **{"size": 10, "overlap": 2, **kw})
    assert str(info.value) == message


def test_a_long_word_counts_as_pieces_of_the_token_cap():
    chunks = chunk_text("x" * 35, regex_offsets, 2, 0, max_token_chars=10, max_chunk_chars=100)
    assert [(c.text, c.tokens) for c in chunks] == [("x" * 20, 2), ("x" * 15, 2)]


WORDS10 = "aaaaaaaaaa bbbbbbbbbb cccccccccc dddddddddd"  # token i spans [11 i, 11 i + 10)


@pytest.mark.parametrize("cap,want", [
    (21, ["aaaaaaaaaa bbbbbbbbbb", "cccccccccc dddddddddd"]),  # two words are exactly 21 characters
    (30, ["aaaaaaaaaa bbbbbbbbbb", "cccccccccc dddddddddd"]),  # three would be 32
    (32, ["aaaaaaaaaa bbbbbbbbbb cccccccccc", "dddddddddd"]),
    (20, ["aaaaaaaaaa", "bbbbbbbbbb", "cccccccccc", "dddddddddd"]),
])
def test_the_character_cap_keeps_the_longest_window_that_fits(cap, want):
    chunks = chunk_text(WORDS10, regex_offsets, 10, 0, max_token_chars=10, max_chunk_chars=cap)
    assert [c.text for c in chunks] == want


def test_a_window_cut_to_the_overlap_moves_on_without_overlapping():
    # windows of 2 tokens (the cap) with an overlap of 2: the next window starts after this one
    chunks = chunk_text(WORDS10, regex_offsets, 4, 2, max_token_chars=10, max_chunk_chars=21)
    assert [c.text for c in chunks] == ["aaaaaaaaaa bbbbbbbbbb", "cccccccccc dddddddddd"]


def test_empty_token_spans_are_no_tokens():
    """A tokenizer's special tokens have empty offsets, (0, 0): they count for nothing."""
    from eragraph.domain.text import split_long_spans

    assert split_long_spans([(0, 0), (0, 5), (5, 5), (6, 300)], 100) == [(0, 5), (6, 106), (106, 206), (206, 300)]

    def with_specials(text):  # [CLS] ... [SEP]
        return [(0, 0), *regex_offsets(text), (0, 0)]

    assert [(c.text, c.tokens) for c in chunk_text("one two three", with_specials, 2, 0)] == \
        [("one two", 2), ("three", 1)]


def test_decode_refusals_name_the_file_and_say_why():
    for data, message in ((b"", "a.txt: empty file"),
                          (b"abc\x00def", "a.txt: binary file (NUL bytes), not text"),
                          (b"x" * 11, "a.txt: 11 bytes is over the 10-byte limit"),
                          (b" \n ", "a.txt: no text in file")):
        with pytest.raises(BadInputError) as info:
            decode_document(data, "a.txt", max_bytes=10)
        assert str(info.value) == message
    assert decode_document(b"x", "a.txt") == "x"


def test_titled_text_without_a_title():
    from eragraph.domain.text import titled_text

    assert titled_text(None, "Body.") == "Body."
