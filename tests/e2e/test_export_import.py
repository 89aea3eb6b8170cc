"""`eragraph export` then `eragraph import` as real processes: the imported store answers the
same top-k, and a dump of a newer
version, a file that is no dump and a non-empty target are refused in one line."""

from __future__ import annotations

import gzip
import json

from serve_support import eragraph

DOCS = {"comet.txt": "The Starglass telescope followed the comet Vellichor across the sky. " * 4,
        "harbor.txt": "The Quillorn lighthouse guided the freighter Marrowind at dawn. " * 4,
        "bread.txt": "Bakers knead dough before dawn and bake loaves in stone ovens. " * 4}


def _top(store) -> list:
    out = eragraph("query", "--store", str(store), "--json", "--k", "3", "Which telescope followed the comet?")
    assert out.returncode == 0, out.stderr
    return [(r["id"], r["score"]) for r in json.loads(out.stdout)["results"]]


def test_export_then_import_answers_the_same(tmp_path):
    (tmp_path / "docs").mkdir()
    for name, text in DOCS.items():
        (tmp_path / "docs" / name).write_text(text)
    store, copy, dump = tmp_path / "kb", tmp_path / "kb2", tmp_path / "kb.dump.gz"
    assert eragraph("ingest", "--store", str(store), "--quiet", str(tmp_path / "docs")).returncode == 0
    out = eragraph("export", "--store", str(store), str(dump), "--json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["records"] > 3
    out = eragraph("import", "--store", str(copy), str(dump))
    assert out.returncode == 0, out.stderr
    assert "imported" in out.stdout and "document" in out.stdout
    assert _top(copy) == _top(store)
    again = eragraph("import", "--store", str(copy), str(dump))
    assert again.returncode != 0 and "the target store is not empty" in again.stderr

    lines = gzip.open(dump, "rt").read().splitlines()
    newer = tmp_path / "newer.gz"
    with gzip.open(newer, "wt") as f:
        f.write(json.dumps({**json.loads(lines[0]), "version": 7}) + "\n" + "\n".join(lines[1:]) + "\n")
    out = eragraph("import", "--store", str(tmp_path / "kb3"), str(newer))
    assert out.returncode != 0 and "this dump is version 7; this eragraph reads version 1, 2: upgrade" in out.stderr
    (tmp_path / "plain.txt").write_text("hello")
    out = eragraph("import", "--store", str(tmp_path / "kb4"), str(tmp_path / "plain.txt"))
    assert out.returncode != 0 and "cannot read it as a gzip-compressed eragraph dump" in out.stderr
