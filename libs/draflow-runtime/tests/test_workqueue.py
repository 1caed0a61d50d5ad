"""WorkQueue semantics (client-go): merging, one worker per key, backoff, rate limit, delays, shutdown.

The clock is faked at its seam (``clock=``) so delays are exact and nothing sleeps.
"""

from __future__ import annotations

import asyncio

import pytest

from draflow_runtime.workqueue import QueueShutDown, WorkQueue
from draflow_testenv.wait import eventually


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def make_queue(clock: FakeClock, **kwargs: float) -> WorkQueue:
    params = {"base_delay": 0.005, "max_delay": 300.0, "qps": 1e9, "burst": 10**9}
    params.update(kwargs)
    return WorkQueue(name="test", clock=clock, **params)  # type: ignore[arg-type]


async def drain(q: WorkQueue) -> list:
    keys = []
    while len(q):
        key = await q.get()
        keys.append(key)
        q.done(key)
    return keys


async def test_repeated_adds_of_a_waiting_key_merge_into_one() -> None:
    q = make_queue(FakeClock())
    for key in ["a", "b", "a", "a", "c", "b"]:
        q.add(key)
    assert len(q) == 3
    assert await drain(q) == ["a", "b", "c"]


async def test_key_added_while_processing_is_held_then_requeued_once_at_done() -> None:
    q = make_queue(FakeClock())
    q.add("a")
    key = await q.get()
    assert key == "a"
    q.add("a")
    q.add("a")
    assert len(q) == 0, "a key being processed must not be handed out again"
    q.done("a")
    assert len(q) == 1
    assert await q.get() == "a"
    q.done("a")
    assert len(q) == 0


async def test_two_workers_never_hold_the_same_key() -> None:
    q = make_queue(FakeClock())
    holding: set[str] = set()
    overlaps: list[str] = []
    processed: list[str] = []

    async def worker() -> None:
        while True:
            try:
                key = await q.get()
            except QueueShutDown:
                return
            if key in holding:
                overlaps.append(key)
            holding.add(key)
            await asyncio.sleep(0)  # yield while holding the key: other workers run (the interleaving tested)
            if len(processed) < 20:
                q.add(key)  # an event for the key arrives while it is processed
            processed.append(key)
            await asyncio.sleep(0)  # and again before done()
            holding.discard(key)
            q.done(key)

    workers = [asyncio.create_task(worker()) for _ in range(4)]
    q.add("x")
    q.add("y")
    await eventually(lambda: len(processed) >= 20 and not q.processing() and len(q) == 0, 10,
                     "20 keys processed and the queue drained", interval=0)
    q.shutdown()
    await asyncio.gather(*workers)
    assert overlaps == []
    assert len(processed) >= 20


async def test_rate_limited_backoff_doubles_up_to_max_and_forget_resets() -> None:
    q = make_queue(FakeClock(), base_delay=0.01, max_delay=0.05)
    delays = [q.add_rate_limited("k") for _ in range(5)]
    assert delays == pytest.approx([0.01, 0.02, 0.04, 0.05, 0.05])
    assert q.num_requeues("k") == 5
    assert q.add_rate_limited("other") == pytest.approx(0.01), "backoff is per key"
    q.forget("k")
    assert q.num_requeues("k") == 0
    assert q.add_rate_limited("k") == pytest.approx(0.01)


async def test_rate_limited_key_becomes_ready_after_its_backoff() -> None:
    clock = FakeClock()
    q = make_queue(clock, base_delay=1.0)
    q.add_rate_limited("k")
    assert len(q) == 0
    clock.advance(0.999)
    assert len(q) == 0
    clock.advance(0.001)
    assert len(q) == 1
    assert await q.get() == "k"


async def test_global_token_bucket_delays_beyond_burst() -> None:
    clock = FakeClock()
    q = make_queue(clock, base_delay=0.001, qps=10.0, burst=2)
    delays = [q.add_rate_limited(f"k{i}") for i in range(5)]
    # two tokens in the bucket, then one every 0.1 s; each key's own backoff is only 1 ms
    assert delays == pytest.approx([0.001, 0.001, 0.1, 0.2, 0.3])
    clock.advance(10.0)  # the bucket refills, never above burst
    assert [q.add_rate_limited(f"j{i}") for i in range(3)] == pytest.approx([0.001, 0.001, 0.1])


async def test_add_after_orders_by_ready_time_and_keeps_the_earlier_time() -> None:
    clock = FakeClock()
    q = make_queue(clock)
    q.add_after("late", 3.0)
    q.add_after("early", 1.0)
    q.add_after("middle", 2.0)
    q.add_after("late", 5.0)  # later than the pending time: ignored
    q.add_after("middle", 0.5)  # earlier: wins
    assert len(q) == 0
    clock.advance(1.0)
    assert await drain(q) == ["middle", "early"]
    clock.advance(1.5)
    assert len(q) == 0
    clock.advance(0.5)
    assert await drain(q) == ["late"]
    clock.advance(10.0)
    assert len(q) == 0, "a delayed key is delivered once"


async def test_add_after_with_no_delay_is_an_add() -> None:
    q = make_queue(FakeClock())
    q.add_after("a", 0)
    q.add("a")
    assert await drain(q) == ["a"]


async def test_waiting_getter_wakes_when_a_delayed_key_is_due() -> None:
    q = WorkQueue(name="test-real-clock")
    q.add_after("a", 0.01)
    async with asyncio.timeout(5):
        assert await q.get() == "a"


async def test_shutdown_wakes_waiting_getters_with_queue_shut_down() -> None:
    q = make_queue(FakeClock())
    getters = [asyncio.create_task(q.get()) for _ in range(3)]
    await asyncio.sleep(0)  # one turn of the loop: the getters block in get() before the shutdown (tested)
    q.shutdown()
    results = await asyncio.gather(*getters, return_exceptions=True)
    assert all(isinstance(r, QueueShutDown) for r in results)
    q.add("a")
    with pytest.raises(QueueShutDown):
        await q.get()
    assert len(q) == 0, "adds after shutdown are ignored"
