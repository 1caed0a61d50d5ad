"""The driver as a real process: fleet mode (one socket set per node) and trace propagation.

Clients are the stubs generated from our protos, i.e. what a kubelet (or kubelet-dra-shim) sends. Every test
with a driver runs twice (``driver_identity``): as the admin and with only the driver's deploy/kustomize RBAC.
"""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import grpc
import pytest
from rd_harness import DRIVER, ENTRY_POINT, allocated_claim, claim_ref

from draflow_protos.dra.v1 import api_pb2 as dra_v1
from draflow_protos.dra.v1 import api_pb2_grpc as dra_v1_grpc
from draflow_protos.inventory.v1 import inventory_pb2 as inv
from draflow_protos.inventory.v1 import inventory_pb2_grpc as inv_grpc
from draflow_protos.pluginregistration.v1 import api_pb2 as reg_pb
from draflow_protos.pluginregistration.v1 import api_pb2_grpc as reg_grpc
from draflow_runtime.kube import RESOURCE_CLAIMS
from draflow_runtime.passedclaims import claims_metadata
from draflow_testenv.wait import eventually
from reference_driver import cdi
from reference_driver.inventory import gpu_uuid

pytestmark = pytest.mark.integration


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
    await eventually(lambda: all(p.exists() for p in reg_sockets), 20,
                     f"the fleet's sockets; see {proc.log_path}", interval=0.1)

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
    await eventually((short_tmp / "reg" / f"{DRIVER}-reg.sock").exists, 20,
                     f"the driver's sockets; see {proc.log_path}", interval=0.1)
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


async def test_a_prepare_answered_from_a_passed_claim_survives_a_kill_right_after(
        run_service, kube, make_namespace, device_class, short_tmp, driver_identity):
    """Crash safety of the fast path: the checkpoint is on disk before the answer, so a driver killed
    (SIGKILL) right after answering still knows the device is taken when it comes back."""
    argv = [ENTRY_POINT, "--nodes", "cs-0", "--fleet-root", str(short_tmp), "--http-port", "0",
            "--log-format", "json"]
    dra_sock = short_tmp / "cs-0" / "plugins" / DRIVER / "dra.sock"
    ns = await make_namespace("rd")
    first = await allocated_claim(kube, ns, device_class, "cs-0", device="gpu-5")
    second = await allocated_claim(kube, ns, device_class, "cs-0", device="gpu-5")  # a double allocation
    await kube.delete(RESOURCE_CLAIMS, first["metadata"]["name"], namespace=ns)  # only the passed copy left

    async def prepare(claim: dict, passed: bool) -> str:
        await eventually(lambda: dra_sock.exists(), 20, "the driver's socket", interval=0.1)
        async with grpc.aio.insecure_channel(f"unix://{dra_sock}") as ch:
            response = await dra_v1_grpc.DRAPluginStub(ch).NodePrepareResources(
                dra_v1.NodePrepareResourcesRequest(claims=[claim_ref(claim)]), timeout=30,
                wait_for_ready=True,  # the killed driver's socket file stays until the new one binds
                metadata=claims_metadata([claim]) if passed else ())
        return response.claims[claim["metadata"]["uid"]].error

    proc = await run_service(argv, env={"OTEL_TRACES_EXPORTER": "none"},
                             kubeconfig=driver_identity.kubeconfig, name="reference-driver-crash")
    assert await prepare(first, passed=True) == ""
    await proc.kill()  # no shutdown: what was acknowledged must already be on disk

    await run_service(argv, env={"OTEL_TRACES_EXPORTER": "none"},
                      kubeconfig=driver_identity.kubeconfig, name="reference-driver-crash-again")
    error = await prepare(second, passed=False)
    assert f"is already prepared for claim {ns}/{first['metadata']['name']}" in error, error
    assert await prepare(first, passed=True) == ""  # idempotent: the recorded devices
