"""A dump's records checked before any is written (services.portable): each must be a JSON
object of a known ``kind`` with exactly the fields its record has (none missing, none unknown:
a ``tenant`` key on a document is refused, not loaded), each field of its type, a vector that
decodes, and document metadata that names no tenant but the target's. A refusal is a
portable.DumpError naming the record (``record 12 (document)``) and the rule, never a traceback.

``eragraph import`` reads the whole dump through ``check_dump`` first, then loads it: a dump
that is cut, damaged or bad anywhere is refused before the target holds anything. The reader
bounds what one line and the whole dump may inflate to (MAX_LINE_BYTES, MAX_DUMP_BYTES), so a
small gzip of zeros cannot fill the memory."""

from __future__ import annotations

import base64
import binascii
import dataclasses
from collections.abc import Iterable
from typing import Any

from ..domain.access import AccessError, check_access, partition_of
from ..domain.doc_status import DocStatus
from ..domain.model import Document, EragraphError, Node, Segment

FORMAT = "eragraph-dump"
READS = (1, 2)  # the dump versions ``load`` reads (portable.DUMP_VERSION writes the newest)
MAX_LINE_BYTES = 64 * 1024 * 1024  # one record (a document's kept text is at most ERAGRAPH_MAX_DOCUMENT_BYTES)
MAX_DUMP_BYTES = 64 * 1024 * 1024 * 1024  # a whole dump, inflated


class DumpError(EragraphError):
    """A dump that cannot be loaded here (its format or version, a bad record, or a target that
    is not empty)."""


_RECORDS = {"document": Document, "status": DocStatus, "node": Node, "segment": Segment}
_VECTOR = {"vector", "dtype"}
_EXTRA = {"document": {"stored_text"}, "node": _VECTOR}  # fields a record carries beside its dataclass's
_PLAIN = {  # the other kinds: field -> (type, required)
    "entity_chunk": {"chunk_id": (str, True), "sentences": (list, True)},
    "entity_vector": {"id": (str, True), "vector": (str, True), "dtype": (str, True)},
    "ledger": {"key": (str, True), "calls": (int, False), "tokens_in": (int, False), "tokens_out": (int, False),
               "seconds": (float, False)},
    "meta": {"key": (str, True), "value": (object, False)},
    "partition": {"index": (int, True), "access": (list, True)},  # an access partition (services.placement)
}
_TYPES = {"str": str, "int": int, "float": float, "tuple": list, "dict": dict}


def _type_of(annotation: str) -> type:
    return _TYPES.get(annotation.split("[", 1)[0].split("|", 1)[0].strip(), object)


def _is(value: Any, kind: type) -> bool:
    if kind is object:
        return True
    if isinstance(value, bool):
        return False
    if kind is float:
        return isinstance(value, (int, float))
    if kind is list:  # a JSON array (a tuple when the records come from dump() in process)
        return isinstance(value, (list, tuple))
    return isinstance(value, kind)


def _name(kind: type) -> str:
    return {str: "a string", int: "an integer", float: "a number", list: "an array", dict: "an object"}[kind]


def _fields(record: dict, where: str, spec: dict[str, tuple[type, bool]]) -> None:
    unknown = sorted(set(record) - set(spec) - {"kind"})
    if unknown:
        raise DumpError(f"{where} has an unknown field {ascii(unknown[0][:60])} (a {record['kind']} record has "
                        f"{', '.join(sorted(spec))})")
    for field, (kind, required) in spec.items():
        if field not in record:
            if required:
                raise DumpError(f"{where} is missing its field {field!r}")
            continue
        if not _is(record[field], kind):
            raise DumpError(f"{where}: {field} must be {_name(kind)}")


def _spec(cls: type, extra: set[str]) -> dict[str, tuple[type, bool]]:
    out = {f.name: (_type_of(f.type), f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING)
           for f in dataclasses.fields(cls)}
    out.update({name: (str, False) for name in extra})
    return out


def _vector(record: dict, where: str, dim: int | None) -> None:
    if record.get("dtype") not in ("f4", "f8"):
        raise DumpError(f"{where}: dtype must be f4 or f8")
    try:
        raw = base64.b64decode(record["vector"], validate=True)
    except (binascii.Error, ValueError):
        raise DumpError(f"{where}: vector is not base64") from None
    size = 4 if record["dtype"] == "f4" else 8
    if len(raw) % size or (dim is not None and len(raw) // size != dim):
        raise DumpError(f"{where}: vector is not {dim if dim is not None else 'whole'} {record['dtype']} numbers")


def check_record(record: Any, number: int, tenant: str, dim: int | None = None) -> dict:
    """``record`` (the dump's ``number``-th, header 1) as a record ``load`` may write into
    ``tenant``'s store, whose vectors have ``dim`` numbers; DumpError in words otherwise."""
    if not isinstance(record, dict):
        kind = "an array" if isinstance(record, list) else type(record).__name__.replace("NoneType", "null")
        raise DumpError(f"record {number} is {kind}, not a JSON object: not a record of an eragraph dump")
    kind = record.get("kind")
    where = f"record {number} ({ascii(kind)[:40]})"  # ascii(): a lone surrogate prints as its escape
    if not isinstance(kind, str):
        raise DumpError(f"{where}: its kind must be a string")
    if kind in _RECORDS:
        _fields(record, where, _spec(_RECORDS[kind], _EXTRA.get(kind, set())))
        for field in ("chunk_ids", "children", "members", "pending_shards", "place"):
            whole = field in ("pending_shards", "place")
            if field in record and not all(_is(v, int if whole else str) for v in record[field]):
                raise DumpError(f"{where}: {field} must hold {'integers' if whole else 'strings'}")
        if kind == "node" and ("vector" in record or "dtype" in record):
            _vector(record, where, dim)
        if kind == "document":
            named = (record.get("metadata") or {}).get("tenant")
            if named is not None and named != tenant:
                whose = f"tenant {tenant!r}" if tenant else "the default tenant"
                raise DumpError(f"{where}: its metadata names tenant {ascii(str(named)[:63])}, not {whose} it is imported "
                                "into: import it with --tenant naming that tenant")
            if "access" in (record.get("metadata") or {}):  # domain.access: validated as ingest does
                _access(record["metadata"]["access"], where)
    elif kind in _PLAIN:
        _fields(record, where, _PLAIN[kind])
        if kind == "entity_vector":
            _vector(record, where, None)
        if kind == "partition":
            _access(record["access"], where)
            if record["index"] < 1:
                raise DumpError(f"{where}: index must be a positive integer (0 is the open partition's)")
        if kind == "entity_chunk" and not all(
                isinstance(s, (list, tuple)) and len(s) == 2 and isinstance(s[0], str) and isinstance(s[1], (list, tuple))
                and all(isinstance(n, str) for n in s[1]) for s in record["sentences"]):
            raise DumpError(f"{where}: sentences must be [text, [entity names]] pairs")
    else:
        raise DumpError(f"{where}: this dump holds a record of unknown kind {ascii(kind[:40])}")
    return record


def _access(value: Any, where: str) -> str:
    """The partition key of a valid access list, or a DumpError naming the record."""
    try:
        return partition_of(check_access(value, where))
    except AccessError as exc:
        raise DumpError(str(exc)) from None


def check_header(header: Any) -> dict:
    """The header of a dump this code reads, or a DumpError saying why not."""
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        raise DumpError("this is not an eragraph dump (its first record has no \"format\": \"eragraph-dump\")")
    version = header.get("version")
    if isinstance(version, bool) or version not in READS:  # True == 1 in Python: no version at all
        reads = ", ".join(map(str, READS))
        if isinstance(version, int) and not isinstance(version, bool) and version > max(READS):
            why = f"; this eragraph reads version {reads}: upgrade eragraph to load it"
        elif isinstance(version, int) and not isinstance(version, bool) and version < min(READS):
            why = (f", older than any this eragraph reads (it reads version {reads}): load it with the "
                   f"eragraph that wrote it and export it again")
        else:
            why = f"; this eragraph reads version {reads}"
        raise DumpError(f"this dump is version {version!r}{why}")
    lsh = header.get("lsh")
    if lsh is not None and not (isinstance(lsh, dict) and isinstance(lsh.get("embedder_id"), str)
                                and all(isinstance(lsh.get(k), int) and not isinstance(lsh.get(k), bool)
                                        for k in ("dim", "n_planes", "seed"))
                                and isinstance(lsh.get("planes"), (list, tuple))
                                and all(isinstance(row, (list, tuple)) for row in lsh["planes"])):
        raise DumpError("the dump's header has no valid lsh (embedder_id, dim, n_planes, seed and planes)")
    if not isinstance(header.get("providers") or {}, dict):
        raise DumpError("the dump's header: providers must be an object")
    return header


def check_dump(records: Iterable[Any], tenant: str) -> dict[str, int]:
    """Read a whole dump (header first) without writing anything: the counts of its records, or
    DumpError at the first bad one."""
    it = iter(records)
    header = check_header(next(it, None))
    dim = (header.get("lsh") or {}).get("dim")
    counts: dict[str, int] = {}
    seen: set[tuple[str, str]] = set()
    registered: set[str] = set()  # the partition keys of the dump's partition records (before its documents)
    for number, record in enumerate(it, 2):
        check_record(record, number, tenant, dim)
        kind = record["kind"]
        if kind == "partition":
            registered.add(partition_of(record["access"]))
        elif kind == "document" and "access" in (record.get("metadata") or {}):
            check_registered(record["metadata"]["access"], registered, f"record {number} (document)")
        counts[kind] = counts.get(kind, 0) + 1
        key = record.get(_ID.get(kind, "kind"))
        if kind != "status" and (kind, str(key)) in seen:
            raise DumpError(f"record {number} ({kind}): {ascii(str(key)[:80])} is in the dump twice")
        seen.add((kind, str(key)))
    return counts


def check_registered(access: Any, registered: set[str], where: str) -> None:
    """DumpError unless the partition of ``access`` is one the dump's partition records named."""
    if partition_of(access) not in registered:
        raise DumpError(f"{where}: its access list's partition is not among the dump's partition records "
                        "(they come before the documents): not a dump eragraph export wrote")


_ID = {"partition": "index", "document": "doc_id", "status": "doc_id", "node": "node_id", "segment": "segment_id",
       "entity_chunk": "chunk_id", "entity_vector": "id", "ledger": "key", "meta": "key"}
