"""Node fit on the real API server: the allocator applies kube-scheduler's NodeResourcesFit (pod count and
resource requests, counting pods other schedulers placed and its own bindings in flight) and refuses
pods that need filters it does not implement; a claim's 256 reservedFor entries count the ones in
flight."""

from __future__ import annotations

import re
from typing import Any

import pytest
from prometheus_client import REGISTRY
from sa_kit import Kit, eventually

from draflow_runtime.kube import PODS, RESOURCE_CLAIMS

pytestmark = pytest.mark.integration


async def _bound(kit: Kit, names: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for name in names:
        pod = await kit.kube.get(PODS, name, kit.namespace)
        if (pod.get("spec") or {}).get("nodeName"):
            out[name] = pod["spec"]["nodeName"]
    return out


async def _scheduled_false(kit: Kit, name: str) -> str:
    pod = await kit.kube.get(PODS, name, kit.namespace)
    for cond in (pod.get("status") or {}).get("conditions") or []:
        if cond["type"] == "PodScheduled" and cond["status"] == "False":
            return str(cond.get("message", ""))
    return ""


async def test_node_pod_capacity_counts_foreign_and_in_flight_pods(kit: Kit) -> None:
    node = await kit.node("n", allocatable={"pods": "3", "cpu": "8", "memory": "8Gi"})
    await kit.slice(node, 10)
    await kit.device_class_()
    await kit.template("one-gpu")
    # A pod another scheduler placed (no claims, bound at creation) takes one of the three slots.
    await kit.kube.create(PODS, {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "foreign"},
                                 "spec": {"nodeName": node, "containers": [
                                     {"name": "c", "image": "registry.k8s.io/pause:3.10"}]}},
                          kit.namespace)
    names = [f"p{i}" for i in range(5)]
    for name in names:  # all queued before the allocator starts: decisions race their own bindings
        await kit.template_pod(name, "one-gpu")
    await kit.start()

    async def settled() -> dict[str, str] | None:
        bound = await _bound(kit, names)
        waiting = [n for n in names if n not in bound and "Too many pods" in await _scheduled_false(kit, n)]
        return bound if len(bound) + len(waiting) == len(names) else None

    bound = await eventually(settled, 60, what="every pod bound or unschedulable with 'Too many pods'")
    assert sorted(bound.values()) == [node, node]  # 3 slots - the foreign pod
    unbound = [n for n in names if n not in bound]
    message = await _scheduled_false(kit, unbound[0])
    assert re.search(r"\b\d+ Too many pods", message), message  # kube-scheduler's wording
    events = await kit.events(unbound[0])
    assert any(e["reason"] == "FailedScheduling" and "Too many pods" in e["message"] for e in events)
    # a pod on the node goes away: a waiting pod takes its slot (no more than that)
    await kit.kube.delete(PODS, "foreign", kit.namespace, grace_period_seconds=0)

    async def third_bound() -> dict[str, str] | None:
        now = await _bound(kit, names)
        return now if len(now) == 3 else None

    await eventually(third_bound, 60, what="a waiting pod bound after a slot was freed")
    last = [n for n in names if n not in await _bound(kit, names)]
    assert len(last) == 2
    assert "Too many pods" in await _scheduled_false(kit, last[0])


async def test_cpu_and_memory_requests_must_fit_the_node(kit: Kit) -> None:
    node = await kit.node("n", allocatable={"pods": "10", "cpu": "2", "memory": "1Gi"})
    await kit.slice(node, 4)
    await kit.device_class_()
    await kit.template("one-gpu")
    await kit.start()
    await kit.template_pod("big", "one-gpu", requests={"cpu": "1500m"})
    assert await kit.wait_bound("big") == node
    await kit.template_pod("second", "one-gpu", requests={"cpu": "600m"})
    message = await kit.wait_condition("second", "Insufficient cpu")
    assert re.search(r"\b\d+ Insufficient cpu", message), message
    await kit.template_pod("mem", "one-gpu", requests={"cpu": "100m", "memory": "2Gi"})
    message = await kit.wait_condition("mem", "Insufficient memory")
    assert "Insufficient cpu" not in message
    await kit.template_pod("small", "one-gpu", requests={"cpu": "500m", "memory": "512Mi"})
    assert await kit.wait_bound("small") == node  # exactly what is left
    assert not (await kit.kube.get(PODS, "second", kit.namespace))["spec"].get("nodeName")


async def test_pod_needing_inter_pod_anti_affinity_gets_a_condition_not_a_bind(kit: Kit) -> None:
    node = await kit.node("n")
    await kit.slice(node, 2)
    await kit.device_class_()
    await kit.template("one-gpu")
    await kit.start()
    term = {"topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchLabels": {"app": "x"}}}
    anti: dict[str, Any] = {"affinity": {"podAntiAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [term]}}}
    await kit.template_pod("anti", "one-gpu", spec=anti)
    message = await kit.wait_condition("anti", "does not support")
    assert "inter-pod anti-affinity" in message
    await kit.template_pod("plain", "one-gpu")
    assert await kit.wait_bound("plain") == node
    assert not (await kit.kube.get(PODS, "anti", kit.namespace))["spec"].get("nodeName")


def _failed_pipelines() -> float:
    return REGISTRY.get_sample_value("draflow_allocator_placements_total", {"result": "failed"}) or 0.0


async def test_claim_shared_by_300_pods_reserves_256_without_rejected_writes(kit: Kit) -> None:
    """reservedFor holds at most 256 consumers; reservations in flight count, so pods beyond the limit
    wait with a reason instead of being written, rejected by the API server and undone."""
    node = await kit.node("n", allocatable={"pods": "400", "cpu": "64", "memory": "64Gi"})
    await kit.slice(node, 1)
    await kit.device_class_()
    await kit.claim("shared")
    names = [f"p{i:03d}" for i in range(300)]
    for name in names:
        await kit.pod(name, {"gpu": {"resourceClaimName": "shared"}})
    failed_before = _failed_pipelines()
    await kit.start()

    async def settled() -> tuple[int, int] | None:
        pods = (await kit.kube.list(PODS, kit.namespace))["items"]
        bound = sum(1 for p in pods if p["spec"].get("nodeName"))
        waiting = sum(1 for p in pods if not p["spec"].get("nodeName") and any(
            c["type"] == "PodScheduled" and c["status"] == "False" and "reserved for 256" in c["message"]
            for c in (p.get("status") or {}).get("conditions") or []))
        return (bound, waiting) if bound + waiting == len(names) else None

    assert await eventually(settled, 240, interval=1.0, what="256 bound, 44 waiting") == (256, 44)
    claim = await kit.kube.get(RESOURCE_CLAIMS, "shared", kit.namespace)
    assert len(claim["status"]["reservedFor"]) == 256
    assert _failed_pipelines() == failed_before  # no write was rejected and undone


async def test_pod_with_scheduling_gates_waits_until_they_are_removed(kit: Kit) -> None:
    node = await kit.node("n")
    await kit.slice(node, 2)
    await kit.device_class_()
    await kit.template("one-gpu")
    await kit.template_pod("gated", "one-gpu", spec={"schedulingGates": [{"name": "example.com/quota"}]})
    await kit.template_pod("plain", "one-gpu")
    failed_before = _failed_pipelines()
    await kit.start()  # both queued at start, the gated one first
    assert await kit.wait_bound("plain") == node
    assert not (await kit.kube.get(PODS, "gated", kit.namespace))["spec"].get("nodeName")
    # not even tried: no allocation written, no binding the API server refuses, nothing undone
    assert not ((await kit.claim_of("gated")).get("status") or {}).get("allocation")
    assert _failed_pipelines() == failed_before
    await kit.kube.patch(PODS, "gated", {"spec": {"schedulingGates": None}}, kit.namespace)
    assert await kit.wait_bound("gated") == node
