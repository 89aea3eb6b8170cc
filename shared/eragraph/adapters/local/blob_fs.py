"""BlobStore on the local filesystem: one file per key under a root folder.

A key is a relative, '/'-separated path ("docs/a.txt" becomes ``root/docs/a.txt``). Keys that
could escape the root or are ambiguous on disk (absolute, empty parts, '.', '..', backslashes,
NUL) are refused with ValueError. Writes are atomic: the bytes go to a hidden temporary file in
the target folder, are fsynced, then moved over the key with ``os.replace``, so a reader sees
either the old or the new blob, never half of one.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from .files import atomic_write

_TMP_SUFFIX = ".partial"
_TMP_NAME = re.compile(r"^\..+\.[0-9a-f]{32}\.partial$")


def _parts(key: str) -> list[str]:
    if not isinstance(key, str) or not key:
        raise ValueError("blob key must be a non-empty string")
    if key.startswith("/") or "\\" in key or "\x00" in key or re.match(r"^[A-Za-z]:", key):
        raise ValueError(f"blob key must be a relative '/'-separated path: {key!r}")
    parts = key.split("/")
    for part in parts:
        if part in ("", ".", ".."):
            raise ValueError(f"blob key has an empty, '.' or '..' part: {key!r}")
        if _TMP_NAME.match(part):
            raise ValueError(f"blob key looks like a temporary file: {key!r}")
    return parts


class FsBlobStore:
    """Blobs as files under ``root`` (created on first use)."""

    def __init__(self, root: Path | str) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self._root_resolved = self.root.resolve()

    def _path(self, key: str) -> Path:
        path = self.root.joinpath(*_parts(key))
        # defence in depth: a symlinked folder must not lead outside the root
        resolved = path.resolve()
        if resolved != self._root_resolved and self._root_resolved not in resolved.parents:
            raise ValueError(f"blob key leaves the store root: {key!r}")
        return path

    def put(self, key: str, data: bytes) -> None:
        path = self._path(key)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except (FileExistsError, NotADirectoryError) as exc:
            raise ValueError(f"blob key {key!r} needs a folder where a blob is stored") from exc
        if path.is_dir():
            raise ValueError(f"blob key {key!r} names a folder of other blobs")
        atomic_write(path, data, _TMP_SUFFIX)

    def get(self, key: str) -> bytes:
        path = self._path(key)
        try:
            return path.read_bytes()
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
            raise KeyError(key) from None

    def size(self, key: str) -> int:
        path = self._path(key)
        try:
            if path.is_dir():
                raise KeyError(key)
            return path.stat().st_size
        except (FileNotFoundError, NotADirectoryError):
            raise KeyError(key) from None

    def delete(self, key: str) -> None:
        path = self._path(key)
        try:
            path.unlink()
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
            return
        # prune folders left empty, up to (not including) the root
        parent = path.parent
        while parent != self.root:
            try:
                parent.rmdir()
            except OSError:
                break
            parent = parent.parent

    def list(self, prefix: str = "") -> list[str]:
        keys = []
        for dirpath, dirnames, filenames in os.walk(self.root):
            rel = os.path.relpath(dirpath, self.root)
            base = "" if rel == "." else rel.replace(os.sep, "/") + "/"
            dirnames[:] = [d for d in dirnames
                           if (base + d + "/").startswith(prefix) or prefix.startswith(base + d + "/")]
            for name in filenames:
                if _TMP_NAME.match(name):
                    continue
                key = base + name
                if key.startswith(prefix):
                    keys.append(key)
        return sorted(keys)

    def list_after(self, prefix: str, after: str, limit: int) -> list[str]:
        """The folder walked as ``list`` walks it (a local folder: no request per page)."""
        return [k for k in self.list(prefix) if k > after][:limit]
