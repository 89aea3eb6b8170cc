"""Composition root: the one place that reads configuration and picks adapters/providers by
name, for each profile (local, memory, aws; bootstrap.profiles names them): embedder, tokenizer,
summarizer, generator, the entity graph's NER and storage, the router's question parser and
weights. Services never read the environment nor choose an adapter. Imports are lazy, so
importing a handler or the CLI never loads a model or touches AWS; ``preflight`` checks that
the named providers can be imported."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ..config import Settings, settings_from_env
from ..services.engine import Engine
from .preflight import USES
from .preflight import preflight as check_providers
from .profile import compose
from .profiles import profile_named


def build_engine(profile: str = "local", store: str | Path | None = None,
                 settings: Settings | None = None, uses: Iterable[str] = USES, tenant: str = "") -> Engine:
    """``local``: a store directory (SQLite + FAISS + files) with MiniLM by default.
    ``memory``: everything in memory (tests, demos). ``aws``: S3/DynamoDB/SQS/OpenSearch/Bedrock
    configured from the environment the SAM template sets. ``tenant``: the namespace of the
    engine ("" the default tenant; bootstrap.tenancy keeps one engine per tenant)."""
    settings = settings or settings_from_env()
    # a missing provider package: one line now, not at first use (``uses``: the providers the
    # caller needs; a Lambda function names its own, e.g. summarize needs no NER)
    # the store's recorded providers replace the ones the settings do not choose, so the check
    # runs on the settings the store opens with
    return compose(profile_named(profile, store), settings, tenant,
                   check=lambda opened: check_providers(opened, profile, uses))


def document_pipeline(profile: str, store: str | Path | None, settings: Settings, engines) -> Any:
    """The pipeline of the documents submitted through the API (ports.uploads.DocumentPipeline),
    as the profile ``profile`` builds it; ``engines(tenant)``: the served engines."""
    return profile_named(profile, store).uploads(engines, settings)
