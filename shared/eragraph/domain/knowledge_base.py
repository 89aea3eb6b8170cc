"""Knowledge base ids: the id under which a tenant's store answers the Amazon Bedrock Knowledge
Bases runtime API (``POST /knowledgebases/{knowledgeBaseId}/retrieve``).

The service model requires ``[0-9a-zA-Z]{10}``. The id is derived from the tenant name alone (a
hash, read as 10 base-36 digits), so it is the same on every read, on every profile and for the
life of the store, and computing it never writes: a read path stays read-only
(tests/unit/test_reads_never_write.py). The default tenant ("") has one too."""

from __future__ import annotations

import hashlib
import re
import string
from collections.abc import Iterable

LENGTH = 10
_ALPHABET = string.digits + string.ascii_uppercase
PATTERN = re.compile(r"[0-9a-zA-Z]{10}")


def knowledge_base_id(tenant: str) -> str:
    """The knowledge base id of ``tenant`` ("" is the default tenant): 10 of [0-9A-Z]."""
    number = int.from_bytes(hashlib.sha256(b"eragraph-knowledge-base\0" + tenant.encode("utf-8")).digest(), "big")
    digits = []
    for _ in range(LENGTH):
        number, digit = divmod(number, len(_ALPHABET))
        digits.append(_ALPHABET[digit])
    return "".join(digits)


def is_knowledge_base_id(text: str) -> bool:
    """Whether ``text`` has the shape the service model requires of a knowledge base id."""
    return PATTERN.fullmatch(text) is not None


def tenant_of(kb_id: str, tenants: Iterable[str]) -> str | None:
    """The tenant among ``tenants`` whose knowledge base id is ``kb_id`` (None: none is)."""
    for tenant in tenants:
        if knowledge_base_id(tenant) == kb_id:
            return tenant
    return None
