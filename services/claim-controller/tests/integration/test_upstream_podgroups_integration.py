"""kube-controller-manager's resourceclaim controller cases for PodGroups (DRAWorkloadResourceClaims;
v1.37.1 ``TestSyncHandler``) restated against the real kube-apiserver; ``tests/unit/upstream_map.py``
names the upstream case(s) each test restates."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from cc_kit import Kit, eventually, plain_claim, pod, template
from test_pod_groups_integration import GPU, member, pod_group
from test_upstream_pods_integration import claim_names, record, statuses, stays

from claim_controller.naming import POD_CLAIM_NAME_ANNOTATION
from draflow_runtime.kube import EVENTS, POD_GROUPS, PODS, RESOURCE_CLAIM_TEMPLATES, RESOURCE_CLAIMS

pytestmark = pytest.mark.integration

HOLD = "test.draflow.dev/hold"


async def group_statuses(kit: Kit, name: str = "workers") -> dict[str, str]:
    return await statuses(kit, name, POD_GROUPS)


async def record_group(kit: Kit, name: str, recorded: dict[str, str]) -> None:
    await record(kit, name, recorded, POD_GROUPS)


def group_claim(name: str, group: dict[str, Any]) -> dict[str, Any]:
    """A claim as the controller generates it for ``group``'s claim ``gpu``."""
    body = plain_claim(name)
    body["metadata"]["annotations"] = {POD_CLAIM_NAME_ANNOTATION: "gpu"}
    meta = group["metadata"]
    body["metadata"]["ownerReferences"] = [{"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
                                            "name": meta["name"], "uid": meta["uid"], "controller": True}]
    return body


async def group_event(kit: Kit, name: str, reason: str) -> dict[str, Any]:
    async def check() -> dict[str, Any] | None:
        events = await kit.kube.list(EVENTS, kit.namespace, field_selector=f"involvedObject.name={name}")
        return next((e for e in events["items"] if e["reason"] == reason), None)
    return await eventually(check, what=f"Event {reason} on PodGroup {name}")


async def recorded_gpu(kit: Kit, other_than: str = "") -> str:
    async def check() -> str | None:
        name = (await group_statuses(kit)).get("gpu")
        return name if name and name != other_than else None
    return await eventually(check, what="the PodGroup's claim recorded")


async def test_a_podgroups_claim_waits_for_its_template_is_made_again_when_deleted_and_kept_on_restart(
        kit: Kit) -> None:
    """missing-template-podgroup, recreate-for-podgroup, nop-podgroup."""
    controller = await kit.start_controller()
    await kit.create(POD_GROUPS, pod_group())
    event = await group_event(kit, "workers", "FailedResourceClaimCreation")
    assert "ResourceClaimTemplate gpu-template not found" in event["message"]
    assert await claim_names(kit) == []

    await kit.create(RESOURCE_CLAIM_TEMPLATES, template("gpu-template"))
    first = await recorded_gpu(kit)
    await kit.kube.delete(RESOURCE_CLAIMS, first, kit.namespace)
    second = await recorded_gpu(kit, other_than=first)
    assert second.startswith("workers-gpu-")
    await stays(kit, [second], "one claim for the group after the deleted one was made again")

    await kit.stop_controller(controller)
    await kit.start_controller()  # a new process: the recorded claim is found, nothing is made
    await stays(kit, [second], "the recorded claim is kept across a restart")
    assert await group_statuses(kit) == {"gpu": second}


async def test_a_group_claim_recorded_but_not_the_groups_is_replaced_and_left_alone(
    kit: Kit, make_namespace: Callable[..., Any],
) -> None:
    """recreate-wrong-owner-podgroup, wrong-claim-owner-podgroup, create-with-other-claim-podgroup: the
    PodGroup's status names ``workers-gpu``, a claim the group does not control (one of that name is in
    another namespace too): without the template nothing is made, with it a claim is generated and
    recorded; the others are not touched."""
    elsewhere = await make_namespace("cc-other")
    await kit.kube.create(RESOURCE_CLAIMS, plain_claim("workers-gpu"), elsewhere)
    await kit.create(RESOURCE_CLAIMS, plain_claim("workers-gpu"))
    await kit.create(POD_GROUPS, pod_group())
    await record_group(kit, "workers", {"gpu": "workers-gpu"})
    await kit.start_controller()
    await group_event(kit, "workers", "FailedResourceClaimCreation")
    await stays(kit, ["workers-gpu"], "the claim the group does not control is not taken")

    await kit.create(RESOURCE_CLAIM_TEMPLATES, template("gpu-template"))
    made = await recorded_gpu(kit, other_than="workers-gpu")
    await stays(kit, sorted(["workers-gpu", made]), "one claim generated next to the other")
    for namespace in (kit.namespace, elsewhere):
        other = await kit.kube.get(RESOURCE_CLAIMS, "workers-gpu", namespace)
        assert "ownerReferences" not in other["metadata"]


async def test_a_recorded_group_claim_the_cache_lacks_is_found_live_or_in_the_processs_own_writes(
        kit: Kit) -> None:
    """nop-claim-in-apiserver-only-for-podgroup, nop-claim-in-mutation-cache-only-for-podgroup: the claim
    informer lags (stopped); group ``workers`` records a claim only the API server has, group ``crew``
    one only this process's own write (the mutation cache) knows: neither group gets a new claim."""
    controller = await kit.start_controller()
    await controller.claims.stop()
    workers = await kit.create(POD_GROUPS, pod_group("workers"))
    crew = await kit.create(POD_GROUPS, pod_group("crew"))
    for name in ("workers", "crew"):
        await group_event(kit, name, "FailedResourceClaimCreation")  # no template yet: looked at
    await kit.create(RESOURCE_CLAIMS, group_claim("workers-gpu-earlier", workers))
    written = group_claim("crew-gpu-written", crew)
    written["metadata"].update(namespace=kit.namespace, uid="0c1a1m00-0000-0000-0000-000000000002",
                               resourceVersion="1")
    controller.ctx.mutations.mutated(written)
    await record_group(kit, "workers", {"gpu": "workers-gpu-earlier"})
    await record_group(kit, "crew", {"gpu": "crew-gpu-written"})
    await kit.create(RESOURCE_CLAIM_TEMPLATES, template("gpu-template"))  # enqueues both groups
    await stays(kit, ["workers-gpu-earlier"], "no claim is made for either group")
    assert await group_statuses(kit, "workers") == {"gpu": "workers-gpu-earlier"}
    assert await group_statuses(kit, "crew") == {"gpu": "crew-gpu-written"}


async def test_a_podgroup_being_deleted_gets_no_claim(kit: Kit) -> None:
    """podgroup-deleted."""
    await kit.create(RESOURCE_CLAIM_TEMPLATES, template("gpu-template"))
    leaving = pod_group("leaving")
    leaving["metadata"]["finalizers"] = [HOLD]
    await kit.create(POD_GROUPS, leaving)
    await kit.kube.delete(POD_GROUPS, "leaving", kit.namespace)
    try:
        await kit.start_controller()
        await kit.create(POD_GROUPS, pod_group("control"))
        made = await eventually(lambda: _gpu(group_statuses(kit, "control")),
                                what="the control group's claim")
        await stays(kit, [made], "no claim for the PodGroup being deleted")
    finally:
        await kit.kube.patch(POD_GROUPS, "leaving", {"metadata": {"finalizers": None}}, kit.namespace)


async def _gpu(probe: Any) -> str | None:
    return (await probe).get("gpu")


async def test_a_member_of_a_podgroup_that_does_not_exist_yet_waits_for_it(kit: Kit) -> None:
    """skip-create-for-pod-podgroup-does-not-exist: no claim until the PodGroup exists; then the member's
    claim (one the group does not list) is generated for the pod."""
    await kit.create(RESOURCE_CLAIM_TEMPLATES, template("gpu-template"))
    await kit.start_controller()
    await kit.create(PODS, member("early", {"scratch": GPU}, group="later"))
    await kit.create(PODS, pod("control", {"gpu": GPU}))
    control = await eventually(lambda: _first(statuses(kit, "control")), what="the control pod's claim")
    await stays(kit, [control], "no claim for the member of a PodGroup that does not exist")

    group = pod_group("later")
    del group["spec"]["resourceClaims"]
    await kit.create(POD_GROUPS, group)
    made = await eventually(lambda: _first(statuses(kit, "early")),
                            what="the member's claim once the group exists")
    assert made.startswith("early-scratch-")
    claim = await kit.get(RESOURCE_CLAIMS, made) or {}
    assert claim["metadata"]["ownerReferences"][0]["kind"] == "Pod"


async def _first(probe: Any) -> str | None:
    found = await probe
    return next(iter(found.values()), None) if found else None
