"""kube-scheduler v1.37.1 DynamicResources ``TestPlugin`` cases about what ends up in the API, restated on
the real kube-apiserver (upstream: PreBind/Unreserve on a fake clientset with reactors). A claim the
finalizer is already on, or taken off or put on between decision and write; a claim deallocated between
decision and write; a binding that fails after the claims were written (the pod leaves ``reservedFor``, a
PodGroup's entry stays); the special claim of extended resources that the API server refuses to create.
Each test names the upstream case it restates (``plugin_map.py``)."""

from __future__ import annotations

from typing import Any

import pytest
from opentelemetry import trace
from sa_kit import Kit, eventually

from draflow_runtime.dra import DELETE_PROTECTION_FINALIZER as FINALIZER
from draflow_runtime.errors import ApiError
from draflow_runtime.kube import PODS, RESOURCE_CLAIMS, Resource
from structured_allocator import nodealloc_plan as na_plan
from structured_allocator.binder import Binder, ClaimPlan, Hooks, PodPlan

pytestmark = pytest.mark.integration

TRACEPARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"  # the claim has its trace already
RESOURCE_QUOTAS = Resource("", "v1", "resourcequotas", "ResourceQuota", True)


async def _claim(kit: Kit, name: str, *, finalizer: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "annotations": {"draflow.dev/traceparent": TRACEPARENT}}
    if finalizer:
        meta["finalizers"] = [FINALIZER]
    body = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": meta,
            "spec": kit.claim_spec()}
    return await kit.kube.create(RESOURCE_CLAIMS, body, kit.namespace)


def _allocation(kit: Kit, node: str) -> dict[str, Any]:
    result = {"request": "gpu", "driver": kit.driver, "pool": node, "device": "gpu-0"}
    return {"devices": {"results": [result]},
            "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
                {"key": "metadata.name", "operator": "In", "values": [node]}]}]}}


async def _allocated(kit: Kit, name: str, node: str) -> dict[str, Any]:
    """A claim allocated by someone before (the test writes the status as the admin)."""
    claim = await _claim(kit, name, finalizer=True)
    body = {**claim, "status": {"allocation": _allocation(kit, node)}}
    return await kit.kube.replace(RESOURCE_CLAIMS, body, subresource="status")


def _plan(kit: Kit, snapshot: dict[str, Any], allocation: dict[str, Any] | None, node: str) -> PodPlan:
    pod = {"metadata": {"name": "p", "namespace": kit.namespace, "uid": "uid-of-p"}}
    return PodPlan(pod=pod, node=node, claims=[ClaimPlan(snapshot, allocation, reserve=True)])


async def _nothing(_: ClaimPlan) -> None:
    return None


def _binder(kit: Kit) -> Binder:
    return Binder(kit.identity.kube, "test-plugin-writes", trace.get_tracer(__name__))


async def test_with_resources_has_finalizer(kit: Kit) -> None:
    node = await kit.node("n")
    await kit.slice(node, 1)
    await kit.device_class_()
    await _claim(kit, "c", finalizer=True)
    await kit.start()
    pod = await kit.pod("p", {"gpu": {"resourceClaimName": "c"}})
    assert await kit.wait_bound("p") == node
    claim = await kit.kube.get(RESOURCE_CLAIMS, "c", kit.namespace)
    assert claim["metadata"]["finalizers"] == [FINALIZER]  # kept, not added twice
    assert claim["status"]["reservedFor"] == [
        {"resource": "pods", "name": "p", "uid": pod["metadata"]["uid"]}]
    assert claim["status"]["allocation"]["devices"]["results"][0]["pool"] == node


@pytest.mark.parametrize("change", ["removed", "added"])
async def test_with_resources_finalizer_gets_removed_or_added_before_the_write(kit: Kit, change: str) -> None:
    """The decision saw the claim with (removed) or without (added) the finalizer; someone changed that
    before the write: the write starts again from the API server's copy and the finalizer is there once."""
    node = await kit.node("n")
    snapshot = await _claim(kit, "c", finalizer=change == "removed")
    finalizers = None if change == "removed" else [FINALIZER]
    await kit.kube.patch(RESOURCE_CLAIMS, "c", {"metadata": {"finalizers": finalizers}}, kit.namespace)
    plan = _plan(kit, snapshot, _allocation(kit, node), node)
    await _binder(kit).write_claims(plan, _nothing)
    claim = await kit.kube.get(RESOURCE_CLAIMS, "c", kit.namespace)
    assert claim["metadata"]["finalizers"] == [FINALIZER]
    assert claim["status"]["allocation"]["devices"] == _allocation(kit, node)["devices"]
    assert claim["status"]["reservedFor"] == [{"resource": "pods", "name": "p", "uid": "uid-of-p"}]


async def test_add_allocation_timestamp_failure_a_claim_deallocated_before_the_reservation(kit: Kit) -> None:
    """The decision found the claim allocated; it is deallocated before the pod is added to
    ``reservedFor``: the write fails (the API server refuses ``reservedFor`` without an allocation) and
    the claim stays unreserved; the pod is tried again from fresh state."""
    node = await kit.node("n")
    snapshot = await _allocated(kit, "c", node)
    await kit.kube.replace(RESOURCE_CLAIMS, {**snapshot, "status": {}}, subresource="status")
    plan = _plan(kit, snapshot, None, node)
    with pytest.raises(ApiError):
        await _binder(kit).write_claims(plan, _nothing)
    claim = await kit.kube.get(RESOURCE_CLAIMS, "c", kit.namespace)
    assert not (claim.get("status") or {}).get("reservedFor")
    assert not (claim.get("status") or {}).get("allocation")


def _delete_pod_before_binding(kit: Kit, name: str) -> Hooks:
    async def delete(plan: PodPlan) -> None:
        if plan.pod["metadata"]["name"] == name:  # the binding that follows fails: the pod is gone
            await kit.kube.delete(PODS, name, kit.namespace)
    return Hooks(after_status_write=delete)


async def test_bind_failure_takes_the_pod_out_of_reserved_for_and_keeps_the_allocation(kit: Kit) -> None:
    node = await kit.node("n")
    await kit.slice(node, 1)
    await kit.device_class_()
    await _allocated(kit, "c", node)
    await kit.start(hooks=_delete_pod_before_binding(kit, "p"))
    await kit.pod("p", {"gpu": {"resourceClaimName": "c"}})

    async def unreserved() -> dict[str, Any] | None:
        claim = await kit.kube.get(RESOURCE_CLAIMS, "c", kit.namespace)
        gone = await kit.get(PODS, "p") is None
        return claim if gone and not claim["status"].get("reservedFor") else None

    claim = await eventually(unreserved, what="the pod gone and out of reservedFor")
    assert claim["status"]["allocation"]["devices"] == _allocation(kit, node)["devices"]  # not ours to undo
    assert claim["metadata"]["finalizers"] == [FINALIZER]


async def test_bind_podgroup_failure_keeps_the_podgroups_reservation(kit: Kit) -> None:
    node, ref = await kit.group_sharing_a_claim(1)
    await kit.start(hooks=_delete_pod_before_binding(kit, "w-1"))
    await kit.worker("w-0")
    assert await kit.wait_bound("w-0") == node
    before = await kit.kube.get(RESOURCE_CLAIMS, "shared", kit.namespace)
    await kit.worker("w-1")
    await kit.wait_gone(PODS, "w-1", "w-1 deleted before its binding")
    claim = await kit.kube.get(RESOURCE_CLAIMS, "shared", kit.namespace)
    assert claim["status"]["reservedFor"] == [ref]
    assert claim["status"]["allocation"] == before["status"]["allocation"]


async def test_extended_resource_name_claim_creation_failure(kit: Kit) -> None:
    """The API server refuses to create the special claim (a ResourceQuota allows none): the pod is not
    bound, no claim is left, and it is placed once the quota is gone."""
    resource = await kit.extended_class()
    node = await kit.node("n")
    await kit.slice(node, 1)
    hard = {"count/resourceclaims.resource.k8s.io": "0"}
    quota = await kit.kube.create(RESOURCE_QUOTAS, {
        "apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "no-claims"},
        "spec": {"hard": hard}}, kit.namespace)
    # no kube-controller-manager here: the quota's status is what its controller would write
    await kit.kube.replace(RESOURCE_QUOTAS, {**quota, "status": {"hard": hard, "used": {
        "count/resourceclaims.resource.k8s.io": "0"}}}, subresource="status")
    await kit.start()
    await kit.kube.create(PODS, {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
        "spec": {"schedulerName": kit.scheduler_name,
                 "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10",
                                 "resources": {"limits": {resource: "1"}}}]}}, kit.namespace)

    async def refused() -> str | None:
        for event in await kit.events("p"):
            if event["reason"] == "FailedBinding" and "quota" in event.get("message", ""):
                return str(event["message"])
        return None

    await eventually(refused, what="a FailedBinding event naming the quota")
    pod = await kit.kube.get(PODS, "p", kit.namespace)
    assert not pod["spec"].get("nodeName")
    assert (await kit.kube.list(RESOURCE_CLAIMS, kit.namespace))["items"] == []
    await kit.kube.delete(RESOURCE_QUOTAS, "no-claims", kit.namespace)
    assert await kit.wait_bound("p", timeout=60) == node


async def test_patch_and_clear_node_allocatable_resource_claim_status(kit: Kit) -> None:
    """TestPatchNodeAllocatableResourceClaimStatus / TestClearNodeAllocatableResourceClaimStatus: the
    statuses are written into ``pods/status`` before the binding, emptied (an explicit empty list) when
    the placement is undone, and a pod that is gone makes the write fail (the pipeline is undone)."""
    await _claim(kit, "c")
    pod = await kit.pod("p", {"ccx": {"resourceClaimName": "c"}})
    statuses = [{"resourceClaimName": "c", "containers": ["main"],
                 "mapping": [{"name": "cpu", "quantity": "8"}]}]
    await na_plan.record(kit.identity.kube, "test-plugin-writes", pod, statuses)
    got = (await kit.kube.get(PODS, "p", kit.namespace))["status"]
    assert got["nodeAllocatableResourceClaimStatuses"] == statuses
    await na_plan.clear(kit.identity.kube, "test-plugin-writes", pod)
    got = (await kit.kube.get(PODS, "p", kit.namespace))["status"]
    assert not got.get("nodeAllocatableResourceClaimStatuses")
    await kit.kube.delete(PODS, "p", kit.namespace)
    await kit.wait_gone(PODS, "p", "pod p gone")
    with pytest.raises(ApiError):
        await na_plan.record(kit.identity.kube, "test-plugin-writes", pod, statuses)


async def test_an_existing_allocation_is_not_stamped_the_api_server_refuses_it(kit: Kit) -> None:
    """claim-reference, claim-template, good-topology, ...: upstream's PreBind (on a fake clientset) adds
    ``allocationTimestamp`` to a claim allocated before. The API server keeps ``status.allocation``
    immutable and refuses that; draflow reserves such a claim without touching its allocation."""
    node = await kit.node("n")
    await kit.slice(node, 1)
    await kit.device_class_()
    claim = await _allocated(kit, "c", node)
    stamped = {**claim["status"]["allocation"], "allocationTimestamp": "2026-01-02T03:04:05Z"}
    with pytest.raises(ApiError, match="field cannot be modified once set"):
        await kit.kube.replace(RESOURCE_CLAIMS, {**claim, "status": {"allocation": stamped}},
                               subresource="status")
    await kit.start()
    await kit.pod("p", {"gpu": {"resourceClaimName": "c"}})
    assert await kit.wait_bound("p") == node
    final = await kit.kube.get(RESOURCE_CLAIMS, "c", kit.namespace)
    assert final["status"]["allocation"] == claim["status"]["allocation"]
    assert [r["name"] for r in final["status"]["reservedFor"]] == ["p"]
