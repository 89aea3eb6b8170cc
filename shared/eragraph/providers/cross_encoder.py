"""The local second-stage reranker behind ports.Reranker: a sentence-transformers CrossEncoder
loaded from a model folder on disk (never downloaded). Local profile only: it needs torch."""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from typing import Any


class CrossEncoderReranker:
    """A sentence-transformers CrossEncoder from a local folder (ERAGRAPH_RERANK_MODEL), loaded
    on first use; its score is the model's single relevance logit per (query, passage)."""

    def __init__(self, path: str, *, batch_size: int = 32, max_length: int = 512) -> None:
        if not path or not os.path.isdir(path):
            raise ValueError(f"ERAGRAPH_RERANK_MODEL must be the folder of a saved cross-encoder for the "
                             f"cross-encoder reranker; {path!r} is not a folder")
        self.path = path
        self.model = os.path.basename(os.path.normpath(path))
        self.identity = f"cross-encoder:{self.model}"
        self.batch_size, self.max_length = batch_size, max_length
        self._model: Any = None
        self._lock = threading.Lock()

    def load(self) -> Any:
        with self._lock:
            if self._model is None:
                from sentence_transformers import CrossEncoder

                try:
                    self._model = CrossEncoder(self.path, device="cpu", max_length=self.max_length,
                                               local_files_only=True)
                except Exception as exc:  # a folder that is not a model: say which setting
                    raise ValueError(f"ERAGRAPH_RERANK_MODEL={self.path!r} is not a loadable cross-encoder: "
                                     f"{type(exc).__name__}: {exc}") from exc
            return self._model

    def score(self, query: str, texts: Sequence[str]) -> list[float]:
        texts = list(texts)
        if not texts:
            return []
        scores = self.load().predict([(query, t) for t in texts], batch_size=self.batch_size,
                                     show_progress_bar=False)
        return [float(s) for s in scores]
