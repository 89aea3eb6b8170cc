"""A message's LSH codes held as 8 bytes each: ``CodeList``, a read-only sequence of ints over a
sorted int64 array.

The in-process queue coalesces a bulk ingest's announces into one message a layer, whose codes
are every changed chunk's: a million of them for a million-chunk ingest before its drain. As a
tuple of Python ints they took 46 MB (53 MB at their peak while made), held for the whole
layer-0 pass, which is a whole-layer pass at that size and never reads them
(services.resummarize: many changes at once). As a ``CodeList`` they are the array the queue
merged them into (``queue_memory.PendingCodes``), 8 MB; a reader that iterates (a scoped
reconcile's few codes, ``SegmentsAffected.to_dict``) gets Python ints a slice at a time."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, overload

import numpy as np

_SLICE = 4096  # codes turned into Python ints at a time by iteration


class CodeList(Sequence[int]):
    """Read-only ``Sequence[int]`` over an int64 array (the one it is given, made read-only,
    not copied: the caller hands it over). Equal to the tuple of the same ints in the same
    order (so a message holding it equals one holding the tuple), and hashed as that tuple."""

    __slots__ = ("_codes",)

    def __init__(self, codes: np.ndarray) -> None:
        array = np.asarray(codes, dtype=np.int64)
        if array.ndim != 1:
            raise ValueError("codes are one row of ints")
        array.setflags(write=False)
        self._codes = array

    def __len__(self) -> int:
        return int(self._codes.shape[0])

    @overload
    def __getitem__(self, i: int) -> int: ...

    @overload
    def __getitem__(self, i: slice) -> CodeList: ...

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            return CodeList(self._codes[i])
        return int(self._codes[i])

    def __iter__(self) -> Iterator[int]:
        for start in range(0, len(self), _SLICE):
            yield from self._codes[start:start + _SLICE].tolist()

    def __eq__(self, other: object) -> bool:
        if isinstance(other, CodeList):
            return bool(np.array_equal(self._codes, other._codes))
        if isinstance(other, tuple):  # as a tuple compares: not equal to a list or a range
            return len(other) == len(self) and all(a == b for a, b in zip(self, other))
        return NotImplemented

    def __hash__(self) -> int:
        return hash(tuple(self))

    def __repr__(self) -> str:
        head = ", ".join(str(c) for c in self._codes[:4].tolist())
        return f"CodeList([{head}{', ...' if len(self) > 4 else ''}], {len(self)} codes)"
