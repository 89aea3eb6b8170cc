"""DynamoDB layer counters under concurrent writers (moto, each request atomic as the service
is): four threads ingesting the same documents at once must leave layer 0's counter equal to
the live refs of its ref index -- the counter is changed only by what a conditional write
actually created or removed, so two writers of one node never both count it. Also measures
the DynamoDB requests per inserted node of a single-writer ingest."""

from __future__ import annotations

import threading
from collections import Counter

from chaos import text_for
from reliability_cases import record

from eragraph.services.ingest import SourceDoc, ingest

N_DOCS = 8
THREADS = 4


def docs() -> list[SourceDoc]:
    return [SourceDoc(source=f"docs/d{k}.txt", text=text_for(k, 1), doc_id=f"d{k}") for k in range(N_DOCS)]


def live_refs(engine, layer: int) -> int:
    return sum(1 for r in engine.graph.prefix_refs(layer, 0, (1 << engine.graph.code_bits) - 1) if r.live)


def count_requests(monkeypatch) -> Counter:
    from moto.core.botocore_stubber import BotocoreStubber

    seen: Counter = Counter()
    call = BotocoreStubber.__call__

    def counting(self, event_name, *args, **kwargs):
        if event_name.startswith("before-send.dynamodb."):
            seen[event_name.rsplit(".", 1)[1]] += 1
        return call(self, event_name, *args, **kwargs)

    monkeypatch.setattr(BotocoreStubber, "__call__", counting)
    return seen


def test_layer_counter_is_exact_under_concurrent_ingests_of_the_same_documents(aws_engine, atomic_requests):
    engine, _, _ = aws_engine
    barrier = threading.Barrier(THREADS)
    errors: list[BaseException] = []

    def writer():
        try:
            barrier.wait()
            ingest(engine, docs())
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=writer) for _ in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=600)
    assert not errors, errors[:1]
    refs = live_refs(engine, 0)
    counter = engine.graph.layer_sizes().get(0, 0)
    chunks = {c for d in engine.graph.list_documents() for c in d.chunk_ids}
    record(f"{THREADS} threads ingesting the same {N_DOCS} documents: layer counter = ref index",
           "aws (moto)", counter == refs == len(chunks), threads=THREADS, documents=N_DOCS)
    assert refs == len(chunks)
    assert counter == refs, f"layer 0 counter says {counter} nodes, the ref index holds {refs}"


def test_requests_per_inserted_node(aws_engine, monkeypatch, capsys):
    """One writer: the DynamoDB requests of put_nodes per inserted node stay batched (printed
    for docs/reliability.md; bounded here)."""
    engine, _, _ = aws_engine
    from eragraph.domain.model import Node

    nodes = [Node(node_id=f"n{i}", layer=0, text=f"text {i}", tokens=2, code=(i * 2654435761) % 4096, doc_id="d")
             for i in range(200)]
    seen = count_requests(monkeypatch)
    engine.graph.put_nodes(nodes)
    total = sum(seen.values())
    with capsys.disabled():
        print(f"\nput_nodes of {len(nodes)} new nodes: {total} DynamoDB requests ({dict(seen)}), "
              f"{total / len(nodes):.3f} per node")
    assert engine.graph.layer_sizes()[0] == len(nodes) == live_refs(engine, 0)
    assert total / len(nodes) < 0.25
