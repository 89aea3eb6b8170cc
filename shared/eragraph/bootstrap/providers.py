"""Providers by name, shared by every profile."""

from __future__ import annotations

from pathlib import Path

from ..config import ProcessSettings, Settings
from ..ports.graph import GraphStore
from ..ports.providers import Embedder, Generator, Reranker, Summarizer, Tokenizer
from ..services.engine import Engine

MINILM_READS = 254  # word pieces MiniLM reads from one text (256 with [CLS]/[SEP])


def make_tokenizer(settings: Settings) -> Tokenizer:
    if settings.embedder == "hash":
        from ..providers.hashing import RegexTokenizer

        return RegexTokenizer()
    # Token counts everywhere are MiniLM word pieces (also for Bedrock: a stated approximation
    # for chunk sizes; the ledger takes LLM token counts from the model's own usage report).
    from ..providers.minilm import MiniLMTokenizer

    return MiniLMTokenizer()


def embed_token_counter(settings: Settings):
    """How the cost ledger counts an embedder's input tokens (services.cost): None when the model
    reports its own counts (Bedrock Titan), else a function of the texts sent to it."""
    if settings.embedder == "hash":
        from ..providers.hashing import RegexTokenizer

        words = RegexTokenizer()
        return lambda texts: sum(words.count(t) for t in texts)
    if settings.embedder == "minilm":
        from ..providers.minilm import MiniLMTokenizer

        pieces = MiniLMTokenizer()
        return lambda texts: sum(min(n, MINILM_READS) for n in pieces.count_many(list(texts)))
    return None


def make_embedder(settings: Settings, cache_path: Path | None, ledger: GraphStore | None = None) -> Embedder:
    """The configured embedder; with ``ledger``, every call to the model (cache misses only) is
    recorded in that graph store's cost ledger."""
    if settings.embedder == "hash":
        from ..providers.hashing import HashingEmbedder

        inner: Embedder = HashingEmbedder(256)
    elif settings.embedder == "minilm":
        from ..providers.minilm import MiniLMEmbedder

        inner = MiniLMEmbedder(batch_size=settings.embed_batch)
    elif settings.embedder == "bedrock":
        from ..providers.bedrock import BedrockEmbedder

        inner = BedrockEmbedder(model_id=settings.bedrock_embed_model, dim=settings.bedrock_embed_dim)
    else:
        raise ValueError(f"unknown embedder {settings.embedder!r} (minilm, bedrock, hash)")
    if ledger is not None:
        from ..services.cost import MeteredEmbedder

        inner = MeteredEmbedder(inner, ledger, embed_token_counter(settings))
    if not settings.embed_cache:
        return inner
    from ..providers.embed_cache import CachedEmbedder, MemoryEmbeddingCache, SqliteEmbeddingCache

    cache = SqliteEmbeddingCache(cache_path) if cache_path is not None else MemoryEmbeddingCache()
    return CachedEmbedder(inner, cache)


def make_summarizer(settings: Settings, tokenizer: Tokenizer) -> Summarizer:
    if settings.summarizer == "extractive":
        from ..providers.extractive import ExtractiveSummarizer

        return ExtractiveSummarizer(tokenizer)
    if settings.summarizer == "bedrock":
        from ..providers.bedrock import BedrockSummarizer

        return BedrockSummarizer(settings.bedrock_text_model, tokenizer)
    if settings.summarizer == "openai":
        from ..providers.openai_compat import OpenAICompatSummarizer

        return OpenAICompatSummarizer(settings.openai_base_url, settings.openai_model,
                                      ProcessSettings.from_env().openai_api_key, tokenizer=tokenizer)
    raise ValueError(f"unknown summarizer {settings.summarizer!r} (extractive, bedrock, openai)")


def make_generator(settings: Settings) -> Generator | None:
    if settings.generator == "none":
        return None
    if settings.generator == "bedrock":
        from ..providers.bedrock import BedrockGenerator

        return BedrockGenerator(settings.bedrock_text_model, models=ProcessSettings.from_env().answer_models)
    if settings.generator == "openai":
        from ..providers.openai_compat import OpenAICompatGenerator

        return OpenAICompatGenerator(settings.openai_base_url, settings.openai_model,
                                     ProcessSettings.from_env().openai_api_key)
    raise ValueError(f"unknown generator {settings.generator!r} (none, bedrock, openai)")


def make_reranker(settings: Settings) -> Reranker | None:
    if settings.reranker == "none":
        return None
    if settings.reranker == "bedrock":
        from ..providers.rerank import BedrockReranker

        return BedrockReranker(settings.rerank_model or "amazon.rerank-v1:0",
                               models=ProcessSettings.from_env().rerank_models)
    if settings.reranker == "cross-encoder":
        from ..providers.cross_encoder import CrossEncoderReranker

        return CrossEncoderReranker(settings.rerank_model)
    raise ValueError(f"unknown reranker {settings.reranker!r} (none, bedrock, cross-encoder)")


def make_extractor(settings: Settings):
    """The entity graph's NER (settings.ner; ``auto``: capitalized with the hash embedder)."""
    from ..providers.spacy_ner import CapitalizedPhraseExtractor, SpacyEntityExtractor

    choice = settings.entity_extractor()
    if choice == "capitalized":
        return CapitalizedPhraseExtractor()
    if choice == "spacy":
        return SpacyEntityExtractor()
    if choice == "spacy+nouns":
        return SpacyEntityExtractor(noun_chunks=True)
    raise ValueError(f"unknown ner {choice!r} (spacy, spacy+nouns, capitalized)")


def make_question_parser(settings: Settings):
    """The router's question parser (settings.parser), or None (every question scores 0)."""
    if settings.parser == "none":
        return None
    if settings.parser == "spacy":
        from ..providers.question_parser import SpacyQuestionParser

        return SpacyQuestionParser()
    raise ValueError(f"unknown parser {settings.parser!r} (spacy, none)")


def attach_query_side(engine: Engine, settings: Settings, entity_store, entity_vectors) -> Engine:
    """What every profile adds after its adapters: the entity graph over the given storage, the
    router's parser and weights."""
    from ..services.entity_hooks import install
    from ..services.routing import load_router

    install(engine, make_extractor(settings), entity_store, entity_vectors, settings.sentence_vectors)
    engine.question_parser = make_question_parser(settings)
    engine.router = load_router(settings.router_weights or None)
    return engine
