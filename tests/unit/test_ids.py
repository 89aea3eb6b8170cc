"""Content-derived ids: stable across runs, sensitive to content, blind to member order."""

from __future__ import annotations

import hashlib
import random

import pytest

from eragraph.domain.ids import (chunk_id, content_hash, document_id_for_source, segment_id, short_hash,
                                 summary_id)


def test_content_hash_is_sha256_of_utf8_and_accepts_bytes():
    assert content_hash("héllo") == hashlib.sha256("héllo".encode()).hexdigest()
    assert content_hash("héllo".encode()) == content_hash("héllo")
    assert content_hash("a") != content_hash("b")


def test_short_hash_separates_parts_unambiguously():
    assert short_hash("ab", "c") != short_hash("a", "bc")
    assert short_hash("a", "") != short_hash("a")
    assert short_hash("abc") not in (short_hash("ab", "c"), short_hash("a", "bc"))
    assert len(short_hash("x")) == 16 and len(short_hash("x", length=8)) == 8
    assert short_hash("x", "y") == short_hash("x", "y")


def test_ids_are_stable_literal_values():
    """Pinned literals: a change of the id scheme silently orphans every existing store. The
    values were computed once outside the package: SHA-256 over each UTF-8 part preceded by its
    length as 8 big-endian bytes, first 16 hex digits (``_reference_short_hash`` below)."""
    assert chunk_id("d1", 0, "hello") == "chk-7db7a24ee6ea3054"
    assert document_id_for_source("a/b.txt") == "doc-1b773e3313d957a6"
    assert segment_id(0, ["b", "a"]) == "seg-e6c2b3a8e4fed5ce"  # members sorted
    assert summary_id(1, ["b", "a"]) == "sum-f67653954227ac46"
    assert short_hash("x", "y") == "231ff9ae421066bd"
    assert short_hash("é") == "1d9b2f68e31ef2b6"  # length in UTF-8 bytes (2), not characters
    assert content_hash("hello") == "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"
    assert content_hash(b"hello") == content_hash("hello")


def _reference_short_hash(*parts: str, length: int = 16) -> str:
    h = hashlib.sha256()
    for part in parts:
        data = part.encode("utf-8")
        h.update(len(data).to_bytes(8, "big") + data)
    return h.hexdigest()[:length]


@pytest.mark.parametrize("parts", [(), ("",), ("a", "bc"), ("ab", "c"), ("x" * 300,), ("naïve", "日本")])
@pytest.mark.parametrize("length", [16, 8, 64])
def test_short_hash_matches_the_reference_scheme(parts, length):
    assert short_hash(*parts, length=length) == _reference_short_hash(*parts, length=length)


def test_chunk_id_depends_on_document_index_and_text():
    base = chunk_id("d1", 0, "hello")
    assert chunk_id("d2", 0, "hello") != base
    assert chunk_id("d1", 1, "hello") != base
    assert chunk_id("d1", 0, "hello!") != base


def test_document_ids_differ_per_source():
    assert document_id_for_source("a.txt") != document_id_for_source("b.txt")


def test_segment_and_summary_ids_ignore_member_order():
    members = [f"chk-{i}" for i in range(12)]
    rng = random.Random(3)
    for _ in range(20):
        shuffled = members[:]
        rng.shuffle(shuffled)
        assert segment_id(0, shuffled) == segment_id(0, members)
        assert summary_id(1, shuffled) == summary_id(1, members)


def test_segment_and_summary_ids_depend_on_layer_and_membership():
    m = ["a", "b", "c"]
    assert segment_id(0, m) != segment_id(1, m)
    assert summary_id(1, m) != summary_id(2, m)
    assert segment_id(0, m) != segment_id(0, m[:2])
    assert summary_id(1, m) != summary_id(1, m + ["d"])
    # segment and summary of the same members never collide
    assert segment_id(0, m)[4:] != summary_id(1, m)[4:]
