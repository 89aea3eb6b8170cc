"""Tenants: one deployment, many customers, none of whom can retrieve another's text.

A tenant is a namespace, not a column: every store of a tenant (graph items, vectors, the entity
graph, counters, dirty markers, queued work) lives under its own key prefix or directory, so the
domain and the services run unchanged inside one tenant and never see another's data. The
default tenant ``""`` is the store as it was before tenants (a single-tenant deployment).

Where a document's tenant comes from: the S3 key prefix ``tenants/<id>/...``, the ``tenant``
attribute of its metadata (JSONL, sidecar), or ``--tenant`` on the CLI. On the API it comes from
the caller's identity only (bootstrap.identity), never from the request body.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from .model import BadInputError
from .refusals import refused

DEFAULT = ""
KEY_PREFIX = "tenants/"  # S3 keys (and local paths) tenants/<id>/...
ATTRIBUTE = "tenant"  # the metadata key that names a document's tenant
MAX_LENGTH = 63
ID_PATTERN = r"[a-z0-9][a-z0-9_-]*"  # the rule of check_tenant, for pydantic fields (api, reindex event)
_ID = re.compile(ID_PATTERN)


class TenantError(BadInputError):
    """A tenant id that is not valid, or two sources naming different tenants."""

    refusal = "metadata"  # its words are the rule the document's metadata broke


def check_tenant(tenant: Any) -> str:
    """``tenant`` as a tenant id: 1-63 characters of a-z, 0-9, ``_`` and ``-``, starting with a
    letter or digit (it becomes part of storage keys, directory names and message groups)."""
    if not isinstance(tenant, str) or not tenant:
        raise TenantError(f"a tenant id must be a non-empty string, not {tenant!r}")
    if len(tenant) > MAX_LENGTH or not _ID.fullmatch(tenant):
        raise TenantError(f"tenant id {tenant[:80]!r} is not valid: 1-{MAX_LENGTH} characters of a-z, 0-9, '_' "
                          "and '-', starting with a letter or digit")
    return tenant


def tenant_of_key(key: str) -> str:
    """The tenant an object key names: ``tenants/<id>/...`` -> ``<id>``; any other key -> the
    default tenant. A key under ``tenants/`` whose id is not valid is a TenantError (never the
    default tenant: a typo must not put a customer's file where everyone's are)."""
    if not key.startswith(KEY_PREFIX):
        return DEFAULT
    head, sep, _rest = key[len(KEY_PREFIX):].partition("/")
    if not sep:
        raise TenantError(f"{key!r} is under {KEY_PREFIX!r} but names no tenant directory ({KEY_PREFIX}<id>/...)")
    return check_tenant(head)


def resolve(given: str, metadata: Mapping[str, Any] | None, where: str) -> tuple[str, dict[str, Any]]:
    """A document's tenant from ``given`` (the key prefix or ``--tenant``; "" when none) and its
    metadata's ``tenant`` attribute, and the metadata without it (the tenant is a namespace, and
    every chunk of the tenant carries it as the built-in attribute). Two that differ are a
    TenantError naming ``where``."""
    rest = dict(metadata or {})
    named = rest.pop(ATTRIBUTE, None)
    if named is None:
        return given, rest
    named = check_tenant(named)
    if given and named != given:
        raise refused(TenantError(f"{where}: its metadata names tenant {named!r} but it belongs to tenant {given!r}"),
                      "wrong_tenant", named=repr(named))
    return named, rest
