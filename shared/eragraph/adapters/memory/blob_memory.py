"""BlobStore in a dict (the memory profile's and the unit tests' blobs)."""

from __future__ import annotations


class MemoryBlobStore:
    def __init__(self) -> None:
        self._data: dict[str, bytes] = {}

    def put(self, key: str, data: bytes) -> None:
        self._data[key] = bytes(data)

    def get(self, key: str) -> bytes:
        return self._data[key]

    def size(self, key: str) -> int:
        return len(self._data[key])

    def delete(self, key: str) -> None:
        self._data.pop(key, None)

    def list(self, prefix: str = "") -> list[str]:
        return sorted(k for k in self._data if k.startswith(prefix))

    def list_after(self, prefix: str, after: str, limit: int) -> list[str]:
        return [k for k in self.list(prefix) if k > after][:limit]
