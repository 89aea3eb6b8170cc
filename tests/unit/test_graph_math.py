"""Graph math of entity-graph retrieval: PPR (exact and local push), LinearRAG activation and
passage init, TERAG restart weights, E2GraphRAG pair filtering and index mapping."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest
import scipy.sparse as sp

from eragraph.domain import graph_math as gm


def push_ppr(seeds, neighbours_many, damping=0.85, epsilon=1e-4, **kw):
    """The estimate of gm.push_ppr_rounds (the services read its rounds and bounds too)."""
    return gm.push_ppr_rounds(seeds, neighbours_many, damping, epsilon, **kw).estimate



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


def test_one_walk_serves_every_personalization_of_its_graph():
    """gm.walk made once gives the same PageRank as the adjacency itself, for any restart."""
    g = nx.gnm_random_graph(25, 50, seed=3)
    g.add_node(25)  # a dangling node
    adj = nx.to_scipy_sparse_array(g, nodelist=sorted(g.nodes))
    w = gm.walk(adj)
    assert w.n == 26 and w.dangling[25]
    rng = np.random.default_rng(3)
    for _ in range(3):
        p = rng.random(26)
        assert np.array_equal(gm.ppr(w, p, tol=1e-10), gm.ppr(adj, p, tol=1e-10))
    with pytest.raises(ValueError):
        gm.ppr(w, np.ones(5))


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
    approx = push_ppr(seeds, gm.batched(neighbours), damping=0.85, epsilon=eps)
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

    est = push_ppr({0: 1.0}, gm.batched(neighbours), damping=0.5, epsilon=1e-3)
    assert max(read) < 30
    assert est[0] > est.get(1, 0) > est.get(2, 0)


def _random_graph(seed: int, n: int = 120, hubs: int = 0):
    """A connected weighted random graph (optionally with hub nodes tied to a third of the
    graph), its scipy adjacency, degrees and a batched reader that counts its calls."""
    g = nx.connected_watts_strogatz_graph(n, 4, 0.3, seed=seed)
    rng = np.random.default_rng(seed)
    for h in range(hubs):
        for v in rng.choice(n, n // 3, replace=False):
            if int(v) != h:
                g.add_edge(h, int(v))
    for u, v in g.edges:
        g[u][v]["weight"] = float(rng.integers(1, 5))
    adj = sp.csr_matrix(nx.to_scipy_sparse_array(g, nodelist=range(n), weight="weight"))
    degree = np.asarray(adj.sum(axis=1)).reshape(-1)
    calls = []

    def many(nodes):
        calls.append(list(nodes))
        out = {}
        for u in nodes:
            row = adj.getrow(u)
            out[u] = (list(zip(row.indices.tolist(), row.data.tolist())), float(row.data.sum()))
        return out

    return g, adj, degree, many, calls


def _exact(adj, seeds, damping):
    personal = np.zeros(adj.shape[0])
    for s, w in seeds.items():
        personal[s] = w
    return gm.ppr(adj, personal, damping=damping, tol=1e-15, max_iter=5000)


def _kendall_tau(a, b):
    n = len(a)
    s = 0
    for i in range(n):
        for j in range(i + 1, n):
            s += np.sign(a[i] - a[j]) * np.sign(b[i] - b[j])
    return s / (n * (n - 1) / 2)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("damping", [0.5, 0.85])
def test_push_rounds_error_is_bounded_by_epsilon_times_degree(seed, damping):
    g, adj, degree, many, calls = _random_graph(seed)
    rng = np.random.default_rng(100 + seed)
    seeds = {int(s): float(w) for s, w in zip(rng.choice(adj.shape[0], 4, replace=False), [1.0, 0.7, 0.3, 0.1])}
    exact = _exact(adj, seeds, damping)
    # networkx agrees on the reference itself
    ref = nx.pagerank(g, alpha=damping, personalization={u: seeds.get(u, 0.0) for u in g}, weight="weight",
                      tol=1e-13, max_iter=5000)
    assert exact == pytest.approx([ref[i] for i in range(adj.shape[0])], abs=1e-8)
    for eps in (1e-3, 1e-5):
        res = gm.push_ppr_rounds(seeds, many, damping=damping, epsilon=eps)
        assert res.complete and res.parked_mass == 0.0
        vec = np.array([res.estimate.get(i, 0.0) for i in range(adj.shape[0])])
        err = exact - vec
        # ACL on a symmetric graph: 0 <= ppr(v) - p(v) < eps * deg(v); L1 error = residual left
        assert err.min() >= -1e-12
        assert np.all(err <= eps * degree + 1e-12)
        assert err.sum() == pytest.approx(res.residual_mass, abs=1e-9)
    # at the fine epsilon the top of the ranking is the exact one
    top = list(np.argsort(-exact, kind="stable")[:10])
    assert len(set(top) & set(np.argsort(-vec, kind="stable")[:10].tolist())) >= 9
    assert _kendall_tau(exact[top], vec[top]) >= 0.9


def test_push_rounds_batch_the_neighbourhood_reads():
    _, adj, degree, many, calls = _random_graph(7, n=400)
    res = gm.push_ppr_rounds({0: 1.0, 17: 0.5}, many, damping=0.85, epsilon=1e-6)
    read = [u for c in calls for u in c]
    assert len(read) == len(set(read)) == res.fetched  # every node read once (the cache)
    assert res.pushes > 20 * len(calls)  # far fewer calls than pushes
    assert len(calls) == res.fetches <= res.rounds + 1
    assert res.fetched > 50 * len(calls) / 10


def test_push_rounds_do_not_read_nodes_that_can_not_be_pushed():
    # a star: the centre receives tiny residual from each leaf's push; with a coarse epsilon the
    # leaves of the far side are never read
    n = 200
    calls = []

    def many(nodes):
        calls.append(list(nodes))
        out = {}
        for u in nodes:
            nb = [(v, 1.0) for v in (u - 1, u + 1) if 0 <= v < n]
            out[u] = (nb, float(len(nb)))
        return out

    res = gm.push_ppr_rounds({0: 1.0}, many, damping=0.5, epsilon=1e-3)
    read = {u for c in calls for u in c}
    assert max(read) < 15
    assert res.estimate[0] > res.estimate[1] > res.estimate[2]


@pytest.mark.parametrize("seed", range(3))
def test_push_hub_cap_parks_mass_within_the_bound(seed):
    g, adj, degree, many, calls = _random_graph(seed, n=150, hubs=2)
    seeds = {0: 1.0, 1: 0.5, 60: 0.5}
    exact = _exact(adj, seeds, 0.85)
    eps = 1e-6
    full = gm.push_ppr_rounds(seeds, many, damping=0.85, epsilon=eps)
    capped = gm.push_ppr_rounds(seeds, many, damping=0.85, epsilon=eps, hub_cap=8)
    assert full.parked_mass == 0.0 and capped.parked_mass > 0.0
    vec = np.array([capped.estimate.get(i, 0.0) for i in range(adj.shape[0])])
    err = exact - vec
    # parking withholds mass: still a lower bound, each node off by at most eps*deg + parked,
    # and the L1 error is exactly residual + parked
    assert err.min() >= -1e-12
    assert np.all(err <= eps * degree + capped.parked_mass + 1e-12)
    assert err.sum() == pytest.approx(capped.residual_mass + capped.parked_mass, abs=1e-9)
    # parked <= damping * sum of pushed residual times the dropped share of each capped hub
    share = max(1.0 - np.sort(adj.getrow(h).data)[::-1][:8].sum() / degree[h] for h in (0, 1))
    assert capped.parked_mass <= 0.85 * share * 1.0 / 0.15 + 1e-12
    # a capped node reads only its 8 heaviest edges: nodes reachable only through a hub's
    # light edges are never seen
    assert capped.fetched <= full.fetched


def test_push_rounds_isolated_seed_keeps_its_mass():
    res = gm.push_ppr_rounds({"a": 1.0, "b": 1.0}, lambda ns: {"a": ([("c", 1.0)], 1.0), "c": ([("a", 1.0)], 1.0)}
                             if "a" in ns else {"c": ([("a", 1.0)], 1.0)}, damping=0.85, epsilon=1e-9)
    assert res.estimate["b"] == pytest.approx(0.5)
    assert res.estimate["a"] + res.estimate["c"] == pytest.approx(0.5, abs=1e-6)
    assert gm.push_ppr_rounds({}, lambda ns: {}).estimate == {}


@pytest.mark.parametrize("h", [1, 2, 3, 4])
def test_pairs_within_hops_batched_equals_bfs(h):
    g = nx.connected_watts_strogatz_graph(80, 4, 0.1, seed=3)
    calls = []

    def many(nodes):
        calls.append(list(nodes))
        return {u: list(g.neighbors(u)) for u in nodes}

    ents = [0, 5, 11, 40, 41, 79]
    want = gm.pairs_within_hops(ents, lambda u: list(g.neighbors(u)), h)
    assert gm.pairs_within_hops_batched(ents, many, h) == want
    assert len(calls) <= (h + 1) // 2
    if h == 2:  # only the query entities' own neighbourhoods are read
        assert {u for c in calls for u in c} == set(ents)


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


def test_min_max_scales_to_unit_interval():
    import numpy as np

    from eragraph.domain.graph_math import min_max

    assert np.allclose(min_max(np.array([0.2, 0.6, 0.4])), [0.0, 1.0, 0.5])
    assert np.allclose(min_max(np.array([0.3, 0.3])), [0.0, 0.0])
    assert min_max(np.array([])).size == 0


@pytest.mark.parametrize("seed", range(5))
def test_the_kept_matrices_give_the_activation_and_restart_made_from_the_counts(seed):
    """semantic_bridging with M^T given and passage_init with ln(1 + C) given (the snapshot keeps
    both) compute exactly what they compute from M and C."""
    import scipy.sparse as sp

    rng = np.random.default_rng(seed)
    mention = sp.random(30, 12, density=0.2, random_state=seed, format="csr")
    mention.data = np.ceil(mention.data * 3)
    contain = sp.random(9, 12, density=0.3, random_state=seed + 7, format="csr")
    contain.data = np.ceil(contain.data * 4)
    sigma, seeds = rng.random(30), np.where(rng.random(12) < 0.25, rng.random(12), 0.0)
    for top in (0, 2):
        made = gm.semantic_bridging(mention, sigma, seeds, 0.1, 3, top)
        kept = gm.semantic_bridging(mention, sigma, seeds, 0.1, 3, top, mention.T.tocsr().astype(np.float64))
        assert np.array_equal(made[0], kept[0]) and np.array_equal(made[1], kept[1])
        psim = rng.random(9)
        assert np.array_equal(gm.passage_init(psim, contain, made[0], made[1], 0.5, 0.05),
                              gm.passage_init(psim, contain, made[0], made[1], 0.5, 0.05, gm.log1p_counts(contain)))
