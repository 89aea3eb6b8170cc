"""The document pipeline: where a document submitted through the API (services.uploads) goes once
its bytes are stored under the key an upload to the documents bucket would have. On AWS that is
the bucket itself (its notification runs the ingest function); locally, a worker in the serving
process (services.upload_worker). The handlers and services.uploads never know which."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable


@runtime_checkable
class DocumentPipeline(Protocol):
    def key_for(self, tenant: str, name: str) -> str:
        """The key ``tenant``'s upload named ``name`` is stored under (services.uploads.upload_key,
        within what the pipeline ingests); services.uploads.UploadError when it ingests no such key."""
        ...

    def source_of(self, engine: Any, key: str) -> str:
        """The source name the pipeline gives the object at ``key`` (its document id derives from it)."""
        ...

    def key_of(self, engine: Any, source: str) -> str | None:
        """The object key of a document's ``source``; None when the document did not come from
        the pipeline's store of objects (a local file ingested by the CLI)."""
        ...

    def ingest(self, engine: Any, keys: Sequence[str]) -> None:
        """Read and ingest the objects just stored at ``keys`` (their status is ``received``)."""
        ...

    def remove(self, engine: Any, doc_id: str, key: str | None) -> None:
        """Remove the document ``doc_id`` (and its object at ``key``)."""
        ...
