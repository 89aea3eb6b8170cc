"""Atomic file writes and the inter-process writer lock shared by the local adapters."""

from __future__ import annotations

import os
import secrets
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO


def atomic_write(path: Path, data: bytes | Callable[[BinaryIO], None], tmp_suffix: str = ".tmp") -> None:
    """Write ``data`` to a hidden temp file beside ``path``, fsync it, then rename it over
    ``path``: readers see the old file or the new one, never half of one. ``data`` may be a
    function that writes the content to the file it is given (a large file, streamed)."""
    tmp = path.parent / f".{path.name}.{secrets.token_hex(16)}{tmp_suffix}"
    try:
        with open(tmp, "wb") as fh:
            if callable(data):
                data(fh)
            else:
                fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()


def file_stamp(path: Path) -> tuple[int, int, int] | None:
    """(inode, size, mtime in ns) of ``path``, None when absent: atomic_write replaces the
    file, so another writer's write changes the stamp."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns)


def writer_lock(path: Path, timeout: float = -1):
    """An inter-process lock on ``path`` (``filelock``: flock on POSIX, msvcrt on Windows);
    use as a context manager. ``timeout`` -1 waits as long as it takes."""
    from filelock import FileLock

    return FileLock(str(path), timeout=timeout)
