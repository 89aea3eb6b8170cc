"""Why a document failed, in the words its owner reads: a fixed vocabulary plus safe detail
(the file's kind, its size, a limit), never an exception's text or type, a path of the server or
a name of the cloud account. The detail of what went wrong goes to the logs.

A reader that refuses a document raises its usual error (the detailed message the CLI prints
and the logs keep) with a ``reason`` attached (``refused``); ``reason_of`` gives the reason of any
exception: the one attached, else the vocabulary's entry its class names (a ``refusal`` class
attribute: BadInputError's "unreadable", MetadataError's "metadata"...), else ``internal``. Every
reason a status holds is one of VOCABULARY's templates filled in (``is_vocabulary``);
docs/status.md lists them."""

from __future__ import annotations

import re
from typing import TypeVar

# name -> template; the placeholders are the safe detail
VOCABULARY: dict[str, str] = {
    "empty": "empty file",
    "binary": "not a readable text file (binary content: {what}; {size})",
    "not_utf8": "not a readable text file (not UTF-8; {size})",
    "no_text": "no text in the file ({kind}; {size})",
    "no_text_layer": "no text layer in the PDF (scanned?; {size})",
    "too_large": "too large: {size}, the limit is {limit}",
    "encrypted_pdf": "encrypted PDF",
    "damaged": "damaged {kind} file ({size})",
    "no_pages": "PDF without pages",
    "too_many_pages": "too many pages: {pages}, the limit is {limit}",
    "unzips_too_large": "DOCX unpacks to {size}, the limit is {limit} (a zip bomb?)",
    "too_slow": "took too long to read: over the {limit}-second limit",
    "metadata": "invalid metadata: {rule}",
    "wrong_tenant": "its metadata names tenant {named}, not the tenant it was uploaded for",
    "too_large_to_store": "too large to store: one of its records would be over the store's item limit",
    "duplicate": "the same document id twice in one batch",
    "not_stored": "not stored: the store refused its name",
    "bytes_lost": "its bytes were not stored before the server stopped: submit it again",
    "unreadable": "not readable (the detail is in the logs)",
    "internal": "not ingested: an internal error (the detail is in the logs)",
    "internal_retried": ("not ingested: an internal error; retried from the queue, then kept in its "
                         "dead-letter queue (the detail is in the logs)"),
    "not_removed": "not removed: {why}",
    "over_quota": ("not ingested: over the tenant's daily ingestion quota ({limit} a day); the object is kept: "
                   "put it again, or sync its data source, once the quota allows"),
    "earlier": "failed (its reason was recorded by an earlier version; ingest it again for one in words)",
}

E = TypeVar("E", bound=BaseException)


def human_size(n: int) -> str:
    """``320 bytes``, ``1.5 KB``, ``25 MB`` (units of 1024)."""
    if n < 1024:
        return f"{n} byte{'' if n == 1 else 's'}"
    value = float(n)
    for unit in ("KB", "MB", "GB", "TB"):
        value /= 1024
        if value < 1024 or unit == "TB":
            break
    text = f"{value:.1f}".rstrip("0").rstrip(".") if value < 100 else f"{value:.0f}"
    return f"{text} {unit}"


def sizes(size: int, limit: int) -> tuple[str, str]:
    """A size and its limit in words, exact when rounding would make them look equal."""
    a, b = human_size(size), human_size(limit)
    return (a, b) if a != b else (f"{size} bytes", f"{limit} bytes")


def reason(name: str, **detail: object) -> str:
    """The vocabulary's entry ``name`` filled in with ``detail``."""
    return VOCABULARY[name].format(**detail)


def refused(exc: E, name: str, **detail: object) -> E:
    """``exc`` with the owner's reason attached (raise what this returns)."""
    exc.reason = reason(name, **detail)  # type: ignore[attr-defined]
    return exc


def reason_of(exc: BaseException) -> str:
    """The reason a status records for ``exc`` (the attached one, or the vocabulary's entry for
    its kind; never its text unless the kind's own words are the detail: metadata rules)."""
    attached = getattr(exc, "reason", None)
    if isinstance(attached, str) and attached and is_vocabulary(attached):
        return attached
    kind = getattr(type(exc), "refusal", "")  # the vocabulary's entry of the exception's class
    if kind == "metadata":  # a rule of the owner's own metadata, in the validator's words
        return reason("metadata", rule=str(exc)[:300])
    return reason(kind if kind in VOCABULARY else "internal")


def _pattern(template: str) -> re.Pattern:
    parts = re.split(r"\{[a-z]+\}", template)
    return re.compile(".+".join(re.escape(p) for p in parts) + r"\Z", re.DOTALL)


_PATTERNS = [_pattern(t) for t in VOCABULARY.values()]


def is_vocabulary(text: str) -> bool:
    """Whether ``text`` is one of the vocabulary's templates filled in."""
    return any(p.match(text) for p in _PATTERNS)
