"""fill_budget and biased_merge (EraRAG Alg. 2 and §III-D)."""

from __future__ import annotations

import pytest

from eragraph.domain.ranking import Candidate, biased_merge, biased_split, fill_budget


def C(node_id, score, tokens=10, layer=0):
    return Candidate(node_id, layer, score, tokens)


def ids(cands):
    return [c.node_id for c in cands]


def test_fill_budget_best_first_with_k_cap():
    cands = [C("a", 0.1), C("b", 0.9), C("c", 0.5), C("d", 0.7)]
    assert ids(fill_budget(cands, 3, None)) == ["b", "d", "c"]
    assert ids(fill_budget(cands, 10, None)) == ["b", "d", "c", "a"]


def test_fill_budget_ties_break_by_id_and_duplicates_dropped():
    cands = [C("z", 0.5), C("a", 0.5), C("a", 0.5), C("m", 0.5)]
    assert ids(fill_budget(cands, 5, None)) == ["a", "m", "z"]


def test_fill_budget_skips_what_no_longer_fits_and_takes_later_shorter_ones():
    cands = [C("big", 0.9, 60), C("mid", 0.8, 50), C("small", 0.7, 30), C("tiny", 0.1, 10)]
    out = fill_budget(cands, 5, 100)
    assert ids(out) == ["big", "small", "tiny"]
    assert sum(c.tokens for c in out) <= 100
    assert fill_budget([C("huge", 1.0, 500)], 3, 100) == []
    # exactly filling the budget is allowed
    assert ids(fill_budget([C("a", 0.9, 50), C("b", 0.8, 50)], 5, 100)) == ["a", "b"]


def test_biased_split():
    assert biased_split(10, 0.6) == (6, 4)
    assert biased_split(5, 0.0) == (0, 5)
    assert biased_split(5, 1.0) == (5, 0)
    with pytest.raises(ValueError):
        biased_split(5, 1.5)


LEAVES = [C(f"l{i}", 0.9 - i * 0.05, 10, 0) for i in range(10)]
SUMS = [C(f"s{i}", 0.5 - i * 0.05, 10, 1) for i in range(10)]


def test_biased_merge_detailed_takes_pk_leaves_then_summaries():
    out = biased_merge(LEAVES, SUMS, k=10, p=0.7, budget=None)
    assert len(out) == 10
    assert sum(c.layer == 0 for c in out) == 7
    assert sum(c.layer == 1 for c in out) == 3
    # the best of each side are taken, and the result is sorted best first
    assert {"l0", "l6", "s0", "s2"} <= set(ids(out)) and "l7" not in ids(out) and "s3" not in ids(out)
    assert [c.score for c in out] == sorted((c.score for c in out), reverse=True)


def test_biased_merge_summarized_prefers_summaries_even_when_they_score_lower():
    out = biased_merge(SUMS, LEAVES, k=5, p=0.8, budget=None)
    assert sum(c.layer == 1 for c in out) == 4
    assert sum(c.layer == 0 for c in out) == 1
    assert "l0" in ids(out)


def test_biased_merge_fills_from_the_other_side_when_one_is_short():
    short_sums = SUMS[:1]
    out = biased_merge(short_sums, LEAVES, k=6, p=0.5, budget=None)  # wants 3 summaries, has 1
    assert len(out) == 6 and sum(c.layer == 1 for c in out) == 1
    out = biased_merge(LEAVES, short_sums, k=6, p=0.5, budget=None)  # wants 3 summaries, has 1
    assert len(out) == 6 and sum(c.layer == 1 for c in out) == 1
    assert len(biased_merge(LEAVES[:2], [], k=6, p=0.5, budget=None)) == 2


def test_biased_merge_respects_budget_over_the_whole_result():
    prim = [C("p0", 0.9, 40), C("p1", 0.8, 40), C("p2", 0.7, 40)]
    sec = [C("s0", 0.6, 30), C("s1", 0.5, 10)]
    out = biased_merge(prim, sec, k=4, p=0.5, budget=100)
    assert sum(c.tokens for c in out) <= 100
    assert ids(out) == ["p0", "p1", "s1"]  # s0 no longer fits after two primaries
    assert len({c.node_id for c in out}) == len(out)
