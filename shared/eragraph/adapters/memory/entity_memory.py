"""In-memory entity store: the reference behaviour of the EntityStore port."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from ...ports.entity import ChunkEntities, EntityMatrices, Sentence, build_matrices, synonym_pairs


class MemoryEntityStore:
    can_export = True

    def __init__(self) -> None:
        self._chunks: dict[str, ChunkEntities] = {}
        self._postings: dict[str, dict[str, int]] = {}
        self._sentences_of: dict[str, set[str]] = {}
        self._cooc: dict[str, dict[str, int]] = {}
        self._freq: dict[str, int] = {}
        self._syn: dict[str, dict[str, float]] = {}
        self._generation = 0
        self._cache: EntityMatrices | None = None

    def add_chunks(self, chunks: Sequence[ChunkEntities]) -> list[str]:
        replaced = [c.chunk_id for c in chunks if c.chunk_id in self._chunks]
        if replaced:
            self.delete_chunks(replaced)
        new: list[str] = []
        for chunk in chunks:
            self._chunks[chunk.chunk_id] = chunk
            for e, n in chunk.counts().items():
                if e not in self._freq:
                    new.append(e)
                    self._freq[e] = 0
                self._freq[e] += n
                self._postings.setdefault(e, {})[chunk.chunk_id] = n
            for sid, s in zip(chunk.sentence_ids(), chunk.sentences):
                for e in set(s.entities):
                    self._sentences_of.setdefault(e, set()).add(sid)
            for (a, b), w in chunk.cooccurrences().items():
                self._cooc.setdefault(a, {})[b] = self._cooc.get(a, {}).get(b, 0) + w
                self._cooc.setdefault(b, {})[a] = self._cooc.get(b, {}).get(a, 0) + w
        self._generation += 1
        return new

    def delete_chunks(self, chunk_ids: Iterable[str]) -> list[str]:
        gone: list[str] = []
        changed = False
        for cid in chunk_ids:
            chunk = self._chunks.pop(cid, None)
            if chunk is None:
                continue
            changed = True
            for e, n in chunk.counts().items():
                self._postings[e].pop(cid, None)
                self._freq[e] -= n
            for sid, s in zip(chunk.sentence_ids(), chunk.sentences):
                for e in set(s.entities):
                    self._sentences_of[e].discard(sid)
            for (a, b), w in chunk.cooccurrences().items():
                for x, y in ((a, b), (b, a)):
                    row = self._cooc[x]
                    row[y] -= w
                    if row[y] <= 0:
                        del row[y]
            for e in chunk.counts():
                if self._freq.get(e, 0) <= 0 and e in self._freq:
                    for table in (self._freq, self._postings, self._sentences_of, self._cooc):
                        table.pop(e, None)
                    for other in self._syn.pop(e, {}):
                        self._syn.get(other, {}).pop(e, None)
                    gone.append(e)
        if changed:
            self._generation += 1
        return gone

    def repair_counts(self) -> dict[str, int]:
        """Recount postings, mentions, co-occurrences and frequencies from the chunk records;
        replace what drifted. Returns the number of entries fixed per kind."""
        postings: dict[str, dict[str, int]] = {}
        sentences: dict[str, set[str]] = {}
        cooc: dict[str, dict[str, int]] = {}
        for chunk in self._chunks.values():
            for e, n in chunk.counts().items():
                postings.setdefault(e, {})[chunk.chunk_id] = n
            for sid, s in zip(chunk.sentence_ids(), chunk.sentences):
                for e in set(s.entities):
                    sentences.setdefault(e, set()).add(sid)
            for (a, b), w in chunk.cooccurrences().items():
                cooc.setdefault(a, {})[b] = cooc.get(a, {}).get(b, 0) + w
                cooc.setdefault(b, {})[a] = cooc.get(b, {}).get(a, 0) + w
        freq = {e: sum(row.values()) for e, row in postings.items()}

        def diff(have: dict, want: dict) -> int:
            keys = set(have) | set(want)
            return sum(1 for k in keys if have.get(k) != want.get(k))

        fixed = {"postings": sum(diff(self._postings.get(e, {}), postings.get(e, {}))
                                 for e in set(self._postings) | set(postings)),
                 "mentions": sum(len(self._sentences_of.get(e, set()) ^ sentences.get(e, set()))
                                 for e in set(self._sentences_of) | set(sentences)),
                 "cooccurrence": sum(diff(self._cooc.get(e, {}), cooc.get(e, {}))
                                     for e in set(self._cooc) | set(cooc)),
                 "frequencies": diff(self._freq, freq)}
        if any(fixed.values()):
            self._postings, self._sentences_of, self._cooc, self._freq = postings, sentences, cooc, freq
            for e in freq:
                self._sentences_of.setdefault(e, set())
                self._cooc.setdefault(e, {})
            self._generation += 1
        return fixed

    def sentence_ids_of_chunks(self, chunk_ids: Iterable[str]) -> list[str]:
        return [sid for c in chunk_ids if c in self._chunks for sid in self._chunks[c].sentence_ids()]

    def postings(self, entities: Iterable[str]) -> dict[str, dict[str, int]]:
        return {e: dict(self._postings[e]) for e in entities if e in self._postings}

    def chunk_entities(self, chunk_ids: Iterable[str]) -> dict[str, dict[str, int]]:
        return {c: self._chunks[c].counts() for c in chunk_ids if c in self._chunks}

    def cooccurring(self, entities: Iterable[str]) -> dict[str, dict[str, int]]:
        return {e: dict(self._cooc.get(e, {})) for e in entities if e in self._freq}

    def add_synonyms(self, edges: Iterable[tuple[str, str, float]]) -> int:
        pairs = synonym_pairs(edges)
        for (a, b), w in pairs.items():
            self._syn.setdefault(a, {})[b] = w
            self._syn.setdefault(b, {})[a] = w
        if pairs:
            self._generation += 1
        return len(pairs)

    def synonyms(self, entities: Iterable[str]) -> dict[str, dict[str, float]]:
        return {e: dict(self._syn[e]) for e in entities if self._syn.get(e)}

    def entity_page(self, after: str | None, limit: int) -> tuple[list[str], str | None]:
        names = sorted(e for e in self._freq if after is None or e > after)[:max(1, limit)]
        return names, (names[-1] if len(names) >= max(1, limit) else None)

    def sentences_of(self, entities: Iterable[str]) -> dict[str, list[str]]:
        return {e: sorted(self._sentences_of.get(e, ())) for e in entities if e in self._freq}

    def get_sentences(self, sentence_ids: Iterable[str]) -> dict[str, Sentence]:
        out = {}
        for sid in sentence_ids:
            cid, _, idx = sid.rpartition("#s")
            chunk = self._chunks.get(cid)
            if chunk is None or not idx.isdigit() or int(idx) >= len(chunk.sentences):
                continue
            s = chunk.sentences[int(idx)]
            out[sid] = Sentence(sid, cid, s.text, tuple(dict.fromkeys(s.entities)))
        return out

    def frequencies(self, entities: Iterable[str]) -> dict[str, int]:
        return {e: self._freq[e] for e in entities if e in self._freq}

    def existing(self, entities: Iterable[str]) -> set[str]:
        return {e for e in entities if e in self._freq}

    def entity_count(self) -> int:
        return len(self._freq)

    def chunk_ids(self) -> set[str]:
        return set(self._chunks)

    def generation(self) -> int:
        return self._generation

    def export(self) -> EntityMatrices:
        if self._cache is None or self._cache.generation != self._generation:
            postings = [(e, c, n) for e, row in self._postings.items() for c, n in row.items()]
            mentions = [(sid, e) for e, sids in self._sentences_of.items() for sid in sids]
            cooc = [(a, b, w) for a, row in self._cooc.items() for b, w in row.items() if a < b]
            syn = [(a, b, w) for a, row in self._syn.items() for b, w in row.items() if a < b]
            self._cache = build_matrices(self._generation, postings, mentions, cooc, syn)
        return self._cache
