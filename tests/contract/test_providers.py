"""Provider port contracts (ports.Embedder, Tokenizer, Summarizer, the entity extractors and the
question parser): every implementation the profiles wire, held to what the port promises:
determinism where it is promised (a store's vectors, ids and segments depend on it), a batch
equal to its items one by one (ingest batches freely), shapes and bounds, and typed errors.
The model-backed ones (MiniLM, spaCy) are marked ``model``."""

from __future__ import annotations

import numpy as np
import pytest

from eragraph.providers.hashing import HashingEmbedder, RegexTokenizer

TEXTS = ["Marie Curie discovered radium in Paris.", "", "   ", "The Eiffel Tower, built 1889; 330 m tall!",
         "naïve café — Zürich", "word " * 300]


def _minilm_embedder():
    from eragraph.providers.minilm import MiniLMEmbedder

    return MiniLMEmbedder()


def _minilm_tokenizer():
    from eragraph.providers.minilm import MiniLMTokenizer

    return MiniLMTokenizer()


EMBEDDERS = [pytest.param(lambda: HashingEmbedder(128), id="hash"),
             pytest.param(_minilm_embedder, id="minilm", marks=pytest.mark.model)]
TOKENIZERS = [pytest.param(RegexTokenizer, id="regex"),
              pytest.param(_minilm_tokenizer, id="minilm", marks=pytest.mark.model)]


@pytest.fixture(params=EMBEDDERS)
def make_embedder(request):
    return request.param


@pytest.fixture(params=TOKENIZERS)
def make_tokenizer(request):
    return request.param


# --- Embedder ----------------------------------------------------------------------------------

def test_embedder_rows_are_unit_float32_of_its_dim(make_embedder):
    e = make_embedder()
    out = e.embed(TEXTS)
    assert out.shape == (len(TEXTS), e.dim) and out.dtype == np.float32
    assert np.all(np.isfinite(out))
    assert np.allclose(np.linalg.norm(out, axis=1), 1.0, atol=1e-4)
    assert e.embed([]).shape[0] == 0


def test_embedder_is_deterministic_across_instances(make_embedder):
    a, b = make_embedder(), make_embedder()
    assert a.identity == b.identity and isinstance(a.identity, str) and a.identity
    assert np.allclose(a.embed(TEXTS), b.embed(TEXTS), atol=1e-6)


def test_embedder_batch_equals_single(make_embedder):
    e = make_embedder()
    batch = e.embed(TEXTS)
    for i, text in enumerate(TEXTS):
        assert np.allclose(batch[i], e.embed([text])[0], atol=1e-5), text[:30]
    assert np.allclose(e.embed(TEXTS[::-1]), batch[::-1], atol=1e-5)  # order in, order out


def test_embedder_tells_texts_apart(make_embedder):
    e = make_embedder()
    a, b, c = e.embed(["bees make honey", "bees make honey", "the stock market fell"])
    assert float(a @ b) == pytest.approx(1.0, abs=1e-5) and float(a @ c) < 0.9


# --- Tokenizer ---------------------------------------------------------------------------------

def test_tokenizer_offsets_are_ordered_spans_of_the_text(make_tokenizer):
    t = make_tokenizer()
    for text in TEXTS:
        spans = t.offsets(text)
        assert t.count(text) == len(spans)
        assert all(0 <= s < e <= len(text) for s, e in spans), text[:30]
        assert all(e1 <= s2 for (_, e1), (s2, _) in zip(spans, spans[1:])), text[:30]
        assert all(text[s:e].strip() for s, e in spans)  # no token is only whitespace
    assert t.count("") == 0 and t.count("   ") == 0
    assert t.count("Marie Curie discovered radium.") >= 4


def test_tokenizer_is_deterministic_and_additive_over_words(make_tokenizer):
    t, again = make_tokenizer(), make_tokenizer()
    for text in TEXTS:
        assert t.offsets(text) == again.offsets(text)
    # tokens never span a space: a text's count is the sum over its space-separated words
    words = "Radium glows; Curie measured it in 1898.".split()
    assert t.count(" ".join(words)) == sum(t.count(w) for w in words)


# --- Summarizer (extractive: the model-free one every profile can run) ---------------------------

def _extractive():
    from eragraph.providers.extractive import ExtractiveSummarizer

    return ExtractiveSummarizer(RegexTokenizer())


MEMBERS = ["Marie Curie discovered radium in 1898. She worked in Paris with Pierre Curie.",
           "Radium glows in the dark. Its discovery changed physics and medicine.",
           "Pierre Curie studied magnetism. The Curie temperature is named after him."]


def test_summarizer_is_deterministic_bounded_and_extractive():
    from eragraph.providers.extractive import member_sentences

    s = _extractive()
    for budget in (8, 20, 60, 400):
        a, b = s.summarize(MEMBERS, budget), _extractive().summarize(MEMBERS, budget)
        assert a == b
        assert a.tokens_out <= budget and a.tokens_out == RegexTokenizer().count(a.text)
        assert a.tokens_in >= sum(RegexTokenizer().count(m) for m in MEMBERS)
    whole = s.summarize(MEMBERS, 400).text
    sentences = [x for m in MEMBERS for x in member_sentences(m)]
    assert any(x in whole for x in sentences)  # picked from the members, not made up


def test_summarizer_refuses_sources_that_do_not_match_the_texts():
    from eragraph.ports.records import MemberSource

    with pytest.raises(ValueError, match="2 sources for 3 texts"):
        _extractive().summarize(MEMBERS, 40, sources=[MemberSource("a"), MemberSource("b")])


# --- Entity extractors -------------------------------------------------------------------------

def _capitalized():
    from eragraph.providers.spacy_ner import CapitalizedPhraseExtractor

    return CapitalizedPhraseExtractor()


def _spacy():
    from eragraph.providers.spacy_ner import SpacyEntityExtractor

    return SpacyEntityExtractor()


EXTRACTORS = [pytest.param(_capitalized, id="capitalized"), pytest.param(_spacy, id="spacy", marks=pytest.mark.model)]
NER_TEXTS = ["Marie Curie moved to Paris. She met Pierre Curie at the Sorbonne.", "",
             "no names here at all.", "The Eiffel Tower stands in Paris, France."]


@pytest.mark.parametrize("make", EXTRACTORS)
def test_extractor_batch_equals_single_and_is_deterministic(make):
    x = make()
    batch = x.extract(NER_TEXTS)
    assert len(batch) == len(NER_TEXTS)
    assert batch == [x.extract([t])[0] for t in NER_TEXTS] == make().extract(NER_TEXTS)
    found = {e for s in batch[0] + batch[3] for e in s.entities}
    assert {"marie curie", "paris"} <= found, found  # names normalized (services.entity_ids)
    assert all(not s.entities for s in batch[2])


@pytest.mark.parametrize("make", EXTRACTORS)
def test_query_entities_are_distinct_normalized_names(make):
    x = make()
    got = x.query_entities("Did Marie Curie live in Paris or in Warsaw, like Marie Curie?")
    assert got == list(dict.fromkeys(got)) and "marie curie" in got
    assert got == make().query_entities("Did Marie Curie live in Paris or in Warsaw, like Marie Curie?")
    assert x.query_entities("") == []


# --- Question parser ---------------------------------------------------------------------------

@pytest.mark.model
def test_question_parser_is_deterministic_and_covers_the_question():
    from eragraph.providers.question_parser import SpacyQuestionParser

    p = SpacyQuestionParser()
    q = "Which scientist who worked in Paris discovered radium?"
    a, b = p.parse(q), SpacyQuestionParser().parse(q)
    assert a == b
    assert [t.text for t in a.tokens][:2] == ["Which", "scientist"] and a.sentences == 1
    assert all(0 <= t.head < len(a.tokens) for t in a.tokens)
    assert p.parse("").tokens == ()
