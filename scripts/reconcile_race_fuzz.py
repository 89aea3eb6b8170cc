"""Concurrent reconciles under a stream of ingests, removals and changes: how often the graph
invariants break (docs/reliability.md, "A plan overtaken by an ingest").

Each run builds a small store (the unit tests' settings: S_min 3, S_max 5, 12 bits), then four
consumer threads reconcile every message while the main thread ingests, removes and changes
documents; each message is delivered once or twice, in random order, and every graph-store
call waits 0-1 ms at random half the time. When the bus is empty the invariants are checked.

    python scripts/reconcile_race_fuzz.py --seeds 0 400 --store sqlite [--without-check]

``--without-check`` takes out domain.scoped.check_inside (the refusal of a planned region whose
old segment reaches beyond it), to measure what it prevents. Thread timing makes each run
differ from one invocation to the next: the counts are rates, not a fixed list of seeds."""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import threading
import time
from dataclasses import replace
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parent.parent / "shared"),
                str(Path(__file__).resolve().parent.parent / "tests")]

from support import make_engine, synthetic_docs  # noqa: E402

from eragraph.adapters.local.graph_sqlite import SqliteGraphStore  # noqa: E402
from eragraph.services import invariants, resummarize  # noqa: E402
from eragraph.services.ingest import ingest  # noqa: E402
from eragraph.services.remove import remove  # noqa: E402

CONSUMERS = 4


class Bus:
    """Messages delivered once or twice each, in random order; thread-safe."""

    def __init__(self, rng: random.Random) -> None:
        self.lock, self.items, self.rng, self.busy = threading.Lock(), [], rng, 0

    def send(self, messages) -> None:
        with self.lock:
            for m in messages:
                for _ in range(self.rng.randint(1, 2)):
                    self.items.insert(self.rng.randint(0, len(self.items)), m)

    def take(self):
        with self.lock:
            if not self.items:
                return None
            self.busy += 1
            return self.items.pop(self.rng.randrange(len(self.items)))

    def done(self) -> None:
        with self.lock:
            self.busy -= 1

    def quiet(self) -> bool:
        with self.lock:
            return not self.items and not self.busy


class Jittered:
    """The graph store, each call preceded half the time by a random wait of up to 1 ms."""

    def __init__(self, inner, rng: random.Random) -> None:
        self._inner, self._rng = inner, rng

    def __getattr__(self, name):
        attr = getattr(self._inner, name)
        if not callable(attr):
            return attr

        def call(*args, **kwargs):
            if self._rng.random() < 0.5:
                time.sleep(self._rng.random() * 0.001)
            return attr(*args, **kwargs)

        return call


def run(seed: int, documents: int, operations: int, store: str) -> tuple[list[str], int]:
    """One run: the invariants' violations at the end and the reconciles that gave up."""
    rng = random.Random(seed)
    engine = make_engine()
    if store == "sqlite":
        engine = replace(engine, graph=SqliteGraphStore(Path(tempfile.mkdtemp()) / "graph.db"))
    docs = synthetic_docs(documents, seed)
    ingest(engine, docs)
    resummarize.drain(engine)
    bus, inner = Bus(random.Random(seed + 1)), engine.graph
    engine = replace(engine, queue=bus)
    extra = synthetic_docs(operations, seed + 100, prefix="x")
    stop, gave_up = threading.Event(), []

    def consumer(s: int) -> None:
        mine = replace(engine, graph=Jittered(inner, random.Random(s)))
        while True:
            message = bus.take()
            if message is None:
                if stop.is_set():
                    return
                time.sleep(0.001)
                continue
            try:
                resummarize.reconcile(mine, message)
            except Exception:  # noqa: BLE001 -- redelivered, as SQS would
                gave_up.append(1)
                bus.send([message])
            finally:
                bus.done()

    threads = [threading.Thread(target=consumer, args=(seed * 10 + i,)) for i in range(CONSUMERS)]
    for t in threads:
        t.start()
    main = replace(engine, graph=Jittered(inner, random.Random(seed + 2)))
    for i in range(operations):
        r = rng.random()
        if r < 0.4 or len(docs) < 3:
            ingest(main, [extra[i]])
            docs.append(extra[i])
        elif r < 0.7:
            remove(main, [docs.pop(rng.randrange(len(docs))).source])
        else:
            j = rng.randrange(len(docs))
            docs[j] = replace(docs[j], text=extra[i].text if rng.random() < 0.7 else docs[j].text + " More.")
            ingest(main, [docs[j]])
    while not bus.quiet():
        time.sleep(0.005)
    stop.set()
    for t in threads:
        t.join()
    report = invariants.check(replace(engine, graph=inner, queue=make_engine().queue))
    return report.violations, len(gave_up)


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seeds", type=int, nargs=2, default=(0, 100), metavar=("FIRST", "END"))
    p.add_argument("--documents", type=int, nargs="+", default=[4, 8], help="store sizes, each run per seed")
    p.add_argument("--operations", type=int, default=8)
    p.add_argument("--store", choices=("memory", "sqlite"), default="sqlite")
    p.add_argument("--without-check", action="store_true")
    args = p.parse_args(argv)
    if args.without_check:
        resummarize.check_inside = lambda *a: None
    broken: list[dict] = []
    runs = 0
    for seed in range(*args.seeds):
        for n in args.documents:
            violations, gave_up = run(seed, n, args.operations, args.store)
            runs += 1
            if violations:
                broken.append({"seed": seed, "documents": n, "violations": violations[:3], "gave_up": gave_up})
                print(json.dumps(broken[-1]), flush=True)
    out = {"store": args.store, "check": not args.without_check, "runs": runs, "broken": len(broken)}
    print(json.dumps(out))
    return out


if __name__ == "__main__":
    main()
