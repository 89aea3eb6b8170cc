"""Hypothesis property tests of the domain's pure functions, beside the seeded ones: LSH codes,
filters, ranking ties and sequencers. Each states a rule that must hold for every input and
lets Hypothesis look for a counterexample (and shrink it). Modest example counts keep the
suite fast; the partition rule's own property test is in test_partition_reference.py."""

from __future__ import annotations

import json

import numpy as np
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from eragraph.domain import sequencer
from eragraph.domain.filters import (COMPARISONS, MAX_DEPTH, RANGES, All, AnyOf, Cond, cache_key, depth, matches,
                                     parse_filter, to_json)
from eragraph.domain.lsh import draw_hyperplanes, hash_vectors, majority_code
from eragraph.domain.ranking import Candidate, biased_merge, fill_budget, rank_key, rank_score

FAST = settings(max_examples=120, deadline=None)

# --- LSH codes -------------------------------------------------------------------------------

_planes = st.builds(lambda dim, n, seed: draw_hyperplanes("e", dim, n, seed),
                    st.integers(2, 12), st.integers(1, 16), st.integers(0, 2**31))


@FAST
@given(config=_planes, data=st.data())
def test_a_code_bit_is_the_side_of_its_hyperplane(config, data):
    rows = data.draw(st.lists(st.lists(st.floats(-1e3, 1e3, allow_nan=False), min_size=config.dim,
                                       max_size=config.dim), min_size=1, max_size=6))
    vectors = np.array(rows, dtype=np.float64)
    codes = hash_vectors(config, vectors)
    for v, code in zip(vectors, codes):
        assert 0 <= code < 1 << config.n_planes
        for j, plane in enumerate(config.planes):  # plane 0 is the most significant bit
            bit = code >> (config.n_planes - 1 - j) & 1
            assert bit == (float(np.dot(v, plane)) >= 0.0)
    # a positive scale changes no side; a batch codes like its rows one by one
    assert hash_vectors(config, vectors * 3.5) == codes
    assert [hash_vectors(config, v[None, :])[0] for v in vectors] == codes


@FAST
@given(bits=st.integers(1, 16), data=st.data())
def test_majority_code_takes_each_bit_by_vote_and_ties_from_its_own_code(bits, data):
    children = data.draw(st.lists(st.integers(0, (1 << bits) - 1), min_size=0, max_size=9))
    own = data.draw(st.integers(0, (1 << bits) - 1))
    code = majority_code(children, own, bits)
    if not children:
        assert code == own
        return
    for j in range(bits):
        ones = sum(c >> j & 1 for c in children)
        zeros = len(children) - ones
        want = 1 if ones > zeros else 0 if zeros > ones else own >> j & 1
        assert code >> j & 1 == want, (children, own, j)


# --- filters ---------------------------------------------------------------------------------

_keys = st.sampled_from(["lang", "year", "tags", "draft", "score", "absent"])
_scalars = st.one_of(st.text(min_size=0, max_size=6), st.integers(-5, 5), st.booleans(),
                     st.floats(-5, 5, allow_nan=False, allow_infinity=False))
_numbers = st.one_of(st.integers(-5, 5), st.floats(-5, 5, allow_nan=False, allow_infinity=False))


def _cond(op: str):
    if op in RANGES:
        return st.builds(Cond, st.just(op), _keys, _numbers)
    if op == "startsWith":
        return st.builds(Cond, st.just(op), _keys, st.text(min_size=1, max_size=3))
    if op in ("in", "notIn"):
        return st.builds(Cond, st.just(op), _keys, st.lists(_scalars, min_size=1, max_size=4).map(tuple))
    return st.builds(Cond, st.just(op), _keys, _scalars)


_conds = st.sampled_from(COMPARISONS).flatmap(_cond)
_filters = st.recursive(_conds, lambda inner: st.one_of(
    st.lists(inner, min_size=1, max_size=3).map(lambda xs: All(tuple(xs))),
    st.lists(inner, min_size=1, max_size=3).map(lambda xs: AnyOf(tuple(xs)))), max_leaves=12)
_attrs = st.dictionaries(st.sampled_from(["lang", "year", "tags", "draft", "score"]),
                         st.one_of(_scalars, st.lists(st.text(max_size=3), max_size=3)), max_size=5)


@FAST
@given(f=_filters)
def test_a_filter_survives_its_json(f):
    assume(depth(f) <= MAX_DEPTH)
    assert parse_filter(to_json(f)) == f
    assert parse_filter(json.dumps(to_json(f))) == f
    assert cache_key(parse_filter(to_json(f))) == cache_key(f)


@FAST
@given(f=_filters, attrs=_attrs)
def test_combinators_are_and_and_or(f, attrs):
    # andAll of one filter and its negation-free copy is the filter; orAll with itself too
    assert matches(All((f,)), attrs) == matches(f, attrs) == matches(AnyOf((f, f)), attrs)
    assert matches(All(()), attrs) is True and matches(AnyOf(()), attrs) is False
    assert matches(None, attrs) is True


@FAST
@given(key=_keys, value=_scalars, attrs=_attrs)
def test_negations_are_complements_and_a_missing_key_matches_only_negations(key, value, attrs):
    for pos, neg, v in (("equals", "notEquals", value), ("in", "notIn", (value,))):
        assert matches(Cond(pos, key, v), attrs) != matches(Cond(neg, key, v), attrs)
    if key not in attrs:
        for op in COMPARISONS:
            v = (value,) if op in ("in", "notIn") else (1 if op in RANGES else "x" if op == "startsWith" else value)
            assert matches(Cond(op, key, v), attrs) == op.startswith("not"), op


@FAST
@given(attr=_numbers, value=_numbers)
def test_the_ranges_order_numbers(attr, value):
    a = {"year": attr}
    gt, gte = matches(Cond("greaterThan", "year", value), a), matches(Cond("greaterThanOrEquals", "year", value), a)
    lt, lte = matches(Cond("lessThan", "year", value), a), matches(Cond("lessThanOrEquals", "year", value), a)
    assert (gt, gte, lt, lte) == (attr > value, attr >= value, attr < value, attr <= value)
    assert not matches(Cond("greaterThan", "year", value), {"year": str(attr)})  # strictly typed
    assert not matches(Cond("greaterThanOrEquals", "year", 0), {"year": True})  # a bool is no number


# --- ranking ties ----------------------------------------------------------------------------

# a node's layer and tokens are its own; the same node may come with several scores (two indexes)
_candidates = st.lists(st.builds(lambda i, score: Candidate(f"n{i}", i % 3, score, 1 + i % 5), st.integers(0, 7),
                                 st.sampled_from([0.5, 0.5 + 1e-7, 0.5 + 2e-6, 0.25, 0.75, 0.0])), max_size=12)


@FAST
@given(cands=_candidates, k=st.integers(0, 8), budget=st.one_of(st.none(), st.integers(0, 12)),
       seed=st.randoms(use_true_random=False))
def test_fill_budget_does_not_depend_on_the_input_order(cands, k, budget, seed):
    got = fill_budget(cands, k, budget)
    shuffled = list(cands)
    seed.shuffle(shuffled)
    # the same ids in the same order whatever the input order (a node given twice: its best
    # score; two copies whose scores tie at SCORE_DIGITS may report either score)
    def seen(cs):
        return [(c.node_id, rank_score(c.score)) for c in cs]
    assert seen(fill_budget(shuffled, k, budget)) == seen(got)
    ids = [c.node_id for c in got]
    assert len(ids) == len(set(ids)) <= k
    assert got == sorted(got, key=rank_key)
    if budget is not None:
        assert sum(c.tokens for c in got) <= budget
    else:
        assert len(got) == min(k, len({c.node_id for c in cands}))


@FAST
@given(a=st.floats(0, 1), ids=st.lists(st.sampled_from("abcdef"), min_size=2, max_size=2, unique=True))
def test_scores_equal_to_five_decimals_tie_by_node_id(a, ids):
    x, y = Candidate(ids[0], 0, a, 1), Candidate(ids[1], 0, a + 4e-7, 1)
    assume(round(a, 5) == round(a + 4e-7, 5))
    assert [c.node_id for c in sorted([x, y], key=rank_key)] == sorted(ids)


@FAST
@given(primary=_candidates, secondary=_candidates, k=st.integers(0, 8), p=st.floats(0, 1))
def test_biased_merge_returns_k_distinct_when_k_exist(primary, secondary, k, p):
    # the layers are disjoint in the engine: secondary ids renamed apart
    secondary = [Candidate("s" + c.node_id, c.layer, c.score, c.tokens) for c in secondary]
    got = biased_merge(primary, secondary, k, p, None)
    ids = [c.node_id for c in got]
    assert len(ids) == len(set(ids))
    assert len(got) == min(k, len({c.node_id for c in primary}) + len({c.node_id for c in secondary}))
    assert got == sorted(got, key=rank_key)


# --- S3 sequencers ---------------------------------------------------------------------------

_hex = st.text(alphabet="0123456789ABCDEFabcdef", min_size=1, max_size=20)


@FAST
@given(a=_hex, b=_hex, c=_hex)
def test_sequencers_compare_as_right_padded_hex(a, b, c):
    w = max(len(a), len(b))
    assert sequencer.compare(a, b) == -sequencer.compare(b, a)
    assert sequencer.compare(a, b) == (int(a.ljust(w, "0"), 16) > int(b.ljust(w, "0"), 16)) - (
        int(a.ljust(w, "0"), 16) < int(b.ljust(w, "0"), 16))
    assert sequencer.compare(a, a.lower() + "00") == 0
    if sequencer.compare(a, b) <= 0 and sequencer.compare(b, c) <= 0:
        assert sequencer.compare(a, c) <= 0
    assert sequencer.supersedes(a, "") and sequencer.supersedes("", a)
