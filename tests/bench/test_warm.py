"""`eragraph bench warm`: what a function holds per chunk for its entity walks, measured on a
store's own entity records."""

from __future__ import annotations

import argparse

from eragraph.adapters.local.entity_sqlite import SqliteEntityStore
from eragraph.bench import warm
from eragraph.ports.entity import ChunkEntities, SentenceMentions


def make_store(path, n: int, words: int) -> None:
    path.mkdir(parents=True)
    store = SqliteEntityStore(path / "entities.sqlite")
    text = " ".join(["word"] * words)
    store.add_chunks([ChunkEntities(f"c{i}", (SentenceMentions(f"{text} {i}.", (f"e{i}", f"e{i + 1}")),
                                              SentenceMentions(f"{text} again {i}.", (f"e{i}",))))
                      for i in range(n)])
    store.close()


def parse(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    warm.add_parser(p.add_subparsers(dest="bench_command"))
    return p.parse_args(argv)


def test_it_holds_every_record_and_a_longer_text_costs_more_a_chunk(tmp_path):
    make_store(tmp_path / "short", 30, 5)
    make_store(tmp_path / "long", 30, 200)
    out = warm.run(parse(["warm", "--stores", str(tmp_path), "--datasets", "short,long", "--out",
                          str(tmp_path / "warm.json")]))
    short, long = out["stores"]["short"], out["stores"]["long"]
    assert (short["chunks"], short["sentences"], short["entities"]) == (30, 60, 31)
    assert long["held_bytes_per_chunk"] > short["held_bytes_per_chunk"] + 1000  # 2 x 195 words more a chunk
    assert short["peak_bytes_per_chunk"] >= short["held_bytes_per_chunk"] > 0
    assert out["worst_peak_bytes_per_chunk"] == long["peak_bytes_per_chunk"]
    assert [c["memory_mb"] for c in out["caps"]] == list(warm.MEMORY_MB) and out["cap_is_safe"] is True
    assert (tmp_path / "warm.json").is_file() and out["command"].startswith("eragraph bench warm")
