"""The entity-graph port: what the entity index stores per chunk and the neighbourhood reads
that graph retrieval needs, plus a bulk export to sparse matrices where the store can afford it.

Definitions (all maintained incrementally, by chunk):
- postings: entity -> {chunk: occurrences of the entity in the chunk}  (LinearRAG's C, E2GraphRAG's I_e->c)
- mentions: sentence -> set of entities it mentions                      (LinearRAG's M)
- co-occurrence: weight(e1, e2) = number of sentences mentioning both    (E2GraphRAG's G; TERAG's co-occurrence edges)
- frequency: f(e) = total occurrences of e over live chunks              (TERAG's f(u))
- synonymy: weight(e1, e2) = cosine of the two names' embeddings, kept where it reached the
  store-time threshold (HippoRAG 2's synonymy edges); undirected, written by the entity index
  (services.synonyms) after a new entity's vector exists, gone with either entity
Sentence ids are ``{chunk_id}#s{i}``; entity ids are their normalized names.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cached_property
from itertools import combinations
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import numpy as np

if TYPE_CHECKING:
    import scipy.sparse as sp


@dataclass(frozen=True)
class SentenceMentions:
    text: str
    entities: tuple[str, ...]  # normalized names, in order of occurrence (repeats allowed)


@dataclass(frozen=True)
class ChunkEntities:
    chunk_id: str
    sentences: tuple[SentenceMentions, ...]

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for s in self.sentences:
            for e in s.entities:
                out[e] = out.get(e, 0) + 1
        return out

    def sentence_ids(self) -> list[str]:
        return [sentence_id(self.chunk_id, i) for i in range(len(self.sentences))]

    def cooccurrences(self) -> dict[tuple[str, str], int]:
        out: dict[tuple[str, str], int] = {}
        for s in self.sentences:
            for a, b in combinations(sorted(set(s.entities)), 2):
                out[(a, b)] = out.get((a, b), 0) + 1
        return out


def sentence_id(chunk_id: str, index: int) -> str:
    return f"{chunk_id}#s{index}"


def chunk_of_sentence(sid: str) -> str:
    return sid.rsplit("#s", 1)[0]


@dataclass(frozen=True)
class Sentence:
    sentence_id: str
    chunk_id: str
    text: str
    entities: tuple[str, ...]  # distinct


class EntityMatrices:
    """A snapshot of the whole entity graph (rows/columns in list order). The name lists are
    plain lists; the sparse matrices are built on first access, so an audit that only needs
    the names (reindex, invariants) runs without scipy (the Lambda functions do not ship it)."""

    def __init__(self, generation: int, postings: Sequence[tuple[str, str, int]],
                 mentions: Sequence[tuple[str, str]], cooccurrence: Sequence[tuple[str, str, int]],
                 synonymy: Sequence[tuple[str, str, float]] = ()) -> None:
        self.generation = generation
        self._postings = postings
        self._mentions = mentions
        self._cooccurrence = cooccurrence
        self._synonymy = synonymy
        self.entities: list[str] = sorted({e for e, _, _ in postings})
        self.chunks: list[str] = sorted({c for _, c, _ in postings})
        self.sentences: list[str] = sorted({s for s, _ in mentions})
        self.entity_index = {e: i for i, e in enumerate(self.entities)}
        self.chunk_index = {c: i for i, c in enumerate(self.chunks)}

    @cached_property
    def contain(self) -> sp.csr_matrix:
        """chunks x entities, occurrence counts"""
        import scipy.sparse as sp

        ei, ci = self.entity_index, self.chunk_index
        return sp.csr_matrix(
            ([float(n) for _, _, n in self._postings],
             ([ci[c] for _, c, _ in self._postings], [ei[e] for e, _, _ in self._postings])),
            shape=(len(self.chunks), len(self.entities))).tocsr()

    @cached_property
    def mention(self) -> sp.csr_matrix:
        """sentences x entities, binary"""
        import scipy.sparse as sp

        ei = self.entity_index
        si = {s: i for i, s in enumerate(self.sentences)}
        m = sp.csr_matrix(
            (np.ones(len(self._mentions)), ([si[s] for s, _ in self._mentions], [ei[e] for _, e in self._mentions])),
            shape=(len(self.sentences), len(self.entities))).tocsr()
        m.data[:] = 1.0
        return m

    @cached_property
    def cooccurrence(self) -> sp.csr_matrix:
        """entities x entities, symmetric sentence co-occurrence counts"""
        import scipy.sparse as sp

        return _symmetric(self.entity_index, self._cooccurrence)

    @cached_property
    def synonymy(self) -> sp.csr_matrix:
        """entities x entities, symmetric synonymy weights (cosines); edges naming an entity
        the snapshot does not hold are left out"""
        return _symmetric(self.entity_index, self._synonymy)

    @cached_property
    def frequency(self) -> np.ndarray:
        """per entity: total occurrences over live chunks"""
        out = np.zeros(len(self.entities), dtype=np.float64)
        for e, _, n in self._postings:
            out[self.entity_index[e]] += n
        return out

    @cached_property
    def sentence_chunk(self) -> np.ndarray:
        """per sentence: row index of its chunk (-1: none)"""
        return np.array([self.chunk_index.get(chunk_of_sentence(s), -1) for s in self.sentences], dtype=np.int64)


def _symmetric(index: dict[str, int], half_rows: Sequence[tuple[str, str, float]]) -> sp.csr_matrix:
    """entities x entities from rows (a, b, w), one per pair: both directions."""
    import scipy.sparse as sp

    kept = [(index[a], index[b], float(w)) for a, b, w in half_rows if a in index and b in index and a != b]
    half = sp.coo_matrix(([w for _, _, w in kept], ([r for r, _, _ in kept], [c for _, c, _ in kept])),
                         shape=(len(index), len(index)))
    return (half + half.T).tocsr()


def build_matrices(generation: int, postings: Iterable[tuple[str, str, int]],
                   mentions: Iterable[tuple[str, str]], cooccurrence: Iterable[tuple[str, str, int]],
                   synonymy: Iterable[tuple[str, str, float]] = ()) -> EntityMatrices:
    """From rows (entity, chunk, count), (sentence, entity), (e1, e2, weight with e1 < e2) and
    (e1, e2, cosine with e1 < e2)."""
    return EntityMatrices(generation, list(postings), list(mentions), list(cooccurrence), list(synonymy))


def synonym_pairs(edges: Iterable[tuple[str, str, float]]) -> dict[tuple[str, str], float]:
    """Edges (a, b, w) as one entry per unordered pair (a < b), self-edges and weights <= 0
    dropped, the larger weight kept where a pair comes twice (a's search found b, b's found a)."""
    out: dict[tuple[str, str], float] = {}
    for a, b, w in edges:
        if a == b or not w > 0:
            continue
        key = (a, b) if a < b else (b, a)
        out[key] = max(out.get(key, 0.0), float(w))
    return out


@runtime_checkable
class EntityStore(Protocol):
    can_export: bool  # True when export() is cheap enough to use per query (local, memory)

    def add_chunks(self, chunks: Sequence[ChunkEntities]) -> list[str]:
        """Add (or replace) the entity records of chunks; returns entities that are new."""
        ...
    def delete_chunks(self, chunk_ids: Iterable[str]) -> list[str]:
        """Delete the chunks' postings, sentences, mentions and co-occurrences; returns the
        entities that no live chunk mentions any more (they are gone from the store)."""
        ...
    def sentence_ids_of_chunks(self, chunk_ids: Iterable[str]) -> list[str]: ...
    def postings(self, entities: Iterable[str]) -> dict[str, dict[str, int]]: ...
    def chunk_entities(self, chunk_ids: Iterable[str]) -> dict[str, dict[str, int]]: ...
    def cooccurring(self, entities: Iterable[str]) -> dict[str, dict[str, int]]: ...
    def add_synonyms(self, edges: Iterable[tuple[str, str, float]]) -> int:
        """Write synonymy edges (a, b, cosine) in both directions (``synonym_pairs``): a pair
        already there takes the new weight, so writing the same edges again changes nothing
        (a redelivered insert). Bumps the generation when it wrote any; returns the number of
        (undirected) edges written."""
        ...
    def synonyms(self, entities: Iterable[str]) -> dict[str, dict[str, float]]:
        """Each given entity's synonymy neighbours and their weights (entities with none are
        left out). An entity leaving the store (delete_chunks) takes its edges, both directions."""
        ...
    def entity_page(self, after: str | None, limit: int) -> tuple[list[str], str | None]:
        """Up to about ``limit`` entities from the opaque cursor ``after`` (None: the start) and the
        cursor to continue from (None: no more). Every entity alive throughout is listed once
        over the pages (reindex: the synonymy backfill)."""
        ...
    def sentences_of(self, entities: Iterable[str]) -> dict[str, list[str]]: ...
    def get_sentences(self, sentence_ids: Iterable[str]) -> dict[str, Sentence]: ...
    def frequencies(self, entities: Iterable[str]) -> dict[str, int]: ...
    def existing(self, entities: Iterable[str]) -> set[str]: ...
    def entity_count(self) -> int: ...
    def generation(self) -> int: ...
    def export(self) -> EntityMatrices: ...
    def chunk_ids(self) -> set[str]:
        """Every chunk the store holds entity records of (audits: may scan)."""
        ...
    def repair_counts(self) -> dict[str, int]:
        """Recount the shared counts (frequencies, co-occurrences; where derived: postings,
        mentions, the entity count) from the per-chunk records and rewrite what drifted;
        returns the number of entries fixed per kind (reindex)."""
        ...
