"""``clientToken`` idempotency, once for every operation that takes one (CreateDataSource,
StartIngestionJob, IngestKnowledgeBaseDocuments, DeleteKnowledgeBaseDocuments), as Bedrock's:

- the first request with a token does its work and records, under
  ``kb-token:<operation>:<token>`` in the tenant's own store (the MetaStore port: SQLite locally,
  DynamoDB on AWS, memory in tests), what it made and a fingerprint of the request;
- a retry with the same token and the same request answers the same thing and does nothing again;
- the same token with another request is refused (ConflictException), never answered with the
  first request's result (the second request's documents would silently never be ingested);
- a record lapses after TOKEN_TTL_SECONDS: read after that, it counts as absent and is removed.

Why not powertools' idempotency utility: its records live in a table of the deployment keyed by
function and payload, while these live in the tenant's store (namespaced per tenant on every
profile, deleted with the tenant) and must work on the local profile, which has no powertools
persistence layer; and its in-progress lock needs conditional writes the meta port does not offer.
A token's work racing itself (two identical requests at the same instant) may still run twice,
as before."""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from ..domain import kb_sync
from ..ports.graph import MetaStore

KEY = "kb-token:"
TOKEN_TTL_SECONDS = 24 * 3600.0  # a retry comes within minutes; a day keeps a slow client's too
T = TypeVar("T")


def fingerprint(request: Mapping[str, Any]) -> str:
    """A digest of the request without its token (the same request, whatever key order)."""
    body = {k: v for k, v in request.items() if k != "clientToken"}
    return hashlib.sha256(json.dumps(body, sort_keys=True, default=str).encode("utf-8")).hexdigest()


def once(meta: MetaStore, operation: str, token: str | None, request: Mapping[str, Any],
         make: Callable[[], tuple[T, Any]], replay: Callable[[Any], T], now: float | None = None) -> T:
    """``make()`` -> (the answer, what to remember), run once per ``token`` (none: every time);
    a retry answers ``replay(remembered)``; the token with another request is a ConflictException."""
    if not token:
        return make()[0]
    key = f"{KEY}{operation}:{token}"
    now = time.time() if now is None else now
    digest = fingerprint(request)
    held = meta.get_meta(key)
    if held is not None:
        if not (isinstance(held, dict) and "expires" in held):  # a record written before expiry and fingerprints
            held = {"value": held, "digest": None, "expires": now + TOKEN_TTL_SECONDS}
        if held["expires"] > now:
            if held["digest"] not in (None, digest):
                raise kb_sync.SyncError("ConflictException", f"the clientToken of this {operation} was used with "
                                        "another request: a retry must send the same request, a new request a "
                                        "new token")
            return replay(held["value"])
        meta.delete_meta(key)  # lapsed
    answer, value = make()
    meta.put_meta(key, {"value": value, "digest": digest, "expires": now + TOKEN_TTL_SECONDS})
    return answer
