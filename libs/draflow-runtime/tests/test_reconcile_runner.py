"""The Runner applies the reconcile contract: done, requeue-after, requeue-with-backoff, terminal,
retryable, timeout, crashes."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from draflow_runtime.reconcile import Done, RequeueAfter, RequeueWithBackoff, Runner, TerminalError
from draflow_runtime.workqueue import WorkQueue
from draflow_testenv.wait import eventually


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def make_queue(clock: FakeClock) -> WorkQueue:
    return WorkQueue(name="runner-test", base_delay=1.0, max_delay=100.0, qps=1e9, burst=10**9, clock=clock)


async def run_one(
    reconcile: Callable[[Any], Awaitable[Any]], *, reconcile_timeout: float | None = 5.0, **kwargs: Any
) -> tuple[WorkQueue, FakeClock]:
    """Process key "k" once through a Runner and return the queue (with the outcome applied)."""
    clock = FakeClock()
    q = make_queue(clock)
    runner = Runner("runner-test", q, reconcile, workers=1, timeout=reconcile_timeout, **kwargs)
    q.add("k")
    key = await q.get()
    await runner.process(key)
    q.done(key)
    return q, clock


async def test_done_forgets_the_key_backoff() -> None:
    async def reconcile(key: str) -> Done:
        return Done()

    q, _ = await run_one(reconcile)
    assert q.num_requeues("k") == 0
    assert len(q) == 0


async def test_requeue_after_readds_the_key_after_the_delay_without_backoff() -> None:
    async def reconcile(key: str) -> RequeueAfter:
        return RequeueAfter(7.0)

    q, clock = await run_one(reconcile)
    assert q.num_requeues("k") == 0
    clock.now = 6.9
    assert len(q) == 0
    clock.now = 7.0
    assert len(q) == 1


async def _process(runner: Runner, q: WorkQueue) -> None:
    key = await q.get()
    await runner.process(key)
    q.done(key)


async def test_requeue_with_backoff_grows_the_keys_backoff_until_done_resets_it() -> None:
    outcomes: list[Any] = [RequeueWithBackoff(), RequeueWithBackoff(), RequeueWithBackoff(), Done()]

    async def reconcile(key: str) -> Any:
        return outcomes.pop(0)

    clock = FakeClock()
    q = make_queue(clock)
    runner = Runner("runner-test", q, reconcile, workers=1, timeout=5.0)
    q.add("k")
    for attempt, backoff in enumerate([1.0, 2.0, 4.0], start=1):  # the queue's base_delay, doubling
        await _process(runner, q)
        assert q.num_requeues("k") == attempt
        clock.now += backoff - 0.001
        assert len(q) == 0
        clock.now += 0.001
        assert len(q) == 1
    await _process(runner, q)  # Done: the backoff starts over
    assert q.num_requeues("k") == 0
    assert len(q) == 0
    assert q.add_rate_limited("k") == 1.0


async def test_requeue_with_backoff_shares_the_count_with_errors_and_may_scale_it() -> None:
    outcomes: list[Any] = [ConnectionError("down"), RequeueWithBackoff(base_delay=0.5, max_delay=3.0),
                           RequeueWithBackoff(base_delay=0.5, max_delay=3.0),
                           RequeueWithBackoff(base_delay=0.5, max_delay=3.0), RequeueAfter(9.0)]

    async def reconcile(key: str) -> Any:
        outcome = outcomes.pop(0)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    clock = FakeClock()
    q = make_queue(clock)
    runner = Runner("runner-test", q, reconcile, workers=1, timeout=5.0)
    q.add("k")
    # the error counts one failure (1 s); then 0.5 * 2**1, 0.5 * 2**2, capped at 3
    for backoff in (1.0, 1.0, 2.0, 3.0):
        await _process(runner, q)
        clock.now += backoff - 0.001
        assert len(q) == 0
        clock.now += 0.001
        assert len(q) == 1
    assert q.num_requeues("k") == 4
    await _process(runner, q)  # RequeueAfter resets the count too
    assert q.num_requeues("k") == 0


async def test_terminal_error_calls_on_terminal_and_is_not_retried() -> None:
    seen: list[tuple[str, str, Any]] = []

    async def reconcile(key: str) -> Done:
        raise TerminalError("spec.devices is empty", obj={"metadata": {"name": key}})

    async def on_terminal(key: str, err: TerminalError) -> None:
        seen.append((key, err.message, err.obj))

    q, clock = await run_one(reconcile, on_terminal=on_terminal)
    assert seen == [("k", "spec.devices is empty", {"metadata": {"name": "k"}})]
    clock.now = 1e6
    assert len(q) == 0
    assert q.num_requeues("k") == 0


async def test_failing_on_terminal_callback_is_contained() -> None:
    async def reconcile(key: str) -> Done:
        raise TerminalError("bad")

    def on_terminal(key: str, err: TerminalError) -> None:
        raise RuntimeError("event sink down")

    q, _ = await run_one(reconcile, on_terminal=on_terminal)
    assert len(q) == 0


async def test_other_exceptions_retry_with_growing_backoff() -> None:
    async def reconcile(key: str) -> Done:
        raise ConnectionError("api server unreachable")

    clock = FakeClock()
    q = make_queue(clock)
    runner = Runner("runner-test", q, reconcile, workers=1, timeout=5.0)
    q.add("k")
    for attempt, backoff in enumerate([1.0, 2.0, 4.0], start=1):
        key = await q.get()
        await runner.process(key)
        q.done(key)
        assert q.num_requeues("k") == attempt
        clock.now += backoff - 0.001
        assert len(q) == 0
        clock.now += 0.001
        assert len(q) == 1


async def test_timeout_is_retryable() -> None:
    async def reconcile(key: str) -> Done:
        await asyncio.sleep(60)  # a reconcile that hangs: the runner's timeout is what is tested
        return Done()

    q, clock = await run_one(reconcile, reconcile_timeout=0.01)
    assert q.num_requeues("k") == 1
    clock.now = 1.0
    assert len(q) == 1


async def test_runner_survives_crashes_and_processes_every_key() -> None:
    calls: dict[str, int] = {}
    all_succeeded = asyncio.Event()

    async def reconcile(key: str) -> Done:
        calls[key] = calls.get(key, 0) + 1
        if calls[key] == 1:
            raise RuntimeError("first attempt crashes")
        if len(calls) == 10 and all(n >= 2 for n in calls.values()):
            all_succeeded.set()
        return Done()

    q = WorkQueue(name="runner-crash", base_delay=0.001, max_delay=0.01, qps=1e9, burst=10**9)
    runner = Runner("runner-crash", q, reconcile, workers=3, timeout=5.0)
    task = asyncio.create_task(runner.run())
    for i in range(10):
        q.add(f"k{i}")
    async with asyncio.timeout(10):
        await all_succeeded.wait()
    await eventually(lambda: not q.processing(), 10, "the last worker called done()", interval=0)
    q.shutdown()
    async with asyncio.timeout(10):
        await task
    assert calls == {f"k{i}": 2 for i in range(10)}
    assert all(q.num_requeues(f"k{i}") == 0 for i in range(10))


async def test_runner_returns_when_the_queue_shuts_down() -> None:
    async def reconcile(key: str) -> Done:
        return Done()

    q = WorkQueue(name="runner-stop")
    task = asyncio.create_task(Runner("runner-stop", q, reconcile, workers=2).run())
    await asyncio.sleep(0)  # one turn of the loop: the runner starts and its workers wait in get()
    q.shutdown()
    async with asyncio.timeout(5):
        await task


async def test_a_cancellation_the_worker_did_not_ask_for_is_retried_and_the_worker_lives_on() -> None:
    """A library may cancel what a reconcile awaits without anyone cancelling the worker (grpc.aio fails
    the calls of a channel it closes with CancelledError): a retryable failure like any other. Before,
    the key was lost and the worker ended silently."""
    calls: dict[str, int] = {}
    both_done = asyncio.Event()

    async def reconcile(key: str) -> Done:
        calls[key] = calls.get(key, 0) + 1
        if calls[key] == 1:
            inner = asyncio.get_running_loop().create_future()  # completes only by the cancel below
            asyncio.get_running_loop().call_soon(inner.cancel)
            await inner  # raises CancelledError in this task, which nobody cancelled
        if calls.keys() == {"a", "b"} and min(calls.values()) >= 2:
            both_done.set()
        return Done()

    q = WorkQueue(name="runner-stray-cancel", base_delay=0.001, max_delay=0.01, qps=1e9, burst=10**9)
    task = asyncio.create_task(Runner("runner-stray-cancel", q, reconcile, workers=1, timeout=5.0).run())
    q.add("a")
    q.add("b")
    async with asyncio.timeout(10):
        await both_done.wait()  # one worker: it outlived both cancellations and retried both keys
    assert calls == {"a": 2, "b": 2}
    q.shutdown()
    async with asyncio.timeout(10):
        await task


async def test_cancelling_the_runner_still_cancels_a_reconcile_in_flight() -> None:
    started = asyncio.Event()

    async def reconcile(key: str) -> Done:
        started.set()
        await asyncio.Event().wait()  # never set: only the runner's cancellation ends it
        return Done()

    q = WorkQueue(name="runner-cancel")
    task = asyncio.create_task(Runner("runner-cancel", q, reconcile, workers=1, timeout=None).run())
    q.add("k")
    async with asyncio.timeout(5):
        await started.wait()
    task.cancel()
    async with asyncio.timeout(5):
        await asyncio.wait({task})
    assert task.cancelled()
    assert q.num_requeues("k") == 0
