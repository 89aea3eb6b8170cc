"""What the planted-bug runs share (planted_filter_bugs.py, planted_tenant_bugs.py): the bugs a
run plants (``PLANTED=name,name``: those only, into a results file of their own) and planting
one set of patches for the length of a block."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path


def selected(bugs: dict, out: Path) -> tuple[dict, Path]:
    """``bugs`` and the results file ``out``, narrowed to ``PLANTED``'s names when it is set."""
    only = [b for b in os.environ.get("PLANTED", "").split(",") if b]
    if not only:
        return bugs, out
    return {b: bugs[b] for b in only}, out.with_name(out.stem + "-" + "-".join(only) + ".json")


@contextlib.contextmanager
def planted(patches):
    """Each (module or class, name, replacement) set in place, the originals put back after."""
    saved = [(m, n, getattr(m, n)) for m, n, _ in patches]
    for m, n, f in patches:
        setattr(m, n, f)
    try:
        yield
    finally:
        for m, n, f in saved:
            setattr(m, n, f)
