"""Change records: what each ingest, each removal and each re-summarization changed, kept in the
store's meta (MetaStore) under ``change:<time>:<token>`` keys, the most recent ``KEEP`` of them.

A record is written by the operation itself (services.ingest.ingest, services.remove.remove,
services.resummarize.reconcile) once it has changed something, so every profile keeps them: the
local worker and the CLI, and on AWS the ingest function (per S3 event) and the summarize
function (per SQS message). Records are trimmed as they are written, but not on every write:
listing the keys is a read (a DynamoDB Query) on the insert path, so a process lists them on
its first write and then every ``SLACK``-th, and deletes the oldest down to ``KEEP`` once it
finds more than ``KEEP + SLACK``; one process so keeps at most ``KEEP + 2 * SLACK`` (two writers
trimming at once delete the same keys; a delete of an absent key is no error).

Fields: ``id``, ``time`` (epoch seconds), ``kind`` (``ingest``, ``remove``, ``resummarize``);
ingest/remove: ``documents`` (the sources added, replaced, retagged or removed; at most
``MAX_LISTED``, ``documents_total`` counts them all; a report holds only those it lists, so
one listed again past the first ``MAX_LISTED`` is counted again), ``chunks_added``, ``chunks_removed``;
resummarize: ``layer`` (the layer whose summaries were written), ``segments``, ``summaries``
(the ids of the summaries written or revised there), ``removed`` (the summary ids removed); every
kind: ``calls``, ``tokens_in``, ``tokens_out`` (its summarize calls) and ``seconds``. Who may
read what a record lists is kept beside it (domain.access): ``partitions``, each listed
document's access partition key, and ``summary_partitions`` / ``removed_partitions``, each
listed summary's partition index.

In a caller's view (``in_view``: GET /changes of a caller with principals) a record lists only
the documents and summaries of the partitions the caller may read, and is left out when it
lists none of them; a record of which something was left out loses its counts and cost (they
are the whole operation's), and the partition fields are never shown. A document is judged by
its partition in the newest record that names it (a retag that moves it to another partition is
a record too, and is newer than every record before it), so one moved out of the caller's
partitions leaves the older records' lists as well; a removed document is shown, in the
records up to its removal's, to those who could read it when it was removed. A record written before
access lists (no partition fields) lists nothing to a caller: it is left out (fail closed).

``rebuild_estimate`` prices summarizing the whole current store from scratch: one summarize
call per summary of every layer, each at the ledger's mean tokens in and out of a summarize call
(``basis: "ledger"``), or, before any summarize call was recorded, at the settings' sizes (a
segment of (S_min+S_max)/2 children of CHUNK_TOKENS words each in, SUMMARY_TOKENS out:
``basis: "words"``)."""

from __future__ import annotations

import itertools
import time
import uuid
from collections.abc import Sequence
from typing import Any

from ..domain.access import Caller, partition_of
from ..domain.model import MetaWrite
from . import cost
from .engine import Engine
from .reports import LISTED, ChangeReport

PREFIX = "change:"
KEEP = 200
SLACK = 20  # trimmed in steps: a writer lists the keys on each write, deletes only past KEEP + SLACK
MAX_LISTED = LISTED  # ids or sources listed in one record (a bulk ingest counts the rest)
MAX_LIMIT = KEEP


def _key(now: float) -> str:
    # zero-padded nanoseconds first: the keys sort by time; the token keeps two writers apart
    return f"{PREFIX}{int(now * 1e9):020d}:{uuid.uuid4().hex[:12]}"


def _cost(report: ChangeReport, seconds: float) -> dict[str, Any]:
    return {"calls": report.cost.summarize_calls, "tokens_in": report.cost.tokens_in,
            "tokens_out": report.cost.tokens_out, "seconds": round(seconds, 4)}


_WRITES = itertools.count()  # this process's record writes: it trims on the first and every SLACK-th


def _put(engine: Engine, record: dict[str, Any], now: float, done: Sequence[str] = ()) -> dict[str, Any]:
    """Store the record; the keys ``done`` (finished work records) are deleted in the same write."""
    key, record = _record(now, record)
    engine.graph.write_meta([(key, record)], list(done))
    _trim_in_turn(engine)
    return record


def _record(now: float, record: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    key = _key(now)
    return key, {"id": key[len(PREFIX):], "time": round(now, 3), **record}


def _trim_in_turn(engine: Engine) -> None:
    if next(_WRITES) % SLACK == 0:
        trim(engine)


def trim(engine: Engine, keep: int = KEEP, slack: int = SLACK) -> int:
    """Delete the oldest records past ``keep`` once there are more than ``keep + slack``."""
    keys = engine.graph.meta_keys(PREFIX)
    if len(keys) <= keep + slack:
        return 0
    old = sorted(keys)[:len(keys) - keep]
    for key in old:
        engine.graph.delete_meta(key)
    return len(old)


def record_documents(engine: Engine, kind: str, report: ChangeReport, seconds: float,
                     now: float | None = None, done: Sequence[str] = ()) -> dict[str, Any] | None:
    """The record of an ingest or a removal (``kind``), when it changed a document; else None.
    ``done``: meta keys of finished work (follow-up records) deleted in the same write."""
    if not (report.sources or report.chunks_added or report.chunks_removed):
        _finish(engine, done)
        return None
    sources, total = report.sources[:MAX_LISTED], report.sources_total
    return _put(engine, {"kind": kind, "documents": sources, "documents_total": total,
                         "partitions": [report.source_partitions.get(s) for s in sources],
                         "chunks_added": report.chunks_added, "chunks_removed": report.chunks_removed,
                         **_cost(report, seconds)}, time.time() if now is None else now, done)


def _finish(engine: Engine, done: Sequence[str]) -> None:
    if done:
        engine.graph.write_meta([], list(done))


def resummarize_write(engine: Engine, report: ChangeReport, seconds: float,
                      now: float | None = None, done: Sequence[str] = (),
                      clear: Sequence[tuple[str, float]] = (), present: Sequence[str] = ()) -> MetaWrite:
    """One record per layer whose summaries a reconcile wrote, revised or removed, with its
    finished work records ``done`` to delete, its shard's marker to clear (``clear``: as
    MetaStore.write_meta clears them) and the summary nodes ``present`` to look for: the write
    that ends a reconcile, made by it or carried by the layer above's first region write
    (services.resummarize). Trims the records when this process's turn comes."""
    layers = sorted(set(report.summary_ids) | set(report.removed_summary_ids))
    stamp = time.time() if now is None else now
    puts: list[tuple[str, Any]] = []
    for n, layer in enumerate(layers):
        written = report.summary_ids.get(layer, [])[:MAX_LISTED]
        written_total = report.summaries_total.get(layer, 0)
        removed = report.removed_summary_ids.get(layer, [])[:MAX_LISTED]
        removed_total = report.removed_total.get(layer, 0)
        spent = _cost(report, seconds) if n == 0 else {"calls": 0, "tokens_in": 0, "tokens_out": 0,
                                                        "seconds": 0.0}  # the cost counted once
        puts.append(_record(stamp, {"kind": "resummarize", "layer": layer,
                                    "segments": report.segments_resummarized.get(layer, 0),
                                    "summaries": written, "summaries_total": written_total,
                                    "removed": removed, "removed_total": removed_total,
                                    "summary_partitions": [report.summary_partitions.get(i) for i in written],
                                    "removed_partitions": [report.summary_partitions.get(i) for i in removed],
                                    **spent}))
        _trim_in_turn(engine)
    return MetaWrite(tuple(puts), tuple(dict.fromkeys(done)), tuple(clear), tuple(dict.fromkeys(present)))


def recent(engine: Engine, limit: int = 20) -> list[dict[str, Any]]:
    """The ``limit`` most recent records, newest first (reads the keys, then those records)."""
    keys = sorted(engine.graph.meta_keys(PREFIX), reverse=True)[:max(0, min(limit, MAX_LIMIT))]
    out = []
    for key in keys:
        record = engine.graph.get_meta(key)
        if isinstance(record, dict):  # trimmed between the listing and the read: left out
            out.append(record)
    return out


HIDDEN = ("partitions", "summary_partitions", "removed_partitions")  # never shown to a caller
WHOLE = ("documents_total", "chunks_added", "chunks_removed", "segments", "summaries_total", "removed_total",
         "calls", "tokens_in", "tokens_out", "seconds")  # the whole operation's: not shown when part is hidden


def in_view(engine: Engine, records: list[dict[str, Any]], caller: Caller | None) -> list[dict[str, Any]]:
    """``records`` as ``caller`` may see them (see the module; None or the operator: as they are).
    One read of the partition registry (services.placement.partitions), whatever the records."""
    if caller is None or caller.everything:
        return records
    from .placement import partitions

    allowed = {i: partition_of(a) for i, a in partitions(engine).items() if caller.may_read(a)}
    keys, indexes = set(allowed.values()), set(allowed)
    latest: dict[str, str | None] = {}  # a source's partition in the newest record naming it
    for record in sorted(records, key=lambda r: r.get("id", ""), reverse=True):
        if record.get("kind") != "resummarize":
            marks = list(record.get("partitions") or ())
            for n, source in enumerate(record.get("documents") or ()):
                latest.setdefault(source, marks[n] if n < len(marks) else None)
    out = []
    for record in records:
        shown: dict[str, list] = {}
        whole = True
        if record.get("kind") == "resummarize":
            for listed, where in (("summaries", "summary_partitions"), ("removed", "removed_partitions")):
                items, marks = list(record.get(listed) or ()), list(record.get(where) or ())
                shown[listed] = [item for n, item in enumerate(items) if n < len(marks) and marks[n] in indexes]
                # all listed and shown (a record lists at most MAX_LISTED: the rest are unknown)
                whole = whole and len(shown[listed]) == len(items) == record.get(f"{listed}_total", len(items))
        else:  # a document moved to another partition since is shown as it is now
            items = list(record.get("documents") or ())
            shown["documents"] = [s for s in items if latest.get(s) in keys]
            whole = len(shown["documents"]) == len(items) == record.get("documents_total", len(items))
        if not any(shown.values()):
            continue
        view = {k: v for k, v in record.items() if k not in HIDDEN and (whole or k not in WHOLE)}
        view.update(shown)
        if not whole and "documents" in shown:
            view["documents_total"] = len(shown["documents"])
        out.append(view)
    return out


def rebuild_estimate(engine: Engine) -> dict[str, Any]:
    """What summarizing the whole current store from scratch would cost (see the module)."""
    sizes = engine.graph.layer_sizes()
    summaries = sum(n for layer, n in sizes.items() if layer >= 1)
    rows = [c for c in cost.ledger_rows(engine.graph.ledger()) if c.kind == "summarize" and c.calls > 0]
    calls = sum(c.calls for c in rows)
    s = engine.settings
    if calls:
        mean_in = sum(c.tokens_in for c in rows) / calls
        mean_out = sum(c.tokens_out for c in rows) / calls
        basis = "ledger"
        model = max(rows, key=lambda c: c.calls).model
    else:
        mean_in = (s.s_min + s.s_max) / 2 * s.chunk_tokens
        mean_out = float(s.summary_tokens)
        basis = "words"
        model = getattr(engine.summarizer, "identity", "")
    tokens_in, tokens_out = round(summaries * mean_in), round(summaries * mean_out)
    usd = cost.cost_usd(model, tokens_in, tokens_out, s.price_table()) if model else None
    return {"calls": summaries, "tokens_in": tokens_in, "tokens_out": tokens_out,
            "usd": None if usd is None else round(usd, 6), "basis": basis, "model": model,
            "summaries": {str(layer): n for layer, n in sorted(sizes.items()) if layer >= 1}}
