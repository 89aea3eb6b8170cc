"""The blob store: bytes by key (source files, snapshots).

A store whose every put is ingested as a document (the AWS documents bucket: its notification
ingests any key) says so with a true ``ingested`` attribute; nothing but documents is put in it
(a document's kept text for rebuilds is not)."""

from __future__ import annotations

from typing import Protocol, runtime_checkable


@runtime_checkable
class BlobStore(Protocol):
    def put(self, key: str, data: bytes) -> None: ...
    def get(self, key: str) -> bytes: ...  # KeyError when absent
    def size(self, key: str) -> int: ...  # bytes, without reading them; KeyError when absent
    def delete(self, key: str) -> None: ...  # no error when absent
    def list(self, prefix: str = "") -> list[str]: ...
    # the first ``limit`` keys under ``prefix`` after ``after``, in order (a listing resumed from a cursor)
    def list_after(self, prefix: str, after: str, limit: int) -> list[str]: ...
