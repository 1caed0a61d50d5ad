"""The reference driver's partitionable profile published with ``partitionTypeAttribute``
(DRAPartitionableDevicesType, on in the test environment: the API server keeps it), and no rewrite loop
when an API server with the gate off drops it."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from draflow_runtime.kube import KubeClient
from draflow_testenv.environment import Environment
from draflow_testenv.wait import consistently, eventually
from slice_publisher.pool_sync import apply_plan, plan_pool
from slice_publisher.splitter import DesiredPool, partition_type_dropped

from .conftest import DRIVER, Harness, settled

pytestmark = pytest.mark.integration


async def test_partitionable_pool_carries_its_partition_type_attribute(harness: Harness) -> None:
    h = harness
    inventory = {"profile": "partitionable", "gpuCount": 2, "partitionsPerGpu": 2}
    h.dirs.inventory.write_text(json.dumps(inventory))
    await h.start_driver()
    pub = await h.start_publisher()

    async def published() -> list[dict] | None:
        slices = await h.slices()
        devices = [s for s in slices if s["spec"].get("devices")]
        return slices if devices and all("partitionTypeAttribute" in s["spec"] for s in devices) else None

    slices = await eventually(published, timeout=30, what="device slices with partitionTypeAttribute")
    for s in slices:
        if s["spec"].get("sharedCounters"):
            assert "partitionTypeAttribute" not in s["spec"]  # the API allows it on device slices only
        else:
            assert s["spec"]["partitionTypeAttribute"] == f"{DRIVER}/partitionGroup"
            types = {d["name"]: d["attributes"]["partitionType"]["string"] for d in s["spec"]["devices"]}
            assert types["gpu-0"] == "whole" and types["gpu-0-part-1"] == "1/2"
            groups = {d["name"]: d["attributes"]["partitionGroup"]["string"] for d in s["spec"]["devices"]}
            assert groups["gpu-0"] == "gpu-0:whole" and groups["gpu-1-part-1"] == "gpu-1:1/2"
    await eventually(lambda: settled(pub), timeout=30, what="publisher settled")
    versions = sorted(s["metadata"]["resourceVersion"] for s in await h.slices())

    async def unchanged() -> bool:
        return sorted(s["metadata"]["resourceVersion"] for s in await h.slices()) == versions

    await consistently(unchanged, 1.0, "published once, not rewritten")


async def test_with_the_gate_off_the_field_is_dropped_and_leaving_it_out_ends_the_rewrites() -> None:
    """A kube-apiserver of its own with DRAPartitionableDevicesType off (the last --feature-gates wins)."""
    driver, pool_name, node = "gpu.gate-off.example", "pool-x", "node-x"
    attr = f"{driver}/partitionType"
    device = {"name": "half-0", "attributes": {"partitionType": {"string": "1/2"}},
              "consumesCounters": [{"counterSet": "c", "counters": {"memory": {"value": "40Gi"}}}]}
    counters = ({"name": "c", "counters": {"memory": {"value": "80Gi"}}},)
    desired = DesiredPool(driver, pool_name, node, {"allNodes": True}, (device,), counters,
                          partition_type_attribute=attr)
    now = "2026-11-24T16:00:00Z"
    async with Environment(apiserver_args=("--feature-gates=DRAPartitionableDevicesType=false",)) as env:
        kube = await KubeClient.from_kubeconfig(str(env.kubeconfig))
        try:
            plan = plan_pool(driver, pool_name, node, desired, [], now=now)
            result = await apply_plan(kube, plan, field_manager="test")
            assert partition_type_dropped([*plan.creates, *plan.updates], result.written)
            existing = [o for o in result.written.values() if o is not None]
            # Still sending it, every sync would find a difference and rewrite the pool (a new generation
            # each time); without it there is nothing to write.
            assert not plan_pool(driver, pool_name, node, desired, existing, now=now).empty
            without = replace(desired, partition_type_attribute="")
            assert plan_pool(driver, pool_name, node, without, existing, now=now).empty
        finally:
            await kube.close()
