"""GET /documents?prefix=s&limit=1 on a prefix with no counters (not a directory) reads one page
of the prefix's records for its counts, never the whole status listing: past the page the counts
are marked approximate. A directory prefix keeps exact counts from its counters."""

from __future__ import annotations

from eragraph.bootstrap import build_engine
from eragraph.config import settings_from_env
from eragraph.services import doc_status

ENV = {"ERAGRAPH_EMBEDDER": "hash", "ERAGRAPH_SUMMARIZER": "extractive", "ERAGRAPH_GENERATOR": "none"}


class Reads:
    """The store's listing reads, counted (the store itself answers them)."""

    def __init__(self, graph) -> None:
        self.graph, self.records = graph, 0

    def __getattr__(self, name):
        return getattr(self.graph, name)

    def doc_statuses_page(self, prefix, after, limit):
        statuses, nxt = self.graph.doc_statuses_page(prefix, after, limit)
        self.records += len(statuses)
        return statuses, nxt


def test_an_uncounted_prefix_reads_one_page_and_says_its_counts_are_approximate():
    engine = build_engine("memory", settings=settings_from_env(ENV))
    total = doc_status.COUNT_PAGE * 3 + 7
    for n in range(total):
        doc_status.record_received(engine, f"d{n}", f"s/{n:05d}.txt")
    reads = Reads(engine.graph)
    engine.graph = reads
    counts, views, cursor, more = doc_status.page(engine, "s", 1)
    assert len(views) == 1 and more and cursor
    assert reads.records <= doc_status.COUNT_PAGE + 2, reads.records
    body = counts.to_json()
    assert body["approximate"] is True and body["total"] == doc_status.COUNT_PAGE
    exact = doc_status.page(engine, "s/", 1)[0].to_json()  # a directory: its counters
    assert exact["total"] == total and "approximate" not in exact
    small = doc_status.page(engine, "s/0000", 5)[0].to_json()  # an uncounted prefix within one page
    assert small["total"] == 10 and "approximate" not in small
