"""Permissions inside a tenant: who may read a document, and which partition its chunks go to.

A document's **access list** is the list of principals that may read it, under the reserved
metadata key ``access`` (``{"access": ["group:finance", "user:alice"]}``; in an S3 sidecar's
``metadataAttributes``, a JSONL line's ``metadata``, ``POST /documents``, a bedrock-agent
ingestion, or ``--access`` on the CLI). A **principal** is ``group:<name>`` or ``user:<name>``,
the name 1-200 characters of letters, digits and ``._@+=:/-`` starting with a letter or digit.
A list names 1-100 principals; anything else is refused in words (``AccessError``), at ingest, as
any metadata is. A document without a list is readable by the whole tenant, or by nobody when
the deployment's ``access_default`` is ``deny``.

The **partition** of a document is the canonical form of its list (its principals, unique and
sorted); every document of one partition has the same readers. ``OPEN`` is the partition of the
documents without a list. Chunks are placed by (partition, LSH bucket) so that a segment, hence a
summary, never holds two partitions (services.resummarize): a summary's readers are its members'.

A **caller** (``Caller``) holds the principals of its identity (never of its request body); it
may read a partition that names one of them, and the open partition unless ``access_default``
is ``deny``. ``Caller(None)`` is the operator: everything, as before access lists existed."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from .model import BadInputError

ATTRIBUTE = "access"  # the reserved metadata key of a document's access list
KINDS = ("group", "user")
MAX_PRINCIPALS = 100
MAX_NAME = 200
PRINCIPAL_PATTERN = r"(group|user):[A-Za-z0-9][A-Za-z0-9._@+=:/-]{0,199}"
_PRINCIPAL = re.compile(PRINCIPAL_PATTERN)
OPEN = ""  # the partition of documents without an access list
READERS = "readers"  # the built-in attribute of every chunk and summary a caller's view selects on
EVERYONE = "*"  # its value for the open partition (documents without a list)
DEFAULTS = ("tenant", "deny")  # what a document without a list is: readable by the tenant, or by nobody


class AccessError(BadInputError):
    """A malformed principal or access list, or a caller whose identity names no principal."""

    refusal = "metadata"


def check_principal(value: Any, where: str = "principal") -> str:
    if not isinstance(value, str) or not _PRINCIPAL.fullmatch(value):
        shown = repr(value[:80]) if isinstance(value, str) else type(value).__name__
        raise AccessError(f"{where}: {shown} is not a principal: 'group:<name>' or 'user:<name>', the name "
                          f"1-{MAX_NAME} letters, digits or '._@+=:/-' starting with a letter or digit")
    return value


def check_access(value: Any, where: str = "metadata") -> list[str]:
    """An access list, validated: a list of 1-100 principals (duplicates allowed, dropped by
    ``canonical``). A string, an empty list or a bad principal is an AccessError naming ``where``."""
    where = f"{where}.{ATTRIBUTE}"
    if not isinstance(value, (list, tuple)):
        raise AccessError(f"{where}: an access list is a list of principals such as ['group:finance', "
                          f"'user:alice'], not {type(value).__name__}")
    if not value:
        raise AccessError(f"{where}: an access list names at least one principal (leave the key out "
                          "for a document the whole tenant may read)")
    if len(value) > MAX_PRINCIPALS:
        raise AccessError(f"{where}: {len(value)} principals; at most {MAX_PRINCIPALS}")
    return [check_principal(v, f"{where}[{i}]") for i, v in enumerate(value)]


def canonical(access: Iterable[str] | None) -> tuple[str, ...]:
    """The canonical form of an access list (unique principals, sorted); () for none."""
    return tuple(sorted(set(access or ())))


def partition_of(access: Iterable[str] | None) -> str:
    """The partition key of an access list: OPEN for none, else a digest of its canonical form
    (a fixed-size key for storage and filter terms; the list itself is kept beside it)."""
    members = canonical(access)
    if not members:
        return OPEN
    return "p" + hashlib.sha256("\n".join(members).encode()).hexdigest()[:32]


def readers_of(access: Iterable[str] | None) -> list[str]:
    """The ``readers`` attribute of a node of this access list: its canonical principals, or
    ``["*"]`` for the open partition."""
    return list(canonical(access)) or [EVERYONE]


def parse_principals(text: str, where: str = "--as") -> tuple[str, ...]:
    """A comma-separated list of principals (``--as group:finance,user:alice``)."""
    items = [p.strip() for p in text.split(",") if p.strip()]
    if not items:
        raise AccessError(f"{where}: names no principal (e.g. group:finance,user:alice)")
    return canonical(check_principal(p, where) for p in items)


@dataclass(frozen=True)
class Caller:
    """Who is asking: ``principals`` from its identity (None: the operator, who reads all);
    ``open_readable``: documents without a list are readable (the deployment's default)."""

    principals: tuple[str, ...] | None = None
    open_readable: bool = True

    @property
    def everything(self) -> bool:
        return self.principals is None

    def may_read(self, access: Iterable[str] | None) -> bool:
        """Whether the caller may read a document (or a partition) with this access list."""
        if self.principals is None:
            return True
        members = canonical(access)
        if not members:
            return self.open_readable
        return not set(members).isdisjoint(self.principals)


def caller(principals: Iterable[str] | None, default: str = "tenant") -> Caller:
    """A Caller of these principals (validated; None: the operator)."""
    if default not in DEFAULTS:
        raise ValueError(f"access_default must be one of {', '.join(DEFAULTS)}, not {default!r}")
    if principals is None:
        return Caller(None)
    principals = list(principals)
    if not principals:  # an identity that names nobody is refused, never the whole tenant
        raise AccessError("the caller's identity names no principal (group:NAME or user:NAME)")
    return Caller(canonical(check_principal(p, "caller") for p in principals), default == "tenant")


# ----- placement: a chunk's code is (partition index, LSH code) -----
# A placed code is ``index << n_planes | lsh``: the open partition is index 0 (so a store without
# access lists has exactly the codes it always had), every other partition an index of its own
# (services.placement allocates them, collision-free). The partition rule's recursion starts
# inside one partition (services.resummarize plans each partition's code range on its own), so a
# segment never holds two partitions. Codes stay below 2^62 (stored as int64).
CODE_BITS = 62


def index_bits(n_planes: int) -> int:
    return CODE_BITS - n_planes


def placed(lsh_code: int, index: int, n_planes: int) -> int:
    """The stored code of a node of partition ``index`` with LSH code ``lsh_code``."""
    if not 0 <= index < 1 << index_bits(n_planes):
        raise ValueError(f"partition index {index} out of range")
    return (index << n_planes) | (lsh_code & ((1 << n_planes) - 1))


def index_of(code: int, n_planes: int) -> int:
    """The partition index a stored code belongs to."""
    return int(code) >> n_planes


def lsh_part(code: int, n_planes: int) -> int:
    return int(code) & ((1 << n_planes) - 1)


def code_range(index: int, n_planes: int) -> tuple[int, int]:
    """The stored codes of partition ``index``: [lo, hi]."""
    return index << n_planes, ((index + 1) << n_planes) - 1


def max_code() -> int:
    return (1 << CODE_BITS) - 1


def index_candidate(key: str, n_planes: int, probe: int) -> int:
    """The ``probe``-th index a partition key may take (1..2^bits - 1; 0 is the open one)."""
    slots = (1 << index_bits(n_planes)) - 1
    return (int(key[1:17], 16) + probe) % slots + 1
