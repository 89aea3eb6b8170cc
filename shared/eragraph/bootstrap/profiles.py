"""The profiles by name (``build_engine``, ``Tenancy``, the benchmarks' ``--profile``): the one
table that names them. A new profile adds its class here."""

from __future__ import annotations

from pathlib import Path

from .aws_profile import AwsProfile
from .local import LocalProfile
from .memory import MemoryProfile
from .profile import Profile

PROFILES: dict[str, type[Profile]] = {p.name: p for p in (AwsProfile, LocalProfile, MemoryProfile)}


def profile_named(name: str, store: str | Path | None = None) -> Profile:
    """The profile ``name``; ``store``: its store directory (the local profile needs one, the
    others keep none)."""
    if name not in PROFILES:
        raise ValueError(f"unknown profile {name!r} (local, memory, aws)")
    return PROFILES[name].opened(store)


def keeps_store(name: str) -> bool:
    """Whether the profile ``name`` keeps its data in a store directory (local)."""
    return PROFILES[name].keeps_store
