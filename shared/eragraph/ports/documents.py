"""The document ports: documents with their tombstones, and the documents' statuses (their own
port, as callers that report status need nothing else of the store)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol, runtime_checkable

from ..domain.doc_status import DocStatus
from ..domain.model import ANY_VERSION, Document


@runtime_checkable
class DocumentStore(Protocol):
    # --- documents (tombstones, ``status == DELETED``, are only seen with include_deleted) ---
    def get_document(self, doc_id: str, include_deleted: bool = False) -> Document | None: ...
    def get_documents(self, doc_ids: Iterable[str]) -> dict[str, Document]:
        """The live documents of ``doc_ids`` by id (the missing and the deleted left out), in
        key reads of a bounded batch (a page of a listing: GET /documents' readers)."""
        ...
    def find_documents(self, source: str) -> list[Document]: ...
    def put_document(self, doc: Document, expected: Document | None = ANY_VERSION) -> None:
        """Store ``doc`` (a document or a tombstone). With ``expected`` the write is
        conditional: it happens only if the stored record (tombstones included) still has
        ``expected.stamp()`` (content hash, version, status), or, for ``expected=None``, if
        there is none; otherwise ConflictError and nothing is written."""
        ...
    def delete_document(self, doc_id: str) -> None: ...
    def list_documents(self) -> list[Document]: ...
    def documents_page(self, after: str | None, limit: int) -> tuple[list[Document], str | None]:
        """At most ``limit`` live documents after the cursor ``after`` (None: from the first),
        and the cursor of the next page (None: none follows); the order is the store's own
        (by id locally, the table's on DynamoDB). For the audit: one bounded read a page."""
        ...


@runtime_checkable
class StatusStore(Protocol):
    # document statuses (domain.doc_status): one record per doc id, listed by source prefix
    def put_doc_status(self, status: DocStatus, count: bool = True) -> None:
        """Replace the doc id's record. ``count=False``: the writer may not write the counters
        (the API's role: POST /documents), so the record is stored uncounted and the next
        counted write of it (the ingest's, when the object's event arrives) or the migration
        counts it; a store whose writers all may write the counters counts it at once."""
        ...
    def get_doc_status(self, doc_id: str) -> DocStatus | None: ...  # one read
    def doc_statuses(self, prefix: str = "") -> list[DocStatus]:
        """The records whose source starts with ``prefix``, by source: reads that prefix only."""
        ...
    def doc_statuses_page(self, prefix: str, after: tuple[str, str] | None, limit: int
                          ) -> tuple[list[DocStatus], tuple[str, str] | None]:
        """At most ``limit`` records whose source starts with ``prefix``, in (source, doc id)
        order strictly after ``after`` (None: from the first), and the (source, doc id) to pass
        as ``after`` for the next page (None: none follows). Reads at most ``limit + 1``
        records, never the rest of the prefix."""
        ...
    def status_counts(self, prefix: str = "") -> dict[str, int] | None:
        """The counters of ``prefix`` (domain.status_counts: key -> documents, one read), or
        None when it has none (a prefix that is not a counted directory, or a store written
        before the counters until migrate_status_counters has counted it)."""
        ...
    def delete_doc_status(self, doc_id: str) -> None: ...  # no error when absent
