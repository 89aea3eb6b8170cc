"""Atomic file writes shared by the local adapters."""

from __future__ import annotations

import os
import secrets
from pathlib import Path


def atomic_write(path: Path, data: bytes, tmp_suffix: str = ".tmp") -> None:
    """Write ``data`` to a hidden temp file beside ``path``, fsync it, then rename it over
    ``path``: readers see the old file or the new one, never half of one."""
    tmp = path.parent / f".{path.name}.{secrets.token_hex(16)}{tmp_suffix}"
    try:
        with open(tmp, "wb") as fh:
            fh.write(bytes(data))
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()
