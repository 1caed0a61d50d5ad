"""KeyedLocks: one lock per key, several keys at once in a fixed order, nothing left behind."""

from __future__ import annotations

import asyncio

from draflow_runtime.keyedlocks import KeyedLocks
from draflow_testenv.wait import eventually


async def test_locks_of_different_claims_do_not_wait_for_each_other() -> None:
    locks = KeyedLocks()
    release = asyncio.Event()
    entered: list[str] = []

    async def hold(uids: list[str], name: str) -> None:
        async with locks.hold_all(uids):
            entered.append(name)
            await release.wait()

    a = asyncio.create_task(hold(["a"], "a"))
    b = asyncio.create_task(hold(["b", "c"], "bc"))
    await eventually(lambda: sorted(entered) == ["a", "bc"], 5.0, "both held at once")
    release.set()
    await asyncio.gather(a, b)
    assert len(locks) == 0, "a lock nobody holds or waits for is forgotten"


async def test_one_claim_is_held_by_one_caller_at_a_time_and_waiters_go_in_turn() -> None:
    locks = KeyedLocks()
    release = asyncio.Event()
    inside: list[str] = []
    done: list[str] = []

    async def first() -> None:
        async with locks.hold_all(["x", "a"]):
            inside.append("first")
            await release.wait()
            done.append("first")

    async def second() -> None:
        async with locks.hold_all(["x"]):
            inside.append("second")
            done.append("second")

    t1 = asyncio.create_task(first())
    await eventually(lambda: inside == ["first"], 5.0, "first holds x")
    t2 = asyncio.create_task(second())
    for _ in range(20):
        await asyncio.sleep(0)  # second runs up to the lock and waits there
    assert inside == ["first"]
    assert len(locks) == 2
    release.set()
    await asyncio.gather(t1, t2)
    assert done == ["first", "second"]
    assert len(locks) == 0


async def test_a_cancelled_waiter_leaves_no_lock_behind() -> None:
    locks = KeyedLocks()
    release = asyncio.Event()

    async def holder() -> None:
        async with locks.hold_all(["x"]):
            await release.wait()

    async def waiter() -> None:
        async with locks.hold_all(["y", "x"]):
            raise AssertionError("never reached: x stays held")

    h = asyncio.create_task(holder())
    await asyncio.sleep(0)
    w = asyncio.create_task(waiter())
    for _ in range(20):
        await asyncio.sleep(0)
    w.cancel()
    await asyncio.gather(w, return_exceptions=True)
    release.set()
    await h
    assert len(locks) == 0
    async with locks.hold_all(["y"]):  # y, taken by the cancelled waiter, was released
        pass
