"""Claims of PodGroups (DRAWorkloadResourceClaims) against the real kube-apiserver — upstream
kube-controller-manager v1.37.1 resourceclaim controller cases in our words: a PodGroup's template claim is
made once, owned by the PodGroup and recorded in its status; a member pod's claim of the same name and
template records the group's claim (none is generated for the pod), its other claims stay its own; a claim
made before a failed status write is reused; a member bound without the allocator gets the group's
allocated claim reserved for the PodGroup; the PodGroup deleted, it goes once its pods ended
(kube-controller-manager's podgroup-protection, done here), then its reservation goes, the claim is
deallocated and deleted."""

from __future__ import annotations

from typing import Any

import pytest
from cc_kit import Kit, eventually, pod, template

from claim_controller.naming import POD_CLAIM_NAME_ANNOTATION
from draflow_runtime.kube import POD_GROUPS, PODS, RESOURCE_CLAIM_TEMPLATES, RESOURCE_CLAIMS

pytestmark = pytest.mark.integration

GPU = {"resourceClaimTemplateName": "gpu-template"}


def pod_group(name: str = "workers") -> dict[str, Any]:
    return {"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup", "metadata": {"name": name},
            "spec": {"schedulingPolicy": {"basic": {}}, "resourceClaims": [{"name": "gpu", **GPU}]}}


def member(name: str, claims: dict[str, dict[str, str]], group: str = "workers", **kw: Any) -> dict[str, Any]:
    body = pod(name, claims, **kw)
    body["spec"]["schedulingGroup"] = {"podGroupName": group}
    return body


def group_ref(group: dict[str, Any]) -> dict[str, str]:
    return {"apiGroup": "scheduling.k8s.io", "resource": "podgroups", "name": group["metadata"]["name"],
            "uid": group["metadata"]["uid"]}


async def recorded(kit: Kit, res: Any, name: str, count: int) -> dict[str, str] | None:
    obj = await kit.get(res, name) or {}
    statuses = {s["name"]: s.get("resourceClaimName") for s in
                (obj.get("status") or {}).get("resourceClaimStatuses") or ()}
    return statuses if len(statuses) == count else None


async def test_a_podgroups_claim_is_made_once_and_recorded_for_the_group_and_its_members(kit: Kit) -> None:
    await kit.create(RESOURCE_CLAIM_TEMPLATES, template("gpu-template", labels={"team": "ml"}))
    await kit.start_controller()
    group = await kit.create(POD_GROUPS, pod_group())
    await kit.create(PODS, member("w-0", {"gpu": GPU}))
    await kit.create(PODS, member("w-1", {"gpu": GPU, "scratch": GPU}))

    group_claims = await eventually(lambda: recorded(kit, POD_GROUPS, "workers", 1), what="PodGroup status")
    shared = group_claims["gpu"]
    assert shared.startswith("workers-gpu-")
    w0 = await eventually(lambda: recorded(kit, PODS, "w-0", 1), what="w-0 status")
    w1 = await eventually(lambda: recorded(kit, PODS, "w-1", 2), what="w-1 status")
    assert w0 == {"gpu": shared} and w1["gpu"] == shared and w1["scratch"] != shared

    claims = {c["metadata"]["name"]: c for c in await kit.claims()}
    assert set(claims) == {shared, w1["scratch"]}  # nothing generated per pod for the group's claim
    meta = claims[shared]["metadata"]
    assert meta["ownerReferences"] == [{
        "apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup", "name": "workers",
        "uid": group["metadata"]["uid"], "controller": True}]
    assert meta["annotations"][POD_CLAIM_NAME_ANNOTATION] == "gpu" and meta["labels"] == {"team": "ml"}
    assert claims[w1["scratch"]]["metadata"]["ownerReferences"][0]["kind"] == "Pod"


async def test_a_claim_made_for_the_group_before_its_status_was_written_is_reused(kit: Kit) -> None:
    await kit.create(RESOURCE_CLAIM_TEMPLATES, template("gpu-template"))
    group = await kit.create(POD_GROUPS, pod_group())
    orphan = await kit.create(RESOURCE_CLAIMS, {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": "made-earlier", "annotations": {POD_CLAIM_NAME_ANNOTATION: "gpu"},
                     "ownerReferences": [{"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
                                          "name": "workers", "uid": group["metadata"]["uid"],
                                          "controller": True}]},
        "spec": template("x")["spec"]["spec"]})
    await kit.start_controller()
    assert await eventually(lambda: recorded(kit, POD_GROUPS, "workers", 1), what="status") == {
        "gpu": orphan["metadata"]["name"]}
    assert [c["metadata"]["name"] for c in await kit.claims()] == ["made-earlier"]


async def test_a_bound_member_reserves_the_groups_claim_for_the_group_until_the_group_is_gone(
        kit: Kit) -> None:
    await kit.create(RESOURCE_CLAIM_TEMPLATES, template("gpu-template"))
    await kit.start_controller()
    group = await kit.create(POD_GROUPS, pod_group())
    shared = (await eventually(lambda: recorded(kit, POD_GROUPS, "workers", 1), what="status"))["gpu"]
    await kit.allocate(shared, "node-a")  # allocated, reserved for nobody yet
    await kit.create(PODS, member("bound", {"gpu": GPU}, node="node-a"))

    async def reserved() -> list[dict[str, Any]] | None:
        claim = await kit.get(RESOURCE_CLAIMS, shared) or {}
        return (claim.get("status") or {}).get("reservedFor")

    assert await eventually(reserved, what="reserved for the PodGroup") == [group_ref(group)]

    await kit.kube.delete(POD_GROUPS, "workers", kit.namespace)  # its member still runs: protected
    deleting = await kit.get(POD_GROUPS, "workers") or {}
    assert deleting["metadata"]["finalizers"] == ["scheduling.k8s.io/podgroup-protection"]
    await kit.set_phase("bound", "Succeeded")  # the last active member ends: the PodGroup goes

    async def gone() -> bool:
        return await kit.get(POD_GROUPS, "workers") is None and await kit.get(RESOURCE_CLAIMS, shared) is None

    # before: the PodGroup kept its finalizer for ever (nobody lifted it) and so its claim and devices
    await eventually(gone, what="the PodGroup gone, its claim deallocated and deleted")
