"""Document statuses end to end on the local profile, as real processes: a folder with a good
file, a binary file and an empty one is ingested (and drained) by `eragraph ingest`; `eragraph
status` and `eragraph serve`'s GET /documents read each status and the counts per prefix."""

from __future__ import annotations

import json

from serve_support import eragraph, get, serving

GOOD = "The harbour master of Gdynia logged a tall ship called Dar Pomorza in the spring. " * 4


def test_a_good_a_binary_and_an_empty_file(tmp_path):
    folder, store = tmp_path / "in", tmp_path / "store"
    folder.mkdir()
    (folder / "good.txt").write_text(GOOD)
    (folder / "photo.txt").write_bytes(b"\x00\x01\x02binary\x00" * 20)
    (folder / "empty.txt").write_bytes(b"")
    out = eragraph("ingest", "--store", str(store), "--quiet", str(folder))
    assert out.returncode == 3, out.stderr  # done, with files skipped

    listing = eragraph("status", "--store", str(store), "--prefix", str(folder), "--json")
    assert listing.returncode == 0, listing.stderr
    body = json.loads(listing.stdout)
    by_name = {d["source"].rsplit("/", 1)[-1]: d for d in body["documents"]}
    assert by_name["good.txt"]["state"] == "done"  # the local ingest drains its summaries
    assert by_name["photo.txt"]["state"] == "failed" and "binary" in by_name["photo.txt"]["reason"]
    assert by_name["empty.txt"]["state"] == "failed" and "empty" in by_name["empty.txt"]["reason"]
    assert (body["total"], body["done"], body["failed"]) == (3, 1, 2)
    assert body["bedrock"]["numberOfDocumentsFailed"] == 2

    one = eragraph("status", "--store", str(store), "--doc", by_name["photo.txt"]["source"])
    assert one.returncode == 0 and "failed" in one.stdout and "reason: " in one.stdout, one.stdout
    missing = eragraph("status", "--store", str(store), "--doc", "no-such-doc")
    assert missing.returncode == 1 and "no document" in missing.stderr
    other = json.loads(eragraph("status", "--store", str(store), "--prefix", str(tmp_path / "elsewhere"),
                                "--json").stdout)
    assert other["total"] == 0

    with serving(store) as url:
        status, counts = get(url, f"/documents?prefix={folder}")
        assert status == 200 and (counts["done"], counts["failed"]) == (1, 2), counts
        status, doc = get(url, f"/documents/{by_name['good.txt']['doc_id']}")
        assert status == 200 and doc["status"] == "done" and doc["chunks"] >= 1
        status, doc = get(url, f"/documents/{by_name['empty.txt']['doc_id']}")
        assert status == 200 and doc["status"] == "failed" and doc["chunks"] == 0
        status, _ = get(url, "/documents?limit=-3")
        assert status == 422
