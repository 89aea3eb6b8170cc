"""The mode registry's capabilities say what a mode does: a mode that needs no embedding answers
with an embedder that refuses to embed, the filter note follows ``under_filter``, and the
families and default benchmark lists are drawn from the table."""

from __future__ import annotations

import pytest
from support import make_engine, synthetic_docs

from eragraph.bench.report import GRAPH_MODES, SINGLE_MODES
from eragraph.bench.retrieval import DEFAULT_MODES
from eragraph.bootstrap import build_engine
from eragraph.config import Settings
from eragraph.services.ingest import ingest
from eragraph.services.modes import LEAVES_ONLY, MODES, NATIVE, families, mode_names, modes_of
from eragraph.services.query import query
from eragraph.services.resummarize import drain
from eragraph.services.summary_search import FILTER_NOTE


class RefusingEmbedder:
    """Embeds the corpus, then refuses: a query that embeds its question fails."""

    def __init__(self, inner):
        self.inner, self.refuse = inner, False

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def embed(self, texts):
        if self.refuse:
            raise AssertionError("this mode embedded the question")
        return self.inner.embed(texts)


@pytest.fixture(scope="module")
def engine():
    engine = build_engine("memory", settings=Settings(embedder="hash", s_min=3, s_max=5, n_planes=12,
                                                      chunk_tokens=40, chunk_overlap=8, summary_tokens=30))
    ingest(engine, synthetic_docs(24))
    drain(engine)
    return engine


@pytest.mark.parametrize("mode", [m for m in mode_names() if m not in ("fusion", "auto")])
def test_needs_embedding_says_whether_the_question_is_embedded(engine, mode):
    refusing = RefusingEmbedder(engine.embedder)
    inner, engine.embedder = engine.embedder, refusing
    try:
        refusing.refuse = True
        if MODES[mode].needs_embedding:
            with pytest.raises(AssertionError, match="embedded the question"):
                query(engine, "a planet with a moon", mode=mode)
        else:
            assert query(engine, "a planet with a moon", mode=mode).results
    finally:
        engine.embedder = inner


@pytest.mark.parametrize("mode", ["collapsed", "dense", "bm25", "hybrid", "tri_graph"])
def test_the_filter_note_follows_under_filter(engine, mode):
    note = query(engine, "a planet with a moon", mode=mode, where={"equals": {"key": "doc_id", "value": "d1"}}).note
    assert (FILTER_NOTE in note) == (MODES[mode].under_filter == LEAVES_ONLY)
    assert MODES[mode].under_filter in (NATIVE, LEAVES_ONLY)


def test_lists_are_drawn_from_the_table():
    assert families() == ["summary", "lexical", "hybrid", "graph", "fusion", "router"]
    assert GRAPH_MODES == tuple(m for m in mode_names() if MODES[m].family == "graph")
    assert DEFAULT_MODES.split(",") == [m for m in mode_names() if MODES[m].variant_of is None]
    assert "auto" not in SINGLE_MODES and "detailed" not in SINGLE_MODES and "fusion" in SINGLE_MODES
    assert modes_of("summary", variants=False) == ["collapsed", "dense"]
    assert all(callable(m.run) and not isinstance(m.run, str) for m in MODES.values())


def test_a_plain_engine_without_lexical_index_lacks_the_lexical_modes():
    engine = make_engine()
    from eragraph.services.modes import available_modes

    assert not {m for m in mode_names() if MODES[m].needs_lexical} & set(available_modes(engine))
