"""A request body as a JSON object, or the 400 saying why not (``BadRequestBody``): a body over
MAX_BODY_BYTES (refused before any scan), invalid JSON, nesting deeper than MAX_BODY_DEPTH
(checked by one linear scan before parsing, so a body nested 100,000 deep costs one scan, not a
RecursionError; a string that never closes is one token to the end, never rescanned), a JSON constant that is no number (NaN,
Infinity) or a JSON value other than an object. The HTTP API's resolver parses every body with
``parse_body`` (eragraph.entrypoints.http.api), and so does the Bedrock KB stream
(eragraph.entrypoints.http.stream)."""

from __future__ import annotations

import json
import re


MAX_BODY_BYTES = 6 * (1 << 20) + (1 << 16)  # Lambda's request payload limit (6 MiB), and a margin for the envelope
MAX_BODY_DEPTH = 32  # nested JSON arrays/objects: a Bedrock KB request with a filter of the documented depth (6) needs ~20


class BadRequestBody(ValueError):
    """A request body that is no JSON object (answered 400 with this message)."""


class NotJsonBody(BadRequestBody):
    """A body declared as something other than JSON (answered 415 by the API, ValidationException
    by the Bedrock KB routes)."""


# a JSON string (so brackets inside strings are not counted), or one bracket. The closing quote
# is optional: a string that never closes matches to the end of the text at once, so the scan
# never restarts from each later quote (which made a body of escaped quotes quadratic)
_JSON_TOKEN = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"?|[\[\]{}]', re.DOTALL)


def nesting_exceeds(text: str, limit: int) -> bool:
    """Whether JSON ``text`` nests arrays/objects deeper than ``limit`` (one linear scan)."""
    if text.count("[") + text.count("{") <= limit:
        return False
    depth = 0
    for match in _JSON_TOKEN.finditer(text):
        token = match.group()
        if token in "[{":
            depth += 1
            if depth > limit:
                return True
        elif token in "]}":
            depth -= 1
    return False


def _no_constant(name: str):
    raise BadRequestBody(f"the body is not valid JSON: {name} is not a JSON number")


def parse_body(text: str) -> dict:
    """The request body as a JSON object, or BadRequestBody saying why not."""
    if len(text) > MAX_BODY_BYTES:  # characters: never more than the body's bytes
        raise BadRequestBody(f"the body is too large (at most {MAX_BODY_BYTES} bytes)")
    if nesting_exceeds(text, MAX_BODY_DEPTH):
        raise BadRequestBody(f"the body nests arrays/objects deeper than {MAX_BODY_DEPTH} levels")
    try:
        value = json.loads(text, parse_constant=_no_constant)
    except json.JSONDecodeError as exc:
        raise BadRequestBody(f"the body is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None
    except RecursionError:  # not reached after the scan above; never a 500 all the same
        raise BadRequestBody(f"the body nests arrays/objects deeper than {MAX_BODY_DEPTH} levels") from None
    if not isinstance(value, dict):
        kind = {list: "an array", str: "a string", bool: "a boolean", type(None): "null"}.get(type(value), "a number")
        raise BadRequestBody(f"the body must be a JSON object, not {kind}")
    return value
