"""A running allocator's free-device counts follow the API server's slices and claims (real
kube-apiserver): devices allocated, a slice grown, a claim deallocated; each time the kept count equals
a recount of the informer's slices."""

from __future__ import annotations

import pytest
from sa_kit import Kit, eventually

from draflow_runtime.kube import RESOURCE_CLAIMS, RESOURCE_SLICES
from structured_allocator.scheduler import Scheduler

pytestmark = pytest.mark.integration


def counted_and_recounted(sched: Scheduler, node: str) -> tuple[tuple[int, int, bool], tuple[int, int]]:
    state = sched.state
    in_use = state.assume.state.devices
    devices = [d for s in state.slices.slices_for_node(node) if s.node_name for d in s.devices]
    recount = (sum(d.id not in in_use for d in devices), len(devices))
    return state.device_counts.free_devices(node), recount


async def test_free_device_counts_follow_slices_and_claims(kit: Kit) -> None:
    node = await kit.node("n")
    name = await kit.slice(node, 3)
    await kit.device_class_()
    await kit.template("one-gpu")
    sched = await kit.start()
    for i in range(2):
        await kit.template_pod(f"p{i}", "one-gpu")
    for i in range(2):
        assert await kit.wait_bound(f"p{i}") == node

    async def settles_at(free: int, total: int) -> None:
        def check() -> bool:
            counted, recount = counted_and_recounted(sched, node)
            return counted == (free, total, False) and recount == (free, total)
        await eventually(check, 30, f"{free} of {total} devices free")

    await settles_at(1, 3)
    raw = await kit.kube.get(RESOURCE_SLICES, name)
    raw["spec"]["devices"] += [{"name": f"gpu-{i}", "attributes": {"index": {"int": i}}} for i in (3, 4)]
    await kit.kube.replace(RESOURCE_SLICES, raw)
    await settles_at(3, 5)
    claim = await kit.claim_of("p0")
    await kit.kube.patch(RESOURCE_CLAIMS, claim["metadata"]["name"],
                         {"status": {"reservedFor": None, "allocation": None}}, kit.namespace,
                         subresource="status")
    await settles_at(4, 5)
