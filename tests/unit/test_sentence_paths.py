"""The ``paths`` mode: PropRAG's beam search over sentence chains (domain.sentence_paths) and the
mode around it (services.path_query), on hand-made data.

The planted chain: "Which team did the spouse of Anna Benson play for?" The answer passage
("Kris Benson did play for a team, the Mets.") never names Anna Benson; it is reached from the
spouse passage through Kris Benson. Three distractors name both Bensons twice and take the
PageRank mass, so tri_graph ranks the answer last; the path spouse -> team is the closest chain
to the question, and ``paths`` brings it into the top two (exact and push executions)."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from support import MemoryVectorIndex, make_engine, with_graph_settings

from eragraph.domain.sentence_paths import beam_paths, rrf_fuse, seed_sentences
from eragraph.services.ingest import SourceDoc, ingest
from eragraph.services.query import available_modes, query
from eragraph.services.resummarize import drain


def _unit(*xs):
    v = np.array(xs, dtype=np.float64)
    return v / np.linalg.norm(v)


# ---------------------------------------------------------------- domain


def chain():
    """Sentences 0 (A, B), 1 (B, C), 2 (A), 3 (D): the question is about the directions of 0
    and 1 together; 2 is close to the question but leads nowhere, 3 shares no entity."""
    vectors = np.array([_unit(1, 0, 0, 0), _unit(0, 1, 0, 0), _unit(0.8, 0.2, 0.1, 0), _unit(0, 0.9, 0, 0.4)])
    mention = sp.csr_matrix(np.array([[1, 1, 0, 0], [0, 1, 1, 0], [1, 0, 0, 0], [0, 0, 0, 1]]))
    return vectors, mention, _unit(1, 1, 0, 0)


def test_the_beam_follows_a_shared_entity_to_the_second_hop():
    vectors, mention, q = chain()
    res = beam_paths(vectors, q, mention, [0, 1, 2, 3], np.zeros(4), [0], width=2, depth=2, mass=0.0)
    assert res.paths[0] == ((0, 1), pytest.approx(1.0))
    # sentence 1 alone is 0.707 similar; its passage gets the chain's score
    assert res.passage_score[1] == pytest.approx(1.0)
    # 3 is linked to nothing on the path: never reached
    assert res.passage_score[3] == -np.inf


def test_depth_one_is_the_seeds_alone():
    vectors, mention, q = chain()
    res = beam_paths(vectors, q, mention, [0, 1, 2, 3], np.zeros(4), [0], width=2, depth=1, mass=0.0)
    assert [p for p, _ in res.paths] == [(0,)]
    assert np.isfinite(res.passage_score).tolist() == [True, False, False, False]


def test_the_beam_keeps_width_paths_and_the_prior_breaks_ties():
    vectors = np.array([_unit(1, 0), _unit(0, 1), _unit(0, 1)])
    mention = sp.csr_matrix(np.array([[1], [1], [1]]))
    q = _unit(1, 1)
    prior = np.array([0.0, 0.0, 1.0])  # passages of sentences 1 and 2 differ only by PageRank mass
    res = beam_paths(vectors, q, mention, [0, 1, 2], prior, [0], width=1, depth=2, mass=0.5)
    assert res.paths[0][0] == (0, 2)
    assert res.passage_score[2] > res.passage_score[1]


def test_seeds_are_the_most_similar_and_those_naming_a_question_entity():
    sim = np.array([0.9, 0.1, 0.8, 0.2])
    mention = sp.csr_matrix(np.array([[1, 0], [0, 1], [1, 0], [0, 1]]))
    assert seed_sentences(sim, mention, [], 2) == [0, 2]
    assert seed_sentences(sim, mention, [1], 1) == [0, 3]


def test_rrf_weights_the_second_list():
    assert [k for k, _ in rrf_fuse(["a", "b", "c"], ["c"], 0.0)] == ["a", "b", "c"]
    assert [k for k, _ in rrf_fuse(["a", "b", "c"], ["c"], 4.0)][0] == "c"
    assert [k for k, _ in rrf_fuse(["a"], ["b"], 1.0)] == ["a", "b"]  # ties keep the first list's order


# ---------------------------------------------------------------- the mode

QUESTION = "Which team did the spouse of Anna Benson play for?"
CORPUS = {
    "spouse": "Anna Benson is the spouse of Kris Benson.",
    "team": "Kris Benson did play for a team, the Mets.",
    "paris": "Anna Benson and Kris Benson visited Paris. Kris Benson liked Paris.",
    "boat": "Anna Benson and Kris Benson bought a boat. Kris Benson sailed the boat.",
    "dog": "Anna Benson and Kris Benson adopted a dog. Kris Benson walked the dog.",
}


def build(exact: bool | None, **graph):
    from eragraph.adapters.memory.entity_memory import MemoryEntityStore
    from eragraph.providers.spacy_ner import CapitalizedPhraseExtractor
    from eragraph.services.entity_hooks import install

    engine = make_engine()
    install(engine, CapitalizedPhraseExtractor(), MemoryEntityStore(), MemoryVectorIndex(), True)
    with_graph_settings(engine, threshold=0.05, exact=exact, **graph)
    ingest(engine, [SourceDoc(source=f"mem://{k}", doc_id=k, text=v) for k, v in CORPUS.items()])
    drain(engine)
    return engine


def top(engine, mode, k=2):
    return [r.doc_id for r in query(engine, QUESTION, mode=mode, k=k).results]


@pytest.mark.parametrize("exact", [None, False])
def test_paths_finds_the_second_hop_tri_graph_misses(exact):
    engine = build(exact, path_weight=4.0)
    assert "paths" in available_modes(engine)
    assert "team" not in top(engine, "tri_graph")
    assert top(engine, "paths") == ["spouse", "team"]


@pytest.mark.parametrize("exact", [None, False])
def test_paths_without_the_path_list_is_tri_graph(exact):
    engine = build(exact, path_weight=0.0)
    assert top(engine, "paths", k=5) == top(engine, "tri_graph", k=5)


def test_the_hop_is_what_finds_it():
    """With one seed sentence (the spouse's), a path of one sentence (no hop) does not reach the
    team; a path of two does."""
    assert "team" not in top(build(None, path_weight=4.0, path_beam=1, path_depth=1), "paths")
    assert top(build(None, path_weight=4.0, path_beam=1, path_depth=2), "paths") == ["spouse", "team"]


def test_paths_without_a_question_entity_answers_like_dense():
    engine = build(None)
    text = "which team did the spouse play for"
    assert [r.doc_id for r in query(engine, text, mode="paths", k=3).results] == \
        [r.doc_id for r in query(engine, text, mode="dense", k=3).results]


@pytest.mark.parametrize("route", ["tri_graph", "paths"])
def test_the_route_setting_puts_paths_behind_fusions_graph_list(monkeypatch, route):
    from eragraph.services import routing

    ran: list[str] = []
    for name in ("paths", "tri_graph"):
        real = getattr(routing, name)
        monkeypatch.setattr(routing, name, lambda *a, _real=real, _name=name, **kw: ran.append(_name) or _real(*a, **kw))
    engine = build(None, route=route)
    res = query(engine, QUESTION, mode="fusion", k=3)
    assert ran == [route] and res.route == "fusion"


def test_an_unknown_route_is_refused():
    from eragraph.config import GraphSettings

    with pytest.raises(ValueError, match="route"):
        GraphSettings(route="dense")
    assert GraphSettings.from_env({"ERAGRAPH_GRAPH_ROUTE": "paths"}).route == "paths"


def test_every_candidate_path_credits_its_passages_as_a_brute_force_does():
    """Depth 2, every seed kept: each passage's score is the best of the seeds in it and of every
    two-sentence path (seed, linked sentence) through it (the crediting is vectorised)."""
    rng = np.random.default_rng(3)
    for _ in range(10):
        n, e, p = 12, 5, 6
        vectors = rng.normal(size=(n, 4))
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        mention = (rng.random((n, e)) < 0.3).astype(float)
        passage_of = rng.integers(0, p, size=n)
        q = _unit(*rng.normal(size=4))
        seeds = [0, 1, 2]
        res = beam_paths(vectors, q, sp.csr_matrix(mention), passage_of, np.zeros(p), seeds, width=len(seeds),
                         depth=2, mass=0.0)
        best = np.full(p, -np.inf)
        for s in seeds:
            best[passage_of[s]] = max(best[passage_of[s]], float(vectors[s] @ q))
            for t in range(n):
                if t != s and (mention[s] * mention[t]).any():
                    v = vectors[s] + vectors[t]
                    sc = float(v @ q / np.linalg.norm(v)) if np.linalg.norm(v) > 0 else 0.0
                    for x in (s, t):
                        best[passage_of[x]] = max(best[passage_of[x]], sc)
        np.testing.assert_allclose(res.passage_score, best)
