"""The providers a store was built with, recorded in it and used to open it.

When a store's hyperplanes are drawn (its first ingest: ``Engine.lsh``), the store records its
providers under the meta key ``providers``: the embedder (its setting, identity and dimension,
and for Bedrock its model), the NER that extracted its entities, and the router's question
parser. ``open_providers`` then opens the store with them: a provider setting the environment
or a flag did not choose takes the store's value, so a client that starts ``eragraph mcp
--store DIR`` with a bare environment gets the store's embedder. A chosen embedder or NER that
differs from the store's is refused, naming both (the store's vectors and entities were made
with its own). A chosen question parser wins: it reads questions only, nothing stored.

A store built before providers were recorded has its embedder inferred from the identity its
hyperplanes record (its NER and parser are then not known, and not replaced)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ..config import Settings
from ..domain.model import EragraphError
from ..ports.graph import MetaStore

PROVIDERS_KEY = "providers"

# the ERAGRAPH_EMBEDDER choice of each embedder identity prefix (providers' ``identity``)
EMBEDDER_PREFIXES = (("hashing-bow-", "hash"), ("bedrock:", "bedrock"),
                     ("sentence-transformers/all-MiniLM-L6-v2", "minilm"))

# the settings a record fixes: (field, the variable and flag that choose it)
EMBEDDER_FIELDS = ("embedder", "bedrock_embed_model", "bedrock_embed_dim")
SHOWN = {"embedder": "ERAGRAPH_EMBEDDER (--embedder)", "bedrock_embed_model": "ERAGRAPH_BEDROCK_EMBED_MODEL",
         "bedrock_embed_dim": "ERAGRAPH_BEDROCK_EMBED_DIM", "ner": "ERAGRAPH_NER", "parser": "ERAGRAPH_PARSER"}


class ProviderConflict(EragraphError):
    """A chosen provider setting differs from the one the store was built with."""


def embedder_name(identity: str) -> str | None:
    """The ERAGRAPH_EMBEDDER choice of an embedder identity (None: one this cannot name)."""
    for prefix, name in EMBEDDER_PREFIXES:
        if identity.startswith(prefix):
            return name
    return None


def providers_record(settings: Settings, embedder_id: str, dim: int) -> dict[str, Any]:
    """What a new store records of the providers that build it."""
    out: dict[str, Any] = {"embedder": settings.embedder, "embedder_id": embedder_id, "dim": int(dim),
                           "ner": settings.entity_extractor(), "parser": settings.parser}
    if settings.embedder == "bedrock":
        out["bedrock_embed_model"] = settings.bedrock_embed_model
        out["bedrock_embed_dim"] = int(dim)
    return out


def record_providers(graph: MetaStore, settings: Settings, embedder_id: str, dim: int) -> None:
    graph.put_meta(PROVIDERS_KEY, providers_record(settings, embedder_id, dim))


def recorded_providers(graph: MetaStore) -> dict[str, Any] | None:
    """The store's record, or one inferred from its hyperplanes (an older store), or None."""
    record = graph.get_meta(PROVIDERS_KEY)
    if isinstance(record, dict):
        return record
    lsh = graph.get_lsh()
    name = embedder_name(lsh.embedder_id) if lsh is not None else None
    if lsh is None or name is None:
        return None
    out: dict[str, Any] = {"embedder": name, "embedder_id": lsh.embedder_id, "dim": lsh.dim}
    if name == "bedrock":
        out["bedrock_embed_model"] = lsh.embedder_id.partition(":")[2]
        out["bedrock_embed_dim"] = lsh.dim
    return out


def _built(record: dict[str, Any]) -> str:
    return f"{record['embedder']} ({record.get('embedder_id', '?')}, {record.get('dim', '?')}-d)"


def open_providers(graph: MetaStore, requested: Settings) -> Settings:
    """``requested`` with the store's recorded providers in place of the ones it did not choose;
    a chosen embedder or NER that differs from the store's raises ProviderConflict naming both."""
    return adopt(recorded_providers(graph), requested)


def adopt(record: dict[str, Any] | None, requested: Settings) -> Settings:
    """``requested`` with the providers of ``record`` (a store's, or a dump's) in place of the
    ones it did not choose (open_providers)."""
    if record is None:
        return requested
    fixed = [f for f in EMBEDDER_FIELDS if f in record]
    for name in fixed:
        if requested.chosen(name) and getattr(requested, name) != record[name]:
            raise ProviderConflict(f"this store was built with embedder {_built(record)}, but {SHOWN[name]} "
                                   f"asks for {getattr(requested, name)!r} (the store's: {record[name]!r}); unset "
                                   f"it to open the store with its own, or use another store")
    settings = replace(requested, **{f: record[f] for f in fixed})
    if "ner" in record:
        ner = settings.entity_extractor()
        if requested.chosen("ner") and ner != record["ner"]:
            raise ProviderConflict(f"this store's entities were extracted with the {record['ner']!r} NER, but "
                                   f"{SHOWN['ner']} asks for {requested.ner!r} ({ner}); unset it to open the "
                                   f"store with its own, or use another store")
        settings = replace(settings, ner=record["ner"])
    if "parser" in record and not requested.chosen("parser"):
        settings = replace(settings, parser=record["parser"])
    return settings
