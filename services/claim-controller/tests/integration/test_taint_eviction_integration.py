"""Device-taint eviction and DeviceTaintRule status against the real kube-apiserver.

There is no scheduler or kubelet here: the test writes what the allocator would (finalizer, allocation
with the request's tolerations, reservedFor, the pod binding) and finishes a terminating pod as a kubelet
would (DELETE with grace period 0).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import pytest
from cc_kit import DRIVER, Kit, consumer, eventually, node_selector, plain_claim, pod
from prometheus_client import REGISTRY

from draflow_runtime.dra import DELETE_PROTECTION_FINALIZER
from draflow_runtime.errors import NotFound
from draflow_runtime.kube import DEVICE_TAINT_RULES, PODS, RESOURCE_CLAIMS, RESOURCE_SLICES

pytestmark = pytest.mark.integration

TAINT = {"key": "draflow.dev/broken", "value": "true", "effect": "NoExecute"}


def tolerate(seconds: int | None = None) -> list[dict[str, Any]]:
    toleration: dict[str, Any] = {"key": TAINT["key"], "operator": "Exists", "effect": "NoExecute"}
    if seconds is not None:
        toleration["tolerationSeconds"] = seconds
    return [toleration]


async def running_on(kit: Kit, name: str, node: str, device: str,
                     tolerations: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """Claim ``name`` allocated (``device`` of pool ``node``, with ``tolerations``) and reserved for pod
    ``name``, which is bound to ``node``: what the allocator leaves behind."""
    claim = plain_claim(name)
    if tolerations:
        claim["spec"]["devices"]["requests"][0]["exactly"]["tolerations"] = tolerations
    await kit.create(RESOURCE_CLAIMS, claim)
    p = await kit.create(PODS, pod(name, {"gpu": {"resourceClaimName": name}}))
    await kit.kube.patch(RESOURCE_CLAIMS, name, {"metadata": {"finalizers": [DELETE_PROTECTION_FINALIZER]}},
                         kit.namespace)
    result: dict[str, Any] = {"request": "gpu", "driver": DRIVER, "pool": node, "device": device}
    if tolerations:
        result["tolerations"] = tolerations
    await kit.kube.patch(RESOURCE_CLAIMS, name, {"status": {
        "allocation": {"devices": {"results": [result]}, "nodeSelector": node_selector(node)},
        "reservedFor": [consumer(p)],
    }}, kit.namespace, subresource="status")
    await kit.kube.request("POST", f"/api/v1/namespaces/{kit.namespace}/pods/{name}/binding", body={
        "apiVersion": "v1", "kind": "Binding", "metadata": {"name": name},
        "target": {"apiVersion": "v1", "kind": "Node", "name": node},
    })
    return p


@contextlib.asynccontextmanager
async def cluster_object(kit: Kit, res: Any, body: dict[str, Any]) -> AsyncIterator[dict[str, Any]]:
    created = await kit.kube.create(res, body)
    try:
        yield created
    finally:
        with contextlib.suppress(NotFound):
            await kit.kube.delete(res, body["metadata"]["name"])


async def terminating(kit: Kit, name: str) -> dict[str, Any] | None:
    current = await kit.get(PODS, name)
    return current if current is not None and current["metadata"].get("deletionTimestamp") else None


def allocated(claim: dict[str, Any] | None) -> bool:
    return claim is not None and (claim.get("status") or {}).get("allocation") is not None


async def eviction_events(kit: Kit, name: str) -> list[str]:
    return [e["message"] for e in await kit.pod_events(name) if e["reason"] == "DeviceTaintManagerEviction"]


async def test_no_execute_rule_evicts_untolerating_pod_reports_status_and_claim_is_released(kit: Kit) -> None:
    node = f"node-{kit.namespace}"  # a pool of this test only: the rule selects nothing else
    await kit.start_controller(rule_status_period=1.0)
    victim = await running_on(kit, "victim", node, "gpu-0")
    await running_on(kit, "tolerant", node, "gpu-1", tolerate())
    await running_on(kit, "patient", node, "gpu-2", tolerate(3600))

    evicted_before = REGISTRY.get_sample_value("draflow_claim_controller_pods_evicted_total") or 0.0
    rule_body = {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceTaintRule",
                 "metadata": {"name": f"broken-{kit.namespace}"},
                 "spec": {"deviceSelector": {"driver": DRIVER, "pool": node}, "taint": TAINT}}
    async with cluster_object(kit, DEVICE_TAINT_RULES, rule_body) as rule:
        evicted = await eventually(lambda: terminating(kit, "victim"), what="untolerating pod deleted")
        conditions = {c["type"]: c for c in evicted["status"].get("conditions") or ()}
        assert conditions["DisruptionTarget"]["status"] == "True"
        assert conditions["DisruptionTarget"]["reason"] == "DeletionByDeviceTaintManager"
        event = await kit.wait_event("victim", "DeviceTaintManagerEviction")
        assert event["type"] == "Normal" and event["message"] == "Marking for deletion"
        assert event["involvedObject"]["uid"] == victim["metadata"]["uid"]
        assert allocated(await kit.get(RESOURCE_CLAIMS, "victim")), "still runs until the kubelet stops it"
        assert REGISTRY.get_sample_value("draflow_claim_controller_pods_evicted_total") == evicted_before + 1

        await kit.kube.delete(PODS, "victim", kit.namespace, grace_period_seconds=0)  # the kubelet is done

        async def victim_claim_released() -> bool:
            claim = await kit.get(RESOURCE_CLAIMS, "victim")
            return claim is not None and not allocated(claim) and not claim["status"].get("reservedFor")
        await eventually(victim_claim_released, what="claim of the evicted pod deallocated")

        async def rule_condition() -> dict[str, Any] | None:
            current = await kit.kube.get(DEVICE_TAINT_RULES, rule["metadata"]["name"])
            for c in (current.get("status") or {}).get("conditions") or ():
                if c["type"] == "EvictionInProgress" and "evicted since" in c["message"]:
                    return dict(c)
            return None
        condition = await eventually(rule_condition, what="rule status counts the evicted pod")
        assert condition["status"] == "True" and condition["reason"] == "PodsPendingEviction"
        assert condition["message"] == ("1 pod needs to be evicted in 1 namespace. "
                                        "1 pod evicted since starting the controller.")
        assert condition["observedGeneration"] == rule["metadata"]["generation"]

        for name in ("tolerant", "patient"):  # tolerated forever, and for an hour
            assert await terminating(kit, name) is None and await kit.get(PODS, name) is not None
            assert await eviction_events(kit, name) == []
            assert allocated(await kit.get(RESOURCE_CLAIMS, name))


async def test_slice_taint_evicts_after_toleration_seconds_and_removal_cancels(kit: Kit) -> None:
    node = f"node-{kit.namespace}"
    await kit.start_controller()
    await running_on(kit, "short", node, "gpu-0", tolerate(1))
    await running_on(kit, "long", node, "gpu-1", tolerate(3600))
    tainted = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
               "metadata": {"name": f"slice-{kit.namespace}"},
               "spec": {"driver": DRIVER, "nodeName": node,
                        "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                        "devices": [{"name": f"gpu-{i}", "taints": [TAINT]} for i in range(2)]}}
    async with cluster_object(kit, RESOURCE_SLICES, tainted) as published:
        await eventually(lambda: terminating(kit, "short"), what="pod evicted once tolerationSeconds passed")
        assert await eviction_events(kit, "short") == ["Marking for deletion"]
        assert await terminating(kit, "long") is None

        untainted = {**published, "spec": {**published["spec"], "devices": [
            {"name": f"gpu-{i}"} for i in range(2)]}}
        await kit.kube.replace(RESOURCE_SLICES, untainted)

        async def cancelled() -> bool:
            return "Cancelling deletion" in await eviction_events(kit, "long")
        await eventually(cancelled, what="pending eviction cancelled when the taint went away")
        assert await terminating(kit, "long") is None


async def test_rules_without_no_execute_evict_nothing_and_say_what_they_would_do(kit: Kit) -> None:
    node = f"node-{kit.namespace}"
    controller = await kit.start_controller()
    assert controller.eviction is not None
    await running_on(kit, "user", node, "gpu-0")
    plain = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
             "metadata": {"name": f"slice-{kit.namespace}"},
             "spec": {"driver": DRIVER, "nodeName": node,
                      "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                      "devices": [{"name": f"gpu-{i}"} for i in range(2)]}}

    def rule_body(name: str, effect: str) -> dict[str, Any]:
        return {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceTaintRule",
                "metadata": {"name": f"{name}-{kit.namespace}"},
                "spec": {"deviceSelector": {"driver": DRIVER, "pool": node},
                         "taint": {**TAINT, "effect": effect}}}

    async def condition_of(name: str) -> dict[str, Any] | None:
        current = await kit.kube.get(DEVICE_TAINT_RULES, name)
        return next((dict(c) for c in (current.get("status") or {}).get("conditions") or ()
                     if c["type"] == "EvictionInProgress"), None)

    async with cluster_object(kit, RESOURCE_SLICES, plain):
        async def caches_current() -> bool:  # the None rule's report is computed once per spec change
            claim = controller.claims.get(f"{kit.namespace}/user") or {}
            bound = controller.pods.get(f"{kit.namespace}/user") or {}
            return (controller.eviction is not None
                    and controller.eviction.slices.get(plain["metadata"]["name"]) is not None
                    and bool(bound.get("spec", {}).get("nodeName"))
                    and bool((claim.get("status") or {}).get("reservedFor")))
        await eventually(caches_current, what="controller caches have the slice, the bound pod and its claim")
        async with cluster_object(kit, DEVICE_TAINT_RULES, rule_body("dry-run", "None")) as dry, \
                cluster_object(kit, DEVICE_TAINT_RULES, rule_body("no-schedule", "NoSchedule")) as nosched:
            dry_condition = await eventually(lambda: condition_of(dry["metadata"]["name"]),
                                             what="effect None rule reports")
            assert (dry_condition["status"], dry_condition["reason"]) == ("False", "NoEffect")
            assert dry_condition["message"] == (
                "2 published devices selected. 1 allocated device selected. 1 pod would be evicted in "
                "1 namespace if the effect was NoExecute. This information will not be updated again. "
                "Recreate the DeviceTaintRule to trigger an update.")
            other = await eventually(lambda: condition_of(nosched["metadata"]["name"]),
                                     what="effect NoSchedule rule reports")
            assert (other["status"], other["reason"], other["message"]) == (
                "False", "OtherEffect", "Eviction only happens for the NoExecute effect.")
            assert await terminating(kit, "user") is None
            assert await eviction_events(kit, "user") == []


def eviction_adds() -> float:
    return REGISTRY.get_sample_value("draflow_workqueue_adds_total", {"name": "device-taint-eviction"}) or 0.0


async def test_without_no_execute_taints_pod_and_claim_changes_queue_no_eviction_work(kit: Kit) -> None:
    """No slice has a NoExecute taint and no rule that effect: bound pods and their claims change without
    an eviction reconcile (before: about two per placed pod, each finding nothing); the first taint still
    evicts, its slice's event queues the pods it concerns."""
    node = f"node-{kit.namespace}"
    controller = await kit.start_controller()
    before = eviction_adds()
    await running_on(kit, "quiet", node, "gpu-0")
    await kit.set_phase("quiet", "Running")

    def caches_current() -> bool:
        claim = controller.claims.get(f"{kit.namespace}/quiet") or {}
        bound = controller.pods.get(f"{kit.namespace}/quiet") or {}
        return ((bound.get("status") or {}).get("phase") == "Running"
                and bool((claim.get("status") or {}).get("reservedFor")))

    await eventually(caches_current, what="the controller's caches have the bound pod and its claim")
    assert eviction_adds() == before
    tainted = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
               "metadata": {"name": f"slice-{kit.namespace}"},
               "spec": {"driver": DRIVER, "nodeName": node,
                        "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                        "devices": [{"name": "gpu-0", "taints": [TAINT]}]}}
    async with cluster_object(kit, RESOURCE_SLICES, tainted):
        await eventually(lambda: terminating(kit, "quiet"), what="the pod evicted once its device is tainted")
