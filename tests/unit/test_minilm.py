"""The real MiniLM embedder and its WordPiece tokenizer (offline weights from a package)."""

from __future__ import annotations

import numpy as np
import pytest

from eragraph.ports.providers import Embedder, Tokenizer
from eragraph.providers.minilm import MiniLMEmbedder, MiniLMTokenizer


def test_construction_is_lazy_and_cheap():
    emb, tok = MiniLMEmbedder(), MiniLMTokenizer()
    assert emb._model is None and tok._tok is None
    assert isinstance(emb, Embedder) and isinstance(tok, Tokenizer)
    assert emb.dim == 384
    assert emb.embed([]).shape == (0, 384)
    assert emb._model is None  # an empty batch loads nothing
    with pytest.raises(ValueError):
        MiniLMEmbedder(batch_size=0)


def test_identity_names_the_model_and_a_digest_of_its_weights(tmp_path):
    import hashlib

    from eragraph.domain.lsh import WEIGHTS_TAG
    from eragraph.providers.minilm import default_model_path, weights_digest

    emb = MiniLMEmbedder()
    name, tag, digest = emb.identity.partition(WEIGHTS_TAG)
    assert name == "sentence-transformers/all-MiniLM-L6-v2" and tag and len(digest) == 16
    assert emb._model is None  # hashing the weights does not load the model
    weights = default_model_path() / "model.safetensors"
    expected = hashlib.sha256(b"model.safetensors\x00" + weights.read_bytes()).hexdigest()
    assert digest == expected[:16] == weights_digest(default_model_path())[:16]
    # other weights (a copy of the model folder with one byte changed) give another identity
    other = tmp_path / "model"
    other.mkdir()
    data = bytearray(weights.read_bytes())
    data[-1] ^= 0xFF
    (other / "model.safetensors").write_bytes(bytes(data))
    changed = MiniLMEmbedder(model_path=other).identity
    assert changed.partition(WEIGHTS_TAG)[0] == name and changed != emb.identity
    (other / "model.safetensors").write_bytes(weights.read_bytes())  # the same bytes again
    assert MiniLMEmbedder(model_path=other).identity == emb.identity
    with pytest.raises(FileNotFoundError):
        weights_digest(tmp_path)


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
