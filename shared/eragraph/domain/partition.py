"""Bucket partitioning into segments within [S_min, S_max] (EraRAG Alg. 1 lines 7-11).

The rule (a binary trie over the LSH bits, most significant bit first)::

    partition(nodes, depth):
        if |nodes| <= S_max:                 -> one segment
        if depth == n_bits:                  -> split the single over-full bucket evenly
        split nodes by bit `depth` into L (0) and R (1)
        if L and R are both *partitionable*: -> partition(L, depth+1) + partition(R, depth+1)
        else:                                -> partition(nodes, depth+1)

A count c is *partitionable* when c can be cut into parts of sizes within [S_min, S_max]
(``ceil(c / S_max) <= floor(c / S_min)``). Refusing a split whose side is not partitionable
is the "merge with the Hamming-adjacent bucket" of the paper: the two sides differ in exactly
that bit. A single exact-code bucket larger than S_max is cut into the fewest even runs (by node
id) that fit the bounds — the paper's "split".

Why this rule:
* Bounds: every segment has between S_min and S_max members, except when the whole layer's
  count is itself not partitionable (fewer than S_min nodes, or e.g. 13-15 nodes with 8-12;
  with S_max >= 2*S_min - 1, as in the default 6-12, only counts below S_min are not):
  then the stated remainder is the top-level even cut, each part at most S_max.
* Stability: the segments of a subtree depend only on the nodes in it. Adding or removing
  nodes in one bucket changes the counts on one root-to-leaf path, so only the segment that
  holds that bucket changes, and a split/merge decision that flips re-partitions only the
  subtree under it — which, for the large counts near the root, never flips (every count
  >= S_min * ceil(S_min / (S_max - S_min)) is partitionable). Segments elsewhere keep their
  members, hence their ids and summaries.
* Locality: members of a segment share the longest code prefix the bounds allow, so they are
  close in Hamming space (and so in angle, EraRAG Theorem 1).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from .model import NodeRef


def check_bounds(s_min: int, s_max: int) -> None:
    if s_min < 1 or s_max < s_min:
        raise ValueError(f"need 1 <= S_min <= S_max, got S_min={s_min}, S_max={s_max}")


def partitionable(count: int, s_min: int, s_max: int) -> bool:
    if count == 0:
        return True
    return math.ceil(count / s_max) <= count // s_min


def _even_cut(nodes: list[NodeRef], s_max: int) -> list[list[NodeRef]]:
    count = len(nodes)
    parts = math.ceil(count / s_max)  # the fewest parts of at most S_max; when the count is
    # partitionable, count / parts >= S_min as well, so even parts fit both bounds
    ordered = sorted(nodes, key=lambda n: n.node_id)
    base, extra = divmod(count, parts)
    out, start = [], 0
    for i in range(parts):
        size = base + (1 if i < extra else 0)
        out.append(ordered[start : start + size])
        start += size
    return out


def largest_unpartitionable(s_min: int, s_max: int) -> int | None:
    """The largest count that cannot be cut within [S_min, S_max] (0 when every count is), or
    None when there is no largest one (S_min == S_max: only multiples of S_min can be cut)."""
    check_bounds(s_min, s_max)
    if s_min == s_max:
        return None if s_min > 1 else 0
    # every count >= S_min * ceil(S_min / (S_max - S_min)) is partitionable
    limit = s_min * math.ceil(s_min / (s_max - s_min))
    return max((c for c in range(1, limit + 1) if not partitionable(c, s_min, s_max)), default=0)


def decide(left: int, right: int, depth: int, n_bits: int, s_min: int, s_max: int) -> str:
    """The rule's decision for a group whose bit-``depth`` halves hold ``left`` and ``right``
    nodes: ``terminal`` (one segment), ``cut`` (an over-full exact-code bucket, cut evenly),
    ``split`` (recurse into both halves) or ``skip`` (ignore this bit: merge the halves).
    Counts above ``max(S_max, largest_unpartitionable)`` may be given capped: the decision
    only compares them with thresholds below that."""
    if left + right <= s_max:
        return "terminal"
    if depth >= n_bits:
        return "cut"
    if left and right and partitionable(left, s_min, s_max) and partitionable(right, s_min, s_max):
        return "split"
    return "skip"


def partition(
    nodes: Sequence[NodeRef], n_bits: int, s_min: int, s_max: int, start_depth: int = 0
) -> list[tuple[str, ...]]:
    """Partition ``nodes`` into segments; each segment is a sorted tuple of node ids.
    ``start_depth``: the nodes are one group of the rule's recursion at that depth (the bits
    above it are not looked at), as services.resummarize re-cuts one region of a layer."""
    check_bounds(s_min, s_max)
    if not nodes:
        return []
    out: list[list[NodeRef]] = []
    stack: list[tuple[list[NodeRef], int]] = [(list(nodes), start_depth)]
    while stack:
        group, depth = stack.pop()
        if depth >= n_bits:
            left, right = group, []
        else:
            shift = n_bits - 1 - depth
            left = [n for n in group if not (n.code >> shift) & 1]
            right = [n for n in group if (n.code >> shift) & 1]
        decision = decide(len(left), len(right), depth, n_bits, s_min, s_max)
        if decision == "terminal":
            out.append(group)
        elif decision == "cut":
            out.extend(_even_cut(group, s_max))
        elif decision == "split":
            stack.append((right, depth + 1))
            stack.append((left, depth + 1))
        else:
            stack.append((group, depth + 1))
    return sorted(tuple(sorted(n.node_id for n in seg)) for seg in out)


def should_summarize(layer_size: int, layer: int, s_max: int, max_layers: int) -> bool:
    """Stopping rule: summarize layer ``layer`` into ``layer + 1`` only while the layer holds
    more than S_max nodes (a single segment's summary would add nothing a top-k over the layer
    does not already see) and the next layer would not exceed ``max_layers`` summary layers."""
    return layer_size > s_max and layer + 1 <= max_layers
