"""Graph math of entity-graph retrieval: PPR (exact and local push), LinearRAG activation and
passage init, TERAG restart weights, E2GraphRAG pair filtering and index mapping."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest
import scipy.sparse as sp

from eragraph.domain import graph_math as gm


def test_ppr_two_nodes_matches_hand_computation():
    # a - b, restart at a: x_a = (1-d) + d x_b, x_b = d x_a  =>  x_a = 1/(1+d), x_b = d/(1+d)
    adj = sp.csr_matrix(np.array([[0.0, 1.0], [1.0, 0.0]]))
    d = 0.85
    x = gm.ppr(adj, np.array([1.0, 0.0]), damping=d, tol=1e-12, max_iter=1000)
    assert x == pytest.approx([1 / (1 + d), d / (1 + d)], abs=1e-8)


def test_ppr_path_of_three_matches_linear_solve():
    adj = np.array([[0, 2.0, 0], [2.0, 0, 1.0], [0, 1.0, 0]])
    d = 0.5
    p = np.array([0.2, 0.0, 0.8])
    t = adj / adj.sum(axis=1, keepdims=True)
    expected = np.linalg.solve(np.eye(3) - d * t.T, (1 - d) * p)
    got = gm.ppr(sp.csr_matrix(adj), p, damping=d, tol=1e-13, max_iter=2000)
    assert got == pytest.approx(expected, abs=1e-9)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_ppr_agrees_with_networkx_pagerank(seed):
    g = nx.gnm_random_graph(30, 60, seed=seed)
    rng = np.random.default_rng(seed)
    for u, v in g.edges:
        g[u][v]["weight"] = float(rng.integers(1, 5))
    g.add_node(30)  # a dangling node
    nodes = sorted(g.nodes)
    personal = {n: 0.0 for n in nodes}
    personal[0], personal[5], personal[30] = 1.0, 2.0, 0.5
    expected = nx.pagerank(g, alpha=0.85, personalization=personal, weight="weight", tol=1e-12, max_iter=1000)
    adj = nx.to_scipy_sparse_array(g, nodelist=nodes, weight="weight")
    got = gm.ppr(adj, np.array([personal[n] for n in nodes]), damping=0.85, tol=1e-13, max_iter=1000)
    assert got == pytest.approx([expected[n] for n in nodes], abs=1e-7)


def test_ppr_rejects_empty_personalization():
    with pytest.raises(ValueError):
        gm.ppr(sp.csr_matrix((2, 2)), np.zeros(2))


@pytest.mark.parametrize("seed", range(5))
def test_push_ppr_ranking_agrees_with_exact(seed):
    g = nx.connected_watts_strogatz_graph(60, 4, 0.3, seed=seed)
    rng = np.random.default_rng(seed)
    for u, v in g.edges:
        g[u][v]["weight"] = float(rng.integers(1, 4))
    adj = sp.csr_matrix(nx.to_scipy_sparse_array(g, nodelist=range(60), weight="weight"))
    seeds = {int(s): float(w) for s, w in zip(rng.choice(60, 3, replace=False), [1.0, 0.5, 0.25])}
    personal = np.zeros(60)
    for s, w in seeds.items():
        personal[s] = w
    exact = gm.ppr(adj, personal, damping=0.85, tol=1e-14, max_iter=3000)

    def neighbours(u):
        row = adj.getrow(u)
        return list(zip(row.indices.tolist(), row.data.tolist()))

    eps = 1e-7
    approx = gm.push_ppr(seeds, neighbours, damping=0.85, epsilon=eps)
    vec = np.array([approx.get(i, 0.0) for i in range(60)])
    degree = np.asarray(adj.sum(axis=1)).reshape(-1)
    # the residual bound: every estimate is below the truth by at most eps * (total degree)
    assert np.all(vec <= exact + 1e-12)
    assert np.abs(vec - exact).sum() <= eps * degree.sum()
    assert list(np.argsort(-vec, kind="stable")[:10]) == list(np.argsort(-exact, kind="stable")[:10])


def test_push_ppr_reads_only_a_neighbourhood():
    # a long path: with a coarse epsilon, push never touches the far end
    n = 200
    read = set()

    def neighbours(u):
        read.add(u)
        return [(v, 1.0) for v in (u - 1, u + 1) if 0 <= v < n]

    est = gm.push_ppr({0: 1.0}, neighbours, damping=0.5, epsilon=1e-3)
    assert max(read) < 30
    assert est[0] > est.get(1, 0) > est.get(2, 0)


def _mention():
    # sentences x entities; entities: 0 q-entity, 1 bridge, 2 answer, 3 noise
    return sp.csr_matrix(np.array([
        [1, 1, 0, 0],  # s0: query entity + bridge
        [0, 1, 1, 0],  # s1: bridge + answer
        [1, 0, 0, 1],  # s2: query entity + noise
    ], dtype=float))


def test_semantic_bridging_reaches_two_hops_and_prunes():
    sigma = np.array([0.9, 0.8, 0.2])
    seeds = np.array([1.0, 0, 0, 0])
    act, tier = gm.semantic_bridging(_mention(), sigma, seeds, threshold=0.4, max_iter=3)
    assert act[1] == pytest.approx(0.9)   # bridge: 0.9 * 1.0
    assert act[2] == pytest.approx(0.72)  # answer: 0.8 * 0.9, reached in step 3
    assert act[3] == 0.0                  # noise: 0.2 < threshold, pruned
    assert list(tier) == [1, 2, 3, 0]
    # one iteration stops at the bridge
    act1, tier1 = gm.semantic_bridging(_mention(), sigma, seeds, threshold=0.4, max_iter=1)
    assert act1[2] == 0.0 and tier1[2] == 0


def test_semantic_bridging_local_equals_matrix_form():
    m = _mention()
    sigma = np.array([0.9, 0.8, 0.7])
    seeds = np.array([0.8, 0, 0, 0])
    act, tier = gm.semantic_bridging(m, sigma, seeds, threshold=0.3, max_iter=3)
    sents = {f"s{i}": [int(j) for j in m.getrow(i).indices] for i in range(m.shape[0])}

    def sentences_of(ents):
        return {e: [s for s, es in sents.items() if e in es] for e in ents}

    def info(sids):
        return {s: (float(sigma[int(s[1:])]), sents[s]) for s in sids}

    act_l, tier_l = gm.semantic_bridging_local({0: 0.8}, sentences_of, info, threshold=0.3, max_iter=3)
    assert {e: pytest.approx(v) for e, v in act_l.items()} == {i: act[i] for i in range(4) if act[i] > 0}
    assert tier_l == {i: int(tier[i]) for i in range(4) if tier[i] > 0}


def test_passage_init_follows_eq7():
    contain = sp.csr_matrix(np.array([[2, 0], [0, 1], [0, 0]], dtype=float))
    act = np.array([0.5, 0.9])
    tier = np.array([1, 2])
    got = gm.passage_init(np.array([0.3, 0.2, 0.9]), contain, act, tier, lam=0.1, passage_weight=0.5)
    expected = [(0.1 * 0.3 + np.log1p(0.5 * np.log1p(2) / 1)) * 0.5,
                (0.1 * 0.2 + np.log1p(0.9 * np.log1p(1) / 2)) * 0.5,
                (0.1 * 0.9) * 0.5]
    assert got == pytest.approx(expected)


def test_restart_weights_normalize_within_groups():
    w = gm.restart_weights(["a", "b"], {"c": 0.8, "d": 0.4, "a": 0.9}, {"a": 1, "b": 3, "c": 2, "d": 1})
    # exact: 1/1, 1/3 -> 0.75, 0.25; semantic: 0.8/2, 0.4/1 -> 0.5, 0.5; a stays exact only
    assert w == pytest.approx({"a": 0.75, "b": 0.25, "c": 0.5, "d": 0.5})
    assert gm.restart_weights([], {"x": 0.5}, {}) == pytest.approx({"x": 1.0})
    assert gm.restart_weights([], {}, {}) == {}


GRAPH = {"a": ["b"], "b": ["a", "c"], "c": ["b", "d"], "d": ["c"], "x": ["y"], "y": ["x"]}


def test_pairs_within_hops():
    nb = lambda e: GRAPH.get(e, [])  # noqa: E731
    assert gm.pairs_within_hops(["a", "c", "x"], nb, 2) == [("a", "c", 2)]
    assert gm.pairs_within_hops(["a", "c", "x"], nb, 1) == []
    assert gm.pairs_within_hops(["a", "d"], nb, 3) == [("a", "d", 3)]
    assert gm.hop_distance("a", "x", nb, 10) is None


def test_index_mapping_and_ranking():
    postings = {"a": {"c1", "c2", "c3"}, "b": {"c2", "c3"}, "c": {"c3", "c4"}}
    chunks = gm.index_mapping([("a", "b"), ("b", "c")], lambda e: postings[e])
    assert chunks == {"c2", "c3"}
    assert gm.index_mapping([("a", "c")], lambda e: postings[e]) == {"c3"}
    rows = gm.coverage_occurrence_rank({"c2": {"a": 5, "b": 1}, "c3": {"a": 1, "b": 1, "c": 1}, "c9": {"z": 9}},
                                       ["a", "b", "c"])
    assert [r[0] for r in rows] == ["c3", "c2", "c9"]
    assert rows[1] == ("c2", 2, 6)
