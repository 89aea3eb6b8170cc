"""A Bedrock Knowledge Bases runtime request checked as the service checks it, before any work.

Two passes, each raising the service's modelled ``ValidationException`` in words (never a Python
type name, never the request's values beyond a short excerpt):

- ``check_shape``: the operation's input shape in the ``bedrock-agent-runtime`` service model
  that botocore ships -- required members, unknown members, types (a boolean is no integer),
  enums, patterns, lengths and ranges, and unions (exactly one member). A pattern must match the
  whole value (``fullmatch``: a value that merely contains a valid part is refused), and it is
  applied only after the length check, at most PATTERN_MAX_CHARS where the model gives no
  maximum, so no value costs more than a bounded match. botocore's own validator
  checks types and required members only, so a client that skips it (or any HTTP caller) could
  send a ``sessionId`` with a line break, ``overrideSearchType: "BOGUS"`` or
  ``numberOfResults: true``.
- ``check_supported``: what Eragraph answers. A member the model allows but Eragraph does not
  apply (guardrails, generation settings, orchestration settings other than query decomposition, managed search, session encryption,
  user context, image queries) is refused with a message naming it, never silently dropped."""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

EXCERPT = 40  # characters of a refused value quoted back
PATTERN_MAX_CHARS = 1024  # a patterned string with no maximum in the model: checked up to this length

ALL = None  # in SUPPORTED: this member and everything under it

_RETRIEVAL = {"vectorSearchConfiguration": {
    "numberOfResults": ALL, "overrideSearchType": ALL, "filter": ALL,
    "rerankingConfiguration": {"type": ALL, "bedrockRerankingConfiguration": {
        "numberOfRerankedResults": ALL, "modelConfiguration": {"modelArn": ALL}}}}}

# the members Eragraph applies, per operation (a nested dict: a member maps to its own members)
SUPPORTED: dict[str, dict] = {
    "Retrieve": {"knowledgeBaseId": ALL, "nextToken": ALL, "retrievalQuery": {"text": ALL, "type": ALL},
                 "retrievalConfiguration": _RETRIEVAL},
    "RetrieveAndGenerate": {"input": ALL, "sessionId": ALL, "retrieveAndGenerateConfiguration": {
        "type": ALL, "externalSourcesConfiguration": ALL,  # refused with its own message (runtime.knowledge_base_config)
        "knowledgeBaseConfiguration": {"knowledgeBaseId": ALL, "modelArn": ALL, "retrievalConfiguration": _RETRIEVAL,
                                       # QUERY_DECOMPOSITION with a generator that can split (runtime.decomposes)
                                       "orchestrationConfiguration": {"queryTransformationConfiguration": ALL}}}},
}
SUPPORTED["RetrieveAndGenerateStream"] = SUPPORTED["RetrieveAndGenerate"]
# bedrock-agent's knowledge-base operations (eragraph.entrypoints.bedrock_agent)
_PATH = {"knowledgeBaseId": ALL, "dataSourceId": ALL}
_PAGE = {"maxResults": ALL, "nextToken": ALL}
_IDENTIFIERS = {**_PATH, "documentIdentifiers": ALL}
SUPPORTED.update({
    "CreateDataSource": {"knowledgeBaseId": ALL, "clientToken": ALL, "name": ALL, "description": ALL,
                         "dataDeletionPolicy": ALL, "dataSourceConfiguration": {
                             "type": ALL, "s3Configuration": {"bucketArn": ALL, "inclusionPrefixes": ALL}}},
    "GetDataSource": _PATH,
    "ListDataSources": {"knowledgeBaseId": ALL, **_PAGE},
    "StartIngestionJob": {**_PATH, "clientToken": ALL, "description": ALL},
    "GetIngestionJob": {**_PATH, "ingestionJobId": ALL},
    "StopIngestionJob": {**_PATH, "ingestionJobId": ALL},
    "ListIngestionJobs": {**_PATH, **_PAGE, "filters": ALL, "sortBy": ALL},
    # documents: lists, checked item by item by the handler (no accessControlList: Eragraph has no ACLs)
    "IngestKnowledgeBaseDocuments": {**_PATH, "clientToken": ALL, "documents": ALL},
    "GetKnowledgeBaseDocuments": _IDENTIFIERS,
    "DeleteKnowledgeBaseDocuments": {**_IDENTIFIERS, "clientToken": ALL},
    "ListKnowledgeBaseDocuments": {**_PATH, **_PAGE},
})


class ShapeError(ValueError):
    """A request that breaks the service model or asks for what Eragraph does not apply."""


@lru_cache(maxsize=None)
def _pattern(source: str) -> re.Pattern | None:
    # the model's patterns anchor with ^...$; in Python ``$`` also matches before a final line
    # break, so "abc\n" would pass ^[a-z]+$: every unescaped end anchor becomes \Z
    python = re.sub(r"(?<!\\)\$(?=\||\)|$)", r"\\Z", source)
    try:
        return re.compile(python)
    except re.error:  # a construct Python's re lacks: the other checks still hold
        return None


def _kind(value: Any) -> str:
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    return {str: "a string", list: "an array", dict: "an object", type(None): "null"}.get(type(value), "a value")


def _excerpt(text: str) -> str:
    shown = text[:EXCERPT].encode("unicode_escape").decode("ascii")
    return shown + ("..." if len(text) > EXCERPT else "")


def _at(path: str) -> str:
    return path or "the request"


def check_shape(shape, value: Any, path: str = "") -> None:
    """ShapeError unless ``value`` fits ``shape`` (a botocore shape) at ``path``."""
    kind = shape.type_name
    meta = shape.metadata
    if meta.get("document"):
        return  # a free JSON value (a filter's value): the filter language checks it
    if kind == "structure":
        _structure(shape, value, path)
    elif kind == "list":
        if not isinstance(value, list):
            raise ShapeError(f"{_at(path)} must be an array (got {_kind(value)})")
        _bounds(path, len(value), meta, "items")
        for i, item in enumerate(value):
            check_shape(shape.member, item, f"{path}[{i}]")
    elif kind == "map":
        if not isinstance(value, dict):
            raise ShapeError(f"{_at(path)} must be an object (got {_kind(value)})")
        for key, item in value.items():
            check_shape(shape.value, item, f"{path}.{key}")
    elif kind == "string":
        _string(shape, value, path)
    elif kind in ("integer", "long"):
        if isinstance(value, bool) or not isinstance(value, int):
            raise ShapeError(f"{_at(path)} must be an integer (got {_kind(value)})")
        _bounds(path, value, meta, None)
    elif kind in ("float", "double"):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ShapeError(f"{_at(path)} must be a number (got {_kind(value)})")
        _bounds(path, value, meta, None)
    elif kind == "boolean":
        if not isinstance(value, bool):
            raise ShapeError(f"{_at(path)} must be true or false (got {_kind(value)})")
    elif kind == "blob":
        if not isinstance(value, str):
            raise ShapeError(f"{_at(path)} must be base64 text (got {_kind(value)})")


def _structure(shape, value: Any, path: str) -> None:
    if not isinstance(value, dict):
        raise ShapeError(f"{_at(path)} must be an object (got {_kind(value)})")
    members = shape.members
    for key in value:
        if key not in members:
            raise ShapeError(f"{_at(path)} has an unknown member {_excerpt(str(key))!r}; "
                             f"known: {', '.join(sorted(members))}")
    for key in shape.required_members:
        if key not in value:
            raise ShapeError(f'{_at(path)} is missing the required member "{key}"')
    if shape.metadata.get("union"):
        given = [k for k in value if value[k] is not None]
        if len(given) != 1:
            raise ShapeError(f"{_at(path)} must set exactly one of {', '.join(sorted(members))} "
                             f"(got {len(given)})")
    for key, item in value.items():
        check_shape(members[key], item, f"{path}.{key}" if path else key)


def _string(shape, value: Any, path: str) -> None:
    if not isinstance(value, str):
        raise ShapeError(f"{_at(path)} must be a string (got {_kind(value)})")
    if shape.enum and value not in shape.enum:
        raise ShapeError(f"{_at(path)} must be one of {', '.join(shape.enum)} (got {_excerpt(value)!r})")
    _bounds(path, len(value), shape.metadata, "characters")
    source = shape.metadata.get("pattern")
    if source and shape.metadata.get("max") is None and len(value) > PATTERN_MAX_CHARS:
        raise ShapeError(f"{_at(path)} must have at most {PATTERN_MAX_CHARS} characters (got {len(value)})")
    pattern = _pattern(source) if source else None
    if pattern is not None and pattern.fullmatch(value) is None:
        raise ShapeError(f"{_at(path)} must match the pattern {source} (got {_excerpt(value)!r})")


def _bounds(path: str, size: float, meta: dict, unit: str | None) -> None:
    low, high = meta.get("min"), meta.get("max")
    what = f"{_at(path)} must have" if unit else f"{_at(path)} must be"
    suffix = f" {unit}" if unit else ""
    if low is not None and size < low:
        raise ShapeError(f"{what} at least {low}{suffix} (got {size})")
    if high is not None and size > high:
        raise ShapeError(f"{what} at most {high}{suffix} (got {size})")


def check_supported(operation: str, value: dict, tree: dict | None = None, path: str = "") -> None:
    """ShapeError naming the first member of ``value`` that Eragraph does not apply."""
    tree = SUPPORTED[operation] if tree is None else tree
    for key, item in value.items():
        where = f"{path}.{key}" if path else key
        if key not in tree:
            raise ShapeError(f"{where} is not supported by this service (Eragraph applies no "
                             f"{key}): remove it from the request")
        sub = tree[key]
        if sub is not ALL and isinstance(item, dict):
            check_supported(operation, item, sub, where)
    if operation == "Retrieve" and path == "":
        query = value.get("retrievalQuery") or {}
        if query.get("type", "TEXT") != "TEXT" or not isinstance(query.get("text"), str):
            raise ShapeError("retrievalQuery must be a text query (type TEXT with text): Eragraph answers "
                             "text queries only")
