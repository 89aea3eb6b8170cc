"""A caller's view (domain.access.Caller, services.query's ``caller``): random documents with
random access lists, random callers, every available mode. No result holds the text, the
document or a node of a document the caller may not read, summaries at every layer included
(each summary's leaves are walked down to their documents), and a caller still gets summaries
of the partitions it may read. Property tests (hypothesis, bounded examples) on the memory and
local profiles; a caller whose identity names nobody is refused in words."""

from __future__ import annotations

import random
import re
from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support import make_engine, synthetic_docs, with_entity_graph

from eragraph.domain.access import AccessError, caller
from eragraph.services.ingest import ingest
from eragraph.services.modes import available_modes
from eragraph.services.query import query
from eragraph.services.resummarize import drain

PRINCIPALS = ("group:finance", "group:board", "user:alice", "user:bob", "user:carol")
LISTS = (None, ["group:finance"], ["group:board", "user:alice"], ["user:bob"], ["group:finance", "user:carol"])
MARKER = re.compile(r"Marker(d\d+)")


def build(engine):
    rng = random.Random(59)
    docs = [d if (a := rng.choice(LISTS)) is None else replace(d, metadata={"access": list(a)})
            for d in synthetic_docs(60)]
    ingest(engine, docs)
    drain(engine)
    return {d.doc_id: (d.metadata or {}).get("access") for d in docs}


@pytest.fixture(scope="module", params=["memory", "local"])
def store(request, tmp_path_factory):
    if request.param == "memory":
        engine = make_engine(ner="capitalized")
        from eragraph.adapters.memory.lexical_memory import MemoryLexicalIndex

        engine.lexical = MemoryLexicalIndex(engine.graph)
        with_entity_graph(engine)
    else:
        from eragraph.bootstrap.local import build_local_engine

        engine = build_local_engine(tmp_path_factory.mktemp("views") / "store", make_engine(ner="capitalized").settings)
    access = build(engine)
    yield engine, access
    if request.param == "local":
        from eragraph.bootstrap.local import close

        close(engine)


def leaves_docs(engine, node_id: str, seen: dict) -> set[str]:
    """The documents under a node (a chunk's own; a summary's, down its children)."""
    if node_id in seen:
        return seen[node_id]
    node = engine.graph.get_nodes([node_id])[node_id]
    out = {node.doc_id} if not node.is_summary else set().union(*(leaves_docs(engine, c, seen) for c in node.children))
    seen[node_id] = out
    return out


def check_view(engine, access, who, mode, text, k=5):
    response = query(engine, text, mode=mode, k=k, caller=who)
    allowed = {d for d, a in access.items() if who.may_read(a)}
    seen: dict = {}
    for r in response.results:
        docs = leaves_docs(engine, r.id, seen)
        assert docs <= allowed, (mode, who, r.id, docs - allowed)
        assert not r.doc_id or r.doc_id in allowed
        assert set(MARKER.findall(r.text)) <= allowed, (mode, r.id)
    return response


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_no_mode_returns_what_the_caller_may_not_read(store, data):
    engine, access = store
    who = caller(data.draw(st.lists(st.sampled_from(PRINCIPALS), min_size=1, max_size=3)),
                 default=data.draw(st.sampled_from(("tenant", "deny"))))
    mode = data.draw(st.sampled_from(available_modes(engine)))
    doc = data.draw(st.sampled_from(sorted(access)))
    number = doc[1:]
    text = data.draw(st.sampled_from((f"What is item number {doc} called?", f"Marker{doc} and the season",
                                      f"football finance stock {number}")))
    check_view(engine, access, who, mode, text)


def test_a_caller_keeps_the_layers_of_what_it_may_read(store):
    engine, access = store
    who = caller(["group:finance"])
    summaries = 0
    for text in ("football league goal season", "stock market bank bond", "planet orbit star",
                 "recipe oven flour", "guitar melody chord", "leaf root flower"):
        response = check_view(engine, access, who, "collapsed", text, k=10)
        summaries += sum(r.layer > 0 for r in response.results)
    assert summaries > 0  # summaries of the open and the finance partitions
    # the operator sees every document
    assert query(engine, "football league goal season", mode="collapsed", k=5).results


def test_a_caller_whose_identity_names_nobody_is_refused():
    with pytest.raises(AccessError, match="names no principal"):
        caller([])
    with pytest.raises(AccessError, match="is not a principal"):
        caller(["finance"])
