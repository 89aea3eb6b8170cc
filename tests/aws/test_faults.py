"""Reliability under faults on the AWS profile (moto S3 and DynamoDB, the OpenSearch fake),
through the real handlers (tests/chaos.py): shuffled 1-5x deliveries, concurrent consumers
and a crash after sampled writes end in the digest of one clean ordered delivery -- the clean
run made on the in-memory profile with the same settings, so the two profiles are also shown
to build the same graph. Summaries are made afresh on every change (ERAGRAPH_DELTA_SUMMARIES
off) so that they can be compared byte for byte."""

from __future__ import annotations

import random
import threading

import pytest
from chaos import ChaosBus, Deliverer, blob_world, digest, first_difference, operations
from reliability_cases import record

from eragraph.bootstrap.aws import LAMBDA_ENGINE, build_aws_engine
from eragraph.bootstrap.memory import build_memory_engine
from eragraph.config import settings_from_env
from eragraph.services import invariants

N_KEYS = 2


@pytest.fixture
def chaos_engine(aws_engine, monkeypatch):
    """The AWS engine rebuilt with revised summaries off and a chaos bus for its queue."""
    _, env, fake = aws_engine
    monkeypatch.setenv("ERAGRAPH_DELTA_SUMMARIES", "false")
    env = {**env, "ERAGRAPH_DELTA_SUMMARIES": "false"}

    def make(seed: int):
        engine = build_aws_engine(environ=env, opensearch_client=fake, refresh=True)
        engine.queue = ChaosBus(random.Random(seed))
        LAMBDA_ENGINE.set(engine)
        return engine
    return make


def clean_digest(ops) -> dict:
    """One clean ordered delivery on the in-memory profile with the AWS test settings."""
    engine = build_memory_engine(settings_from_env())
    engine.queue = ChaosBus(random.Random(0), max_copies=1)
    LAMBDA_ENGINE.set(engine)
    try:
        Deliverer(blob_world(engine), engine.queue).clean(ops)
    finally:
        LAMBDA_ENGINE.set(None)
    assert invariants.check(engine).ok
    return digest(engine)


@pytest.mark.parametrize("seed", [21, 22, 24])
def test_shuffled_repeated_deliveries_end_in_the_clean_state(chaos_engine, seed):
    ops = operations(N_KEYS, seed)
    expected = clean_digest(ops)
    engine = chaos_engine(seed)
    stats = Deliverer(blob_world(engine), engine.queue).shuffled(ops, random.Random(seed))
    got = digest(engine)
    report = invariants.check(engine)
    record("shuffled 1-5x deliveries", "aws (moto)", got == expected and report.ok, **stats)
    assert report.ok, report.violations[:5]
    assert got == expected, first_difference(got, expected)
    assert stats["message_deliveries"] > stats["messages_sent"]


def test_concurrent_consumers_end_in_the_clean_state(chaos_engine, atomic_requests):
    """Three consumer threads run the summarize handler at once on one table (each DynamoDB
    request atomic, as the service is; the threads interleave between requests)."""
    ops = operations(N_KEYS, 23)
    expected = clean_digest(ops)
    engine = chaos_engine(23)
    bus = engine.queue
    deliverer = Deliverer(blob_world(engine), bus)
    for op in ops:
        deliverer.world(op)
        assert deliverer.s3(op)
    errors: list[BaseException] = []

    def consumer():
        try:
            while (m := bus.take()) is not None:
                deliverer.message(m)
        except BaseException as exc:
            errors.append(exc)

    while bus.owed:  # a round of consumers, until no message is owed
        threads = [threading.Thread(target=consumer) for _ in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=900)
    got = digest(engine)
    report = invariants.check(engine)
    record("3 concurrent consumers", "aws (moto)", got == expected and report.ok and not errors,
           operations=len(ops), message_deliveries=bus.delivered, failed_deliveries=deliverer.failures)
    assert not errors, errors[:1]
    assert report.ok, report.violations[:5]
    assert got == expected, first_difference(got, expected)
