"""Rules of domain.graph_math a caller relies on, each checked against a reference computed here
(a linear solve for PPR, hand-built graphs whose answer is known): the push's mass, budgets,
reads and hub cap; the restart weights; LinearRAG's bridging (matrix and local forms); the
E2GraphRAG functions' edge cases."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from eragraph.domain import graph_math as gm


def exact_ppr(adj: np.ndarray, p: np.ndarray, d: float) -> np.ndarray:
    t = adj / adj.sum(axis=1, keepdims=True)
    return np.linalg.solve(np.eye(len(p)) - d * t.T, (1 - d) * p)


def graph_of(adj: np.ndarray):
    """neighbours_many over a dense symmetric matrix, logging every node it is asked for."""
    asked: list = []

    def many(nodes):
        asked.extend(nodes)
        return {u: ([(v, float(adj[u, v])) for v in np.flatnonzero(adj[u])], float(adj[u].sum())) for u in nodes}

    return many, asked


def random_graph(n: int, seed: int, low: float = 1.0, high: float = 3.0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    adj = np.zeros((n, n))
    for i in range(n):  # a ring keeps it connected, chords make it irregular
        adj[i, (i + 1) % n] = adj[(i + 1) % n, i] = rng.uniform(low, high)
    for _ in range(n):
        i, j = rng.integers(0, n, 2)
        if i != j:
            adj[i, j] = adj[j, i] = rng.uniform(low, high)
    return adj


# ---------------------------------------------------------------- push PPR


@pytest.mark.parametrize("seeds", [{}, {"a": 0.0}, {"a": -1.0, "b": 0.0}])
def test_seeds_without_mass_read_nothing_and_settle_nothing(seeds):
    many, asked = graph_of(np.zeros((1, 1)))
    res = gm.push_ppr_rounds(seeds, many)
    assert res == gm.PushOutcome({}, 0.0, 0.0, 0, 0, 0, 0, True)
    assert asked == []


def test_the_defaults_approximate_ppr_at_damping_0_85_within_epsilon_times_degree():
    adj = random_graph(12, 0)
    p = np.zeros(12)
    p[[0, 5]] = [0.25, 0.75]
    many, _ = graph_of(adj)
    res = gm.push_ppr_rounds({0: 1.0, 5: 3.0}, many)
    x = exact_ppr(adj, p, 0.85)
    est = np.array([res.estimate.get(i, 0.0) for i in range(12)])
    assert res.complete
    assert np.all(x - est >= -1e-12)
    assert np.all(x - est <= 1e-4 * adj.sum(axis=1) + 1e-12)


@pytest.mark.parametrize("seed", [1, 2])
def test_the_error_bound_holds_with_fractional_degrees(seed):
    # degrees below 1: the push threshold is epsilon times the degree, not epsilon
    adj = random_graph(15, seed, low=0.02, high=0.2)
    many, _ = graph_of(adj)
    eps = 0.05
    res = gm.push_ppr_rounds({0: 1.0}, many, damping=0.6, epsilon=eps)
    p = np.zeros(15)
    p[0] = 1.0
    x = exact_ppr(adj, p, 0.6)
    est = np.array([res.estimate.get(i, 0.0) for i in range(15)])
    assert np.all(x - est >= -1e-12)
    assert np.all(x - est <= eps * adj.sum(axis=1) + 1e-12)


def dangling():
    """a - b (symmetric), a -> z where z has no neighbours (absent from the answer), b - c with
    weight 0.5 (a fractional degree)."""
    asked: list = []
    calls: list = []
    edges = {"a": [("b", 1.0), ("z", 1.0)], "b": [("a", 1.0), ("c", 0.5)], "c": [("b", 0.5)]}

    def many(nodes):
        calls.append(list(nodes))
        asked.extend(nodes)
        return {u: (edges[u], sum(w for _, w in edges[u])) for u in nodes if u in edges}

    return many, asked, calls


def test_every_node_is_read_once_and_counted_as_fetched():
    many, asked, calls = dangling()
    res = gm.push_ppr_rounds({"a": 1.0}, many, damping=0.85, epsilon=1e-6)
    assert res.complete
    assert sorted(asked) == sorted(set(asked)) == ["a", "b", "c", "z"]
    assert res.fetched == 4
    assert res.fetches == len(calls)


def test_mass_is_conserved_and_a_node_without_neighbours_keeps_what_reaches_it():
    many, _, _ = dangling()
    res = gm.push_ppr_rounds({"a": 1.0}, many, damping=0.85, epsilon=1e-6)
    assert sum(res.estimate.values()) + res.residual_mass + res.parked_mass == pytest.approx(1.0, abs=1e-12)
    # z is reached by every push of a (several rounds); it restarts onto itself, so it holds what
    # a sends it in total: 0.85 * (a's pushed mass) / 2, and a settles 0.15 of the same mass
    assert res.estimate["z"] == pytest.approx(0.85 / 2 * res.estimate["a"] / 0.15, rel=1e-4)


def test_the_estimate_lists_only_nodes_with_settled_mass():
    adj = random_graph(30, 3)
    many, _ = graph_of(adj)
    res = gm.push_ppr_rounds({0: 1.0}, many, damping=0.85, epsilon=0.05)
    assert res.residual_mass > 0  # some nodes hold residual only
    assert res.estimate and all(v > 0 for v in res.estimate.values())


def test_the_round_budget_stops_the_push_and_says_so():
    adj = random_graph(40, 4)
    many, _ = graph_of(adj)
    res = gm.push_ppr_rounds({0: 1.0}, many, damping=0.85, epsilon=1e-8, max_rounds=3)
    assert (res.rounds, res.complete) == (3, False)
    res = gm.push_ppr_rounds({0: 1.0}, many, damping=0.85, epsilon=1e-8, max_pushes=1)
    assert (res.rounds, res.pushes, res.complete) == (1, 1, False)
    assert res.residual_mass == pytest.approx(0.85)


def test_the_hub_cap_keeps_the_heaviest_edges_ties_by_name_and_parks_the_rest():
    items = [("z", 1.0), ("y", 1.0), ("a", 0.5), ("b", 3.0)]  # y and z tie; the store lists z first

    def many(nodes):
        return {u: (items, 5.5) for u in nodes if u == "h"}

    res = gm.push_ppr_rounds({"h": 1.0}, many, damping=0.85, epsilon=1e-6, hub_cap=2)
    assert set(res.estimate) == {"h", "b", "y"}
    assert res.estimate["b"] == pytest.approx(0.85 * 3.0 / 5.5)
    assert res.parked_mass == pytest.approx(0.85 * 1.5 / 5.5)
    uncapped = gm.push_ppr_rounds({"h": 1.0}, many, damping=0.85, epsilon=1e-6, hub_cap=4)
    assert set(uncapped.estimate) == {"h", "a", "b", "y", "z"} and uncapped.parked_mass == 0.0


def test_a_truncated_neighbour_list_parks_the_missing_share():
    # a's degree is 1 but its list is empty (the store truncated it): its spread is parked; b
    # pushes in the same round
    edges = {"a": ([], 1.0), "b": ([("c", 1.0)], 1.0), "c": ([("b", 1.0)], 1.0)}
    res = gm.push_ppr_rounds({"a": 1.0, "b": 1.0}, lambda nodes: {u: edges[u] for u in nodes}, damping=0.85,
                             epsilon=1e-6)
    assert res.parked_mass == pytest.approx(0.85 * 0.5)
    assert sum(res.estimate.values()) + res.residual_mass + res.parked_mass == pytest.approx(1.0)


def test_a_degree_bound_keeps_a_hub_unread_and_is_asked_once_per_node():
    hub = [(f"x{i}", 1.0) for i in range(200)]
    edges = {"s": [("h", 1.0)] + [(f"t{i}", 1.0) for i in range(70)], "h": [("s", 1.0)] + hub,
             **{f"t{i}": [("s", 1.0)] for i in range(70)}}
    asked, bounded = [], []

    def many(nodes):
        asked.extend(nodes)
        return {u: (edges[u], float(len(edges[u]))) for u in nodes if u in edges}

    def bounds(nodes):
        bounded.extend(nodes)
        return {u: float(len(edges[u])) for u in nodes if u == "h"}

    res = gm.push_ppr_rounds({"s": 1.0}, many, damping=0.85, epsilon=1e-3, degree_bounds=bounds)
    assert "h" not in asked
    assert len(bounded) == len(set(bounded)) and "h" in bounded
    assert res.complete
    # h first receives 0.85 / 71 ~ 0.012, under epsilon * 201 = 0.015; s's second push brings it
    # over, and h is read then, its bound not asked again
    asked.clear()
    bounded.clear()
    gm.push_ppr_rounds({"s": 1.0}, many, damping=0.85, epsilon=0.015 / 201, degree_bounds=bounds)
    assert "h" in asked and len(asked) == len(set(asked))
    assert len(bounded) == len(set(bounded)) and "h" in bounded


@pytest.mark.parametrize("bounds", [None, lambda nodes: {"b": 1.0}])
def test_a_residual_exactly_epsilon_times_the_degree_is_pushed(bounds):
    # a - b, weight 1, damping 0.5: b receives exactly 0.5 = epsilon * deg(b)
    edges = {"a": ([("b", 1.0)], 1.0), "b": ([("a", 1.0)], 1.0)}
    res = gm.push_ppr_rounds({"a": 1.0}, lambda nodes: {u: edges[u] for u in nodes}, damping=0.5, epsilon=0.5,
                             degree_bounds=bounds)
    assert res.estimate == {"a": 0.5, "b": 0.25}
    assert res.residual_mass == 0.25 and res.complete


def test_a_degree_bound_the_store_does_not_know_changes_nothing():
    adj = random_graph(80, 5, low=0.01, high=0.05)  # more than 64 nodes, degrees far below 1
    many, _ = graph_of(adj)
    plain = gm.push_ppr_rounds({0: 1.0}, many, damping=0.85, epsilon=0.3)
    many, _ = graph_of(adj)
    unknown = gm.push_ppr_rounds({0: 1.0}, many, damping=0.85, epsilon=0.3, degree_bounds=lambda nodes: {})
    assert unknown.estimate == pytest.approx(plain.estimate)
    assert (unknown.fetched, unknown.pushes) == (plain.fetched, plain.pushes)
    many, _ = graph_of(adj)
    small = gm.push_ppr_rounds({0: 1.0}, many, damping=0.85, epsilon=1e-4, degree_bounds=lambda nodes: {})
    assert small.fetched > 64


def test_batched_reports_the_sum_of_the_positive_weights():
    many = gm.batched(lambda u: [("b", 0.5), ("c", 0.25), ("d", 0.0), ("e", 2)])
    assert many(["a"]) == {"a": ([("b", 0.5), ("c", 0.25), ("d", 0.0), ("e", 2.0)], 2.75)}


# ---------------------------------------------------------------- exact PPR


def test_ppr_defaults_are_damping_0_85_converged():
    adj = random_graph(10, 6)
    p = np.arange(10, dtype=float)
    got = gm.ppr(sp.csr_matrix(adj), p)
    assert got == pytest.approx(exact_ppr(adj, p / p.sum(), 0.85), abs=1e-6)


@pytest.mark.parametrize("p, message", [
    ([1.0, 0.0, 0.0], "personalization length must equal the number of nodes"),
    ([1.0, -0.5], "personalization must be non-negative"),
    ([0.0, 0.0], "personalization has no mass"),
])
def test_ppr_refuses_a_bad_personalization_in_words(p, message):
    with pytest.raises(ValueError) as err:
        gm.ppr(sp.csr_matrix(np.array([[0.0, 1.0], [1.0, 0.0]])), np.array(p))
    assert str(err.value) == message


# ---------------------------------------------------------------- TERAG restart weights


def test_restart_weights_count_a_missing_frequency_as_one():
    w = gm.restart_weights(["a", "b"], {"c": 0.5, "d": 0.5}, {"a": 3.0, "c": 2.0})
    assert w == pytest.approx({"a": 0.25, "b": 0.75, "c": 1 / 3, "d": 2 / 3})


def test_a_semantic_group_without_positive_similarity_carries_no_mass():
    assert gm.restart_weights(["a"], {"c": -0.2, "d": 0.0}, {}) == {"a": 1.0}
    assert gm.restart_weights([], {"c": 0.0}, {}) == {}


# ---------------------------------------------------------------- LinearRAG bridging


def chain(n_ent: int, sim):
    """Entities e0..e{n-1}, sentence s_i mentions e_i and e_{i+1}, with similarity sim (one
    number, or one per sentence)."""
    m = np.zeros((n_ent - 1, n_ent))
    for i in range(n_ent - 1):
        m[i, i] = m[i, i + 1] = 1.0
    sigma = np.broadcast_to(np.asarray(sim, dtype=float), (n_ent - 1,)).copy()
    return m, sigma


def local_of(m: np.ndarray, sigma: np.ndarray):
    def sentences_of(ents):
        return {e: [s for s in np.flatnonzero(m[:, e])] for e in ents}

    def sentence_info(sids):
        return {s: (float(sigma[s]), list(np.flatnonzero(m[s]))) for s in sids}

    return sentences_of, sentence_info


@pytest.mark.parametrize("top", [0, 1])
def test_bridging_defaults_take_three_steps_over_0_4(top):
    m, sigma = chain(6, [0.9, 0.95, 0.96, 0.97, 0.98])  # each entity's best sentence leads on
    seeds = np.zeros(6)
    seeds[0] = 1.0
    a, tier = gm.semantic_bridging(sp.csr_matrix(m), sigma, seeds, top_sentences=top)
    assert tier.tolist() == [1, 2, 3, 4, 0, 0]
    act, tiers = gm.semantic_bridging_local({0: 1.0}, *local_of(m, sigma), top_sentences=top)
    assert tiers == {0: 1, 1: 2, 2: 3, 3: 4}
    assert act[1] == pytest.approx(a[1]) and act[3] == pytest.approx(a[3])
    if top:
        assert a[:4] == pytest.approx([1.0, 0.9, 0.9 * 0.95, 0.9 * 0.95 * 0.96])


@pytest.mark.parametrize("top", [0, 1])
def test_a_score_equal_to_the_threshold_does_not_activate(top):
    m, sigma = chain(3, 0.5)
    seeds = np.array([1.0, 0.0, 0.0])
    _, tier = gm.semantic_bridging(sp.csr_matrix(m), sigma, seeds, threshold=0.5, top_sentences=top)
    assert tier.tolist() == [1, 0, 0]
    _, tiers = gm.semantic_bridging_local({0: 1.0}, *local_of(m, sigma), threshold=0.5, top_sentences=top)
    assert tiers == {0: 1}


def test_no_seed_activates_nothing():
    m, sigma = chain(3, 0.9)
    a, tier = gm.semantic_bridging(sp.csr_matrix(m), sigma, np.zeros(3))
    assert a.tolist() == [0.0, 0.0, 0.0] and tier.tolist() == [0, 0, 0]
    act, tiers = gm.semantic_bridging_local({0: 0.0}, *local_of(m, sigma))
    assert act == {} and tiers == {}


def top_sentence_graph():
    # seeds e0 (in no sentence: skipped, not an end to the step) and e1, which is in s0 (0.5,
    # with e2), s1 (0.9, with e3) and s2 (0.45, with e4)
    m = np.zeros((3, 5))
    m[0, [1, 2]] = 1.0
    m[1, [1, 3]] = 1.0
    m[2, [1, 4]] = 1.0
    sigma = np.array([0.5, 0.9, 0.45])
    seeds = np.zeros(5)
    seeds[[0, 1]] = 1.0
    return m, sigma, seeds


def test_top_sentences_spread_through_the_most_similar_sentences_only():
    m, sigma, seeds = top_sentence_graph()
    a, tier = gm.semantic_bridging(sp.csr_matrix(m), sigma, seeds, threshold=0.4, top_sentences=1)
    assert tier.tolist() == [1, 1, 0, 2, 0] and a[3] == pytest.approx(0.9)
    a, tier = gm.semantic_bridging(sp.csr_matrix(m), sigma, seeds, threshold=0.4, top_sentences=2)
    assert tier.tolist() == [1, 1, 2, 2, 0]
    assert a[2] == pytest.approx(0.5) and a[3] == pytest.approx(0.9)
    act, tiers = gm.semantic_bridging_local({0: 1.0, 1: 1.0}, *local_of(m, sigma), threshold=0.4, top_sentences=1)
    assert tiers == {0: 1, 1: 1, 3: 2} and act[3] == pytest.approx(0.9)


def test_one_sentence_entities_spread_and_scores_are_seed_times_similarity():
    m = np.zeros((2, 4))
    m[0, [0, 1]] = 1.0  # e0's only sentence
    m[1, [2, 3]] = 1.0  # e2's only sentence
    sigma = np.array([0.6, 0.8])
    seeds = np.array([0.5, 0.0, 1.0, 0.0])
    a, tier = gm.semantic_bridging(sp.csr_matrix(m), sigma, seeds, threshold=0.25, top_sentences=3)
    assert tier.tolist() == [1, 2, 1, 2]
    assert a.tolist() == pytest.approx([0.5, 0.3, 1.0, 0.8])


def test_the_local_form_keeps_the_best_score_or_the_sum_of_an_entity_reached_twice():
    # x is in s0 (0.9, with e0) and s1 (0.3, with e1), both seeds
    sentences = {"e0": ["s0"], "e1": ["s1"], "x": ["s0", "s1"]}
    info = {"s0": (0.9, ["e0", "x"]), "s1": (0.3, ["e1", "x"])}

    def sentences_of(ents):
        return {e: sentences[e] for e in ents}

    def sentence_info(sids):
        return {s: info[s] for s in sids}

    for seeds in ({"e0": 1.0, "e1": 1.0}, {"e1": 1.0, "e0": 1.0}):
        act, _ = gm.semantic_bridging_local(seeds, sentences_of, sentence_info, top_sentences=1)
        assert act["x"] == pytest.approx(0.9)
    act, _ = gm.semantic_bridging_local({"e0": 1.0, "e1": 1.0}, sentences_of, sentence_info, top_sentences=0)
    assert act["x"] == pytest.approx(1.2)
    act, tiers = gm.semantic_bridging_local({"e1": 1.0}, sentences_of, sentence_info, threshold=0.25)
    assert act["x"] == pytest.approx(0.3) and tiers["x"] == 2


def test_bipartite_adjacency_carries_the_entity_edges_as_csr():
    contain = sp.csr_matrix(np.array([[1, 0], [1, 1]]))
    ee = sp.csr_matrix(np.array([[0.0, 2.0], [2.0, 0.0]]))
    adj = gm.bipartite_adjacency(contain, ee)
    assert adj.format == "csr"
    assert adj.toarray().tolist() == [[0, 0, 1, 0], [0, 0, 1, 1], [1, 1, 0, 2], [0, 1, 2, 0]]
    assert gm.bipartite_adjacency(contain).toarray()[2:, 2:].tolist() == [[0, 0], [0, 0]]


# ---------------------------------------------------------------- E2GraphRAG functions


def test_hop_distance_of_a_node_to_itself_is_zero_and_each_node_is_read_once():
    ring = {i: [(i - 1) % 6, (i + 1) % 6] for i in range(6)}
    read = []

    def neighbours(u):
        read.append(u)
        return ring[u]

    assert gm.hop_distance(2, 2, neighbours, 3) == 0
    assert gm.hop_distance(0, 3, neighbours, 5) == 3
    assert len(read) == len(set(read))
    read.clear()
    assert gm.hop_distance(0, 9, neighbours, 10) is None  # the whole ring searched
    assert sorted(read) == list(range(6))


def test_pairs_within_hops_batched_when_nodes_have_no_neighbours():
    edges = {"a": ["b"], "b": ["a"]}  # c and d: absent from every answer

    def many(nodes):
        return {u: edges[u] for u in nodes if u in edges}

    got = gm.pairs_within_hops_batched(["a", "b", "c", "d"], many, 4)
    assert got == gm.pairs_within_hops(["a", "b", "c", "d"], lambda u: edges.get(u, []), 4) == [("a", "b", 1)]
    assert gm.pairs_within_hops_batched(["c", "d"], many, 4) == []


def test_coverage_ties_go_to_more_occurrences_then_to_the_chunk_id():
    rows = gm.coverage_occurrence_rank({"c3": {"x": 1}, "c1": {"x": 1}, "c2": {"x": 4}, "c0": {"x": 1, "y": 1}},
                                       ["x", "y"])
    assert [r[0] for r in rows] == ["c0", "c2", "c1", "c3"]


def test_min_max_of_equal_values_is_zeros_of_the_same_length():
    out = gm.min_max(np.array([2.0, 2.0, 2.0]))
    assert out.shape == (3,) and out.tolist() == [0.0, 0.0, 0.0]
    assert gm.min_max(np.array([1.0, 3.0, 2.0])).tolist() == [0.0, 1.0, 0.5]
