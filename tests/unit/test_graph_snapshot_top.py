"""The view's top-n (services.graph_snapshot._first): the first n of a stable sort, without
sorting every chunk, ties in index order and excluded entries (-inf scores) last."""

from __future__ import annotations

import numpy as np
import pytest

from eragraph.services.graph_snapshot import _first


@pytest.mark.parametrize("seed", range(20))
def test_the_first_n_are_the_stable_sort_s(seed):
    rng = np.random.default_rng(seed)
    size = int(rng.integers(1, 60))
    keys = rng.integers(0, 6, size).astype(np.float64)  # many ties
    keys[rng.random(size) < 0.2] = np.inf  # chunks a filter leaves out
    for n in (0, 1, 3, size // 2, size - 1, size, size + 4):
        assert _first(keys, n).tolist() == np.argsort(keys, kind="stable")[:max(n, 0)].tolist(), (seed, n)
