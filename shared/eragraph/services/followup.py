"""What must follow a document write, kept until it is done (an outbox per ingest batch).

An ingest commits each document conditionally (its chunks are already written), then removes the
chunks the old version had and the new one has not, then announces the batch's changes to the
reconcile of layer 0. A remove writes its tombstone, then removes the chunks, then announces. A
process that dies between the commit and the announce leaves a state that looks finished: a
redelivered event finds its own version stored and would be a no-op, so the chunks it added
would never be partitioned and the ones it replaced never removed.

So before its commits a batch writes one meta record ``followup:<token>`` naming, per document,
the (chunk id, code) pairs to remove; each committed document (or tombstone) carries the token in
its meta (``_followup``); the record is deleted once the batch has announced. An event that
finds its exact version stored with a token whose record still exists (``pending``) redoes the
follow-up: removes what is left to remove and announces the document's chunks and the removed ones
again (an extra announcement costs a reconcile that finds nothing to change), and then deletes
the record once none of the documents it lists still carries its token unredone (``settle``:
a rerun of a killed CLI ingest leaves no record behind). Reindex removes records older than
its ``stuck_after``; its own audits (orphan chunks, layers against their
partition) repair what such a record would have."""

from __future__ import annotations

import hashlib
import time
from collections.abc import Mapping, Sequence

from ..domain.model import Document
from .engine import Engine

PREFIX = "followup:"
TOKEN = "_followup"  # the document meta key naming its batch's record


def begin(engine: Engine, gone: Mapping[str, Sequence[tuple[str, int]]], docs: Sequence[Document]) -> str:
    """Record the follow-ups of a batch of document writes (document id -> chunks to drop);
    returns the token. The token is derived from what the batch writes (ids, content hashes,
    versions), so the same writes made twice store the same documents byte for byte."""
    basis = "\n".join(sorted(f"{d.doc_id}|{d.content_hash}|{d.version}|{d.status}" for d in docs))
    token = hashlib.sha256(basis.encode("utf-8")).hexdigest()[:32]
    engine.graph.put_meta(PREFIX + token, {"at": round(time.time(), 3),
                                           "gone": {d: [[i, int(c)] for i, c in pairs] for d, pairs in gone.items()},
                                           "docs": sorted({d.doc_id for d in docs})})
    return token


def stamped(doc: Document, token: str) -> Document:
    from dataclasses import replace

    return replace(doc, meta={**doc.meta, TOKEN: token})


def end(engine: Engine, token: str) -> None:
    engine.graph.delete_meta(PREFIX + token)


def token_of(doc: Document) -> str | None:
    token = (doc.meta or {}).get(TOKEN)
    return str(token) if token else None


def settle(engine: Engine, token: str, redone: set[str]) -> bool:
    """After a write that redid part of ``token``'s follow-up (``redone``: the documents it
    redid, announced and flushed): end the record once none of its documents needs it any
    more -- each was redone, or is stored under another token (or not at all: its commit never
    happened, and its next write carries its own). A record that does not list its documents
    (written before they were listed) is left to reindex. Returns whether it is gone."""
    entry = engine.graph.get_meta(PREFIX + token)
    if entry is None:
        return True
    if "docs" not in entry:
        return False
    for doc_id in entry["docs"]:
        if doc_id in redone:
            continue
        stored = engine.graph.get_document(doc_id, include_deleted=True)
        if stored is not None and token_of(stored) == token:
            return False
    end(engine, token)
    return True


def pending(engine: Engine, doc: Document | None) -> list[tuple[str, int]] | None:
    """The chunks still to remove of ``doc``'s unfinished write (possibly none), or None when its
    write was followed through."""
    token = (doc.meta or {}).get(TOKEN) if doc is not None else None
    if not token:
        return None
    entry = engine.graph.get_meta(PREFIX + str(token))
    if entry is None:
        return None
    return [(str(i), int(c)) for i, c in entry.get("gone", {}).get(doc.doc_id, [])]


def expire(engine: Engine, older_than: float, now: float | None = None) -> int:
    """Delete records older than ``older_than`` seconds (reindex); returns how many."""
    now = time.time() if now is None else now
    n = 0
    for key in engine.graph.meta_keys(PREFIX):
        entry = engine.graph.get_meta(key)
        if entry is not None and (older_than <= 0 or now - float(entry.get("at", 0.0)) >= older_than):
            engine.graph.delete_meta(key)
            n += 1
    return n
