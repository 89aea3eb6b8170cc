"""Where a document's chunks are placed: its access partition's index (domain.access).

The registry lives in the tenant's meta store: ``access-index:<i>`` names the partition key that
owns index i (claimed with ``claim_meta``: of two writers of different partitions only one owns
an index, so two partitions never share one, and two writers of one partition agree on it), and
``access:<key>`` records a partition's index and its canonical access list (what a caller's view
reads to know which partitions it may read). An index is the partition key's digest, probed
linearly on a clash, so a partition's index is found with one read once known."""

from __future__ import annotations

from collections.abc import Iterable

from ..domain.access import OPEN, Caller, canonical, index_candidate, partition_of
from ..domain.model import EragraphError
from .engine import Engine

KEY = "access:"
INDEX = "access-index:"
PROBES = 64


def partition_index(engine: Engine, access: Iterable[str] | None, cache: dict[str, int] | None = None) -> int:
    """The index of the partition of ``access`` (0: the open one), allocated on first use."""
    key = partition_of(access)
    if key == OPEN:
        return 0
    if cache is not None and key in cache:
        return cache[key]
    known = engine.graph.get_meta(KEY + key)
    if known is not None:
        index = int(known["index"])
    else:
        n_planes = engine.settings.n_planes
        for probe in range(PROBES):
            candidate = index_candidate(key, n_planes, probe)
            if engine.graph.claim_meta(f"{INDEX}{candidate}", key) == key:
                index = candidate
                break
        else:
            raise EragraphError(f"no free partition index for {key} after {PROBES} probes")
        engine.graph.put_meta(KEY + key, {"index": index, "access": list(canonical(access))})
    if cache is not None:
        cache[key] = index
    return index


def access_of(engine: Engine, index: int) -> tuple[str, ...]:
    """The canonical access list of partition ``index`` (the open one: ()); two reads."""
    if not index:
        return ()
    key = engine.graph.get_meta(f"{INDEX}{index}")
    record = None if key is None else engine.graph.get_meta(KEY + str(key))
    if record is None:
        raise EragraphError(f"partition index {index} is not registered")
    return tuple(record["access"])


def partitions(engine: Engine) -> dict[int, tuple[str, ...]]:
    """Every allocated partition: index -> its canonical access list (the open one: 0 -> ())."""
    out: dict[int, tuple[str, ...]] = {0: ()}
    for name in engine.graph.meta_keys(KEY):
        record = engine.graph.get_meta(name)
        if record is not None:
            out[int(record["index"])] = tuple(record["access"])
    return out


def readable(engine: Engine, caller: Caller) -> set[int] | None:
    """The partition indexes ``caller`` may read (None: all, the operator)."""
    if caller.everything:
        return None
    return {i for i, access in partitions(engine).items() if caller.may_read(access)}
