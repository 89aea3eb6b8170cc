"""BM25 as SQLite FTS5's ``bm25()`` computes it (k1 = 1.2, b = 0.75), in pure Python.

The memory adapter and the OpenSearch test double rank with it, so every LexicalIndex adapter
orders the same corpus the same way. Tokens: lower-cased ``\\w+`` runs (FTS5's ``unicode61``
tokenizer up to diacritics folding, which ``fold`` applies)."""

from __future__ import annotations

import math
import re
import unicodedata
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence

K1 = 1.2
B = 0.75
_WORD = re.compile(r"\w+")
MAX_QUERY_TERMS = 64  # a longer question keeps its first 64 distinct terms


def fold(text: str) -> str:
    decomposed = unicodedata.normalize("NFKD", text)
    return "".join(c for c in decomposed if not unicodedata.combining(c)).lower()


def tokens(text: str) -> list[str]:
    return _WORD.findall(fold(text))


def query_terms(text: str) -> list[str]:
    """Distinct terms of a question, first occurrence order, at most MAX_QUERY_TERMS."""
    return list(dict.fromkeys(tokens(text)))[:MAX_QUERY_TERMS]


def informative_terms(terms: Sequence[str], df: Mapping[str, int], n_docs: int) -> list[str]:
    """The terms that can move an FTS5 ranking: ``bm25()`` gives a term held by half the rows
    or more an IDF of log((N - n + 0.5) / (n + 0.5)) <= 0, which it clamps to 1e-6, so such a
    term adds at most ~2e-6 to a score. The FTS5 and memory indexes leave it out of the match:
    the ranking stays (up to those 1e-6 terms), the longest posting lists are not walked, and
    the rows such a term alone matched, whose scores were ~1e-6 noise, are not returned. A term
    no row holds goes too (it matches nothing). A query with no term left keeps them all: its
    ranking is that noise, as before. (OpenSearch's BM25 gives every term a positive IDF: its
    adapter sends every term.)"""
    keep = [t for t in terms if 0 < 2 * df.get(t, 0) < n_docs]
    return keep or list(terms)


class Bm25Corpus:
    """An incremental BM25 corpus: add and remove documents, score a query."""

    def __init__(self) -> None:
        self.tf: dict[str, Counter] = {}
        self.df: Counter = Counter()
        self.total_len = 0

    def __len__(self) -> int:
        return len(self.tf)

    def add(self, doc_id: str, text: str) -> None:
        self.delete(doc_id)
        counts = Counter(tokens(text))
        self.tf[doc_id] = counts
        self.df.update(counts.keys())
        self.total_len += sum(counts.values())

    def delete(self, doc_id: str) -> None:
        old = self.tf.pop(doc_id, None)
        if old is None:
            return
        self.df.subtract(old.keys())
        for term in old:  # a term no document holds any more is forgotten (a long-lived corpus
            if self.df[term] <= 0:  # would otherwise keep every word it ever saw)
                del self.df[term]
        self.total_len -= sum(old.values())

    def search(self, text: str, k: int) -> list[tuple[str, float]]:
        return top_k(score(self.tf, self.df, self.total_len, query_terms(text)), k)


def idf(n_docs: int, df: int) -> float:
    value = math.log((n_docs - df + 0.5) / (df + 0.5))
    return max(value, 1e-6)  # FTS5 clamps a non-positive IDF to 1e-6


def score(tf: Mapping[str, Mapping[str, int]], df: Mapping[str, int], total_len: int,
          terms: Sequence[str]) -> dict[str, float]:
    n = len(tf)
    if n == 0 or not terms:
        return {}
    avgdl = total_len / n if total_len else 1.0
    weights = {t: idf(n, df.get(t, 0)) for t in terms if df.get(t, 0) > 0}
    out: dict[str, float] = {}
    for doc_id, counts in tf.items():
        dl = sum(counts.values())
        s = 0.0
        for t, w in weights.items():
            f = counts.get(t, 0)
            if f:
                s += w * f * (K1 + 1) / (f + K1 * (1 - B + B * dl / avgdl))
        if s > 0:
            out[doc_id] = s
    return out


def top_k(scores: Mapping[str, float] | Iterable[tuple[str, float]], k: int) -> list[tuple[str, float]]:
    items = scores.items() if isinstance(scores, Mapping) else scores
    return sorted(items, key=lambda x: (-x[1], x[0]))[:max(int(k), 0)]
