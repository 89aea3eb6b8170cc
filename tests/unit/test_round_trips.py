"""The round-trip clock (adapters/aws/round_trips): a request is one wait on its thread; a
fan-out over w lanes costs the slowest lane's waits, whatever the threads' scheduling."""

from __future__ import annotations

import threading

from eragraph.adapters.aws import round_trips


def request(x: int) -> int:
    round_trips.tick()
    return x * x


def test_sequential_requests_are_one_wait_each():
    start = round_trips.now()
    for i in range(5):
        request(i)
    assert round_trips.now() - start == 5


def test_a_fan_out_costs_its_longest_lane_and_keeps_the_order():
    start = round_trips.now()
    assert round_trips.fan_out(request, list(range(20)), 8) == [i * i for i in range(20)]
    assert round_trips.now() - start == 3  # ceil(20 / 8)
    assert round_trips.fan_out(request, [3], 8) == [9]
    assert round_trips.now() - start == 4
    assert round_trips.fan_out(request, [], 8) == []
    assert round_trips.now() - start == 4


def test_nested_fan_outs_add_their_depths():
    start = round_trips.now()

    def two_levels(x: int) -> int:
        request(x)
        return sum(round_trips.fan_out(request, [x, x + 1], 2))

    round_trips.fan_out(two_levels, [1, 2, 3], 3)
    assert round_trips.now() - start == 2


def test_each_thread_keeps_its_own_clock():
    seen = []
    t = threading.Thread(target=lambda: (request(1), seen.append(round_trips.now())))
    before = round_trips.now()
    t.start()
    t.join()
    assert round_trips.now() == before
    assert seen == [1]
