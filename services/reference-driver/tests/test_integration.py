"""The driver over real gRPC unix sockets, reading claims from a real kube-apiserver.

Clients are the stubs generated from our protos, i.e. what a kubelet (or kubelet-dra-shim) sends. Every test
with a driver runs twice (``driver_identity``): as the admin and with only the driver's deploy/kustomize RBAC.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import pytest
import pytest_asyncio

from draflow_protos.dra.v1 import api_pb2 as dra_v1
from draflow_protos.dra.v1 import api_pb2_grpc as dra_v1_grpc
from draflow_protos.dra.v1beta1 import api_pb2 as dra_v1beta1
from draflow_protos.dra.v1beta1 import api_pb2_grpc as dra_v1beta1_grpc
from draflow_protos.drahealth.v1 import api_pb2 as health_v1
from draflow_protos.drahealth.v1 import api_pb2_grpc as health_v1_grpc
from draflow_protos.drahealth.v1alpha1 import api_pb2 as health_v1alpha1
from draflow_protos.drahealth.v1alpha1 import api_pb2_grpc as health_v1alpha1_grpc
from draflow_protos.inventory.v1 import inventory_pb2 as inv
from draflow_protos.inventory.v1 import inventory_pb2_grpc as inv_grpc
from draflow_protos.pluginregistration.v1 import api_pb2 as reg_pb
from draflow_protos.pluginregistration.v1 import api_pb2_grpc as reg_grpc
from draflow_runtime.kube import DEVICE_CLASSES, RESOURCE_CLAIMS
from draflow_testenv.identity import ServiceIdentity
from draflow_testenv.wait import eventually
from reference_driver import cdi
from reference_driver.fleet import Fleet
from reference_driver.inventory import gpu_uuid
from reference_driver.settings import DriverSettings

pytestmark = pytest.mark.integration

DRIVER = "gpu.draflow.example"
# The console script `reference-driver` of this environment (PATH may not include the venv's bin).
ENTRY_POINT = str(Path(sys.executable).parent / "reference-driver")


# -- fixtures and helpers --------------------------------------------------------------------------------


@pytest_asyncio.fixture(loop_scope="session", scope="session")
async def device_class(kube) -> AsyncIterator[str]:
    name = f"rd-gpu-{uuid.uuid4().hex[:6]}"
    await kube.create(DEVICE_CLASSES, {
        "apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": name},
        "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]},
    })
    yield name
    await kube.delete(DEVICE_CLASSES, name)


@pytest_asyncio.fixture(loop_scope="session")
async def driver_identity(make_namespace, service_identity) -> ServiceIdentity:
    """The driver's identity: the admin, and (a second run of each test using it) only the RBAC of
    deploy/kustomize/base/reference-driver. Test set-up keeps the admin ``kube``."""
    return await service_identity("reference-driver", await make_namespace("rd-id"))


class Driver:
    """An in-process driver (single node or fleet) and channels to its sockets."""

    def __init__(self, fleet: Fleet, root: Path) -> None:
        self.fleet = fleet
        self.root = root
        self.node_name = next(iter(fleet.nodes))
        self.node = fleet.nodes[self.node_name]
        self._channels: list[grpc.aio.Channel] = []

    def channel(self, path: Path | None = None) -> grpc.aio.Channel:
        ch = grpc.aio.insecure_channel(f"unix://{path or self.node.paths.dra_socket}")
        self._channels.append(ch)
        return ch

    def v1(self) -> dra_v1_grpc.DRAPluginStub:
        return dra_v1_grpc.DRAPluginStub(self.channel())

    def v1beta1(self) -> dra_v1beta1_grpc.DRAPluginStub:
        return dra_v1beta1_grpc.DRAPluginStub(self.channel())

    async def close(self) -> None:
        for ch in self._channels:
            await ch.close()
        await self.fleet.stop(grace=0)


@pytest_asyncio.fixture(loop_scope="session")
async def driver(driver_identity, short_tmp) -> AsyncIterator[Driver]:
    inventory_file = short_tmp / "inventory.json"
    inventory_file.write_text(json.dumps({"gpuCount": 8}))
    settings = DriverSettings(
        node_name=f"rd-{uuid.uuid4().hex[:6]}",
        registry_dir=str(short_tmp / "registry"), plugins_dir=str(short_tmp / "plugins"),
        cdi_root=str(short_tmp / "cdi"), state_dir=str(short_tmp / "state"),
        inventory_file=str(inventory_file), poll_interval=0.05, health_resend_interval=30, http_port=0,
    )
    fleet = Fleet(settings, driver_identity.kube)
    await fleet.start()
    drv = Driver(fleet, short_tmp)
    yield drv
    await drv.close()


async def allocated_claim(
    kube, namespace: str, device_class: str, node: str, device: str = "gpu-1",
    config: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """Create a ResourceClaim and allocate ``device`` of ``node`` to it, as the allocator would."""
    claim = await kube.create(RESOURCE_CLAIMS, {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"generateName": "gpu-"},
        "spec": {"devices": {"requests": [
            {"name": "gpu", "exactly": {"deviceClassName": device_class}}]}},
    }, namespace=namespace)
    allocation = {
        "devices": {
            "results": [{"request": "gpu", "driver": DRIVER, "pool": node, "device": device}],
            "config": config or [],
        },
        "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
            {"key": "metadata.name", "operator": "In", "values": [node]}]}]},
    }
    reserved = [{"resource": "pods", "name": "pod-0", "uid": str(uuid.uuid4())}]
    return await kube.patch(
        RESOURCE_CLAIMS, claim["metadata"]["name"],
        {"status": {"allocation": allocation, "reservedFor": reserved}},
        namespace=namespace, subresource="status",
    )


def claim_ref(obj: dict[str, Any], pb: Any = dra_v1) -> Any:
    meta = obj["metadata"]
    return pb.Claim(namespace=meta["namespace"], name=meta["name"], uid=meta["uid"])


def sharing(interval: str) -> list[dict[str, Any]]:
    return [{"source": "FromClaim", "requests": ["gpu"], "opaque": {"driver": DRIVER, "parameters": {
        "apiVersion": f"{DRIVER}/v1", "kind": "GpuConfig",
        "sharing": {"strategy": "TimeSlicing", "timeSlicing": {"interval": interval}}}}}]


def cdi_file(drv: Driver, uid: str) -> Path:
    return drv.node.paths.cdi_root / cdi.spec_file_name(DRIVER, "gpu", uid)


# -- registration ----------------------------------------------------------------------------------------


async def test_get_info_returns_the_plugin_info_the_kubelet_expects(driver):
    stub = reg_grpc.RegistrationStub(driver.channel(driver.node.paths.registration_socket))
    info = await stub.GetInfo(reg_pb.InfoRequest())
    assert info.type == "DRAPlugin"
    assert info.name == DRIVER
    assert info.endpoint == str(driver.root / "plugins" / DRIVER / "dra.sock")
    assert os.path.isabs(info.endpoint)
    assert list(info.supported_versions) == [
        "v1.DRAPlugin", "v1beta1.DRAPlugin", "v1.DRAResourceHealth", "v1alpha1.DRAResourceHealth"]
    assert driver.node.paths.registration_socket == driver.root / "registry" / f"{DRIVER}-reg.sock"

    await stub.NotifyRegistrationStatus(reg_pb.RegistrationStatus(plugin_registered=True))
    assert driver.node.registered is True
    with pytest.raises(grpc.aio.AioRpcError) as info_err:
        await stub.NotifyRegistrationStatus(
            reg_pb.RegistrationStatus(plugin_registered=False, error="version mismatch"))
    assert "version mismatch" in (info_err.value.details() or "")
    assert driver.node.registered is False


# -- prepare / unprepare ---------------------------------------------------------------------------------


async def test_prepare_over_v1_and_v1beta1_is_idempotent(driver, kube, make_namespace, device_class,
                                                         validate_cdi):
    ns = await make_namespace("rd")
    claim = await allocated_claim(kube, ns, device_class, driver.node_name, config=sharing("Short"))
    uid = claim["metadata"]["uid"]

    request = dra_v1.NodePrepareResourcesRequest(claims=[claim_ref(claim)])
    first = await driver.v1().NodePrepareResources(request)
    assert list(first.claims) == [uid]
    result = first.claims[uid]
    assert result.error == ""
    assert [(d.pool_name, d.device_name, list(d.request_names), list(d.cdi_device_ids))
            for d in result.devices] == [
        (driver.node_name, "gpu-1", ["gpu"], [f"{DRIVER}/gpu={uid}-gpu-1"])]
    assert not result.devices[0].HasField("share_id")

    spec = json.loads(cdi_file(driver, uid).read_text())
    assert validate_cdi(spec) == []
    env = spec["devices"][0]["containerEdits"]["env"]
    assert f"DRAFLOW_GPU_1={gpu_uuid(driver.node_name, 1)}" in env
    assert "DRAFLOW_GPU_1_TIMESLICE_INTERVAL=Short" in env

    again = await driver.v1beta1().NodePrepareResources(
        dra_v1beta1.NodePrepareResourcesRequest(claims=[claim_ref(claim, dra_v1beta1)]))
    beta = again.claims[uid]
    assert beta.error == ""
    assert [(d.device_name, list(d.cdi_device_ids)) for d in beta.devices] == [
        ("gpu-1", [f"{DRIVER}/gpu={uid}-gpu-1"])]
    assert (await driver.v1().NodePrepareResources(
        dra_v1.NodePrepareResourcesRequest(claims=[claim_ref(claim)]))) == first


async def test_invalid_opaque_config_fails_only_that_claim(driver, kube, make_namespace, device_class):
    ns = await make_namespace("rd")
    good = await allocated_claim(kube, ns, device_class, driver.node_name, device="gpu-2")
    bad = await allocated_claim(kube, ns, device_class, driver.node_name, device="gpu-3",
                                config=sharing("Sometimes"))
    response = await driver.v1().NodePrepareResources(
        dra_v1.NodePrepareResourcesRequest(claims=[claim_ref(good), claim_ref(bad)]))
    good_uid, bad_uid = good["metadata"]["uid"], bad["metadata"]["uid"]
    assert set(response.claims) == {good_uid, bad_uid}
    assert response.claims[good_uid].error == ""
    assert [d.device_name for d in response.claims[good_uid].devices] == ["gpu-2"]
    assert "sharing.timeSlicing.interval" in response.claims[bad_uid].error
    assert not response.claims[bad_uid].devices
    assert cdi_file(driver, good_uid).exists()
    assert not cdi_file(driver, bad_uid).exists()


async def test_missing_replaced_and_unallocated_claims_fail_one_by_one(driver, kube, make_namespace,
                                                                        device_class):
    ns = await make_namespace("rd")
    claim = await allocated_claim(kube, ns, device_class, driver.node_name, device="gpu-4")
    unallocated = await kube.create(RESOURCE_CLAIMS, {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": "pending"},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": device_class}}]}},
    }, namespace=ns)
    replaced = dra_v1.Claim(namespace=ns, name=claim["metadata"]["name"], uid=str(uuid.uuid4()))
    missing = dra_v1.Claim(namespace=ns, name="nope", uid=str(uuid.uuid4()))
    response = await driver.v1().NodePrepareResources(dra_v1.NodePrepareResourcesRequest(
        claims=[replaced, missing, claim_ref(unallocated), claim_ref(claim)]))
    assert "was replaced" in response.claims[replaced.uid].error
    assert "not found" in response.claims[missing.uid].error
    assert "not allocated" in response.claims[unallocated["metadata"]["uid"]].error
    assert response.claims[claim["metadata"]["uid"]].error == ""


async def test_unprepare_removes_the_cdi_file_and_unknown_claims_succeed(driver, kube, make_namespace,
                                                                         device_class):
    ns = await make_namespace("rd")
    claim = await allocated_claim(kube, ns, device_class, driver.node_name, device="gpu-5")
    uid = claim["metadata"]["uid"]
    await driver.v1().NodePrepareResources(dra_v1.NodePrepareResourcesRequest(claims=[claim_ref(claim)]))
    assert cdi_file(driver, uid).exists()

    unknown = dra_v1.Claim(namespace=ns, name="never-prepared", uid=str(uuid.uuid4()))
    response = await driver.v1().NodeUnprepareResources(
        dra_v1.NodeUnprepareResourcesRequest(claims=[claim_ref(claim), unknown]))
    assert {k: v.error for k, v in response.claims.items()} == {uid: "", unknown.uid: ""}
    assert not cdi_file(driver, uid).exists()
    assert uid not in driver.node.state.prepared_claims
    beta = await driver.v1beta1().NodeUnprepareResources(
        dra_v1beta1.NodeUnprepareResourcesRequest(claims=[claim_ref(claim, dra_v1beta1)]))
    assert beta.claims[uid].error == ""


async def test_prepared_claims_survive_a_driver_restart(kube, make_namespace, device_class, short_tmp,
                                                        driver_identity):
    settings = DriverSettings(
        node_name="rd-restart", registry_dir=str(short_tmp / "reg"), plugins_dir=str(short_tmp / "pl"),
        cdi_root=str(short_tmp / "cdi"), state_dir=str(short_tmp / "st"), http_port=0,
    )
    ns = await make_namespace("rd")
    claim = await allocated_claim(kube, ns, device_class, "rd-restart", device="gpu-0")
    request = dra_v1.NodePrepareResourcesRequest(claims=[claim_ref(claim)])
    fleet = Fleet(settings, driver_identity.kube)
    await fleet.start()
    first = Driver(fleet, short_tmp)
    before = await first.v1().NodePrepareResources(request)
    await first.close()

    fleet = Fleet(settings, driver_identity.kube)  # a new process would do the same: load the checkpoint
    await fleet.start()
    second = Driver(fleet, short_tmp)
    try:
        assert claim["metadata"]["uid"] in second.node.state.prepared_claims
        assert await second.v1().NodePrepareResources(request) == before
    finally:
        await second.close()


async def test_a_device_prepared_for_one_claim_is_refused_to_another_unless_it_is_shareable(
    driver, kube, make_namespace, device_class
):
    """The driver is the last line of defence (upstream's kubeletplugin contract): two claims naming the
    same exclusive device, the second gets a per-claim error and the first stays prepared; unprepare of
    the first frees the device; a device with allowMultipleAllocations serves both."""
    ns = await make_namespace("rd")
    first = await allocated_claim(kube, ns, device_class, driver.node_name, device="gpu-6")
    second = await allocated_claim(kube, ns, device_class, driver.node_name, device="gpu-6")
    uid1, uid2 = first["metadata"]["uid"], second["metadata"]["uid"]
    response = await driver.v1().NodePrepareResources(
        dra_v1.NodePrepareResourcesRequest(claims=[claim_ref(first)]))
    assert response.claims[uid1].error == ""
    response = await driver.v1().NodePrepareResources(
        dra_v1.NodePrepareResourcesRequest(claims=[claim_ref(second), claim_ref(first)]))
    error = response.claims[uid2].error
    name1 = first["metadata"]["name"]
    assert f"device {driver.node_name}/gpu-6 is already prepared for claim {ns}/{name1}" in error
    assert "does not allow multiple allocations" in error
    assert not response.claims[uid2].devices and not cdi_file(driver, uid2).exists()
    assert response.claims[uid1].error == "" and cdi_file(driver, uid1).exists()
    assert set(driver.node.state.prepared_claims) >= {uid1} and uid2 not in driver.node.state.prepared_claims

    await driver.v1().NodeUnprepareResources(dra_v1.NodeUnprepareResourcesRequest(claims=[claim_ref(first)]))
    response = await driver.v1().NodePrepareResources(
        dra_v1.NodePrepareResourcesRequest(claims=[claim_ref(second)]))
    assert response.claims[uid2].error == ""

    # The same node with the consumable profile: every GPU allows multiple allocations.
    (driver.root / "inventory.json").write_text(json.dumps({"gpuCount": 8, "profile": "consumable"}))
    gpu7 = (driver.node_name, "gpu-7")
    await eventually(lambda: asyncio.sleep(0, driver.node.devices()[gpu7].allow_multiple_allocations),
                     10, "the consumable inventory loaded")
    shared = [await allocated_claim(kube, ns, device_class, driver.node_name, device="gpu-7") for _ in "ab"]
    response = await driver.v1().NodePrepareResources(
        dra_v1.NodePrepareResourcesRequest(claims=[claim_ref(c) for c in shared]))
    assert [response.claims[c["metadata"]["uid"]].error for c in shared] == ["", ""]


# -- streams ----------------------------------------------------------------------------------------------


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


# -- fleet mode, as a real process -------------------------------------------------------------------------


async def test_fleet_mode_answers_on_every_nodes_socket(run_service, kube, make_namespace, device_class,
                                                        short_tmp, driver_identity):
    nodes = [f"fl-{i}" for i in range(50)]
    proc = await run_service(
        [ENTRY_POINT, "--nodes", "fl-0..fl-49", "--fleet-root", str(short_tmp), "--http-port", "0",
         "--log-format", "json"],
        env={"OTEL_TRACES_EXPORTER": "none"}, kubeconfig=driver_identity.kubeconfig,
        name="reference-driver-fleet",
    )
    reg_sockets = [short_tmp / n / "plugins_registry" / f"{DRIVER}-reg.sock" for n in nodes]
    for _ in range(200):
        if all(p.exists() for p in reg_sockets):
            break
        await asyncio.sleep(0.1)
    else:
        pytest.fail(f"fleet sockets did not appear; see {proc.log_path}")

    async def info(node: str, path: Path) -> tuple[str, str]:
        async with grpc.aio.insecure_channel(f"unix://{path}") as ch:
            got = await reg_grpc.RegistrationStub(ch).GetInfo(reg_pb.InfoRequest(), timeout=10)
            return node, got.endpoint

    answers = await asyncio.gather(*(info(n, p) for n, p in zip(nodes, reg_sockets, strict=True)))
    assert answers == [(n, str(short_tmp / n / "plugins" / DRIVER / "dra.sock")) for n in nodes]

    ns = await make_namespace("rd")
    claim = await allocated_claim(kube, ns, device_class, "fl-37", device="gpu-7")
    uid = claim["metadata"]["uid"]
    dra_sock = short_tmp / "fl-37" / "plugins" / DRIVER / "dra.sock"
    async with grpc.aio.insecure_channel(f"unix://{dra_sock}") as ch:
        response = await dra_v1_grpc.DRAPluginStub(ch).NodePrepareResources(
            dra_v1.NodePrepareResourcesRequest(claims=[claim_ref(claim)]), timeout=10)
        inventory = await inv_grpc.InventoryStub(ch).ListAndWatchResources(
            inv.ListAndWatchResourcesRequest(node_name="fl-37")).read()
    assert response.claims[uid].error == ""
    assert (short_tmp / "fl-37" / "cdi" / cdi.spec_file_name(DRIVER, "gpu", uid)).exists()
    assert not list((short_tmp / "fl-36" / "cdi").iterdir())
    uuids = {d.attributes["uuid"].string_value for d in inventory.pools[0].devices}
    assert gpu_uuid("fl-37", 0) in uuids and gpu_uuid("fl-36", 0) not in uuids
    await proc.stop()
    assert not any(p.exists() for p in reg_sockets)  # sockets removed on shutdown


async def test_rpc_spans_continue_the_callers_trace(run_service, otlp_receiver, short_tmp, driver_identity):
    proc = await run_service(
        [ENTRY_POINT, "--node-name", "rd-traced", "--registry-dir", str(short_tmp / "reg"),
         "--plugins-dir", str(short_tmp / "pl"), "--cdi-root", str(short_tmp / "cdi"),
         "--state-dir", str(short_tmp / "st"), "--http-port", "0"],
        env={"OTEL_EXPORTER_OTLP_ENDPOINT": f"http://{otlp_receiver.endpoint}",
             "OTEL_BSP_SCHEDULE_DELAY": "100"},
        kubeconfig=driver_identity.kubeconfig, name="reference-driver-traced",
    )
    dra_sock = short_tmp / "pl" / DRIVER / "dra.sock"
    for _ in range(200):
        if (short_tmp / "reg" / f"{DRIVER}-reg.sock").exists():
            break
        await asyncio.sleep(0.1)
    else:
        pytest.fail(f"driver sockets did not appear; see {proc.log_path}")
    trace_id, parent_id = uuid.uuid4().hex, uuid.uuid4().hex[:16]
    metadata = (("traceparent", f"00-{trace_id}-{parent_id}-01"),)
    unknown = dra_v1.Claim(namespace="ns", name="c", uid=str(uuid.uuid4()))
    async with grpc.aio.insecure_channel(f"unix://{dra_sock}") as ch:
        response = await dra_v1_grpc.DRAPluginStub(ch).NodeUnprepareResources(
            dra_v1.NodeUnprepareResourcesRequest(claims=[unknown]), metadata=metadata, timeout=10)
    assert response.claims[unknown.uid].error == ""
    spans = await otlp_receiver.wait_for(lambda spans: [s for s in spans if s.trace_id == trace_id])
    assert [(s.name, s.parent_span_id, s.service_name) for s in spans] == [
        ("/k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin/NodeUnprepareResources", parent_id, "reference-driver")]
