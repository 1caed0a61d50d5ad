"""The health and inventory streams over real gRPC unix sockets, driven by the control files.

Clients are the stubs generated from our protos, i.e. what a kubelet (or kubelet-dra-shim) sends. Every test
with a driver runs twice (``driver_identity``): as the admin and with only the driver's deploy/kustomize RBAC.
"""

from __future__ import annotations

import asyncio
import json

import grpc
import pytest
from rd_harness import DRIVER

from draflow_protos.drahealth.v1 import api_pb2 as health_v1
from draflow_protos.drahealth.v1 import api_pb2_grpc as health_v1_grpc
from draflow_protos.drahealth.v1alpha1 import api_pb2 as health_v1alpha1
from draflow_protos.drahealth.v1alpha1 import api_pb2_grpc as health_v1alpha1_grpc
from draflow_protos.inventory.v1 import inventory_pb2 as inv
from draflow_protos.inventory.v1 import inventory_pb2_grpc as inv_grpc

pytestmark = pytest.mark.integration


@pytest.mark.parametrize(
    ("health_pb", "health_grpc"),
    [
        pytest.param(health_v1, health_v1_grpc, id="v1"),
        pytest.param(health_v1alpha1, health_v1alpha1_grpc, id="v1alpha1"),
    ],
)
async def test_health_stream_reflects_the_control_file(driver, health_pb, health_grpc):
    stream = health_grpc.DRAResourceHealthStub(driver.channel()).NodeWatchResources(
        health_pb.NodeWatchResourcesRequest())
    try:
        first = await asyncio.wait_for(stream.read(), 5)
        assert len(first.devices) == 8
        assert {d.health for d in first.devices} == {health_pb.HEALTHY}
        control = driver.node.paths.state_dir / "health.json"
        tmp = control.with_suffix(".tmp")
        tmp.write_text(json.dumps({"devices": {"gpu-6": {"health": "Unhealthy", "message": "xid 79"}}}))
        tmp.rename(control)
        second = await asyncio.wait_for(stream.read(), 5)
        unhealthy = [(d.device.device_name, d.message) for d in second.devices
                     if d.health == health_pb.UNHEALTHY]
        assert unhealthy == [("gpu-6", "xid 79")]
        assert {d.device.pool_name for d in second.devices} == {driver.node_name}
    finally:
        stream.cancel()


async def test_inventory_stream_resends_the_complete_inventory_on_change(driver):
    stub = inv_grpc.InventoryStub(driver.channel())
    stream = stub.ListAndWatchResources(inv.ListAndWatchResourcesRequest(node_name=driver.node_name))
    inventory_file = driver.root / "inventory.json"

    async def next_count() -> int:
        msg = await asyncio.wait_for(stream.read(), 5)
        assert msg.driver == DRIVER
        assert msg.node_name == driver.node_name
        assert [p.name for p in msg.pools] == [driver.node_name]
        return len(msg.pools[0].devices)

    try:
        assert await next_count() == 8
        for count in (200, 8):
            inventory_file.write_text(json.dumps({"gpuCount": count}))
            assert await next_count() == count
    finally:
        stream.cancel()

    wrong = stub.ListAndWatchResources(inv.ListAndWatchResourcesRequest(node_name="someone-else"))
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await wrong.read()
    assert err.value.code() == grpc.StatusCode.NOT_FOUND


async def test_unhealthy_devices_are_tainted_in_the_inventory(driver):
    stub = inv_grpc.InventoryStub(driver.channel())
    stream = stub.ListAndWatchResources(inv.ListAndWatchResourcesRequest())
    try:
        await asyncio.wait_for(stream.read(), 5)
        (driver.node.paths.state_dir / "health.json").write_text(
            json.dumps({"devices": {"gpu-0": {"health": "Unhealthy"}}}))
        msg = await asyncio.wait_for(stream.read(), 5)
        taints = {d.name: [(t.key, t.effect) for t in d.taints] for d in msg.pools[0].devices if d.taints}
        assert taints == {"gpu-0": [(f"{DRIVER}/unhealthy", "NoSchedule")]}
    finally:
        stream.cancel()
