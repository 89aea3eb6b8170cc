"""The bundle of ports a service works with, and the store's recorded settings."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Protocol

from ..config import GRAPH_SETTINGS, Settings
from ..domain.lsh import check_embedder, draw_hyperplanes
from ..domain.model import EragraphError, LshConfig
from ..domain.text import EMBED_FORMAT_VERSION
from ..ports.blobs import BlobStore
from ..ports.graph import GraphStore, MetaStore
from ..ports.lexical import LexicalIndex
from ..ports.providers import Embedder, Generator, Reranker, Summarizer, Tokenizer
from ..ports.queue import MessageQueue
from ..ports.vectors import VectorIndex
from .store_providers import open_providers, record_providers

if TYPE_CHECKING:
    from ..domain.model import Document, Node
    from ..domain.question_features import ParsedQuestion
    from ..domain.router_model import RouterModel
    from .entity_index import EntityIndex


class QuestionParser(Protocol):
    """The router's parse of a question (providers.question_parser)."""

    identity: str

    def parse(self, text: str) -> ParsedQuestion: ...


# meta mark: this store's leaf vectors carry their attributes (metadata filters); set when the
# store's hyperplanes are drawn (a new store); a store built before filters has none until
# `eragraph reindex` adds them (services.reindex.audit_attributes)
LEAF_ATTRS = "leaf_attrs"
NODE_READERS = "node_readers"  # services.readers_backfill.MARK
# meta mark: the embedding format of this store's leaf vectors (domain.text.EMBED_FORMAT_VERSION:
# titles on every chunk); set when the store's hyperplanes are drawn, and by `eragraph migrate
# titles` once it has re-embedded an older store (services.title_migration); absent: format 1
EMBED_FORMAT = "leaf_embed_format"

IngestHook = Callable[["Engine", "Sequence[Node]"], None]
RemoveHook = Callable[["Engine", "Document", "Sequence[str]"], None]


@dataclass
class Engine:
    settings: Settings
    graph: GraphStore
    vectors: VectorIndex
    queue: MessageQueue
    embedder: Embedder
    tokenizer: Tokenizer
    summarizer: Summarizer
    blobs: BlobStore | None = None
    generator: Generator | None = None
    reranker: Reranker | None = None  # the second stage of a query that asks for reranking (None: none configured)
    lexical: LexicalIndex | None = None  # BM25 over the leaf chunks (None: the profile has none)
    # the entity graph (services.entity_index); None: this engine has none and the graph modes
    # are not offered
    entities: EntityIndex | None = None
    # the router (services.routing): its question parser (None: every question scores 0) and
    # its trained weights (None: the weights shipped in the package)
    question_parser: QuestionParser | None = None
    router: RouterModel | None = None
    # called after new layer-0 nodes are stored / before a document's chunks leave
    ingest_hooks: list[IngestHook] = field(default_factory=list)
    remove_hooks: list[RemoveHook] = field(default_factory=list)
    # the exact graph path's matrices, cached per entity-store generation (services.graph_query)
    graph_snapshot: Any = None
    # the tenant whose namespace every port of this engine reads and writes (domain.tenants);
    # "" is the default tenant. The composition root binds the ports to it; services only stamp
    # it on the chunks' attributes and check documents against it.
    tenant: str = ""
    # the buckets a Bedrock KB data source syncs from, by name (the profile's source_bucket:
    # an S3 bucket on AWS, a folder locally); None: none can be read
    buckets: Callable[[str], BlobStore] | None = None

    def lsh(self) -> LshConfig:
        """The store's hyperplanes: drawn on first use from the recorded seed, then reused;
        a store built with another embedder is refused."""
        config = self.graph.get_lsh()
        if config is None:  # a new store: its leaves carry their attributes from the first on
            self.graph.put_meta(LEAF_ATTRS, 1)
            self.graph.put_meta(NODE_READERS, 1)  # and their readers (services.readers_backfill)
            self.graph.put_meta(EMBED_FORMAT, EMBED_FORMAT_VERSION)
            gs = self.settings.graph_retrieval
            if gs.synonyms_on:  # its inserts keep the synonymy edges: nothing to backfill
                self.graph.put_meta("entity_synonyms", {"threshold": gs.synonym_threshold, "top": gs.synonym_top,
                                                        "after": None, "done": True})
            record_providers(self.graph, self.settings, self.embedder.identity, self.embedder.dim)
            config = self.graph.put_lsh(
                draw_hyperplanes(self.embedder.identity, self.embedder.dim,
                                 self.settings.n_planes, self.settings.seed)
            )
        check_embedder(config, self.embedder.identity, self.embedder.dim)
        return config


    def known_lsh(self) -> LshConfig:
        """``lsh()``, answered from the copy a store keeps once read where it keeps one
        (DynamoDB's ``known_lsh``: the hyperplanes never change once written): for a path that
        works on a store known to exist (the reconcile), not for one that must learn that a
        tenant was deleted."""
        known = getattr(self.graph, "known_lsh", None)
        config = known() if known is not None else None
        if config is None:
            return self.lsh()
        check_embedder(config, self.embedder.identity, self.embedder.dim)
        return config

    def stored_lsh(self) -> LshConfig | None:
        """The store's hyperplanes, checked against this engine's embedder, or None when none
        were drawn (nothing was ever ingested, or the store's tenant was deleted). A read path's
        check: unlike ``lsh()`` it draws and writes nothing."""
        config = self.graph.get_lsh()
        if config is not None:
            check_embedder(config, self.embedder.identity, self.embedder.dim)
        return config


def open_settings(graph: MetaStore, requested: Settings) -> Settings:
    """Record the graph-shaping settings in a new store; a store that has them keeps its own
    (changing S_min/S_max or the hyperplanes of a built graph needs `eragraph rebuild`), and the
    providers it was built with (services.store_providers)."""
    requested = open_providers(graph, requested)
    stored = graph.get_meta("settings")
    if stored is None:
        graph.put_meta("settings", requested.graph_settings())
        return requested
    unknown = set(stored) - set(GRAPH_SETTINGS)
    if unknown:
        raise EragraphError(f"store has unknown settings {sorted(unknown)}")
    return replace(requested, **stored)
