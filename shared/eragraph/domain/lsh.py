"""Hyperplane LSH (EraRAG §III-B): an n-bit code per vector, one bit per stored hyperplane."""

from __future__ import annotations

import numpy as np

from .model import EmbedderMismatchError, LshConfig


def draw_hyperplanes(embedder_id: str, dim: int, n_planes: int, seed: int) -> LshConfig:
    """Draw ``n_planes`` Gaussian hyperplane normals from a recorded seed."""
    if n_planes < 1 or n_planes > 62:
        raise ValueError("n_planes must be between 1 and 62 (codes are stored as int64)")
    if dim < 1:
        raise ValueError("dim must be positive")
    rng = np.random.default_rng(seed)
    planes = rng.standard_normal((n_planes, dim))
    return LshConfig(
        embedder_id=embedder_id,
        dim=dim,
        n_planes=n_planes,
        seed=seed,
        planes=tuple(tuple(float(x) for x in row) for row in planes),
    )


# An embedder identity may end in WEIGHTS_TAG + a digest of the model's weight files
# (providers.minilm): the same model name with other weights is another embedder.
WEIGHTS_TAG = "#weights-sha256:"


def same_embedder(stored_id: str, embedder_id: str) -> bool:
    """Whether vectors of ``embedder_id`` may go into a store recorded with ``stored_id``.
    Equal identities match. A stored identity without a weights digest (a store created before
    digests were recorded) matches the same model name with any digest: nothing recorded says
    which weights built it, and refusing would make every such store unreadable. A stored
    digest must match exactly, and an embedder that cannot name its weights does not match it."""
    if stored_id == embedder_id:
        return True
    stored_name, tagged, _ = stored_id.partition(WEIGHTS_TAG)
    name, _, _ = embedder_id.partition(WEIGHTS_TAG)
    return not tagged and stored_name == name


def check_embedder(config: LshConfig, embedder_id: str, dim: int) -> None:
    """Refuse to hash vectors of another embedder (or other weights) into a store built with this one."""
    if not same_embedder(config.embedder_id, embedder_id) or config.dim != dim:
        raise EmbedderMismatchError(
            f"this store was built with embedder {config.embedder_id!r} (dim {config.dim}); "
            f"refusing {embedder_id!r} (dim {dim}). Use the same embedder or a new store."
        )


def hash_vectors(config: LshConfig, vectors: np.ndarray) -> list[int]:
    """Code of each row: bit j (most significant first) is 1 iff v . h_j >= 0."""
    vectors = np.atleast_2d(np.asarray(vectors, dtype=np.float64))
    if vectors.shape[1] != config.dim:
        raise EmbedderMismatchError(f"vector dim {vectors.shape[1]} != store dim {config.dim}")
    planes = np.asarray(config.planes, dtype=np.float64)
    bits = (vectors @ planes.T) >= 0.0
    weights = 1 << np.arange(config.n_planes - 1, -1, -1, dtype=np.int64)
    return [int(x) for x in bits.astype(np.int64) @ weights]


def majority_code(child_codes: list[int], own_code: int, n_planes: int) -> int:
    """Code of a summary node: bit j is the majority of its children's bit j; a tie takes the
    bit of the summary's own embedding. A summary stands for its children, and the majority
    approximates the sign of their summed projections; unlike the summary text's own hash it
    barely moves when one child is added or removed, so a re-summarized segment's new node
    usually lands in its predecessor's bucket and the update stays local one layer up."""
    if not child_codes:
        return own_code
    code = 0
    half = len(child_codes) / 2.0
    for j in range(n_planes - 1, -1, -1):
        ones = sum((c >> j) & 1 for c in child_codes)
        bit = 1 if ones > half else 0 if ones < half else (own_code >> j) & 1
        code = (code << 1) | bit
    return code
