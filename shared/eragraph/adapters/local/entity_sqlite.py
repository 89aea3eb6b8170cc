"""Entity store in its own SQLite file (``STORE/entities.sqlite``, WAL): postings, sentences,
mentions, co-occurrence and frequencies, updated per chunk in one transaction, and synonymy
edges (``ent_syn``, both directions, gone with either entity); matrices for the exact PPR are
exported once per generation (a counter bumped by every change) and cached."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterable, Sequence
from itertools import combinations
from pathlib import Path

from ...ports.entity import ChunkEntities, EntityMatrices, Sentence, build_matrices, synonym_pairs

SCHEMA = """
CREATE TABLE IF NOT EXISTS ent_sentences (sentence_id TEXT PRIMARY KEY, chunk_id TEXT NOT NULL,
    idx INTEGER NOT NULL, text TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS ent_sentences_chunk ON ent_sentences(chunk_id);
CREATE TABLE IF NOT EXISTS ent_mentions (sentence_id TEXT NOT NULL, entity TEXT NOT NULL,
    PRIMARY KEY (sentence_id, entity)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS ent_mentions_entity ON ent_mentions(entity);
CREATE TABLE IF NOT EXISTS ent_postings (entity TEXT NOT NULL, chunk_id TEXT NOT NULL, n INTEGER NOT NULL,
    PRIMARY KEY (entity, chunk_id)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS ent_postings_chunk ON ent_postings(chunk_id);
CREATE TABLE IF NOT EXISTS ent_cooc (a TEXT NOT NULL, b TEXT NOT NULL, w INTEGER NOT NULL,
    PRIMARY KEY (a, b)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS ent_freq (entity TEXT PRIMARY KEY, n INTEGER NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS ent_syn (a TEXT NOT NULL, b TEXT NOT NULL, w REAL NOT NULL,
    PRIMARY KEY (a, b)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS ent_meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL);
"""

_BATCH = 500


def _chunks(items: list, size: int = _BATCH):
    for i in range(0, len(items), size):
        yield items[i : i + size]


class SqliteEntityStore:
    can_export = True

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._conn = sqlite3.connect(str(self.path), check_same_thread=False, isolation_level=None)
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute("PRAGMA synchronous=NORMAL")
        self._conn.executescript(SCHEMA)
        self._lock = threading.RLock()
        self._cache: EntityMatrices | None = None

    def close(self) -> None:
        self._conn.close()

    # ------------------------------------------------------------ helpers
    def _select_in(self, sql: str, keys: Iterable[str]) -> list[tuple]:
        keys = list(dict.fromkeys(keys))
        rows: list[tuple] = []
        for part in _chunks(keys):
            marks = ",".join("?" * len(part))
            rows += self._conn.execute(sql.format(marks=marks), part).fetchall()
        return rows

    def _bump(self) -> None:
        self._conn.execute("INSERT INTO ent_meta(key, value) VALUES('generation', 1) "
                           "ON CONFLICT(key) DO UPDATE SET value = value + 1")

    # ------------------------------------------------------------ writes
    def add_chunks(self, chunks: Sequence[ChunkEntities]) -> list[str]:
        if not chunks:
            return []
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                self._delete([c.chunk_id for c in chunks])
                freq: dict[str, int] = {}
                cooc: dict[tuple[str, str], int] = {}
                sentences, mentions, postings = [], [], []
                for chunk in chunks:
                    for e, n in chunk.counts().items():
                        freq[e] = freq.get(e, 0) + n
                        postings.append((e, chunk.chunk_id, n))
                    for i, (sid, s) in enumerate(zip(chunk.sentence_ids(), chunk.sentences)):
                        sentences.append((sid, chunk.chunk_id, i, s.text))
                        mentions += [(sid, e) for e in dict.fromkeys(s.entities)]
                    for pair, w in chunk.cooccurrences().items():
                        cooc[pair] = cooc.get(pair, 0) + w
                known = {r[0] for r in self._select_in("SELECT entity FROM ent_freq WHERE entity IN ({marks})", freq)}
                new = [e for e in freq if e not in known]
                c = self._conn
                c.executemany("INSERT INTO ent_sentences VALUES (?,?,?,?)", sentences)
                c.executemany("INSERT INTO ent_mentions VALUES (?,?)", mentions)
                c.executemany("INSERT INTO ent_postings VALUES (?,?,?)", postings)
                c.executemany("INSERT INTO ent_freq(entity, n) VALUES (?,?) "
                              "ON CONFLICT(entity) DO UPDATE SET n = n + excluded.n", list(freq.items()))
                both = [(a, b, w) for (a, b), w in cooc.items()] + [(b, a, w) for (a, b), w in cooc.items()]
                c.executemany("INSERT INTO ent_cooc(a, b, w) VALUES (?,?,?) "
                              "ON CONFLICT(a, b) DO UPDATE SET w = w + excluded.w", both)
                self._bump()
                c.execute("COMMIT")
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
        return new

    def delete_chunks(self, chunk_ids: Iterable[str]) -> list[str]:
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                gone = self._delete(list(chunk_ids))
                self._conn.execute("COMMIT")
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
        return gone

    def _delete(self, chunk_ids: list[str]) -> list[str]:
        postings = self._select_in("SELECT entity, chunk_id, n FROM ent_postings WHERE chunk_id IN ({marks})", chunk_ids)
        sentences = [r[0] for r in self._select_in(
            "SELECT sentence_id FROM ent_sentences WHERE chunk_id IN ({marks})", chunk_ids)]
        if not postings and not sentences:
            return []
        by_sentence: dict[str, list[str]] = {}
        for sid, e in self._select_in("SELECT sentence_id, entity FROM ent_mentions WHERE sentence_id IN ({marks})",
                                      sentences):
            by_sentence.setdefault(sid, []).append(e)
        cooc: dict[tuple[str, str], int] = {}
        for ents in by_sentence.values():
            for a, b in combinations(sorted(set(ents)), 2):
                cooc[(a, b)] = cooc.get((a, b), 0) + 1
        freq: dict[str, int] = {}
        for e, _, n in postings:
            freq[e] = freq.get(e, 0) + n
        c = self._conn
        c.executemany("UPDATE ent_freq SET n = n - ? WHERE entity = ?", [(n, e) for e, n in freq.items()])
        both = [(w, a, b) for (a, b), w in cooc.items()] + [(w, b, a) for (a, b), w in cooc.items()]
        c.executemany("UPDATE ent_cooc SET w = w - ? WHERE a = ? AND b = ?", both)
        c.executemany("DELETE FROM ent_cooc WHERE a = ? AND b = ? AND w <= 0", [(a, b) for _, a, b in both])
        c.executemany("DELETE FROM ent_mentions WHERE sentence_id = ?", [(s,) for s in sentences])
        c.executemany("DELETE FROM ent_sentences WHERE sentence_id = ?", [(s,) for s in sentences])
        c.executemany("DELETE FROM ent_postings WHERE entity = ? AND chunk_id = ?", [(e, ch) for e, ch, _ in postings])
        gone = [r[0] for r in self._select_in("SELECT entity FROM ent_freq WHERE n <= 0 AND entity IN ({marks})", freq)]
        c.executemany("DELETE FROM ent_freq WHERE entity = ?", [(e,) for e in gone])
        edges = self._select_in("SELECT a, b FROM ent_syn WHERE a IN ({marks})", gone)
        c.executemany("DELETE FROM ent_syn WHERE a = ? AND b = ?", edges + [(b, a) for a, b in edges])
        self._bump()
        return gone

    def repair_counts(self) -> dict[str, int]:
        """Recount frequencies from the postings and co-occurrences from the sentence mentions
        (the per-chunk rows), in one transaction; fix what drifted. Returns the number of rows
        fixed per kind."""
        with self._lock:
            c = self._conn
            c.execute("BEGIN IMMEDIATE")
            try:
                want_freq = dict(c.execute("SELECT entity, SUM(n) FROM ent_postings GROUP BY entity").fetchall())
                have_freq = dict(c.execute("SELECT entity, n FROM ent_freq").fetchall())
                by_sentence: dict[str, list[str]] = {}
                for sid, e in c.execute("SELECT sentence_id, entity FROM ent_mentions").fetchall():
                    by_sentence.setdefault(sid, []).append(e)
                want_cooc: dict[tuple[str, str], int] = {}
                for ents in by_sentence.values():
                    for a, b in combinations(sorted(set(ents)), 2):
                        for pair in ((a, b), (b, a)):
                            want_cooc[pair] = want_cooc.get(pair, 0) + 1
                have_cooc = {(a, b): w for a, b, w in c.execute("SELECT a, b, w FROM ent_cooc").fetchall()}
                bad_freq = [e for e in set(want_freq) | set(have_freq) if want_freq.get(e) != have_freq.get(e)]
                bad_cooc = [p for p in set(want_cooc) | set(have_cooc) if want_cooc.get(p) != have_cooc.get(p)]
                c.executemany("DELETE FROM ent_freq WHERE entity = ?", [(e,) for e in bad_freq])
                c.executemany("INSERT INTO ent_freq(entity, n) VALUES (?, ?)",
                              [(e, want_freq[e]) for e in bad_freq if want_freq.get(e, 0) > 0])
                c.executemany("DELETE FROM ent_cooc WHERE a = ? AND b = ?", bad_cooc)
                c.executemany("INSERT INTO ent_cooc(a, b, w) VALUES (?, ?, ?)",
                              [(a, b, want_cooc[(a, b)]) for a, b in bad_cooc if (a, b) in want_cooc])
                if bad_freq or bad_cooc:
                    self._bump()
                c.execute("COMMIT")
            except BaseException:
                c.execute("ROLLBACK")
                raise
        return {"frequencies": len(bad_freq), "cooccurrence": len(bad_cooc)}

    # ------------------------------------------------------------ reads
    def sentence_ids_of_chunks(self, chunk_ids: Iterable[str]) -> list[str]:
        return sorted(r[0] for r in self._select_in(
            "SELECT sentence_id FROM ent_sentences WHERE chunk_id IN ({marks})", chunk_ids))

    def postings(self, entities: Iterable[str]) -> dict[str, dict[str, int]]:
        out: dict[str, dict[str, int]] = {}
        for e, ch, n in self._select_in("SELECT entity, chunk_id, n FROM ent_postings WHERE entity IN ({marks})", entities):
            out.setdefault(e, {})[ch] = n
        return out

    def chunk_entities(self, chunk_ids: Iterable[str]) -> dict[str, dict[str, int]]:
        out: dict[str, dict[str, int]] = {}
        for e, ch, n in self._select_in("SELECT entity, chunk_id, n FROM ent_postings WHERE chunk_id IN ({marks})", chunk_ids):
            out.setdefault(ch, {})[e] = n
        return out

    def cooccurring(self, entities: Iterable[str]) -> dict[str, dict[str, int]]:
        entities = list(entities)
        out: dict[str, dict[str, int]] = {e: {} for e in self.existing(entities)}
        for a, b, w in self._select_in("SELECT a, b, w FROM ent_cooc WHERE a IN ({marks})", entities):
            out.setdefault(a, {})[b] = w
        return out

    def add_synonyms(self, edges: Iterable[tuple[str, str, float]]) -> int:
        pairs = synonym_pairs(edges)
        if not pairs:
            return 0
        rows = [(a, b, w) for (a, b), w in pairs.items()] + [(b, a, w) for (a, b), w in pairs.items()]
        with self._lock:
            c = self._conn
            c.execute("BEGIN IMMEDIATE")
            try:
                c.executemany("INSERT INTO ent_syn(a, b, w) VALUES (?,?,?) "
                              "ON CONFLICT(a, b) DO UPDATE SET w = excluded.w", rows)
                self._bump()
                c.execute("COMMIT")
            except BaseException:
                c.execute("ROLLBACK")
                raise
        return len(pairs)

    def synonyms(self, entities: Iterable[str]) -> dict[str, dict[str, float]]:
        out: dict[str, dict[str, float]] = {}
        for a, b, w in self._select_in("SELECT a, b, w FROM ent_syn WHERE a IN ({marks})", entities):
            out.setdefault(a, {})[b] = w
        return out

    def entity_page(self, after: str | None, limit: int) -> tuple[list[str], str | None]:
        limit = max(1, limit)
        names = [r[0] for r in self._conn.execute(
            "SELECT entity FROM ent_freq WHERE entity > ? ORDER BY entity LIMIT ?", (after or "", limit))]
        return names, (names[-1] if len(names) >= limit else None)

    def sentences_of(self, entities: Iterable[str]) -> dict[str, list[str]]:
        entities = list(entities)
        out: dict[str, list[str]] = {e: [] for e in self.existing(entities)}
        for sid, e in self._select_in("SELECT sentence_id, entity FROM ent_mentions WHERE entity IN ({marks})", entities):
            out.setdefault(e, []).append(sid)
        return {e: sorted(v) for e, v in out.items()}

    def get_sentences(self, sentence_ids: Iterable[str]) -> dict[str, Sentence]:
        sentence_ids = list(sentence_ids)
        ents: dict[str, list[str]] = {}
        for sid, e in self._select_in("SELECT sentence_id, entity FROM ent_mentions WHERE sentence_id IN ({marks})",
                                      sentence_ids):
            ents.setdefault(sid, []).append(e)
        return {sid: Sentence(sid, ch, text, tuple(sorted(ents.get(sid, ()))))
                for sid, ch, text in self._select_in(
                    "SELECT sentence_id, chunk_id, text FROM ent_sentences WHERE sentence_id IN ({marks})", sentence_ids)}

    def frequencies(self, entities: Iterable[str]) -> dict[str, int]:
        return dict(self._select_in("SELECT entity, n FROM ent_freq WHERE entity IN ({marks})", entities))

    def existing(self, entities: Iterable[str]) -> set[str]:
        return {r[0] for r in self._select_in("SELECT entity FROM ent_freq WHERE entity IN ({marks})", entities)}

    def entity_count(self) -> int:
        return self._conn.execute("SELECT COUNT(*) FROM ent_freq").fetchone()[0]

    def chunk_ids(self) -> set[str]:
        rows = self._conn.execute("SELECT DISTINCT chunk_id FROM ent_sentences").fetchall()
        return {r[0] for r in rows}

    def generation(self) -> int:
        row = self._conn.execute("SELECT value FROM ent_meta WHERE key = 'generation'").fetchone()
        return row[0] if row else 0

    def export(self) -> EntityMatrices:
        with self._lock:
            gen = self.generation()
            if self._cache is None or self._cache.generation != gen:
                c = self._conn
                self._cache = build_matrices(
                    gen,
                    c.execute("SELECT entity, chunk_id, n FROM ent_postings").fetchall(),
                    c.execute("SELECT sentence_id, entity FROM ent_mentions").fetchall(),
                    c.execute("SELECT a, b, w FROM ent_cooc WHERE a < b").fetchall(),
                    c.execute("SELECT a, b, w FROM ent_syn WHERE a < b").fetchall(),
                )
            return self._cache
