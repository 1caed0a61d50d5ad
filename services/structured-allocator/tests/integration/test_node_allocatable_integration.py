"""DRANodeAllocatableResources against the real kube-apiserver: devices that stand for node cpu count
towards node fit (the pod's own share and that of pods already on the node, read from their
``status.nodeAllocatableResourceClaimStatuses``), and the allocator writes that status before binding,
as kube-scheduler v1.37.1's DynamicResources plugin does."""

from __future__ import annotations

from typing import Any

import pytest
from sa_kit import Kit

from draflow_runtime.errors import Forbidden
from draflow_runtime.kube import NODES, PODS, RESOURCE_CLAIMS, RESOURCE_SLICES
from draflow_testenv.featuregates import WANTED_GATES
from draflow_testenv.wait import eventually

pytestmark = pytest.mark.integration


async def cpu_slice(kit: Kit, node: str, devices: int) -> None:
    """``devices`` CCX devices on ``node``, each standing for 8 node cpus. The API server's
    NodeDeclaredFeatures admission takes such a slice only for a node declaring the feature (as
    kubelet-dra-shim's simulated nodes do with the gate on)."""
    await kit.kube.patch(NODES, node, {"status": {"declaredFeatures": ["DRANodeAllocatableResources"]}},
                         subresource="status")
    name = f"{node}-ccx"
    body = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": name},
            "spec": {"driver": kit.driver, "nodeName": node,
                     "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                     "devices": [{"name": f"ccx-{i}", "nodeAllocatableResources": {
                         "cpu": {"mapping": {"deviceMultiplier": "8"}},
                         "memory": {"overhead": {"perPod": "1Gi"}}}} for i in range(devices)]}}

    async def created() -> bool:  # the admission reads nodes from its informer: it may lag the patch
        try:
            await kit.kube.create(RESOURCE_SLICES, body)
        except Forbidden as exc:
            raise AssertionError(str(exc)) from exc
        return True

    await eventually(created, 10, what=f"ResourceSlice {name} admitted")
    kit.cluster_objects.append((RESOURCE_SLICES, name))


async def ccx_pod(kit: Kit, name: str, cpu: str, **spec: Any) -> None:
    await kit.kube.create(RESOURCE_CLAIMS, {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": name},
        "spec": {"devices": {"requests": [
            {"name": "ccx", "exactly": {"deviceClassName": kit.device_class}}]}}}, kit.namespace)
    await kit.pod(name, {"ccx": {"resourceClaimName": name}}, requests={"cpu": cpu}, **spec)


async def status_of(kit: Kit, name: str) -> list[dict[str, Any]]:
    pod = await kit.get(PODS, name) or {}
    return list((pod.get("status") or {}).get("nodeAllocatableResourceClaimStatuses") or [])


async def test_a_devices_cpu_share_counts_for_the_pod_and_stays_counted_once_it_is_bound(kit: Kit) -> None:
    assert "DRANodeAllocatableResources" in WANTED_GATES
    small = await kit.node("small")  # 64 cpu
    await cpu_slice(kit, small, 2)
    await kit.device_class_()
    await kit.start()
    await ccx_pod(kit, "first", "60")  # 60 + 8 from the device > 64
    message = await kit.wait_condition("first", "Insufficient cpu")
    assert "Insufficient cpu" in message

    big = await kit.node("big", allocatable={"pods": "110", "cpu": "100", "memory": "256Gi"},
                         labels={"size": "big"})
    await cpu_slice(kit, big, 2)
    assert await kit.wait_bound("first") == big
    assert await status_of(kit, "first") == [{
        "resourceClaimName": "first", "containers": ["main"],
        "mapping": [{"name": "cpu", "quantity": "8"}],
        "overhead": [{"name": "memory", "perPod": "1Gi"}]}]

    # 68 of big's 100 cpus are taken by the bound pod (its status says so); 30 + 8 does not fit, 24 + 8 does.
    await ccx_pod(kit, "second", "30", nodeSelector={"size": "big"})
    await kit.wait_condition("second", "Insufficient cpu")
    await ccx_pod(kit, "third", "24", nodeSelector={"size": "big"})
    assert await kit.wait_bound("third") == big
