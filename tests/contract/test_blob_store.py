"""BlobStore contract: every backend in factories.BLOB_STORE_FACTORIES."""

from __future__ import annotations

import pytest

ALL_BYTES = bytes(range(256)) * 3


def test_put_get_round_trips_bytes(blob_store):
    blob_store.put("a.txt", b"hello")
    blob_store.put("bin", ALL_BYTES)
    blob_store.put("empty", b"")
    assert blob_store.get("a.txt") == b"hello"
    assert blob_store.get("bin") == ALL_BYTES
    assert blob_store.get("empty") == b""


def test_size_without_reading_and_missing_raises_key_error(blob_store):
    blob_store.put("docs/a.bin", ALL_BYTES)
    blob_store.put("empty", b"")
    assert blob_store.size("docs/a.bin") == len(ALL_BYTES) and blob_store.size("empty") == 0
    for missing in ("nope", "docs", "no/such/folder.txt"):
        with pytest.raises(KeyError):
            blob_store.size(missing)


def test_put_overwrites(blob_store):
    blob_store.put("k", b"one")
    blob_store.put("k", b"two, longer")
    assert blob_store.get("k") == b"two, longer"
    assert blob_store.list() == ["k"]


def test_get_missing_raises_key_error(blob_store):
    with pytest.raises(KeyError):
        blob_store.get("nope")
    with pytest.raises(KeyError):
        blob_store.get("no/such/folder.txt")


def test_delete_and_delete_missing(blob_store):
    blob_store.put("docs/x.txt", b"x")
    blob_store.delete("docs/x.txt")
    blob_store.delete("docs/x.txt")
    blob_store.delete("never/was")
    with pytest.raises(KeyError):
        blob_store.get("docs/x.txt")
    assert blob_store.list() == []


def test_list_prefix_sorted_and_nested(blob_store):
    keys = ["docs/b.txt", "docs/a.txt", "docs/sub/c.txt", "raw/z", "top", "docsx/q", "docs/ab.md"]
    for key in keys:
        blob_store.put(key, key.encode())
    assert blob_store.list() == sorted(keys)
    assert blob_store.list("") == sorted(keys)
    assert blob_store.list("docs/") == ["docs/a.txt", "docs/ab.md", "docs/b.txt", "docs/sub/c.txt"]
    assert blob_store.list("docs") == ["docs/a.txt", "docs/ab.md", "docs/b.txt", "docs/sub/c.txt", "docsx/q"]
    assert blob_store.list("docs/a") == ["docs/a.txt", "docs/ab.md"]
    assert blob_store.list("docs/sub/") == ["docs/sub/c.txt"]
    assert blob_store.list("missing/") == []
    for key in keys:
        assert blob_store.get(key) == key.encode()


def test_list_after_resumes_from_a_cursor_in_key_order(blob_store):
    keys = ["docs/a.txt", "docs/a.txt.metadata.json", "docs/ab.md", "docs/b.txt", "docs/sub/c.txt", "raw/z"]
    for key in keys:
        blob_store.put(key, b"x")
    assert blob_store.list_after("docs/", "", 2) == ["docs/a.txt", "docs/a.txt.metadata.json"]
    assert blob_store.list_after("docs/", "docs/a.txt.metadata.json", 2) == ["docs/ab.md", "docs/b.txt"]
    assert blob_store.list_after("docs/", "docs/b.txt", 10) == ["docs/sub/c.txt"]
    assert blob_store.list_after("docs/", "docs/sub/c.txt", 10) == []
    assert blob_store.list_after("", "docs/sub/c.txt", 10) == ["raw/z"]


def test_unicode_keys(blob_store):
    blob_store.put("notes/café résumé.txt", b"1")
    assert blob_store.list("notes/") == ["notes/café résumé.txt"]
    assert blob_store.get("notes/café résumé.txt") == b"1"


@pytest.mark.persistent
def test_blobs_survive_reopen(blob_store_backend):
    first = blob_store_backend.open()
    first.put("docs/a.txt", b"A")
    first.put("b", b"B")
    first.delete("b")
    second = blob_store_backend.reopen(first)
    assert second.list() == ["docs/a.txt"]
    assert second.get("docs/a.txt") == b"A"


# --- filesystem specifics ----------------------------------------------------------------

@pytest.mark.parametrize("key", ["", "/etc/passwd", "../x", "a/../../x", "a/./b", "a//b", "a/", "..",
                                 "a\\b", "C:/x", "nul\x00"])
def test_fs_rejects_unsafe_keys(tmp_path, key):
    from eragraph.adapters.local.blob_fs import FsBlobStore

    store = FsBlobStore(tmp_path / "root")
    with pytest.raises(ValueError):
        store.put(key, b"x")
    assert not (tmp_path / "x").exists()
    assert store.list() == []


def test_fs_layout_and_no_temp_files_left(tmp_path):
    from eragraph.adapters.local.blob_fs import FsBlobStore

    root = tmp_path / "root"
    store = FsBlobStore(root)
    store.put("docs/sub/c.txt", b"c")
    store.put("docs/sub/c.txt", b"c2")
    assert (root / "docs" / "sub" / "c.txt").read_bytes() == b"c2"
    assert sorted(p.name for p in root.rglob("*")) == ["c.txt", "docs", "sub"]
    store.delete("docs/sub/c.txt")
    assert list(root.iterdir()) == []  # emptied folders are pruned


def test_fs_ignores_stray_temp_files(tmp_path):
    from eragraph.adapters.local.blob_fs import FsBlobStore

    root = tmp_path / "root"
    store = FsBlobStore(root)
    store.put("a", b"1")
    (root / f".a.{'0' * 32}.partial").write_bytes(b"half")  # left by a crash mid-write
    assert store.list() == ["a"]
