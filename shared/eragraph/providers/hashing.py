"""Model-free providers: a hashing-trick bag-of-words embedder and a regex tokenizer.

They need no weights and run instantly, so unit tests and the smallest smoke runs use them;
the embedded default is MiniLM (providers.minilm)."""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np

from ..domain.ids import short_hash
from ..domain.text import regex_offsets

_TOKEN = re.compile(r"[a-z0-9]+")


class HashingEmbedder:
    """Signed feature hashing of lower-cased words and word bigrams, L2-normalized."""

    def __init__(self, dim: int = 256) -> None:
        self.dim = dim
        self.identity = f"hashing-bow-v1@{dim}"

    def _index(self, feature: str) -> tuple[int, float]:
        h = int(short_hash("f", feature, length=12), 16)
        return h % self.dim, (1.0 if (h >> 47) & 1 else -1.0)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            words = _TOKEN.findall(text.lower())
            feats = words + [a + "_" + b for a, b in zip(words, words[1:])]
            for f in feats:
                i, sign = self._index(f)
                out[row, i] += sign
            norm = np.linalg.norm(out[row])
            if norm > 0:
                out[row] /= norm
            else:
                out[row, 0] = 1.0
        return out


class RegexTokenizer:
    """Words and punctuation marks as tokens."""

    identity = "regex-words"

    def count(self, text: str) -> int:
        return len(regex_offsets(text))

    def offsets(self, text: str) -> list[tuple[int, int]]:
        return regex_offsets(text)
