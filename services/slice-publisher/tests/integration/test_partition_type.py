"""The reference driver's partitionable profile published with ``partitionTypeAttribute``
(DRAPartitionableDevicesType, on in the test environment: the API server keeps it), and no rewrite loop."""

from __future__ import annotations

import json

import pytest

from draflow_testenv.wait import consistently, eventually

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
            assert s["spec"]["partitionTypeAttribute"] == f"{DRIVER}/partitionType"
            types = {d["name"]: d["attributes"]["partitionType"]["string"] for d in s["spec"]["devices"]}
            assert types["gpu-0"] == "whole" and types["gpu-0-part-1"] == "1/2"
    await eventually(lambda: settled(pub), timeout=30, what="publisher settled")
    versions = sorted(s["metadata"]["resourceVersion"] for s in await h.slices())

    async def unchanged() -> bool:
        return sorted(s["metadata"]["resourceVersion"] for s in await h.slices()) == versions

    await consistently(unchanged, 1.0, "published once, not rewritten")
