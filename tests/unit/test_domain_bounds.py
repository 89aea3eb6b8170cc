"""The domain's input bounds and their messages, at the exact boundary (the last value allowed
and the first refused), and the few rules the seeded and property tests did not pin down
(mutation testing, docs/testing/mutation.md, found them unchecked): the error a caller reads says what is
wrong, a 62-plane LSH code is exact, sequencers pad on the right."""

from __future__ import annotations

import re

import numpy as np
import pytest

from eragraph.domain import sequencer
from eragraph.domain.fusion import rrf, weighted_rrf
from eragraph.domain.lsh import draw_hyperplanes, hash_vectors
from eragraph.domain.model import EmbedderMismatchError
from eragraph.domain.partition import largest_unpartitionable
from eragraph.domain.ranking import Candidate, biased_merge, biased_split
from eragraph.domain.tenants import TenantError, check_tenant


def test_hyperplane_counts_and_dims_at_their_bounds():
    assert draw_hyperplanes("e", 1, 1, 0).n_planes == 1
    assert draw_hyperplanes("e", 3, 62, 0).n_planes == 62
    for n in (0, 63):
        with pytest.raises(ValueError, match="^" + re.escape("n_planes must be between 1 and 62 (codes are stored as int64)") + "$"):
            draw_hyperplanes("e", 3, n, 0)
    with pytest.raises(ValueError, match="^dim must be positive$"):
        draw_hyperplanes("e", 0, 4, 0)


def test_a_62_plane_code_is_exact():
    """Codes up to 2^62: computed in integers (a float product loses the low bits past 2^53)."""
    config = draw_hyperplanes("e", 8, 62, 7)
    rng = np.random.default_rng(1)
    vectors = rng.standard_normal((20, 8))
    planes = np.array(config.planes)
    for v, code in zip(vectors, hash_vectors(config, vectors)):
        want = int("".join("1" if float(v @ p) >= 0 else "0" for p in planes), 2)
        assert code == want
    assert max(hash_vectors(config, vectors)) > 2**53


def test_a_vector_of_another_dim_is_refused_by_name():
    config = draw_hyperplanes("e", 4, 8, 0)
    with pytest.raises(EmbedderMismatchError, match=r"^vector dim 5 != store dim 4$"):
        hash_vectors(config, np.ones((1, 5)))


def test_rrf_bounds_and_messages():
    assert rrf([["a", "b"]], c=0) == [("a", 1.0), ("b", 0.5)]  # c = 0 is allowed
    with pytest.raises(ValueError, match="^the RRF constant must be non-negative$"):
        rrf([["a"]], c=-1)
    with pytest.raises(ValueError, match="^one weight per ranked list$"):
        rrf([["a"], ["b"]], [1.0])
    with pytest.raises(ValueError, match="^RRF weights must be non-negative$"):
        rrf([["a"]], [-0.5])
    assert rrf([["a"]], [0.0]) == [("a", 0.0)]


def test_weighted_rrf_bounds_and_its_constant():
    assert weighted_rrf(["a"], ["b"], 1.0) == [("b", 1 / 61), ("a", 0.0)]
    assert weighted_rrf(["a"], ["b"], 0.25, c=0) == [("a", 0.75), ("b", 0.25)]  # c is passed on
    for s in (-0.01, 1.01, 2.0):
        with pytest.raises(ValueError, match=re.escape("s(q) must be within [0, 1]")):
            weighted_rrf(["a"], ["b"], s)
    with pytest.raises(ValueError) as raised:
        weighted_rrf(["a"], ["b"], 3.0)
    assert str(raised.value) == "s(q) must be within [0, 1]"


def test_biased_split_bounds():
    assert biased_split(10, 0.0) == (0, 10) and biased_split(10, 1.0) == (10, 0)
    with pytest.raises(ValueError) as raised:
        biased_split(10, 1.5)
    assert str(raised.value) == "p must be within [0, 1]"


def test_biased_merge_keeps_the_budget_on_the_primary_side():
    primary = [Candidate(f"p{i}", 0, 1.0 - i / 10, 4) for i in range(4)]
    secondary = [Candidate(f"s{i}", 1, 0.5 - i / 10, 4) for i in range(4)]
    assert [c.node_id for c in biased_merge(primary, secondary, 4, 0.5, budget=8)] == ["p0", "p1"]
    # 6 tokens: one primary (the second would not fit), no room for a secondary
    assert [c.node_id for c in biased_merge(primary, secondary, 4, 0.5, budget=6)] == ["p0"]


def test_bad_partition_bounds_say_which():
    from eragraph.domain.partition import check_bounds

    with pytest.raises(ValueError) as raised:
        check_bounds(7, 5)
    assert str(raised.value) == "need 1 <= S_min <= S_max, got S_min=7, S_max=5"


@pytest.mark.parametrize("s_min,s_max,want", [(2, 2, None), (2, 3, 1), (3, 3, None), (1, 1, 0), (1, 5, 0)])
def test_largest_unpartitionable_at_small_bounds(s_min, s_max, want):
    assert largest_unpartitionable(s_min, s_max) == want


def test_sequencers_pad_on_the_right_and_refuse_what_is_not_hex():
    assert sequencer.compare("0A00", "0A") == 0 and sequencer.compare("0A", "0A00") == 0
    assert sequencer.compare("0A01", "0A") == 1 and sequencer.compare("0A", "0A01") == -1
    assert sequencer.compare("B", "0A000") == 1  # "B0000" > "0A000": padded right, not left
    with pytest.raises(ValueError, match=re.escape("not a hexadecimal sequencer: 'x1'")):
        sequencer.normalize("x1")


def test_tenant_ids_are_refused_with_the_rule():
    assert check_tenant("a" * 63) == "a" * 63
    with pytest.raises(TenantError, match=re.escape("a tenant id must be a non-empty string, not ''")):
        check_tenant("")
    with pytest.raises(TenantError, match=re.escape("a tenant id must be a non-empty string, not 3")):
        check_tenant(3)
    long = "b" * 100
    with pytest.raises(TenantError) as raised:
        check_tenant(long)
    assert str(raised.value) == (f"tenant id {'b' * 80!r} is not valid: 1-63 characters of a-z, 0-9, '_' "
                                 "and '-', starting with a letter or digit")
    with pytest.raises(TenantError, match=re.escape("tenant id '-a' is not valid")):
        check_tenant("-a")
