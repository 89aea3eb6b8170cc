"""Knowledge base ids: the id under which a tenant's store answers the Amazon Bedrock Knowledge
Bases runtime API (``POST /knowledgebases/{knowledgeBaseId}/retrieve``).

The service model requires ``[0-9a-zA-Z]{10}``. The id is a hash of the deployment's salt and the
tenant name (read as 10 base-36 digits), so it is the same on every read and for the life of the
deployment, and computing it never writes: a read path stays read-only
(tests/unit/test_reads_never_write.py). The default tenant ("") has one too.

The salt (Settings.kb_id_salt, ERAGRAPH_KB_ID_SALT: on AWS the template's KnowledgeBaseIdSalt,
by default the stack's own id) is a secret of the deployment: without it an id cannot be computed
from a tenant name, so an id reveals no name and a caller cannot test guessed names against ids.
An empty salt gives the ids of the versions before it (docs/bedrock-kb.md: the migration)."""

from __future__ import annotations

import hashlib
import re
import string
from collections.abc import Iterable

LENGTH = 10
_ALPHABET = string.digits + string.ascii_uppercase
PATTERN = re.compile(r"[0-9a-zA-Z]{10}")


def knowledge_base_id(tenant: str, salt: str = "") -> str:
    """The knowledge base id of ``tenant`` ("" is the default tenant) under the deployment's
    ``salt``: 10 of [0-9A-Z]."""
    key = b"eragraph-knowledge-base\0" + (salt.encode("utf-8") + b"\0" if salt else b"")
    number = int.from_bytes(hashlib.sha256(key + tenant.encode("utf-8")).digest(), "big")
    digits = []
    for _ in range(LENGTH):
        number, digit = divmod(number, len(_ALPHABET))
        digits.append(_ALPHABET[digit])
    return "".join(digits)


def is_knowledge_base_id(text: str) -> bool:
    """Whether ``text`` has the shape the service model requires of a knowledge base id."""
    return PATTERN.fullmatch(text) is not None


def tenant_of(kb_id: str, tenants: Iterable[str], salt: str = "") -> str | None:
    """The tenant among ``tenants`` whose knowledge base id (under ``salt``) is ``kb_id`` (None: none is)."""
    for tenant in tenants:
        if knowledge_base_id(tenant, salt) == kb_id:
            return tenant
    return None
