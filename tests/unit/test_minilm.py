"""The real MiniLM embedder and its WordPiece tokenizer (offline weights from a package)."""

from __future__ import annotations

import numpy as np
import pytest

from eragraph.ports import Embedder, Tokenizer
from eragraph.providers.minilm import MiniLMEmbedder, MiniLMTokenizer


def test_construction_is_lazy_and_cheap():
    emb, tok = MiniLMEmbedder(), MiniLMTokenizer()
    assert emb._model is None and tok._tok is None
    assert isinstance(emb, Embedder) and isinstance(tok, Tokenizer)
    assert emb.identity == "sentence-transformers/all-MiniLM-L6-v2" and emb.dim == 384
    assert emb.embed([]).shape == (0, 384)
    assert emb._model is None  # an empty batch loads nothing
    with pytest.raises(ValueError):
        MiniLMEmbedder(batch_size=0)


@pytest.fixture(scope="module")
def embedder():
    return MiniLMEmbedder(batch_size=2)


@pytest.fixture(scope="module")
def tokenizer():
    return MiniLMTokenizer()


@pytest.mark.model
def test_embeds_normalized_and_paraphrase_is_closer(embedder):
    texts = ["The cat sat on the mat.",
             "A cat was sitting on a rug.",
             "Interest rates rose sharply after the central bank meeting."]
    vecs = embedder.embed(texts)  # batch_size=2 -> two batches
    assert vecs.shape == (3, 384) and vecs.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-5)
    sim = vecs @ vecs.T
    assert sim[0, 1] > sim[0, 2] + 0.2
    # batching does not change the vectors
    np.testing.assert_allclose(embedder.embed([texts[2]])[0], vecs[2], atol=1e-5)


@pytest.mark.model
def test_tokenizer_offsets_are_exact_word_pieces(tokenizer):
    text = "Hello wörld, naïve café déjà-vu   EraRAG grows incrementally!"
    spans = tokenizer.offsets(text)
    assert tokenizer.count(text) == len(spans) > 10
    pieces = [text[s:e] for s, e in spans]
    assert all(p and p == p.strip() for p in pieces)
    assert all(0 <= s < e <= len(text) for s, e in spans)
    assert [s for s, _ in spans] == sorted(s for s, _ in spans)
    assert pieces[:3] == ["Hello", "wörld", ","]
    assert "".join(pieces) == "".join(text.split())  # every non-space char covered, in order
    assert tokenizer.offsets("") == [] and tokenizer.count("") == 0


@pytest.mark.model
def test_tokenizer_does_not_truncate_long_text(tokenizer):
    words = ["incremental", "graph", "retrieval", "summary", "of", "layers"]
    text = " ".join(words[i % len(words)] for i in range(2000))
    spans = tokenizer.offsets(text)
    assert len(spans) > 256
    assert len(spans) >= 2000
    assert spans[-1][1] == len(text)
    assert tokenizer.count(text) == len(spans)
    assert tokenizer.count_many([text, "a b"]) == [len(spans), 2]
