"""S3 events of one key delivered out of order and more than once, through the ingest handler
(functions/ingest/app.py, via SQS batch records) on moto: whatever the delivery order, the
store ends in the state of the last S3 operation. The events are the real notification JSON
of tests/events with the key and the ``sequencer`` of each operation filled in."""

from __future__ import annotations

import itertools
import json
import random
from urllib.parse import quote_plus

import pytest
from aws_helpers import BUCKET, event, load_handler

from eragraph.domain.ids import content_hash

TEXT_A = ("Comet observers at the mountain observatory used the great telescope to follow the comet. "
          "The telescope is called Starglass and the comet is named Vellichor. ") * 3
TEXT_B = ("Bakers in the valley village roast chestnuts in a stone oven every winter. "
          "The oven is called Emberhold and the village is named Quillmere. ") * 3

# increasing S3 sequencers of different lengths: compared as integers the shorter third one
# would look oldest; right-padded with zeros (as AWS documents) it is the newest
SEQUENCERS = ("0A1B2C3D4E5F6789", "0A1B2C3D4E5F67890A", "0A1B2C3D4E5F678A")

# (operation, text) per step; None: a delete
SCENARIOS = {
    "put-delete-put": [("put", TEXT_A), ("delete", None), ("put", TEXT_B)],
    "put-put-delete": [("put", TEXT_A), ("put", TEXT_B), ("delete", None)],
    "put-delete-same-put": [("put", TEXT_A), ("delete", None), ("put", TEXT_A)],
}


def s3_event(op: str, key: str, seq: str) -> dict:
    body = event("s3_put.json" if op == "put" else "s3_delete.json")
    obj = body["Records"][0]["s3"]["object"]
    obj["key"], obj["sequencer"] = quote_plus(key), seq
    return body


def sqs_batch(bodies: list[dict]) -> dict:
    template = event("sqs_ingest_batch.json")["Records"][1]
    records = []
    for n, body in enumerate(bodies):
        record = json.loads(json.dumps(template))
        record["messageId"] = f"msg-{n}"
        record["body"] = json.dumps(body)
        records.append(record)
    return {"Records": records}


def schedules(n_events: int, seed: int, count: int, interleave: bool):
    """Delivery schedules: every event delivered 1-3 times, in every order of the plain
    permutations and in ``count`` random shuffles. Yields a list of ("op", i) / ("deliver", i)
    steps; with ``interleave`` a delivery may come before later operations happen."""
    rng = random.Random(seed)
    orders = [list(p) for p in itertools.permutations(range(n_events))]
    for _ in range(count):
        copies = [i for i in range(n_events) for _ in range(rng.randint(1, 3))]
        rng.shuffle(copies)
        orders.append(copies)
    for order in orders:
        if not interleave:
            yield [("op", i) for i in range(n_events)] + [("deliver", i) for i in order]
            continue
        steps, done = [], 0
        for i in order:
            while done <= i or (done < n_events and rng.random() < 0.4):
                steps.append(("op", done))
                done += 1
            steps.append(("deliver", i))
        steps += [("op", j) for j in range(done, n_events)]
        yield steps


def final_state(engine, source: str) -> dict:
    docs = engine.graph.find_documents(source)
    doc_ids = {d.doc_id for d in docs}
    from eragraph.domain.ids import document_id_for_source

    doc_ids.add(document_id_for_source(source))
    chunks = {n.node_id for n in engine.graph.get_nodes(r.node_id for r in engine.graph.layer_refs(0)).values()
              if n.doc_id in doc_ids}
    store = engine.entities.store
    return {"hashes": sorted(d.content_hash for d in docs),
            "listed": sorted(c for d in docs for c in d.chunk_ids),
            "chunks": sorted(chunks),
            "vectors": sorted(c for c in engine.vectors.ids() if c in chunks or c in {x for d in docs for x in d.chunk_ids}),
            "entity_chunks": sorted(set(store.chunk_ids()) & (chunks | {x for d in docs for x in d.chunk_ids}))}


@pytest.mark.parametrize("interleave", [False, True], ids=["after-all-ops", "interleaved"])
@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_any_delivery_order_ends_in_the_last_operation(aws_engine, lambda_context, scenario, interleave):
    engine, _, _ = aws_engine
    handler = load_handler("ingest")
    ops = SCENARIOS[scenario]
    cases = 0
    for n, steps in enumerate(schedules(len(ops), seed=sorted(SCENARIOS).index(scenario) * 10 + interleave, count=6,
                                        interleave=interleave)):
        key = f"docs/{scenario} case {n}.txt"
        source = f"s3://{BUCKET}/{key}"
        for kind, i in steps:
            op, text = ops[i]
            if kind == "op":
                if op == "put":
                    engine.blobs.put(key, text.encode())
                else:
                    engine.blobs.delete(key)
            else:
                out = handler.handler(sqs_batch([s3_event(op, key, SEQUENCERS[i])]), lambda_context)
                assert out == {"batchItemFailures": []}
        last_op, last_text = ops[-1]
        state = final_state(engine, source)
        if last_op == "delete":
            assert state == {"hashes": [], "listed": [], "chunks": [], "vectors": [], "entity_chunks": []}, steps
        else:
            assert state["hashes"] == [content_hash(last_text)], steps
            assert state["chunks"] == state["listed"] == state["vectors"] == state["entity_chunks"], steps
            assert state["chunks"], steps
        cases += 1
    assert cases == 6 + 6
