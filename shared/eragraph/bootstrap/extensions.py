"""Optional parts of the engine that hook into ingestion and query (the entity graph and its
retrieval modes). Each installer is looked up lazily; one that is not present is skipped."""

from __future__ import annotations

import importlib

from ..services.engine import Engine

INSTALLERS = ("eragraph.services.entity_index:install",)


def install_extensions(engine: Engine) -> None:
    for spec in INSTALLERS:
        module_name, func = spec.split(":")
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name == module_name:
                continue
            raise
        getattr(module, func)(engine)
