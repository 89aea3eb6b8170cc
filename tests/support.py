"""Test helpers: a memory-adapter engine with model-free providers (fast, deterministic).

Imported as `from support import ...` (tests/ is on sys.path through its conftest)."""

from __future__ import annotations

import random

from eragraph.adapters.memory.blob_memory import MemoryBlobStore
from eragraph.adapters.memory.graph_memory import MemoryGraphStore
from eragraph.adapters.memory.queue_memory import MemoryQueue
from eragraph.adapters.memory.vector_memory import MemoryVectorIndex
from eragraph.config import Settings
from eragraph.providers.extractive import ExtractiveSummarizer
from eragraph.providers.hashing import HashingEmbedder, RegexTokenizer
from eragraph.services.engine import Engine

TOPICS = {
    "astronomy": "planet star orbit telescope galaxy comet nebula moon solar eclipse",
    "cooking": "recipe oven flour butter sugar bake roast simmer spice garlic",
    "football": "goal striker league match referee penalty stadium coach season transfer",
    "finance": "bond stock market interest inflation bank dividend equity yield credit",
    "botany": "leaf root flower seed pollen stem photosynthesis soil petal forest",
    "music": "guitar melody chord rhythm album singer concert drum piano tempo",
}


def synthetic_docs(n: int, seed: int = 0, prefix: str = "d") -> list:
    """n small documents, each mostly about one topic, with a unique named fact."""
    from eragraph.services.ingest import SourceDoc

    rng = random.Random(seed)
    names = list(TOPICS)
    docs = []
    for i in range(n):
        topic = names[i % len(names)]
        words = TOPICS[topic].split()
        sentences = []
        for _ in range(3):
            sentences.append(" ".join(rng.choice(words) for _ in range(9)).capitalize() + ".")
        sentences.append(f"The {topic} item number {prefix}{i} is called Marker{prefix}{i}.")
        docs.append(SourceDoc(source=f"mem://{prefix}{i}.txt", doc_id=f"{prefix}{i}", title=f"{topic} {i}",
                              text=" ".join(sentences)))
    return docs


def make_engine(**overrides) -> Engine:
    settings = Settings(embedder="hash", s_min=3, s_max=5, n_planes=12, chunk_tokens=40,
                        chunk_overlap=8, summary_tokens=30).with_overrides(**overrides)
    tokenizer = RegexTokenizer()
    return Engine(
        settings=settings,
        graph=MemoryGraphStore(),
        vectors=MemoryVectorIndex(),
        queue=MemoryQueue(),
        embedder=HashingEmbedder(128),
        tokenizer=tokenizer,
        summarizer=ExtractiveSummarizer(tokenizer),
        blobs=MemoryBlobStore(),
    )




def with_entity_graph(engine: Engine, extractor=None, store=None, vectors=None):
    """Attach an entity graph (capitalized-phrase NER, memory storage unless given) to an engine
    built by make_engine; returns its EntityIndex."""
    from eragraph.adapters.memory.entity_memory import MemoryEntityStore
    from eragraph.providers.spacy_ner import CapitalizedPhraseExtractor
    from eragraph.services.entity_hooks import install

    return install(engine, extractor or CapitalizedPhraseExtractor(), store or MemoryEntityStore(),
                   vectors or MemoryVectorIndex())


def with_graph_settings(engine: Engine, **graph) -> Engine:
    """Replace the engine's graph retrieval settings (config.GraphSettings fields)."""
    from eragraph.config import GraphSettings

    engine.settings = engine.settings.with_overrides(graph_retrieval=GraphSettings(**graph))
    return engine


class Crash(RuntimeError):
    """A consumer dying in the middle of a reconcile."""


class Ledger:
    """A summarizer wrapper that records every paid call by its input and can die once, raising
    Crash, after ``fail_after`` calls."""

    def __init__(self, inner, fail_after: int | None = None):
        from collections import Counter

        self.inner = inner
        self.identity = inner.identity
        self.fail_after = fail_after
        self.paid: Counter = Counter()

    def summarize(self, texts, max_tokens, sources=None):
        if self.fail_after is not None and sum(self.paid.values()) >= self.fail_after:
            self.fail_after = None  # the consumer dies once
            raise Crash("consumer died")
        self.paid[tuple(texts)] += 1
        return self.inner.summarize(texts, max_tokens)


def drain_redelivering(engine: Engine) -> None:
    """Deliver the queue, ten messages a batch, as SQS would to consumers that may die: the
    records of a batch from the one that raised Crash on are not acknowledged and come again."""
    from eragraph.services.resummarize import reconcile

    pending: list = []
    while engine.queue.pending() or pending:
        batch = pending or engine.queue.receive(10)
        pending = []
        for i, (receipt, message) in enumerate(batch):
            try:
                reconcile(engine, message)
            except Crash:
                pending = batch[i:]
                break
            engine.queue.ack([receipt])


def hamming(a: int, b: int) -> int:
    """Bits that differ between two LSH codes (domain.lsh)."""
    return (a ^ b).bit_count()


def load_sources(paths, max_bytes=None, csv_mapping=None):
    """(documents, errors, raw bytes of each readable file keyed by its source), all in memory:
    services.sources.iter_sources collected, for small inputs."""
    from eragraph.domain.text import MAX_DOCUMENT_BYTES
    from eragraph.services.sources import iter_sources

    errors: list = []
    raw: dict = {}
    docs = list(iter_sources(paths, errors, MAX_DOCUMENT_BYTES if max_bytes is None else max_bytes, raw, csv_mapping))
    return docs, errors, raw


class RecordingQueue(MemoryQueue):
    """The memory queue, keeping every message sent (the queue coalesces what it holds)."""

    def __init__(self) -> None:
        super().__init__()
        self.messages: list = []

    def send(self, messages) -> None:
        self.messages += list(messages)
        super().send(messages)
