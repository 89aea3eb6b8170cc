"""Hyperplane LSH: reproducible planes, sign bits MSB first, angular locality, embedder guard."""

from __future__ import annotations

import numpy as np
import pytest

from eragraph.domain.lsh import check_embedder, draw_hyperplanes, hash_vectors, majority_code
from support import hamming
from eragraph.domain.model import EmbedderMismatchError, LshConfig


def _unit(rows: np.ndarray) -> np.ndarray:
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def test_hyperplanes_reproducible_from_seed():
    a = draw_hyperplanes("emb", 16, 10, seed=7)
    b = draw_hyperplanes("emb", 16, 10, seed=7)
    c = draw_hyperplanes("emb", 16, 10, seed=8)
    assert a == b
    assert a.planes != c.planes
    assert len(a.planes) == 10 and all(len(row) == 16 for row in a.planes)
    assert (a.embedder_id, a.dim, a.n_planes, a.seed) == ("emb", 16, 10, 7)
    # the recorded seed alone regenerates the planes (numpy default_rng, standard normal)
    expected = np.random.default_rng(7).standard_normal((10, 16))
    assert np.allclose(np.asarray(a.planes), expected)


@pytest.mark.parametrize("n_planes,dim", [(0, 4), (63, 4), (4, 0)])
def test_draw_rejects_bad_sizes(n_planes, dim):
    with pytest.raises(ValueError):
        draw_hyperplanes("emb", dim, n_planes, seed=1)


def test_codes_are_sign_bits_most_significant_first():
    config = LshConfig(embedder_id="e", dim=2, n_planes=3, seed=0,
                       planes=((1.0, 0.0), (0.0, 1.0), (1.0, 1.0)))
    # v=(1,-1): dots 1, -1, 0 -> bits 1,0,1 (zero counts as 1) -> 0b101
    # v=(-1,2): dots -1, 2, 1 -> bits 0,1,1 -> 0b011
    # v=(-2,1): dots -2, 1, -1 -> bits 0,1,0 -> 0b010
    assert hash_vectors(config, np.array([[1.0, -1.0], [-1.0, 2.0], [-2.0, 1.0]])) == [5, 3, 2]
    # a single vector is accepted as one row
    assert hash_vectors(config, np.array([1.0, -1.0])) == [5]


def test_codes_match_a_hand_computation_on_random_planes():
    config = draw_hyperplanes("e", 8, 12, seed=3)
    rng = np.random.default_rng(0)
    vecs = rng.standard_normal((20, 8))
    planes = np.asarray(config.planes)
    for v, code in zip(vecs, hash_vectors(config, vecs)):
        bits = "".join("1" if float(np.dot(v, h)) >= 0 else "0" for h in planes)
        assert code == int(bits, 2)


def test_similar_vectors_share_more_bits_than_dissimilar():
    config = draw_hyperplanes("e", 64, 32, seed=11)
    rng = np.random.default_rng(5)
    base = _unit(rng.standard_normal((200, 64)))
    near = _unit(base + 0.25 * rng.standard_normal((200, 64)) / 8.0)
    far = _unit(rng.standard_normal((200, 64)))
    cb, cn, cf = (hash_vectors(config, x) for x in (base, near, far))
    near_d = np.mean([hamming(a, b) for a, b in zip(cb, cn)])
    far_d = np.mean([hamming(a, b) for a, b in zip(cb, cf)])
    assert near_d < far_d / 3
    # Theorem 1: P(bit differs) = theta / pi; random pairs in 64-d are near-orthogonal -> ~1/2
    assert 0.4 * 32 < far_d < 0.6 * 32
    cos = np.sum(base * near, axis=1)
    expected = np.mean(np.arccos(np.clip(cos, -1, 1)) / np.pi) * 32
    assert abs(near_d - expected) < 1.0


def test_hash_refuses_other_dimension():
    config = draw_hyperplanes("e", 8, 4, seed=1)
    with pytest.raises(EmbedderMismatchError):
        hash_vectors(config, np.ones((2, 9)))


def test_check_embedder_refuses_other_identity_or_dim():
    config = draw_hyperplanes("minilm", 384, 16, seed=1)
    check_embedder(config, "minilm", 384)  # same: fine
    with pytest.raises(EmbedderMismatchError, match="minilm"):
        check_embedder(config, "titan", 384)
    with pytest.raises(EmbedderMismatchError):
        check_embedder(config, "minilm", 256)


def test_check_embedder_weights_digest():
    from eragraph.domain.lsh import WEIGHTS_TAG

    a, b = f"minilm{WEIGHTS_TAG}aaaa", f"minilm{WEIGHTS_TAG}bbbb"
    tagged = draw_hyperplanes(a, 8, 4, 1)
    check_embedder(tagged, a, 8)
    with pytest.raises(EmbedderMismatchError, match="bbbb"):
        check_embedder(tagged, b, 8)  # same model name, other weights
    with pytest.raises(EmbedderMismatchError):
        check_embedder(tagged, "minilm", 8)  # cannot name its weights
    legacy = draw_hyperplanes("minilm", 8, 4, 1)  # recorded before weights digests existed
    check_embedder(legacy, a, 8)
    check_embedder(legacy, b, 8)
    with pytest.raises(EmbedderMismatchError):
        check_embedder(legacy, f"titan{WEIGHTS_TAG}aaaa", 8)


def test_hamming():
    assert hamming(0b1011, 0b1011) == 0
    assert hamming(0b1011, 0b0010) == 2
    assert hamming(0, (1 << 40) - 1) == 40


def test_majority_code_bits_and_ties():
    # bit columns (MSB first): 1,1,0 | 1,0,0 | 0,1,1 | 0,1,0 over four children
    kids = [0b1100, 0b1010, 0b0011, 0b1000]
    # bit3: 3 ones -> 1; bit2: 1 one -> 0; bit1: 2 of 4 tie -> own; bit0: 1 one -> 0
    assert majority_code(kids, own_code=0b0000, n_planes=4) == 0b1000
    assert majority_code(kids, own_code=0b1111, n_planes=4) == 0b1010
    assert majority_code([0b101], own_code=0b010, n_planes=3) == 0b101
    assert majority_code([], own_code=0b011, n_planes=3) == 0b011


def test_majority_code_is_order_independent_and_stable_under_one_change():
    rng = np.random.default_rng(2)
    kids = [int(x) for x in rng.integers(0, 1 << 20, size=11)]
    own = int(rng.integers(0, 1 << 20))
    assert majority_code(kids, own, 20) == majority_code(list(reversed(kids)), own, 20)
    # replacing one of 11 children flips only bits whose vote was 6:5 against the newcomer
    flips = [hamming(majority_code(kids, own, 20), majority_code(kids[:-1] + [k], own, 20))
             for k in rng.integers(0, 1 << 20, size=50)]
    assert np.mean(flips) < 4  # a summary barely moves when one child changes
