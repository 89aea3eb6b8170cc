"""Odd cursors and huge numbers on the read routes' parameters, on the local (SQLite) store: a
code of '²' (``str.isdigit()`` takes it, ``int`` does not) and one of 10^23 (over SQLite's
INTEGER) are the cursor refusal in words, never a ValueError or an OverflowError (a 500); GET
/ledger's ``since`` is bounded both ways (a floor of MAX_SERIES_DAYS, a future one answers no
points), so neither 0 nor 10^23 reads past what it should."""

from __future__ import annotations

import time

import pytest

from eragraph.bootstrap import build_engine
from eragraph.config import settings_from_env
from eragraph.domain.ledger import HOUR
from eragraph.services import graph_view
from eragraph.services.ingest import SourceDoc, ingest
from eragraph.services.summary_search import BadQueryError

ENV = {"ERAGRAPH_EMBEDDER": "hash", "ERAGRAPH_SUMMARIZER": "extractive", "ERAGRAPH_GENERATOR": "none"}


@pytest.fixture(scope="module")
def engine(tmp_path_factory):
    engine = build_engine("local", tmp_path_factory.mktemp("store"), settings_from_env(ENV))
    ingest(engine, [SourceDoc(source=f"notes/{n}.txt", text=f"Harbour master {n} keeps the ferry log. " * 6)
                    for n in range(3)])
    return engine


@pytest.mark.parametrize("cursor", ["²:x", "١٢:x", f"{10 ** 23}:x", f"{1 << 63}:x", "-1:x", "1" * 40 + ":x"])
def test_an_odd_cursor_is_refused_in_words(engine, cursor):
    with pytest.raises(BadQueryError, match="is not one this API gave"):
        graph_view.layer_page(engine, 0, cursor=cursor)


def test_a_cursor_this_api_gave_still_pages(engine):
    first = graph_view.layer_page(engine, 0, limit=1)
    assert first["next_cursor"]
    second = graph_view.layer_page(engine, 0, limit=1, cursor=first["next_cursor"])
    assert second["nodes"][0]["id"] != first["nodes"][0]["id"]


def test_the_ledgers_since_is_bounded_both_ways(engine):
    now = time.time()
    future = graph_view.ledger_series(engine, since=10 ** 23)
    assert future["series"] == [] and future["since"] <= now + 24 * HOUR + 5
    floor = graph_view.ledger_series(engine, since=0)["since"]
    assert now - graph_view.MAX_SERIES_DAYS * 24 * HOUR - 5 <= floor <= now - graph_view.MAX_SERIES_DAYS * 24 * HOUR + 5
    assert graph_view.ledger_series(engine, since=0)["series"], "this store's recent calls are still read"
