"""Writes per pod, counted by the API server itself (``apiserver_request_total``), against the real
kube-apiserver: the pod status is applied once per pod and each claim deleted once, as upstream's
controller does, and the statuses stay right across a restart of the controller.

Only the controller under test applies ``pods/status`` or deletes ResourceClaims here (the test's own
writes are creates and merge patches), and tests of one session run one at a time, so the server's
counters over a test are the controller's writes."""

from __future__ import annotations

from collections import Counter

import pytest
from cc_kit import Kit, eventually, pod, template
from prometheus_client.parser import text_string_to_metric_families

from claim_controller.controller import Controller
from draflow_runtime.kube import PODS, RESOURCE_CLAIM_TEMPLATES, RESOURCE_CLAIMS
from draflow_testenv.wait import consistently

pytestmark = pytest.mark.integration

NODE = "node-1"
HOLD = "test.draflow.dev/hold"
APPLY_POD_STATUS = ("APPLY", "pods", "status")
DELETE_CLAIM = ("DELETE", "resourceclaims", "")


async def writes(kit: Kit) -> Counter[tuple[str, str, str]]:
    """Every write request the API server has answered so far, by (verb, resource, subresource)."""
    counts: Counter[tuple[str, str, str]] = Counter()
    for family in text_string_to_metric_families(await kit.kube.get_text("/metrics")):
        if family.name != "apiserver_request":
            continue
        for sample in family.samples:
            labels = sample.labels
            if sample.name.endswith("_total") and labels.get("verb") in ("APPLY", "DELETE"):
                key = (labels["verb"], labels.get("resource", ""), labels.get("subresource", ""))
                counts[key] += int(sample.value)
    return counts


async def recorded_claim(kit: Kit, pod_name: str) -> str:
    async def check() -> str | None:
        current = await kit.get(PODS, pod_name)
        statuses = (current or {}).get("status", {}).get("resourceClaimStatuses") or ()
        return str(statuses[0]["resourceClaimName"]) if statuses else None
    return await eventually(check, what=f"claim of {pod_name} recorded")


async def owned_claim(kit: Kit, pod_name: str) -> str | None:
    for claim in await kit.claims():
        if any(o["name"] == pod_name for o in claim["metadata"].get("ownerReferences") or ()):
            return str(claim["metadata"]["name"])
    return None


async def test_pod_status_is_applied_once_and_each_claim_deleted_once(kit: Kit) -> None:
    """One pod at a time (the steady state: the new claim's event reaches the controller before the
    pod's status update did, and used to make it apply the same status again)."""
    await kit.create(RESOURCE_CLAIM_TEMPLATES, template("t"))
    await kit.start_controller()
    before = await writes(kit)
    pods = 8
    for i in range(pods):
        p = await kit.create(PODS, pod(f"p{i}", {"gpu": {"resourceClaimTemplateName": "t"}}))
        name = await recorded_claim(kit, f"p{i}")
        assert name == await owned_claim(kit, f"p{i}")
        await kit.allocate(name, NODE, p)  # what the allocator does: finalizer, allocation, reservedFor
        await kit.set_phase(f"p{i}", "Succeeded")
        await eventually(lambda name=name: _gone(kit, name), what=f"claim {name} deleted")

    async def settled() -> bool:
        after = await writes(kit)
        return after[APPLY_POD_STATUS] - before[APPLY_POD_STATUS] == pods \
            and after[DELETE_CLAIM] - before[DELETE_CLAIM] == pods

    await consistently(settled, 1.0, "one status apply and one claim delete per pod")
    after = await writes(kit)
    assert after[APPLY_POD_STATUS] - before[APPLY_POD_STATUS] == pods
    assert after[DELETE_CLAIM] - before[DELETE_CLAIM] == pods


async def test_statuses_stay_right_across_a_restart_and_are_not_rewritten(kit: Kit) -> None:
    await kit.create(RESOURCE_CLAIM_TEMPLATES, template("t"))
    first = await kit.start_controller()
    names = {}
    for i in range(3):
        await kit.create(PODS, pod(f"p{i}", {"gpu": {"resourceClaimTemplateName": "t"}}))
        names[f"p{i}"] = await recorded_claim(kit, f"p{i}")
    await kit.stop_controller(first)

    before = await writes(kit)
    await kit.start_controller()  # a new process: nothing remembered of the first one's writes
    await kit.create(PODS, pod("late", {"gpu": {"resourceClaimTemplateName": "t"}}))
    names["late"] = await recorded_claim(kit, "late")
    for pod_name, claim_name in names.items():
        assert claim_name == await owned_claim(kit, pod_name)

    async def one_apply() -> bool:
        return (await writes(kit))[APPLY_POD_STATUS] - before[APPLY_POD_STATUS] == 1

    await consistently(one_apply, 1.0, "only the new pod's status is applied")
    assert len(await kit.claims()) == 4
    for pod_name, claim_name in names.items():
        current = await kit.get(PODS, pod_name)
        assert current is not None
        assert current["status"]["resourceClaimStatuses"] == [
            {"name": "gpu", "resourceClaimName": claim_name}]
        claim = await kit.get(RESOURCE_CLAIMS, claim_name)
        assert claim is not None
        assert claim["metadata"]["ownerReferences"][0]["uid"] == current["metadata"]["uid"]


async def test_a_claim_deleted_while_another_finalizer_holds_it_stays_in_view(kit: Kit) -> None:
    """The DELETE answer shows the claim held (deletionTimestamp, a finalizer left): the controller keeps
    seeing it (hiding it as gone would leave it unreconciled until the informer drops it)."""
    await kit.create(RESOURCE_CLAIM_TEMPLATES, template("t"))
    controller = await kit.start_controller()
    p = await kit.create(PODS, pod("held", {"gpu": {"resourceClaimTemplateName": "t"}}))
    name = await recorded_claim(kit, "held")
    hold = [{"op": "add", "path": "/metadata/finalizers", "value": [HOLD]}]
    await kit.kube.patch(RESOURCE_CLAIMS, name, hold, kit.namespace, patch_type="json")
    await kit.set_phase("held", "Succeeded")
    try:
        async def deleting() -> bool:
            claim = await kit.get(RESOURCE_CLAIMS, name)
            return claim is not None and bool(claim["metadata"].get("deletionTimestamp"))
        await eventually(deleting, what="the claim deleted, held by the other finalizer")
        await eventually(lambda: _seen_deleting(controller, kit.namespace, name),
                         what="the controller sees the claim being deleted")
        await consistently(lambda: _seen_deleting(controller, kit.namespace, name), 1.0,
                           "the controller keeps seeing it")
        assert p["metadata"]["uid"] in {o["uid"] for o in (await kit.get(RESOURCE_CLAIMS, name) or {})
                                        ["metadata"]["ownerReferences"]}
    finally:
        release = [{"op": "remove", "path": "/metadata/finalizers"}]
        await kit.kube.patch(RESOURCE_CLAIMS, name, release, kit.namespace, patch_type="json")
    await eventually(lambda: _gone(kit, name), what="claim gone once released")


def _seen_deleting(controller: Controller, namespace: str, name: str) -> bool:
    claim = controller.ctx.claim(namespace, name)
    return claim is not None and bool(claim["metadata"].get("deletionTimestamp"))


async def _gone(kit: Kit, name: str) -> bool:
    return await kit.get(RESOURCE_CLAIMS, name) is None
