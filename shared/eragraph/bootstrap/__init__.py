"""Composition root: the one place that reads configuration and picks adapters/providers by
name. Imports are lazy, so importing a handler or the CLI never loads a model or touches AWS."""

from __future__ import annotations

from pathlib import Path

from ..config import Settings, settings_from_env
from ..services.engine import Engine


def build_engine(profile: str = "local", store: str | Path | None = None,
                 settings: Settings | None = None) -> Engine:
    """``local``: a store directory (SQLite + FAISS + files) with MiniLM by default.
    ``memory``: everything in memory (tests, demos). ``aws``: S3/DynamoDB/SQS/OpenSearch/Bedrock
    configured from the environment the SAM template sets."""
    settings = settings or settings_from_env()
    if profile == "local":
        from .local import build_local_engine

        if store is None:
            raise ValueError("the local profile needs a store directory")
        return build_local_engine(Path(store), settings)
    if profile == "memory":
        from .local import build_memory_engine

        return build_memory_engine(settings)
    if profile == "aws":
        from .aws import build_aws_engine

        return build_aws_engine(settings)
    raise ValueError(f"unknown profile {profile!r} (local, memory, aws)")
