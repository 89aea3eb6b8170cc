"""Fault injection for the reliability suite: a world of S3 operations, a bus that delivers
every S3 event and every summarize message 1 to 5 times in shuffled order (interleaved with
the operations themselves), and a digest of everything the store holds.

The deliveries go through the real Lambda handlers (functions/ingest, functions/summarize)
with the real event JSON of tests/events, on whatever engine ``LAMBDA_ENGINE`` holds: moto's
AWS profile or a local one (the handlers only use the engine's ports). What SQS itself does is
replaced by ``ChaosBus``: it keeps each sent message with a number of deliveries still owed and
hands them out in a random order, as an at-least-once queue with no ordering may; a record a
handler reports as failed is owed once more (SQS would make it visible again)."""

from __future__ import annotations

import hashlib
import json
import random
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from urllib.parse import quote_plus

from lambda_support import LambdaContext, event, load_handler

from eragraph.domain.model import SegmentsAffected

MAX_COPIES = 5
TOPICS = ("harbour ferry tide quay lock canal estuary bridge",
          "orchard pear apple blossom cider press harvest ladder",
          "glacier moraine crevasse summit ridge valley snow ice",
          "foundry anvil forge bellows hammer ingot smelter slag")


def text_for(key: int, revision: int) -> str:
    """A document of two or three chunks with capitalized names for the entity graph."""
    rng = random.Random(key * 1000 + revision)
    words = TOPICS[key % len(TOPICS)].split()
    sentences = [" ".join(rng.choice(words) for _ in range(10)).capitalize() + "." for _ in range(6)]
    sentences.insert(2, f"Captain Maren{key} met Elder Tobin{revision} at Port Kestrel{key}.")
    sentences.append(f"The ledger of Hollow{key} names Warden{key}x{revision} as keeper.")
    return " ".join(sentences)


@dataclass(frozen=True)
class Op:
    key: str
    kind: str  # "put" or "delete"
    text: str | None
    sequencer: str


def operations(n_keys: int, seed: int) -> list[Op]:
    """Puts of every key, then replacements, deletes and re-puts in a seeded order. Sequencers
    increase with every operation (S3's grow per key; a global order is one of those)."""
    rng = random.Random(seed)
    ops: list[tuple[str, int, str]] = [("put", k, "") for k in range(n_keys)]
    for k in range(n_keys):
        ops += [rng.choice([("put", k, "again"), ("delete", k, ""), ("delete", k, "then-put")])]
    rng.shuffle(ops[n_keys:])
    out, revision = [], {}
    for n, (kind, k, how) in enumerate(ops):
        revision[k] = revision.get(k, 0) + 1
        key = f"docs/key {k}.txt"
        seq = f"{0x0A00000000000000 + n * 16:016X}"
        out.append(Op(key, kind, text_for(k, revision[k]) if kind == "put" else None, seq))
        if how == "then-put":
            n2 = len(ops) + len(out)
            out.append(Op(key, "put", text_for(k, revision[k] + 7), f"{0x0A00000000000000 + n2 * 16:016X}"))
    return out


def s3_event(op: Op) -> dict:
    body = event("s3_put.json" if op.kind == "put" else "s3_delete.json")
    obj = body["Records"][0]["s3"]["object"]
    obj["key"], obj["sequencer"] = quote_plus(op.key), op.sequencer
    if op.kind == "put":
        obj["size"] = len(op.text.encode())
    return body


def sqs_records(bodies: Sequence[str], template: str, counter: list[int]) -> dict:
    """An SQS event of these bodies, each record shaped like the template's first one."""
    base = event(template)["Records"][0]
    records = []
    for body in bodies:
        counter[0] += 1
        record = json.loads(json.dumps(base))
        record["messageId"] = f"chaos-{counter[0]}"
        record["body"] = body
        records.append(record)
    return {"Records": records}


class ChaosBus:
    """engine.queue for the fault tests (MessageQueue): every sent message is owed 1 to
    ``max_copies`` deliveries, handed out in a random order."""

    def __init__(self, rng: random.Random, max_copies: int = MAX_COPIES) -> None:
        self.rng = rng
        self.max_copies = max_copies
        self.owed: list[list] = []  # [message, deliveries still owed]
        self.sent = 0
        self.delivered = 0
        self._lock = threading.Lock()
        self._inflight: dict[str, SegmentsAffected] = {}

    # the MessageQueue port (announce, continuations)
    def send(self, messages: Sequence[SegmentsAffected]) -> None:
        with self._lock:
            for m in messages:
                self.sent += 1
                self.owed.append([m, self.rng.randint(1, self.max_copies)])

    def take(self) -> SegmentsAffected | None:
        with self._lock:
            if not self.owed:
                return None
            i = self.rng.randrange(len(self.owed))
            entry = self.owed[i]
            entry[1] -= 1
            if entry[1] == 0:
                self.owed.pop(i)
            self.delivered += 1
            return entry[0]

    def owe_again(self, message: SegmentsAffected) -> None:
        with self._lock:
            self.owed.append([message, 1])

    def receive(self, max_messages: int = 10) -> list[tuple[str, SegmentsAffected]]:
        out = []
        while len(out) < max_messages:
            m = self.take()
            if m is None:
                break
            receipt = f"c{self.delivered}"
            self._inflight[receipt] = m
            out.append((receipt, m))
        return out

    def ack(self, receipts: Sequence[str]) -> None:
        for r in receipts:
            self._inflight.pop(r, None)

    def pending(self) -> int:
        with self._lock:
            return sum(n for _, n in self.owed)


@dataclass
class Deliverer:
    """Runs the handlers on the engine in LAMBDA_ENGINE, the way their event sources do."""

    world: Callable[[Op], None]  # applies an operation to the bucket
    bus: ChaosBus
    context: LambdaContext = field(default_factory=LambdaContext)
    counter: list[int] = field(default_factory=lambda: [0])
    failures: int = 0
    redeliver: bool = True  # False: a failed message is lost (its DLQ is never redriven)
    lost: list = field(default_factory=list)

    def __post_init__(self) -> None:
        self.ingest = load_handler("ingest")
        self.summarize = load_handler("summarize")

    def _run(self, handler, body: str, template: str) -> bool:
        """One record through a handler; False when it reports the record failed (a batch of
        one whose record fails raises BatchProcessingError: SQS keeps the message either way)."""
        from aws_lambda_powertools.utilities.batch.exceptions import BatchProcessingError

        try:
            out = handler.handler(sqs_records([body], template, self.counter), self.context)
        except BatchProcessingError:
            return False
        return not out["batchItemFailures"]

    def s3(self, op: Op) -> bool:
        return self._run(self.ingest, json.dumps(s3_event(op)), "sqs_ingest_batch.json")

    def message(self, message: SegmentsAffected) -> bool:
        body = json.dumps(message.to_dict(), separators=(",", ":"))
        if not self._run(self.summarize, body, "sqs_summarize_batch.json"):
            self.failures += 1
            if self.redeliver:
                self.bus.owe_again(message)
            else:
                self.lost.append(message)
            return False
        return True

    def drain(self) -> None:
        while True:
            m = self.bus.take()
            if m is None:
                return
            self.message(m)

    def clean(self, ops: Sequence[Op]) -> None:
        """Each operation, then its event once, then every message once in the order sent."""
        self.bus.max_copies = 1
        for op in ops:
            self.world(op)
            assert self.s3(op)
            while self.bus.owed:  # in order: the first owed message first
                m, _ = self.bus.owed.pop(0)
                self.message(m)

    def shuffled(self, ops: Sequence[Op], rng: random.Random) -> dict:
        """Operations in order; their events (1-5 copies each, only after the operation) and
        the messages (1-5 copies each) delivered in a random interleaving."""
        events: list[list] = []  # [op, copies owed]
        done = deliveries = 0
        while done < len(ops) or events or self.bus.owed:
            choices = (["op"] if done < len(ops) else []) + (["event"] if events else []) + \
                      (["message"] if self.bus.owed else [])
            pick = rng.choice(choices)
            if pick == "op":
                self.world(ops[done])
                events.append([ops[done], rng.randint(1, MAX_COPIES)])
                done += 1
            elif pick == "event":
                i = rng.randrange(len(events))
                events[i][1] -= 1
                op = events[i][0]
                if events[i][1] == 0:
                    events.pop(i)
                deliveries += 1
                if not self.s3(op):
                    events.append([op, 1])
            else:
                self.message(self.bus.take())
        return {"operations": len(ops), "s3_deliveries": deliveries, "messages_sent": self.bus.sent,
                "message_deliveries": self.bus.delivered, "failed_deliveries": self.failures}


def blob_world(engine) -> Callable[[Op], None]:
    def apply(op: Op) -> None:
        if op.kind == "put":
            engine.blobs.put(op.key, op.text.encode())
        else:
            engine.blobs.delete(op.key)
    return apply


def _h(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def digest(engine, with_texts: bool = True) -> dict:
    """Everything a clean run decides: documents, nodes (and their texts) per layer, segments,
    layer counters, vector ids, the entity graph (postings, mentions, co-occurrences) and its
    vector ids. Layers are walked up from 0 through the ref index, not the counters."""
    g = engine.graph
    out: dict = {"documents": sorted((d.source, d.content_hash, d.version, tuple(d.chunk_ids))
                                     for d in g.list_documents())}
    layers, layer = {}, 0
    while True:
        refs = g.layer_refs(layer)
        if not refs and layer > 0:
            break
        nodes = g.get_nodes([r.node_id for r in refs])
        layers[layer] = {
            "nodes": sorted((i, n.code, _h(n.text) if with_texts else "") for i, n in nodes.items()),
            "segments": sorted((s.members, s.summary_id) for s in g.get_segments(layer)),
        }
        layer += 1
    out["layers"] = layers
    out["counters"] = {k: v for k, v in g.layer_sizes().items() if v}
    out["vector_ids"] = sorted(engine.vectors.ids())
    if engine.entities is not None:
        store = engine.entities.store
        m = store.export()
        contain = m.contain.tocoo()
        out["postings"] = sorted((m.entities[c], m.chunks[r], int(v)) for r, c, v in zip(contain.row, contain.col, contain.data))
        mention = m.mention.tocoo()
        out["mentions"] = sorted((m.sentences[r], m.entities[c]) for r, c in zip(mention.row, mention.col))
        cooc = m.cooccurrence.tocoo()
        out["cooccurrence"] = sorted((m.entities[r], m.entities[c], int(v)) for r, c, v in zip(cooc.row, cooc.col, cooc.data))
        out["frequency"] = sorted(zip(m.entities, (int(x) for x in m.frequency)))
        out["entity_vector_ids"] = sorted(engine.entities.vectors.ids())
    return out


def first_difference(a: dict, b: dict) -> str:
    """A short description of where two digests differ (for assertion messages)."""
    for key in sorted(set(a) | set(b)):
        if a.get(key) != b.get(key):
            if isinstance(a.get(key), dict) and isinstance(b.get(key), dict):
                return f"{key}: " + first_difference(a[key], b[key])
            return f"{key}: {str(a.get(key))[:300]} != {str(b.get(key))[:300]}"
    return "equal"
