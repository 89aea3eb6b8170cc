"""Ports: the narrow, batch-first interfaces that services depend on.

Adapters (memory, local, aws) and providers (models) implement these; services import only
ports and domain. Every GraphStore/VectorIndex/BlobStore/MessageQueue adapter runs the same
contract tests (tests/contract).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np

from .domain.doc_status import DocStatus
from .domain.filters import Filter
from .domain.model import (ANY_VERSION, Document, LshConfig, Node, NodeRef, RefState, RegionChange, Segment,
                           SegmentsAffected)


@dataclass(frozen=True)
class Hit:
    node_id: str
    score: float


@dataclass(frozen=True)
class SummaryResult:
    text: str
    tokens_in: int
    tokens_out: int


@dataclass(frozen=True)
class MemberSource:
    """Where a member text given to a summarizer comes from. ``group``: the document of a chunk
    (chunks of one document share it; a summary is a group of its own). ``at_start``: the text
    starts where its document starts (a document's first chunk, or a summary), so its first
    sentence is whole; a later chunk starts wherever its token window did. ``summary``: the
    member is a summary (its lines may carry labels, see providers.extractive)."""
    group: str
    at_start: bool = True
    summary: bool = False


@dataclass(frozen=True)
class Answer:
    text: str
    cited_ids: tuple[str, ...]
    tokens_in: int
    tokens_out: int
    model: str


@runtime_checkable
class BlobStore(Protocol):
    def put(self, key: str, data: bytes) -> None: ...
    def get(self, key: str) -> bytes: ...  # KeyError when absent
    def size(self, key: str) -> int: ...  # bytes, without reading them; KeyError when absent
    def delete(self, key: str) -> None: ...  # no error when absent
    def list(self, prefix: str = "") -> list[str]: ...


@runtime_checkable
class GraphStore(Protocol):
    # --- store-wide configuration ---
    def get_lsh(self) -> LshConfig | None: ...
    def put_lsh(self, config: LshConfig) -> LshConfig:
        """Store ``config`` unless one is stored already; return the stored one."""
        ...
    def get_meta(self, key: str) -> Any | None: ...
    def put_meta(self, key: str, value: Any) -> None: ...
    def delete_meta(self, key: str) -> None: ...
    def meta_keys(self, prefix: str) -> list[str]: ...
    def add_ledger(self, kind: str, calls: int, tokens_in: int, tokens_out: int, seconds: float) -> None: ...
    def ledger(self) -> dict[str, dict[str, float]]: ...

    # --- documents (tombstones, ``status == DELETED``, are only seen with include_deleted) ---
    def get_document(self, doc_id: str, include_deleted: bool = False) -> Document | None: ...
    def find_documents(self, source: str) -> list[Document]: ...
    def put_document(self, doc: Document, expected: Document | None = ANY_VERSION) -> None:
        """Store ``doc`` (a document or a tombstone). With ``expected`` the write is
        conditional: it happens only if the stored record (tombstones included) still has
        ``expected.stamp()`` (content hash, version, status), or, for ``expected=None``, if
        there is none; otherwise ConflictError and nothing is written."""
        ...
    def delete_document(self, doc_id: str) -> None: ...
    def list_documents(self) -> list[Document]: ...

    # document statuses (domain.doc_status): one record per doc id, listed by source prefix
    def put_doc_status(self, status: DocStatus) -> None: ...  # replaces the doc id's record
    def get_doc_status(self, doc_id: str) -> DocStatus | None: ...  # one read
    def doc_statuses(self, prefix: str = "") -> list[DocStatus]:
        """The records whose source starts with ``prefix``, by source: reads that prefix only."""
        ...
    def delete_doc_status(self, doc_id: str) -> None: ...  # no error when absent

    # --- nodes and the code-ordered ref index ---
    def put_nodes(self, nodes: Sequence[Node], index: bool = True) -> None:
        """Write nodes; with ``index`` each also becomes live in its layer's ref index (a ref
        it had keeps its segment). Summaries are written with ``index=False`` as they are made
        and enter the index with their segment (apply_region)."""
        ...
    def check_fits(self, doc: Document | None = None, nodes: Sequence[Node] = ()) -> None:
        """Raise ItemTooLargeError (naming the item) when ``doc`` or one of ``nodes`` would not
        fit one stored item; put_document and put_nodes check the same before writing."""
        ...
    def get_nodes(self, node_ids: Iterable[str]) -> dict[str, Node]: ...
    def delete_nodes(self, node_ids: Iterable[str]) -> None:
        """Delete nodes; a ref that is in a segment stays as a tombstone until its layer is
        reconciled, any other ref goes."""
        ...
    def prefix_refs(self, layer: int, lo: int, hi: int, limit: int | None = None) -> list[RefState]:
        """Refs of ``layer`` (tombstones included) with lo <= code <= hi, in (code, node id)
        order, at most ``limit``: one range read, never the whole layer for a narrow range."""
        ...
    def layer_refs(self, layer: int) -> list[NodeRef]:
        """Every live node of a layer (audits and rebuilds; never on an insert or query path)."""
        ...
    def layer_sizes(self) -> dict[int, int]:
        """Live nodes per layer, from maintained counters (no count over the nodes)."""
        ...
    def repair_layer_counts(self) -> dict[int, int]:
        """Recount every layer's live refs from the ref index and rewrite the counters that
        differ (without losing an update made meanwhile); counters of layers without live refs
        are removed. Returns layer -> correction applied (new - old), only non-zero ones
        (reindex: reads whole layers)."""
        ...

    # --- segments (membership is the ref's ``seg``: a node is in at most one segment) ---
    def get_segments(self, layer: int) -> list[Segment]:
        """Every segment of a layer (audits only)."""
        ...
    def get_segments_by_id(self, layer: int, segment_ids: Iterable[str]) -> dict[str, Segment]: ...
    def apply_region(self, change: RegionChange) -> None:
        """Apply one region's re-cut atomically if its refs are still as read, else raise
        ConflictError and write nothing. An adapter that has to split a large region in
        several writes (DynamoDB) writes a ``domain.model.applying_key`` meta key with the
        first and deletes it with the last, so that a partial apply is seen (and repaired by
        a whole-layer reconcile)."""
        ...


@runtime_checkable
class VectorIndex(Protocol):
    def upsert(self, ids: Sequence[str], vectors: np.ndarray, metas: Sequence[Mapping[str, Any]]) -> None:
        """metas carry at least ``layer`` (int) and ``doc_id`` (str); a leaf chunk's also carry
        ``attrs`` (domain.filters.chunk_attrs: its document's metadata and the built-in
        attributes), what ``where`` filters on. An upsert of a present id replaces its meta."""
        ...
    def delete(self, ids: Iterable[str]) -> None: ...
    def search(
        self,
        vector: np.ndarray,
        k: int,
        layers: Sequence[int] | None = None,
        doc_ids: Sequence[str] | None = None,
        where: Filter | None = None,
    ) -> list[Hit]:
        """Top-k by inner product (vectors are normalized), best first, optionally filtered:
        the true top-k of the allowed set, never a short post-filtered list. ``where`` keeps the
        vectors whose ``attrs`` match (domain.filters.matches); a vector without ``attrs`` (a
        summary, an entity) never matches a filter."""
        ...
    def ids(self) -> set[str]: ...
    def get_vectors(self, ids: Sequence[str]) -> dict[str, np.ndarray]: ...
    def count(self) -> int: ...
    def flush(self) -> None: ...


@runtime_checkable
class MessageQueue(Protocol):
    def send(self, messages: Sequence[SegmentsAffected]) -> None: ...
    def receive(self, max_messages: int = 10) -> list[tuple[str, SegmentsAffected]]:
        """Up to max_messages (receipt, message) pairs, oldest first."""
        ...
    def ack(self, receipts: Sequence[str]) -> None: ...
    def pending(self) -> int: ...


@runtime_checkable
class Embedder(Protocol):
    identity: str
    dim: int
    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Normalized float32 vectors, one row per text."""
        ...


@runtime_checkable
class Tokenizer(Protocol):
    """Counts tokens the way the embedder reads them, and gives token character spans."""
    def count(self, text: str) -> int: ...
    def offsets(self, text: str) -> list[tuple[int, int]]: ...


@runtime_checkable
class Summarizer(Protocol):
    identity: str
    def summarize(self, texts: Sequence[str], max_tokens: int,
                  sources: Sequence[MemberSource] | None = None) -> SummaryResult:
        """One summary of ``texts`` (a segment's members) in at most ``max_tokens``;
        ``sources`` says where each text comes from (a summarizer may ignore it)."""
        ...


@runtime_checkable
class RevisingSummarizer(Summarizer, Protocol):
    """A summarizer that can update an earlier summary of a segment instead of reading all of
    its children again (services.resummarize uses it when that is cheaper)."""
    def revise(self, previous: str, added: Sequence[str], removed: Sequence[str], max_tokens: int,
               previous_share: float = 0.5) -> SummaryResult:
        """``previous`` summarized the segment before ``added`` children joined and ``removed``
        ones left; ``previous_share`` is the fraction of the new segment it stands for."""
        ...


@runtime_checkable
class Generator(Protocol):
    """Writes an answer from evidence. A generator that can stream also has
    ``stream(question, evidence) -> Iterator[str | Answer]``: the text in pieces, in order, as
    it is generated, then one Answer (the whole text, its citations and token counts) as the
    last item. services.generation.stream_answer gives every generator that shape."""
    identity: str
    def answer(self, question: str, evidence: Sequence[tuple[str, str]]) -> Answer:
        """evidence: (result id, text) pairs; the answer cites result ids."""
        ...


@runtime_checkable
class Reranker(Protocol):
    """Scores (query, passage) pairs for a second-stage re-ordering of retrieved results."""
    identity: str
    def score(self, query: str, texts: Sequence[str]) -> list[float]:
        """One relevance score per text, in the order given (higher is more relevant)."""
        ...


@runtime_checkable
class LexicalIndex(Protocol):
    """BM25 over the leaf chunks (layer 0). The index is written by the store that holds the
    chunk text, in the same write as the chunk (SQLite FTS5 beside the nodes table; the
    OpenSearch document that carries the chunk's vector), so there is no write method here."""
    def search(self, text: str, k: int, where: Filter | None = None) -> list[Hit]:
        """Top-k leaf chunks by BM25 (higher is better), best first, ties by id; ``where``:
        only chunks whose attributes (domain.filters.chunk_attrs of their document) match, the
        true top-k of those. Raises LexicalIndexMissing when the store was built before it had
        a lexical index."""
        ...
    def ready(self) -> bool:
        """True when every leaf chunk of the store is indexed."""
        ...
    def rebuild(self, nodes: Iterable[Node]) -> int:
        """Index the text of ``nodes`` (the store's leaf chunks) and mark the index ready;
        returns how many (`eragraph reindex` passes every leaf)."""
        ...


@runtime_checkable
class Namespaced(Protocol):
    """A store that keeps several tenants side by side, each under its own namespace (DynamoDB
    key prefixes, an OpenSearch scope): a tenant's deletion drops its namespace through this
    port (bootstrap.tenancy), whichever adapter holds it. A store per tenant (local files,
    memory) is deleted whole instead."""

    def drop_namespace(self) -> int: ...


@runtime_checkable
class TenantRegistry(Protocol):
    """The tenants of one deployment where no directory listing says (AWS: items of the
    default namespace). The default tenant "" is never registered."""

    def register_tenant(self, tenant: str) -> None: ...

    def has_tenant(self, tenant: str) -> bool: ...  # one strongly consistent read

    def tenants(self) -> list[str]: ...  # sorted

    def forget_tenant(self, tenant: str) -> None: ...

    def record_audit(self, tenant: str, at: float) -> None:
        """``tenant`` ("" the default) was audited whole, its audit ending at ``at`` (epoch s)."""
        ...

    def watch_audits(self, tenant: str, at: float) -> None:
        """Start the audit clock of a tenant that has no time yet (the default tenant is never
        registered): from ``at`` it counts as due. No effect once it has one."""
        ...

    def audit_since(self) -> dict[str, float]:
        """Every tenant with a time -> its last completed audit or, never audited, when its
        clock started (registration, or watch_audits). One read of the registry."""
        ...
