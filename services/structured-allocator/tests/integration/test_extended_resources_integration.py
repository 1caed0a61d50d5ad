"""Extended resources backed by DRA on the real API server, the allocator as the admin and with only its
RBAC: a node that advertises the name (a device plugin) serves it by node fit, any other node through
the special ResourceClaim the allocator creates, allocates, reserves and records in
``pod.status.extendedResourceClaimStatus`` before binding; a special claim left from an earlier attempt
is deleted and the pod placed afresh."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from sa_kit import Kit, devices_of

from draflow_runtime.kube import PODS, RESOURCE_CLAIMS
from structured_allocator.binder import Hooks, PodPlan

pytestmark = pytest.mark.integration

ANNOTATION = "resource.kubernetes.io/extended-resource-claim"


async def _pod(kit: Kit, name: str, pin: str, limits: dict[str, str]) -> dict[str, Any]:
    return await kit.kube.create(PODS, {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
        "spec": {"schedulerName": kit.scheduler_name, "nodeSelector": {"pin": pin},
                 "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10",
                                 "resources": {"limits": limits}}]}}, kit.namespace)


async def _dra_node(kit: Kit) -> tuple[str, str]:
    """The extended resource's device class and a node ``pin=dra`` with two devices: -> (the resource
    name, the node)."""
    resource = await kit.extended_class()
    node = await kit.node("dra", labels={"pin": "dra"})
    await kit.slice(node, 2)
    return resource, node


async def _special_claims(kit: Kit, pod_uid: str) -> list[dict[str, Any]]:
    items = (await kit.kube.list(RESOURCE_CLAIMS, kit.namespace)).get("items") or []
    return [c for c in items if (c["metadata"].get("annotations") or {}).get(ANNOTATION) == "true"
            and any(o["uid"] == pod_uid for o in c["metadata"].get("ownerReferences") or [])]


async def test_dra_serves_extended_resources_where_no_device_plugin_does(kit: Kit) -> None:
    resource = await kit.extended_class()
    plugin = await kit.node("plugin", labels={"pin": "plugin"},
                            allocatable={"pods": "10", "cpu": "8", "memory": "8Gi", resource: "4"})
    dra = await kit.node("dra", labels={"pin": "dra"})
    await kit.slice(dra, 3)
    await kit.start()

    by_plugin = await _pod(kit, "by-plugin", "plugin", {resource: "2"})
    assert await kit.wait_bound("by-plugin") == plugin
    pod = await kit.kube.get(PODS, "by-plugin", kit.namespace)
    assert "extendedResourceClaimStatus" not in pod["status"]
    assert await _special_claims(kit, by_plugin["metadata"]["uid"]) == []

    by_dra = await _pod(kit, "by-dra", "dra", {resource: "2"})
    assert await kit.wait_bound("by-dra") == dra
    pod = await kit.kube.get(PODS, "by-dra", kit.namespace)
    status = pod["status"]["extendedResourceClaimStatus"]
    assert status["requestMappings"] == [
        {"containerName": "main", "resourceName": resource, "requestName": "container-0-request-0"}]
    (claim,) = await _special_claims(kit, by_dra["metadata"]["uid"])
    assert claim["metadata"]["name"] == status["resourceClaimName"]
    assert claim["metadata"]["name"].startswith("by-dra-extended-resources-")
    assert "resource.kubernetes.io/delete-protection" in claim["metadata"]["finalizers"]
    assert len(devices_of(claim)) == 2
    assert [r["uid"] for r in claim["status"]["reservedFor"]] == [by_dra["metadata"]["uid"]]

    # Only one device is left on the DRA node: the allocator counts it, node fit does not refuse it.
    await _pod(kit, "too-many", "dra", {resource: "2"})
    message = await kit.wait_condition("too-many")
    assert "Insufficient" not in message and "\"<extended-resources>\"" in message, message


async def test_a_special_claim_left_from_an_earlier_attempt_is_deleted_and_the_pod_placed_afresh(
    kit: Kit,
) -> None:
    resource, node = await _dra_node(kit)
    pod = await _pod(kit, "retried", "dra", {f"deviceclass.resource.kubernetes.io/{kit.device_class}": "1"})
    uid = pod["metadata"]["uid"]
    # What a crash after creating the claim leaves behind (its requests need not fit any more).
    stale = await kit.kube.create(RESOURCE_CLAIMS, {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"generateName": "retried-extended-resources-", "annotations": {ANNOTATION: "true"},
                     "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": "retried", "uid": uid,
                                          "controller": True}]},
        "spec": {"devices": {"requests": [{"name": "container-0-request-0", "exactly": {
            "deviceClassName": kit.device_class, "count": 5}}]}}}, kit.namespace)
    assert resource  # the explicit name exists too; the pod uses the implicit one
    await kit.start()

    assert await kit.wait_bound("retried", timeout=60) == node

    await kit.wait_gone(RESOURCE_CLAIMS, stale["metadata"]["name"], "the stale claim deleted")
    (claim,) = await _special_claims(kit, uid)
    assert claim["metadata"]["name"] != stale["metadata"]["name"]
    assert len(devices_of(claim)) == 1


async def test_a_failed_placement_deletes_the_claim_it_created_and_the_retry_makes_a_new_one(
    kit: Kit,
) -> None:
    resource, node = await _dra_node(kit)
    created: list[str] = []

    async def fail_once(plan: PodPlan) -> None:
        if not created:
            created.extend(cp.key.partition("/")[2] for cp in plan.created)
            raise RuntimeError("injected failure before the binding")

    await kit.start(hooks=Hooks(after_status_write=fail_once))
    pod = await _pod(kit, "flaky", "dra", {resource: "2"})
    assert await kit.wait_bound("flaky", timeout=60) == node
    assert len(created) == 1
    await kit.wait_gone(RESOURCE_CLAIMS, created[0], "the claim of the failed placement deleted")
    (claim,) = await _special_claims(kit, pod["metadata"]["uid"])
    assert claim["metadata"]["name"] != created[0] and len(devices_of(claim)) == 2  # both devices again
    status = (await kit.kube.get(PODS, "flaky", kit.namespace))["status"]["extendedResourceClaimStatus"]
    assert status["resourceClaimName"] == claim["metadata"]["name"]


async def test_a_crash_after_the_claim_was_written_leaves_no_device_held_twice(kit: Kit) -> None:
    resource, node = await _dra_node(kit)
    crashed = asyncio.Event()

    async def crash(plan: PodPlan) -> None:
        crashed.set()
        kit.task_of(first).cancel()  # the whole allocator dies after the status write, before binding
        await asyncio.Event().wait()  # blocks until the cancellation above reaches this task

    first = await kit.start(hooks=Hooks(after_status_write=crash))
    pod = await _pod(kit, "p0", "dra", {resource: "2"})
    await asyncio.wait_for(crashed.wait(), 30)
    await kit.stop(first)
    (left,) = await _special_claims(kit, pod["metadata"]["uid"])
    assert len(devices_of(left)) == 2  # allocated before the crash: both devices of the node

    await kit.start()
    assert await kit.wait_bound("p0", timeout=60) == node
    await kit.wait_gone(RESOURCE_CLAIMS, left["metadata"]["name"], "the leftover claim deleted")
    (claim,) = await _special_claims(kit, pod["metadata"]["uid"])
    assert sorted(devices_of(claim)) == sorted(devices_of(left))


async def test_a_pod_with_a_claim_and_extended_resources_gets_both_on_one_node(kit: Kit) -> None:
    resource = await kit.extended_class()
    await kit.node("other", labels={"pin": "other"})  # no devices: the pod cannot go there
    node = await kit.node("dra", labels={"pin": "dra"})
    await kit.slice(node, 3)
    await kit.template("one-gpu")
    await kit.start()
    pod = await kit.template_pod("both", "one-gpu", spec={"containers": [
        {"name": "main", "image": "registry.k8s.io/pause:3.10",
         "resources": {"claims": [{"name": "gpu"}], "limits": {resource: "2"}}}]})
    assert await kit.wait_bound("both") == node
    claim = await kit.claim_of("both")
    (special,) = await _special_claims(kit, pod["metadata"]["uid"])
    assert len(devices_of(claim)) == 1 and len(devices_of(special)) == 2
    assert not set(devices_of(claim)) & set(devices_of(special))
