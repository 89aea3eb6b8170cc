"""Reliability under faults, on the in-memory and the local (SQLite + FAISS) profiles, through
the real handlers (tests/chaos.py):

1. every S3 event and every summarize message delivered 1 to 5 times in a shuffled order,
   interleaved with the S3 operations: the store's digest equals one clean ordered delivery;
2. N consumers at once on one store: the same digest, invariants hold;
3. a crash after each write of an ingest and of a reconcile, then redelivery (or reindex, or
   a restart: a new engine on the store, what the dead one held in memory lost, then
   redelivery): the same digest, invariants hold, nothing orphaned.

Summaries are compared byte for byte, so these runs summarize every changed segment afresh
(``delta_summaries=False``): revised summaries depend on the path taken, as the README says.
Each test adds its cases to tests/reliability_cases (docs/reliability.md is made from them)."""

from __future__ import annotations

import random
import threading

import pytest
from chaos import ChaosBus, Deliverer, blob_world, digest, first_difference, operations
from reliability_cases import record

from eragraph.bootstrap.aws import LAMBDA_ENGINE
from eragraph.bootstrap.local import build_local_engine
from eragraph.bootstrap.memory import build_memory_engine
from eragraph.config import Settings
from eragraph.services import invariants, reindex

pytest.importorskip("aws_lambda_powertools")

SETTINGS = Settings(embedder="hash", s_min=3, s_max=5, n_planes=12, chunk_tokens=40, chunk_overlap=8,
                    summary_tokens=30, embed_cache=False, delta_summaries=False)
N_KEYS = 6


@pytest.fixture(autouse=True)
def powertools_env(monkeypatch):
    monkeypatch.setenv("POWERTOOLS_SERVICE_NAME", "eragraph-test")
    monkeypatch.setenv("POWERTOOLS_METRICS_NAMESPACE", "EragraphTest")
    yield
    LAMBDA_ENGINE.set(None)


def new_engine(profile: str, tmp_path, name: str, seed: int, max_copies: int = 5):
    engine = build_memory_engine(SETTINGS) if profile == "memory" else build_local_engine(tmp_path / name, SETTINGS)
    engine.queue = ChaosBus(random.Random(seed), max_copies)
    LAMBDA_ENGINE.set(engine)
    return engine


def clean_digest(profile: str, tmp_path, ops) -> dict:
    engine = new_engine(profile, tmp_path, "clean", 0, max_copies=1)
    Deliverer(blob_world(engine), engine.queue).clean(ops)
    assert invariants.check(engine).ok
    return digest(engine)


@pytest.mark.parametrize("profile", ["memory", "local"])
def test_shuffled_repeated_deliveries_end_in_the_clean_state(profile, tmp_path):
    seeds = range(4) if profile == "memory" else range(2)
    for seed in seeds:
        ops = operations(N_KEYS, seed)
        expected = clean_digest(profile, tmp_path / f"s{seed}", ops)
        engine = new_engine(profile, tmp_path / f"s{seed}", "chaos", seed)
        stats = Deliverer(blob_world(engine), engine.queue).shuffled(ops, random.Random(seed))
        got = digest(engine)
        report = invariants.check(engine)
        held = got == expected and report.ok
        record("shuffled 1-5x deliveries", profile, held, **stats)
        assert report.ok, report.violations[:5]
        assert got == expected, first_difference(got, expected)
        assert stats["message_deliveries"] > stats["messages_sent"]  # duplicates were delivered


@pytest.mark.parametrize("profile", ["memory", "local"])
def test_concurrent_consumers_end_in_the_clean_state(profile, tmp_path):
    """Four consumer threads take messages from the bus at once while the events are
    delivered: regions that overlap are settled by apply_region's conditions."""
    ops = operations(N_KEYS, 11)
    expected = clean_digest(profile, tmp_path, ops)
    engine = new_engine(profile, tmp_path, "concurrent", 11)
    bus = engine.queue
    deliverer = Deliverer(blob_world(engine), bus)
    errors: list[BaseException] = []
    events_done = threading.Event()

    def consumer():
        try:
            while True:
                m = bus.take()
                if m is None:
                    if events_done.is_set() and not bus.owed:
                        return
                    events_done.wait(0.01)
                    continue
                deliverer.message(m)
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=consumer) for _ in range(4)]
    for t in threads:
        t.start()
    for op in ops:
        deliverer.world(op)
        assert deliverer.s3(op)
    events_done.set()
    for t in threads:
        t.join(timeout=600)
    deliverer.drain()  # records that failed on a lost race are owed again
    got = digest(engine)
    report = invariants.check(engine)
    record("4 concurrent consumers", profile, got == expected and report.ok and not errors,
           operations=len(ops), message_deliveries=bus.delivered, failed_deliveries=deliverer.failures)
    assert not errors, errors[:1]
    assert report.ok, report.violations[:5]
    assert got == expected, first_difference(got, expected)


class Crash(RuntimeError):
    """The process died here."""


class CrashAfter:
    """Wraps a port: counts its write calls and raises Crash after the k-th one (once)."""

    WRITES = {"put_nodes", "delete_nodes", "delete_dead_nodes", "put_document", "delete_document", "apply_region",
              "put_meta", "write_meta", "delete_meta", "delete_meta_if_older", "upsert", "delete", "add_chunks",
              "delete_chunks", "put_lsh", "flush"}

    def __init__(self, inner, budget: dict) -> None:
        self._inner, self._budget = inner, budget

    def __getattr__(self, name):
        attr = getattr(self._inner, name)
        if name not in self.WRITES or not callable(attr):
            return attr

        def write(*args, **kwargs):
            out = attr(*args, **kwargs)
            self._budget["writes"] += 1
            if self._budget["writes"] == self._budget["crash_at"]:
                if self._budget.get("on_crash") is not None:
                    self._budget["on_crash"]()
                raise Crash(f"after write {self._budget['writes']} ({name})")
            return out
        return write


def crashing(engine, budget: dict) -> None:
    engine.graph = CrashAfter(engine.graph, budget)
    engine.vectors = CrashAfter(engine.vectors, budget)
    index = engine.entities
    if index is not None:
        index.store = CrashAfter(index.store, budget)
        index.vectors = CrashAfter(index.vectors, budget)


@pytest.mark.parametrize("profile,recovery,step", [("memory", "redelivery", 1), ("memory", "reindex", 1),
                                                   ("local", "redelivery", 1), ("local", "reindex", 3),
                                                   ("local", "restart", 5)])
def test_a_crash_after_any_write_is_repaired(profile, recovery, step, tmp_path):
    """For every k: run the scenario and crash (an exception out of the port) after the k-th
    write to any store: graph, vectors, entity graph. ``redelivery``: the failed event or
    message is delivered again, as SQS does with an unacknowledged one; the final digest equals
    the clean run's. ``reindex``: the failed event or message is lost for good; reindex then
    leaves the store consistent (invariants, which include documents and the entity graph, hold:
    nothing orphaned), and once the lost S3 events are replayed (a DLQ redrive, a re-upload)
    the digest equals the clean run's. ``restart``: the process dies with the crash -- its
    engine, with whatever it held in memory (unflushed vectors), is dropped and a new one is
    opened on the store, as a new Lambda container would -- and the failed event or message is
    delivered again to the new one. On the local profile every ``step``-th k."""
    ops = operations(3, 5)
    expected = clean_digest(profile, tmp_path, ops)
    total = {"writes": 0, "crash_at": 0}
    probe = new_engine(profile, tmp_path, "probe", 5, max_copies=1)
    crashing(probe, total)
    Deliverer(blob_world(probe), probe.queue).clean(ops)
    n_writes = total["writes"]
    assert n_writes > 50
    held = tried = 0
    for k in range(1, n_writes + 1, step):
        budget = {"writes": 0, "crash_at": k}
        engine = new_engine(profile, tmp_path, f"k{k}", 5, max_copies=1)
        crashing(engine, budget)
        if recovery == "restart":
            def restart(bus=engine.queue, folder=tmp_path / f"k{k}"):
                fresh = build_local_engine(folder, SETTINGS)
                fresh.queue = bus  # the queue outlives the process, as SQS does
                LAMBDA_ENGINE.set(fresh)
            budget["on_crash"] = restart
        deliverer = Deliverer(blob_world(engine), engine.queue, redeliver=recovery != "reindex")
        lost_events = []
        for op in ops:
            deliverer.world(op)
            if not deliverer.s3(op):
                if recovery != "reindex":
                    assert deliverer.s3(op), k
                else:
                    lost_events.append(op)
            deliverer.drain()
        assert budget["writes"] >= k  # the crash happened
        if recovery == "reindex":
            reindex.run(engine, stuck_after=0.0, drain=False)
            deliverer.drain()
            check = invariants.check(engine)
            assert check.ok, (k, check.violations[:5])
            for op in lost_events:
                assert deliverer.s3(op)
            deliverer.drain()
        engine = LAMBDA_ENGINE.get()  # the new one after a restart
        got = digest(engine)
        ok = invariants.check(engine).ok and got == expected
        tried += 1
        held += ok
        assert ok, (k, first_difference(got, expected))
    record(f"crash after write k of {n_writes} (every {step}), then {recovery}", profile, held == tried,
           cases=tried)
