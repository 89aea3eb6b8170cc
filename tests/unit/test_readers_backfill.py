"""The readers backfill (services.readers_backfill, the reindex's ``readers`` step): a store whose
vectors were written before access lists carry no ``readers``, and a caller sees none of them;
a reindex gives every chunk its document's readers (its access list, or the whole tenant's
``*``) and every summary its partition's, from the stored vectors (nothing embedded), so each
caller then gets what a store built today answers; a second run reads nothing and changes
nothing. On the memory and local profiles; a run cut after a page resumes from its cursor."""

from __future__ import annotations

import random

import numpy as np
import pytest
from access_cases import tagged
from support import make_engine, synthetic_docs

from eragraph.domain.access import READERS, caller
from eragraph.services import readers_backfill, reindex
from eragraph.services.engine import NODE_READERS
from eragraph.services.ingest import ingest
from eragraph.services.query import query
from eragraph.services.resummarize import drain

CALLERS = [caller(["group:finance"]), caller(["user:bob"], "deny"), caller(["user:alice"])]
QUESTIONS = ("football league goal season", "stock market bank bond", "planet orbit star", "Markerd5")


def answers(engine, mode="collapsed"):
    return [[r.id for r in query(engine, q, mode=mode, k=6, caller=who).results] for who in CALLERS for q in QUESTIONS]


def strip_readers(engine) -> int:
    """Make the store one written before access lists: no vector carries readers, no mark."""
    ids = [r.node_id for layer in engine.graph.layer_sizes() for r in engine.graph.layer_refs(layer)]
    vectors = engine.vectors.get_vectors(ids)
    nodes = engine.graph.get_nodes(ids)
    from eragraph.services.ingest import leaf_meta

    metas = []
    for i in ids:
        n = nodes[i]
        if n.layer == 0:
            meta = leaf_meta(n, engine.graph.get_document(n.doc_id), engine.tenant)
            meta["attrs"] = {k: v for k, v in meta["attrs"].items() if k != READERS}
        else:
            meta = {"layer": n.layer, "doc_id": ""}
        metas.append(meta)
    engine.vectors.upsert(ids, np.stack([vectors[i] for i in ids]), metas)
    engine.vectors.flush()
    engine.graph.delete_meta(NODE_READERS)
    return len(ids)


@pytest.fixture(params=["memory", "local"])
def engine(request, tmp_path):
    if request.param == "memory":
        made = make_engine()
    else:
        from eragraph.bootstrap.local import build_local_engine

        made = build_local_engine(tmp_path / "store", make_engine().settings)
    ingest(made, tagged(synthetic_docs(40), random.Random(3)))
    drain(made)
    yield made
    if request.param == "local":
        from eragraph.bootstrap.local import close

        close(made)


def test_a_reindex_gives_old_nodes_their_readers_once(engine):
    assert engine.graph.get_meta(NODE_READERS) == 1  # a store made today is marked
    before, layered = answers(engine), answers(engine, "summarized")
    assert any(before) and any(r.layer > 0 for r in query(engine, QUESTIONS[0], k=10, caller=CALLERS[0]).results)
    nodes = strip_readers(engine)
    assert not any(answers(engine))  # an old store: a caller sees nothing until the backfill
    report = reindex.run(engine)
    assert report["complete"] and report["readers_added"] == nodes
    assert report["metrics"]["ReadersAdded"] == nodes
    assert answers(engine) == before and answers(engine, "summarized") == layered
    again = reindex.run(engine)
    assert again["readers_added"] == 0 and answers(engine) == before


def test_a_backfill_cut_after_a_page_resumes_from_its_cursor(engine):
    before = answers(engine)
    nodes = strip_readers(engine)
    report: dict = {}
    cursor = readers_backfill.backfill(engine, report, None, lambda: True, page=7)
    assert cursor is not None and 0 < report["readers_added"] < nodes
    assert engine.graph.get_meta(NODE_READERS) is None
    while cursor is not None:
        cursor = readers_backfill.backfill(engine, report, cursor, lambda: True, page=7)
    assert report["readers_added"] == nodes and engine.graph.get_meta(NODE_READERS) == 1
    assert answers(engine) == before
