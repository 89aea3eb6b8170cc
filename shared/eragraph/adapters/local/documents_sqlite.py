"""The DocumentStore part of the SQLite graph store: the ``documents`` table (tombstones
included), and the live documents' chunk attributes that filters read."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable

from ...domain.model import ANY_VERSION, DELETED, ConflictError, Document
from .sqlite_db import SqliteDb, _dumps


_DOC_COLS = "doc_id, source, content_hash, title, chunk_ids, status, meta, version, metadata"
_DOC_MARKS = ", ".join("?" * len(_DOC_COLS.split(",")))
_LIVE = f"status != '{DELETED}'"
# each live document's chunk attributes (domain.filters.chunk_attrs) as one JSON object: its
# metadata and the built-in source, doc_id and title (title only when it has one)
_CHUNK_ATTRS = ("SELECT doc_id, CASE WHEN title = '' "
                "THEN json_set(metadata, '$.source', source, '$.doc_id', doc_id) "
                "ELSE json_set(metadata, '$.source', source, '$.doc_id', doc_id, '$.title', title) END AS attrs "
                f"FROM documents WHERE {_LIVE}")


def _doc_row(doc: Document) -> tuple:
    return (doc.doc_id, doc.source, doc.content_hash, doc.title, _dumps(list(doc.chunk_ids)),
            doc.status, _dumps(doc.meta), doc.version, _dumps(doc.metadata))


def _doc(row: sqlite3.Row | tuple) -> Document:
    doc_id, source, content_hash, title, chunk_ids, status, meta, version, metadata = row
    return Document(doc_id=doc_id, source=source, content_hash=content_hash, title=title,
                    chunk_ids=tuple(json.loads(chunk_ids)), status=status, meta=json.loads(meta),
                    version=version, metadata=json.loads(metadata))


class SqliteDocumentStore(SqliteDb):
    def get_document(self, doc_id: str, include_deleted: bool = False) -> Document | None:
        where = "doc_id = ?" if include_deleted else f"doc_id = ? AND {_LIVE}"
        rows = self._query(f"SELECT {_DOC_COLS} FROM documents WHERE {where}", (doc_id,))
        return _doc(rows[0]) if rows else None

    def get_documents(self, doc_ids: Iterable[str]) -> dict[str, Document]:
        ids = list(dict.fromkeys(doc_ids))
        out: dict[str, Document] = {}
        for start in range(0, len(ids), 500):  # SQLite's bound parameters, a batch at a time
            part = ids[start:start + 500]
            rows = self._query(f"SELECT {_DOC_COLS} FROM documents WHERE doc_id IN ({','.join('?' * len(part))})"
                               f" AND {_LIVE}", tuple(part))
            out.update((d.doc_id, d) for d in map(_doc, rows))
        return {i: out[i] for i in ids if i in out}

    def find_documents(self, source: str) -> list[Document]:
        rows = self._query(f"SELECT {_DOC_COLS} FROM documents WHERE source = ? AND {_LIVE} ORDER BY doc_id",
                           (source,))
        return [_doc(r) for r in rows]

    def put_document(self, doc: Document, expected: Document | None = ANY_VERSION) -> None:
        with self._write() as conn:
            if expected is not ANY_VERSION:
                row = conn.execute("SELECT content_hash, version, status FROM documents WHERE doc_id = ?",
                                   (doc.doc_id,)).fetchone()
                if (row is None) != (expected is None) or (
                        row is not None and tuple(row) != expected.stamp()):
                    raise ConflictError(f"document {doc.doc_id} changed concurrently")
            conn.execute(f"INSERT OR REPLACE INTO documents ({_DOC_COLS}) VALUES ({_DOC_MARKS})", _doc_row(doc))

    def delete_document(self, doc_id: str) -> None:
        with self._write() as conn:
            conn.execute("DELETE FROM documents WHERE doc_id = ?", (doc_id,))

    def list_documents(self) -> list[Document]:
        return [_doc(r) for r in self._query(f"SELECT {_DOC_COLS} FROM documents WHERE {_LIVE} ORDER BY doc_id")]

    def documents_page(self, after: str | None, limit: int) -> tuple[list[Document], str | None]:
        limit = max(limit, 0)
        rows = self._query(f"SELECT {_DOC_COLS} FROM documents WHERE {_LIVE} AND doc_id > ? ORDER BY doc_id LIMIT ?",
                           (after or "", limit + 1))
        page = [_doc(r) for r in rows[:limit]]
        return page, (page[-1].doc_id if len(rows) > limit and page else None)
