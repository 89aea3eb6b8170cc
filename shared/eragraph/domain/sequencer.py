"""Ordering the events of one S3 key by their ``sequencer``.

S3 puts a ``sequencer`` (a hexadecimal string) into the notification of every PUT and DELETE;
for one key, the event with the greater value happened later. Sequencers may have different
lengths: AWS documents comparing them by right-padding the shorter one with zeros and then
comparing the strings. An empty version (a source without sequencers, e.g. a local file) is
older than any sequencer and is superseded by anything (the last call wins).
"""

from __future__ import annotations

_HEX = set("0123456789ABCDEF")


def normalize(sequencer: str | None) -> str:
    """Upper-case hex; raises ValueError on anything that is not hex."""
    value = (sequencer or "").strip().upper()
    if any(ch not in _HEX for ch in value):
        raise ValueError(f"not a hexadecimal sequencer: {sequencer!r}")
    return value


def compare(a: str, b: str) -> int:
    """-1, 0 or 1 as ``a`` is older than, the same as or newer than ``b``."""
    a, b = normalize(a), normalize(b)
    width = max(len(a), len(b))
    a, b = a.ljust(width, "0"), b.ljust(width, "0")
    return (a > b) - (a < b)


def supersedes(new: str, old: str) -> bool:
    """Whether a write of version ``new`` replaces what version ``old`` wrote. Without a version
    on either side there is no order to respect: the later call wins."""
    if not new or not old:
        return True
    return compare(new, old) > 0
