"""ResourcePoolStatusRequests (DRAResourcePoolStatus, resource.k8s.io/v1alpha3) answered by the real
allocator against a real kube-apiserver, as the allocator's identity: counts including an allocation
still being written, taints and DeviceTaintRules, a pool still being published, partitionSummary
(DRAPartitionableDevicesType), and the clean-up of expired requests."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sa_kit import Kit, eventually

from draflow_cli import status as cli_status
from draflow_runtime.errors import NotFound
from draflow_runtime.kube import RESOURCE_POOL_STATUS_REQUESTS, RESOURCE_SLICES
from structured_allocator.poolstatus_controller import PoolStatusController, pool_status_answers
from structured_allocator.scheduler import Scheduler

pytestmark = pytest.mark.integration

NO_SCHEDULE = {"key": "example.com/maintenance", "value": "true", "effect": "NoSchedule"}


def holds(fn: Callable[[], object]) -> Callable[[], Awaitable[bool]]:
    async def check() -> bool:
        return bool(fn())
    return check


@contextlib.asynccontextmanager
async def answering(kit: Kit, sched: Scheduler) -> AsyncIterator[PoolStatusController]:
    """The answers as the service's leadership term runs them (``__main__.lead``)."""
    async with pool_status_answers(kit.identity.kube, sched.state, sched.settings.field_manager,
                                   enabled=sched.settings.gates["DRAResourcePoolStatus"]) as controller:
        assert controller is not None
        yield controller


async def ask(kit: Kit, name: str, **spec: Any) -> str:
    name = f"{name}-{kit.suffix}"
    await kit.kube.create(RESOURCE_POOL_STATUS_REQUESTS, {
        "apiVersion": "resource.k8s.io/v1alpha3", "kind": "ResourcePoolStatusRequest",
        "metadata": {"name": name}, "spec": {"driver": kit.driver, **spec}})
    kit.cluster_objects.append((RESOURCE_POOL_STATUS_REQUESTS, name))
    return name


async def answer_of(kit: Kit, name: str, timeout: float = 30.0) -> dict[str, Any]:  # noqa: ASYNC109
    async def check() -> dict[str, Any] | None:
        status = (await kit.kube.get(RESOURCE_POOL_STATUS_REQUESTS, name)).get("status")
        return dict(status) if status else None
    return await eventually(check, timeout, what=f"status of ResourcePoolStatusRequest {name}")


async def slice_(kit: Kit, name: str, pool: str, devices: list[dict[str, Any]], *, count: int = 1,
                 node: str | None = None, **spec: Any) -> str:
    name = f"{name}-{kit.suffix}"
    placement = {"nodeName": node} if node else {"allNodes": True}
    await kit.kube.create(RESOURCE_SLICES, {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": name},
        "spec": {"driver": kit.driver, "pool": {"name": pool, "generation": 1, "resourceSliceCount": count},
                 **placement, **({"devices": devices} if devices else {}), **spec}})
    kit.cluster_objects.append((RESOURCE_SLICES, name))
    return name


async def test_the_answer_counts_allocations_still_being_written_and_taints(kit: Kit) -> None:
    node = await kit.node("n0")
    await slice_(kit, "own", node, [{"name": f"gpu-{i}"} for i in range(3)] + [
        {"name": "gpu-3", "taints": [NO_SCHEDULE]}], node=node)
    await slice_(kit, "shared", "shared-pool", [{"name": f"nic-{i}"} for i in range(2)])
    await kit.taint_rule("drain", {**NO_SCHEDULE, "effect": "NoExecute"}, driver=kit.driver,
                         pool="shared-pool", device="nic-0")
    await kit.device_class_()
    await kit.template("one-gpu")
    sched = await kit.start(write_concurrency=1)
    async with answering(kit, sched):
        await kit.template_pod("bound", "one-gpu")
        await kit.wait_bound("bound")
        # The next pod's allocation is decided and assumed, but its write waits for the one write slot.
        async with sched.write_slots:
            await kit.template_pod("in-flight", "one-gpu")
            await eventually(holds(sched.state.assume.in_flight), what="an allocation in flight")
            claim = await kit.claim_of("in-flight")
            assert not (claim.get("status") or {}).get("allocation")  # not written yet
            status = await answer_of(kit, await ask(kit, "during-write"))
    pools = {p["poolName"]: p for p in status["pools"]}
    assert status["poolCount"] == 2 and list(pools) == sorted(pools)
    assert status["conditions"][0]["type"] == "Complete"
    assert status["conditions"][0]["message"] == "Calculated status for 2 pools"
    allocated = sum(p["allocatedDevices"] for p in pools.values())
    assert allocated == 2, status  # the bound pod's device and the one being written
    own, shared = pools[node], pools["shared-pool"]
    assert own["nodeName"] == node and "nodeName" not in shared
    assert own["totalDevices"] == 4 and own["unavailableDevices"] == 1
    assert shared["totalDevices"] == 2 and shared["unavailableDevices"] == 1  # the DeviceTaintRule
    for pool in pools.values():
        assert pool["availableDevices"] == pool["totalDevices"] - pool["allocatedDevices"] - pool[
            "unavailableDevices"]


async def test_a_pool_still_being_published_is_answered_once_it_is_complete(kit: Kit) -> None:
    await slice_(kit, "first", "big-pool", [{"name": "d-0"}], count=2)
    sched = await kit.start()
    async with answering(kit, sched) as controller:
        name = await ask(kit, "waits", poolName="big-pool")
        await eventually(holds(lambda: name in controller._waiting), what="request waiting for the pool")
        assert (await kit.kube.get(RESOURCE_POOL_STATUS_REQUESTS, name)).get("status") is None
        await slice_(kit, "second", "big-pool", [{"name": "d-1"}, {"name": "d-2"}], count=2)
        status = await answer_of(kit, name)
    assert [(p["poolName"], p["resourceSliceCount"], p["totalDevices"]) for p in status["pools"]] == [
        ("big-pool", 2, 3)]


def _partition(name: str, profile: str, memory: str) -> dict[str, Any]:
    return {"name": name, "attributes": {"profile": {"string": profile}},
            "consumesCounters": [{"counterSet": "gpu-0", "counters": {"memory": {"value": memory}}}]}


async def test_partition_summary_from_the_slices_partition_type_attribute(kit: Kit) -> None:
    await slice_(kit, "counters", "mig", [], count=2,
                 sharedCounters=[{"name": "gpu-0", "counters": {"memory": {"value": "80Gi"}}}])
    parts = [_partition("full", "Full", "80Gi"), _partition("half-0", "Half", "40Gi"),
             _partition("half-1", "Half", "40Gi")]
    devices = await slice_(kit, "parts", "mig", parts, count=2,
                           partitionTypeAttribute=f"{kit.driver}/profile")
    # DRAPartitionableDevicesType is on in the test environment: the API server keeps the field.
    stored = await kit.kube.get(RESOURCE_SLICES, devices)
    assert stored["spec"]["partitionTypeAttribute"] == f"{kit.driver}/profile"
    await kit.device_class_()
    await kit.template("half", selectors=('device.attributes["' + kit.driver + '"].profile == "Half"',))
    await kit.node("n0")
    sched = await kit.start()
    async with answering(kit, sched):
        await kit.template_pod("half-user", "half")
        await kit.wait_bound("half-user")
        status = await answer_of(kit, await ask(kit, "parts", poolName="mig"))
        cli = await cli_status.run(kit.kube, pool_status_wait=30)  # `draflow status` asks the same way
        # The request's default names another attribute: the slices' own declaration wins. (The API server
        # keeps the field: DRAPartitionableDevicesType is on.)
        other = await ask(kit, "default", poolName="mig", defaultPartitionTypeAttribute=f"{kit.driver}/x")
        stored = await kit.kube.get(RESOURCE_POOL_STATUS_REQUESTS, other)
        assert stored["spec"]["defaultPartitionTypeAttribute"] == f"{kit.driver}/x"
        assert (await answer_of(kit, other))["pools"] == status["pools"]
    [pool] = status["pools"]
    rows = [line.split() for line in cli.splitlines() if line.startswith(f"{kit.driver} ")]
    assert rows == [[kit.driver, "mig", "-", "2", "3", "1", "0", "2"]], cli
    assert f"mig: partitions by {kit.driver}/profile (allocatable/total): Full 0/1, Half 1/2" in cli
    assert "validationError" not in pool, pool
    assert pool["partitionSummary"] == [
        {"attribute": f"{kit.driver}/profile", "type": "Full", "total": 1, "allocatable": 0},
        {"attribute": f"{kit.driver}/profile", "type": "Half", "total": 2, "allocatable": 1},
    ]


async def test_answered_and_expired_requests_are_deleted(kit: Kit) -> None:
    await slice_(kit, "s", "p", [{"name": "d-0"}])
    sched = await kit.start()
    async with answering(kit, sched):
        answered = await ask(kit, "answered")
        await answer_of(kit, answered)
    later = PoolStatusController(kit.identity.kube, sched.state, "test",
                                 clock=lambda: datetime.now(UTC) + timedelta(hours=2))
    await later.requests.start()
    try:
        await later.requests.wait_synced()
        await eventually(holds(lambda: (later.requests.get(answered) or {}).get("status")),
                         what="answered request in the cache")
        assert await later.cleanup() >= 1
    finally:
        await later.requests.stop()
    with pytest.raises(NotFound):
        await kit.kube.get(RESOURCE_POOL_STATUS_REQUESTS, answered)
