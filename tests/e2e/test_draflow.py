"""draflow installed on the real two-node cluster by ``kubectl apply -k`` of its overlay, with the image built
here: the reference driver registers with each node's real kubelet, slice-publisher publishes its slices, a
pod with a template claim is given a device by draflow, prepared by its node's real kubelet calling the
driver, and its real container sees the CDI-injected environment; deleting the pod unprepares (the CDI spec
goes)."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import grpc
import pytest

from draflow_protos.pluginregistration.v1 import api_pb2 as reg_pb
from draflow_protos.pluginregistration.v1 import api_pb2_grpc as reg_grpc
from draflow_testenv import images, klog
from draflow_testenv.cluster import ClusterEnvironment, kubelet_log_lines
from draflow_testenv.node import NodeLayout
from draflow_testenv.wait import eventually

pytestmark = pytest.mark.e2e
DRIVER = "gpu.draflow.example"


async def _get(cluster: ClusterEnvironment, path: str) -> Any:
    return await cluster.admin.request("GET", path)


WORKLOADS = {"claim-controller", "structured-allocator", "slice-publisher", "reference-driver"}


def _ready(pod: dict[str, Any]) -> bool:
    conditions = pod.get("status", {}).get("conditions", [])
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


async def _pods_ready(cluster: ClusterEnvironment) -> bool:
    """Each of the four workloads has a Ready pod (pods are labelled with their service's name)."""
    pods = [p for ns in ("draflow-system", "draflow-node")  # controllers, node agents
            for p in (await _get(cluster, f"/api/v1/namespaces/{ns}/pods"))["items"]]
    ready = {p["metadata"].get("labels", {}).get("app.kubernetes.io/name") for p in pods if _ready(p)}
    return ready >= WORKLOADS


async def _claim_pod(cluster: ClusterEnvironment, ns: str, name: str, node: str | None = None) -> None:
    """A ResourceClaimTemplate for one device of the driver's class (once per namespace) and a pod using
    it, scheduled by draflow (on ``node`` if given), printing its DRAFLOW_GPU_* environment and sleeping."""
    await cluster.admin.ensure_namespace(ns)
    await cluster.admin.ensure(f"/apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaimtemplates", {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate", "metadata": {"name": "one-gpu"},
        "spec": {"spec": {"devices": {"requests": [
            {"name": "gpu", "exactly": {"deviceClassName": DRIVER}}]}}},
    })
    await cluster.admin.request("POST", f"/api/v1/namespaces/{ns}/pods", {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
        "spec": {
            "schedulerName": "draflow", "automountServiceAccountToken": False,
            **({"nodeSelector": {"kubernetes.io/hostname": node}} if node else {}),
            "terminationGracePeriodSeconds": 1,
            "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}],
            "containers": [{"name": "main", "image": images.WORKLOAD_IMAGE, "imagePullPolicy": "Never",
                            "command": ["/bin/sh", "-c", "env | sort | grep '^DRAFLOW_GPU'; exec sleep 3600"],
                            "resources": {"claims": [{"name": "gpu"}]}}],
        },
    })


async def _running(cluster: ClusterEnvironment, ns: str, name: str) -> dict[str, Any]:
    async def running() -> dict[str, Any] | None:
        pod = await _get(cluster, f"/api/v1/namespaces/{ns}/pods/{name}")
        return pod if pod.get("status", {}).get("phase") == "Running" else None

    pod: dict[str, Any] = await eventually(running, timeout=180, interval=1.0,
                                           what=f"pod {ns}/{name} Running")
    return pod


async def _claim_uid(cluster: ClusterEnvironment, ns: str, pod: dict[str, Any]) -> str:
    name = pod["status"]["resourceClaimStatuses"][0]["resourceClaimName"]
    claim = await _get(cluster, f"/apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaims/{name}")
    return str(claim["metadata"]["uid"])


async def _log_count(cluster: ClusterEnvironment, node: NodeLayout, *needles: str) -> int:
    return len(await asyncio.to_thread(kubelet_log_lines, cluster, list(needles), node))


async def test_driver_registers_with_the_real_kubelet_and_its_slices_appear(
        cluster: ClusterEnvironment, installed: list[dict[str, Any]]) -> None:
    await eventually(lambda: _pods_ready(cluster), timeout=240, interval=1.0,
                     what="the four draflow workloads Ready on the real node")

    async def slices() -> list[dict[str, Any]]:
        items = (await _get(cluster, "/apis/resource.k8s.io/v1/resourceslices"))["items"]
        return [s for s in items
                if s["spec"]["driver"] == DRIVER and s["spec"].get("nodeName") == cluster.node.name]

    found = await eventually(slices, timeout=120, interval=1.0, what="the driver's ResourceSlices")
    assert sum(len(s["spec"].get("devices", [])) for s in found) > 0

    # What the driver advertises, asked the way the kubelet asks it (GetInfo on its registration socket)...
    socket = cluster.node.plugins_registry / f"{DRIVER}-reg.sock"
    async with grpc.aio.insecure_channel(f"unix://{socket}") as channel:
        info = await reg_grpc.RegistrationStub(channel).GetInfo(reg_pb.InfoRequest(), timeout=10)
    assert (info.type, info.name, info.supported_versions[0]) == ("DRAPlugin", DRIVER, "v1.DRAPlugin")

    # ...and the real kubelet's own log: our driver registered at the endpoint it advertises, with the
    # first service version it advertises (kubelet v1.37.1 picks the first one it supports).
    async def registered() -> list[klog.Record]:
        return await asyncio.to_thread(klog.records, cluster.kubelet_log(), "Registered DRA plugin",
                                       driverName=DRIVER)

    record = (await eventually(registered, timeout=60, interval=0.5, what="the kubelet's registration"))[-1]
    assert record.values["endpoint"] == info.endpoint
    assert record.values["chosenService"] == info.supported_versions[0]


def _rpc_results(cluster: ClusterEnvironment, call: str, uid: str,
                 layout: NodeLayout | None = None) -> list[dict[str, str]]:
    """A kubelet's (the first node's by default) "Done calling <call> rpc" records (V4, dra_plugin.go)
    whose response names ``uid``."""
    found = klog.records(cluster.kubelet_log(layout), f"Done calling {call} rpc", driverName=DRIVER)
    return [r.values for r in found if f'key:"{uid}"' in r.values.get("response", "")]


async def test_a_template_claim_pod_runs_with_the_cdi_injected_device(
        cluster: ClusterEnvironment, installed: list[dict[str, Any]]) -> None:
    await eventually(lambda: _pods_ready(cluster), timeout=240, interval=1.0, what="draflow Ready")
    ns = f"e2e-dra-{uuid.uuid4().hex[:6]}"
    await _claim_pod(cluster, ns, "gpu-user")

    pod = await _running(cluster, ns, "gpu-user")
    node = cluster.layout(pod["spec"]["nodeName"])  # whichever of the nodes draflow chose

    async def device_env() -> str | None:
        text = await cluster.pod_log(ns, "gpu-user")
        return text if "DRAFLOW_GPU_" in text else None

    text = await eventually(device_env, timeout=60, interval=0.5, what="DRAFLOW_GPU_* in the container log")
    claim_name = pod["status"]["resourceClaimStatuses"][0]["resourceClaimName"]
    assert f"_CLAIM={ns}/{claim_name}" in text
    claim = await _get(cluster, f"/apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaims/{claim_name}")
    uid = claim["metadata"]["uid"]
    specs = [p for p in node.cdi_dir.iterdir() if uid in p.name]
    assert specs, "no CDI spec for the prepared claim"

    await cluster.admin.request("DELETE", f"/api/v1/namespaces/{ns}/pods/gpu-user")

    async def unprepared() -> bool:
        return not any(uid in p.name for p in node.cdi_dir.iterdir())

    await eventually(unprepared, timeout=120, interval=0.5, what="the CDI spec removed after the pod went")

    # The node's real kubelet called our driver once each way and both calls succeeded: no gRPC error and
    # no per-claim error in the response (its own log, V4 for dra_plugin.go); the prepare response carries
    # the claim's device and the CDI device ID the container got.
    [prepared] = await asyncio.to_thread(_rpc_results, cluster, "NodePrepareResources", uid, node)
    [unprepared_] = await asyncio.to_thread(_rpc_results, cluster, "NodeUnprepareResources", uid, node)
    for result in (prepared, unprepared_):
        assert result["err"] == "null" and "error:" not in result["response"], result
    assert f'cdi_device_ids:"{DRIVER}/gpu={uid}-' in prepared["response"], prepared


async def test_kubelet_restart_does_not_prepare_again_and_driver_restart_registers_again(
        cluster: ClusterEnvironment, installed: list[dict[str, Any]]) -> None:
    await eventually(lambda: _pods_ready(cluster), timeout=240, interval=1.0, what="draflow Ready")
    ns = f"e2e-restart-{uuid.uuid4().hex[:6]}"
    await _claim_pod(cluster, ns, "before")
    before = await _running(cluster, ns, "before")
    node = cluster.layout(before["spec"]["nodeName"])
    uid = await _claim_uid(cluster, ns, before)
    prepared = ("Done calling NodePrepareResources rpc", uid)
    assert await _log_count(cluster, node, *prepared) == 1

    await cluster.restart_kubelet(node)
    # A pod created on the node after the restart running proves its new kubelet has long synced the older.
    await _claim_pod(cluster, ns, "after", node=node.name)
    await _running(cluster, ns, "after")
    pod = await _get(cluster, f"/api/v1/namespaces/{ns}/pods/before")
    assert pod["status"]["phase"] == "Running"
    assert pod["status"]["containerStatuses"][0]["restartCount"] == 0
    # the checkpointed claim was not prepared a second time
    assert await _log_count(cluster, node, *prepared) == 1

    registered = ("Registered DRA plugin", f'driverName="{DRIVER}"')
    registrations = await _log_count(cluster, node, *registered)
    drivers = (await cluster.admin.request("GET", "/api/v1/namespaces/draflow-node/pods", params={
        "labelSelector": "app.kubernetes.io/name=reference-driver"}))["items"]
    for d in drivers:
        name = d["metadata"]["name"]
        await cluster.admin.request("DELETE", f"/api/v1/namespaces/draflow-node/pods/{name}")

    async def registered_again() -> bool:
        return await _log_count(cluster, node, *registered) > registrations

    await eventually(registered_again, timeout=180, interval=1.0,
                     what="the restarted driver registered again")
    for name in ("before", "after"):
        await cluster.admin.request("DELETE", f"/api/v1/namespaces/{ns}/pods/{name}")

    async def unprepared() -> bool:
        return not any(uid in p.name for p in node.cdi_dir.iterdir())

    await eventually(unprepared, timeout=120, interval=0.5,
                     what="the first claim unprepared by the new driver")


async def test_two_real_nodes_each_run_the_driver_and_a_claim_pod(
        cluster: ClusterEnvironment, installed: list[dict[str, Any]]) -> None:
    env = cluster
    assert len(env.node_layouts) == 2
    names = {n.name for n in env.node_layouts}
    await eventually(lambda: _pods_ready(env), timeout=240, interval=1.0, what="draflow Ready")

    async def agents_on_each_node() -> bool:
        pods = (await _get(env, "/api/v1/namespaces/draflow-node/pods"))["items"]
        for agent in ("reference-driver", "slice-publisher"):
            on = {p["spec"].get("nodeName") for p in pods if _ready(p)
                  and p["metadata"].get("labels", {}).get("app.kubernetes.io/name") == agent}
            if on != names:
                return False
        return True

    await eventually(agents_on_each_node, timeout=240, interval=1.0,
                     what="a Ready reference-driver and slice-publisher pod on each node")

    # Each node's own kubelet registered the driver at that node's endpoint.
    for layout in env.node_layouts:
        async def registered(layout: NodeLayout = layout) -> list[klog.Record]:
            return await asyncio.to_thread(klog.records, env.kubelet_log(layout), "Registered DRA plugin",
                                           driverName=DRIVER)

        [record, *_] = await eventually(registered, timeout=60, interval=0.5,
                                        what=f"the driver registered with {layout.name}'s kubelet")
        assert record.values["endpoint"] == str(layout.plugins_dir / DRIVER / "dra.sock")

    async def slices_of_both() -> set[str] | None:
        items = (await _get(env, "/apis/resource.k8s.io/v1/resourceslices"))["items"]
        nodes = {s["spec"].get("nodeName") for s in items if s["spec"]["driver"] == DRIVER}
        return nodes if nodes >= names else None

    await eventually(slices_of_both, timeout=120, interval=1.0, what="ResourceSlices of both nodes")

    # A claim pod on each node: prepared by that node's kubelet, CDI spec in that node's directory only.
    ns = f"e2e-two-{uuid.uuid4().hex[:6]}"
    for layout in env.node_layouts:
        await _claim_pod(env, ns, f"on-{layout.name}", node=layout.name)
    for layout in env.node_layouts:
        pod = await _running(env, ns, f"on-{layout.name}")
        assert pod["spec"]["nodeName"] == layout.name
        uid = await _claim_uid(env, ns, pod)

        async def device_env(pod_name: str = f"on-{layout.name}") -> str | None:
            text = await env.pod_log(ns, pod_name)
            return text if "DRAFLOW_GPU_" in text else None

        await eventually(device_env, timeout=60, interval=0.5, what=f"the CDI-injected env on {layout.name}")
        for other in env.node_layouts:
            has_spec = any(uid in p.name for p in other.cdi_dir.iterdir())
            prepared = await asyncio.to_thread(_rpc_results, env, "NodePrepareResources", uid, other)
            mine = other is layout
            assert (has_spec, len(prepared)) == (mine, 1 if mine else 0), (other.name, prepared)
