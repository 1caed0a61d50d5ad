"""Binding conditions: the pure state machine, the waiter, and the decision treating failed claims as
unavailable."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sa_builders import DRIVER, alloc, claim, req, res

from draflow_testenv.wait import consistently
from structured_allocator.binder import ClaimPlan, WriteFailed
from structured_allocator.binding_wait import BindingFailed, BindingWaiter
from structured_allocator.bindingconds import BindingState, binding_status, needs_binding_conditions

T0 = datetime(2026, 1, 2, 3, 0, 0, tzinfo=UTC)
STAMP = "2026-01-02T03:00:00Z"


def bc_alloc(**extra: Any) -> dict[str, Any]:
    return alloc(res("gpu", "gpu-0", bindingConditions=["Attached"],
                     bindingFailureConditions=["AttachFailed"], **extra), allocationTimestamp=STAMP)


def with_conditions(allocation: dict[str, Any] | None, **conds: str) -> dict[str, Any]:
    c = claim("c", req("gpu"), allocation=allocation)
    c["metadata"]["uid"] = "uid-c"
    c.setdefault("status", {})["devices"] = [{
        "driver": DRIVER, "pool": "node-1", "device": "gpu-0",
        "conditions": [{"type": t, "status": s, "reason": "Test", "message": f"{t} is {s}"}
                       for t, s in conds.items()]}]
    return c


@pytest.mark.parametrize(("conds", "now", "state"), [
    pytest.param({}, T0, BindingState.PENDING, id="no-status-yet"),
    pytest.param({"Attached": "False"}, T0, BindingState.PENDING, id="condition-false"),
    pytest.param({"Attached": "True"}, T0, BindingState.READY, id="condition-true"),
    pytest.param({"Attached": "True", "AttachFailed": "False"}, T0, BindingState.READY,
                 id="failure-condition-false"),
    pytest.param({"Attached": "True", "AttachFailed": "True"}, T0, BindingState.FAILED,
                 id="failure-wins-even-when-ready"),
    pytest.param({"Attached": "False"}, T0 + timedelta(seconds=600), BindingState.TIMED_OUT,
                 id="timeout-after-allocation-timestamp"),
    pytest.param({"Attached": "True"}, T0 + timedelta(seconds=9999), BindingState.READY,
                 id="ready-never-times-out"),
])
def test_binding_status(conds: dict[str, str], now: datetime, state: BindingState) -> None:
    status = binding_status(with_conditions(bc_alloc(), **conds), now=now, timeout=600)
    assert status.state is state
    if state is BindingState.FAILED:
        assert "AttachFailed" in status.message and "node-1/gpu-0" in status.message


def test_devices_without_binding_conditions_need_no_wait() -> None:
    plain = alloc(res("gpu", "gpu-0"))
    assert not needs_binding_conditions(plain)
    assert binding_status(with_conditions(plain), now=T0, timeout=1).state is BindingState.NONE
    assert needs_binding_conditions(bc_alloc())


def test_conditions_of_another_device_do_not_count() -> None:
    c = with_conditions(bc_alloc(), Attached="True")
    c["status"]["devices"][0]["device"] = "gpu-1"
    assert binding_status(c, now=T0, timeout=600).state is BindingState.PENDING


def test_explicit_allocation_overrides_a_stale_cached_claim() -> None:
    stale = with_conditions(None, Attached="True")  # informer has not seen the allocation yet
    assert binding_status(stale, bc_alloc(), now=T0, timeout=600).state is BindingState.READY


# -- the waiter -------------------------------------------------------------------------------------


class Cache:
    def __init__(self, c: dict[str, Any] | None) -> None:
        self.c = c

    def get(self, key: str) -> dict[str, Any] | None:
        return self.c


def plan_for(c: dict[str, Any], allocation: dict[str, Any] | None) -> ClaimPlan:
    return ClaimPlan(c, allocation, True)


async def test_waiter_returns_when_a_claim_update_sets_the_condition() -> None:
    cache = Cache(with_conditions(bc_alloc()))
    waiter = BindingWaiter(cache.get, timeout=600, poll_interval=3600, clock=lambda: T0)
    cp = plan_for(cache.c, bc_alloc())
    assert waiter.pending([cp]) == [cp]
    task = asyncio.create_task(waiter.wait([cp]))
    await consistently(lambda: not task.done(), 0.05, "the waiter waits while the condition is unset")
    assert not task.done()
    cache.c = with_conditions(bc_alloc(), Attached="True")
    waiter.notify("default/c")  # the informer's claim event
    await asyncio.wait_for(task, 1)


async def test_waiter_polls_the_cache_without_an_event() -> None:
    cache = Cache(with_conditions(bc_alloc()))
    waiter = BindingWaiter(cache.get, timeout=600, poll_interval=0.05, clock=lambda: T0)
    task = asyncio.create_task(waiter.wait([plan_for(cache.c, bc_alloc())]))
    await consistently(lambda: not task.done(), 0.1, "the waiter polls while the condition is unset")
    cache.c = with_conditions(bc_alloc(), Attached="True")
    await asyncio.wait_for(task, 1)


async def test_waiter_fails_fast_on_a_failure_condition() -> None:
    cache = Cache(with_conditions(bc_alloc()))
    waiter = BindingWaiter(cache.get, timeout=600, poll_interval=3600, clock=lambda: T0)
    task = asyncio.create_task(waiter.wait([plan_for(cache.c, bc_alloc())]))
    await consistently(lambda: not task.done(), 0.05, "the waiter waits while no condition is set")
    cache.c = with_conditions(bc_alloc(), AttachFailed="True")
    waiter.notify("default/c")
    with pytest.raises(BindingFailed, match="AttachFailed") as info:
        await asyncio.wait_for(task, 1)
    assert info.value.claim == "default/c"


async def test_waiter_gives_up_after_the_timeout() -> None:
    cache = Cache(with_conditions(bc_alloc()))
    waiter = BindingWaiter(cache.get, timeout=0.1, poll_interval=0.02, clock=lambda: T0)
    with pytest.raises(BindingFailed, match="not met within"):
        await asyncio.wait_for(waiter.wait([plan_for(cache.c, bc_alloc())]), 2)


async def test_waiter_fails_when_the_claim_is_replaced() -> None:
    cache = Cache(with_conditions(bc_alloc()))
    waiter = BindingWaiter(cache.get, timeout=600, poll_interval=3600, clock=lambda: T0)
    cp = plan_for(cache.c, bc_alloc())
    replaced = with_conditions(bc_alloc())
    replaced["metadata"]["uid"] = "other"
    cache.c = replaced
    with pytest.raises(WriteFailed, match="vanished"):
        await waiter.wait([cp])


async def test_already_allocated_claims_are_read_from_the_cache() -> None:
    cache = Cache(with_conditions(bc_alloc(), Attached="True"))
    waiter = BindingWaiter(cache.get, timeout=600, poll_interval=3600, clock=lambda: T0)
    cp = ClaimPlan(cache.c, None, False)  # allocated before (e.g. a restart after the status write)
    assert waiter.pending([cp]) == [cp]
    await asyncio.wait_for(waiter.wait([cp]), 1)
