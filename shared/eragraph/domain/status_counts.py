"""The status counters: how many documents are in each stored state, under the tenant and under
each of a source's first directories, kept by the status store in the same write as the status
record (so a listing's counts never read the records). One exception on AWS: the API's
``received`` (POST /documents) is written uncounted, its role holding no grant on the counters,
and the ingest's next write of that record counts it (adapters.aws.status_dynamodb).

A status counts under ``""`` (the whole tenant) and under every prefix of its source that ends
with ``/``, up to ``COUNTED_DIRS`` of them (``s3://bucket/a/b.txt`` counts under ``""``,
``s3:/``, ``s3://``, ``s3://bucket/`` and ``s3://bucket/a/``): a directory is one counter read,
whatever it holds. Another prefix (a partial name, or deeper than the counted directories) has
no counter: its counts are read from its records (services.doc_status), which costs what that
prefix holds, not what the tenant holds.

The counted states are the stored ones, with an indexed status without layer-0 shards (nothing
to summarize) counted as ``done`` already: ``received``, ``indexed``, ``done``, ``failed``. How
many ``indexed`` ones are ``summaries_pending`` rather than ``done`` depends on the dirty markers
at reading time (domain.doc_status.effective_state); services.doc_status splits them."""

from __future__ import annotations

from collections.abc import Iterable

from .doc_status import DONE, FAILED, INDEXED, RECEIVED, DocStatus

COUNTED_DIRS = 12  # directory prefixes counted per source (besides the whole tenant)
COUNTED_KEYS = (RECEIVED, INDEXED, DONE, FAILED)


def counted_prefixes(source: str) -> list[str]:
    """``""`` and the first COUNTED_DIRS prefixes of ``source`` that end with ``/``."""
    out = [""]
    at = source.find("/")
    while at >= 0 and len(out) <= COUNTED_DIRS:
        out.append(source[:at + 1])
        at = source.find("/", at + 1)
    return out


def is_counted(prefix: str) -> bool:
    """Whether ``prefix`` has counters (the tenant, or a counted directory)."""
    return prefix == "" or (prefix.endswith("/") and prefix.count("/") <= COUNTED_DIRS)


def counter_key(status: DocStatus) -> str:
    """The counter a status adds to."""
    if status.state == INDEXED and not status.pending_shards:
        return DONE
    return status.state


def deltas(before: DocStatus | None, after: DocStatus | None) -> dict[str, dict[str, int]]:
    """prefix -> {counter key: change} of replacing ``before`` (None: none counted) with
    ``after`` (None: deleted); prefixes and keys that do not change are left out."""
    out: dict[str, dict[str, int]] = {}
    for status, sign in ((before, -1), (after, 1)):
        if status is None:
            continue
        key = counter_key(status)
        for prefix in counted_prefixes(status.source):
            row = out.setdefault(prefix, {})
            row[key] = row.get(key, 0) + sign
    return {p: {k: n for k, n in row.items() if n} for p, row in out.items() if any(row.values())}


def add_into(totals: dict[str, dict[str, int]], statuses: Iterable[DocStatus]) -> dict[str, dict[str, int]]:
    """Count ``statuses`` into ``totals`` (prefix -> key -> n): a recount, a migration."""
    for status in statuses:
        for prefix, row in deltas(None, status).items():
            mine = totals.setdefault(prefix, {})
            for key, n in row.items():
                mine[key] = mine.get(key, 0) + n
    return totals
