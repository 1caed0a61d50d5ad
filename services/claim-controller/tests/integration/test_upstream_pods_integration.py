"""kube-controller-manager's resourceclaim controller cases for pods (v1.37.1 ``TestSyncHandler``,
``TestClaimExists``) restated against the real kube-apiserver; ``tests/unit/upstream_map.py`` names the
upstream case(s) each test restates."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from cc_kit import Kit, consumer, eventually, plain_claim, pod, template
from test_writes_integration import APPLY_POD_STATUS, writes

from claim_controller.naming import POD_CLAIM_NAME_ANNOTATION
from draflow_runtime.kube import PODS, RESOURCE_CLAIM_TEMPLATES, RESOURCE_CLAIMS
from draflow_runtime.resources import Resource
from draflow_testenv.wait import consistently

pytestmark = pytest.mark.integration

HOLD = "test.draflow.dev/hold"
GPU = {"resourceClaimTemplateName": "t"}


async def statuses(kit: Kit, name: str, res: Resource = PODS) -> dict[str, str]:
    """``status.resourceClaimStatuses`` of pod (or ``res``) ``name``: claim entry -> claim name."""
    current = await kit.get(res, name) or {}
    return {s["name"]: s.get("resourceClaimName") for s in
            (current.get("status") or {}).get("resourceClaimStatuses") or ()}


async def record(kit: Kit, name: str, recorded: dict[str, str], res: Resource = PODS) -> None:
    """Write ``status.resourceClaimStatuses`` of pod (or ``res``) ``name`` as an earlier controller would."""
    body = {"status": {"resourceClaimStatuses": [{"name": k, "resourceClaimName": v}
                                                 for k, v in recorded.items()]}}
    await kit.kube.patch(res, name, body, kit.namespace, subresource="status")


def owned_claim(name: str, owner: dict[str, Any], pod_claim: str | None = "gpu") -> dict[str, Any]:
    """A claim as the controller generates it for ``owner`` (``pod_claim`` None: without the annotation)."""
    body = plain_claim(name)
    meta = owner["metadata"]
    body["metadata"]["ownerReferences"] = [{"apiVersion": "v1", "kind": "Pod", "name": meta["name"],
                                            "uid": meta["uid"], "controller": True}]
    if pod_claim is not None:
        body["metadata"]["annotations"] = {POD_CLAIM_NAME_ANNOTATION: pod_claim}
    return body


async def claim_names(kit: Kit) -> list[str]:
    return sorted(c["metadata"]["name"] for c in await kit.claims())


async def stays(kit: Kit, expected: list[str], what: str) -> None:
    async def same() -> bool:
        return await claim_names(kit) == expected
    await consistently(same, 1.0, what)
    assert await claim_names(kit) == expected


async def test_a_pod_being_deleted_or_without_claims_gets_no_claim(kit: Kit) -> None:
    """pod-deleted, no-volumes: only the pod that may still run and has a claim gets one."""
    await kit.create(RESOURCE_CLAIM_TEMPLATES, template("t"))
    leaving = pod("leaving", {"gpu": GPU})
    leaving["metadata"]["finalizers"] = [HOLD]
    await kit.create(PODS, leaving)
    await kit.kube.delete(PODS, "leaving", kit.namespace)  # held by the finalizer: being deleted
    bare = pod("bare", {})
    del bare["spec"]["resourceClaims"]
    await kit.create(PODS, bare)
    try:
        await kit.start_controller()
        await kit.create(PODS, pod("control", {"gpu": GPU}))
        made = await eventually(lambda: _one(statuses(kit, "control")), what="the control pod's claim")
        await stays(kit, [made], "no claim for the pod being deleted nor the one without claims")
    finally:
        await kit.kube.patch(PODS, "leaving", {"metadata": {"finalizers": None}}, kit.namespace)


async def _one(probe: Any) -> str | None:
    found = await probe
    return next(iter(found.values()), None) if found else None


async def test_a_recorded_claim_the_pod_does_not_control_is_replaced_and_left_alone(kit: Kit) -> None:
    """recreate-wrong-owner; TestClaimExists "owner check fails": the status names a claim the pod does
    not control: a claim is generated and recorded instead, the other one is not touched."""
    await kit.create(RESOURCE_CLAIM_TEMPLATES, template("t"))
    await kit.create(RESOURCE_CLAIMS, plain_claim("someone-elses"))
    await kit.create(PODS, pod("p", {"gpu": GPU}))
    await record(kit, "p", {"gpu": "someone-elses"})
    await kit.start_controller()

    async def replaced() -> str | None:
        name = (await statuses(kit, "p")).get("gpu")
        return name if name != "someone-elses" else None

    made = await eventually(replaced, what="a generated claim recorded instead")
    assert made.startswith("p-gpu-")
    await stays(kit, sorted([made, "someone-elses"]), "the other claim stays, nothing more is made")
    other = await kit.get(RESOURCE_CLAIMS, "someone-elses")
    assert other is not None and "ownerReferences" not in other["metadata"]
    event = await kit.wait_event("p", "ResourceClaimRecreated")
    assert "someone-elses" in event["message"] and made in event["message"]


async def test_a_claim_named_like_the_generated_one_but_not_the_pods_is_never_taken(
    kit: Kit, make_namespace: Callable[..., Any],
) -> None:
    """wrong-claim-owner, create-with-other-claim: a claim ``<pod>-<claim>`` without the pod as owner, in
    the pod's namespace and in another one, is not taken for the pod: without the template nothing is
    made (Warning), with it a new claim is generated; the two others stay as they were."""
    elsewhere = await make_namespace("cc-other")
    await kit.kube.create(RESOURCE_CLAIMS, plain_claim("p-gpu"), elsewhere)
    await kit.create(RESOURCE_CLAIMS, plain_claim("p-gpu"))
    await kit.start_controller()
    await kit.create(PODS, pod("p", {"gpu": GPU}))
    event = await kit.wait_event("p", "FailedResourceClaimCreation")
    assert "ResourceClaimTemplate t not found" in event["message"]
    await stays(kit, ["p-gpu"], "the claim of the same name is not taken")
    assert await statuses(kit, "p") == {}

    await kit.create(RESOURCE_CLAIM_TEMPLATES, template("t"))
    made = await eventually(lambda: _one(statuses(kit, "p")), what="a generated claim recorded")
    assert made != "p-gpu" and made.startswith("p-gpu-")
    await stays(kit, sorted(["p-gpu", made]), "one claim generated next to the other")
    for namespace in (kit.namespace, elsewhere):
        other = await kit.kube.get(RESOURCE_CLAIMS, "p-gpu", namespace)
        assert "ownerReferences" not in other["metadata"]


async def test_a_recorded_claim_the_cache_lacks_is_read_live_and_not_made_again(kit: Kit) -> None:
    """nop-claim-in-apiserver-only; TestClaimExists "found in apiserver fallback": the claim informer
    lags (stopped); the claim recorded in the status exists only in the API server: it is found there."""
    controller = await kit.start_controller()
    await controller.claims.stop()
    p = await kit.create(PODS, pod("p", {"gpu": GPU}))
    await kit.wait_event("p", "FailedResourceClaimCreation")  # no template yet: the pod was looked at
    await kit.create(RESOURCE_CLAIMS, owned_claim("p-gpu-earlier", p))
    await record(kit, "p", {"gpu": "p-gpu-earlier"})
    await kit.create(RESOURCE_CLAIM_TEMPLATES, template("t"))  # enqueues the pod again
    await stays(kit, ["p-gpu-earlier"], "the recorded claim is found live, no second one is made")
    assert await statuses(kit, "p") == {"gpu": "p-gpu-earlier"}


async def test_a_recorded_claim_only_this_process_has_written_is_not_made_again(kit: Kit) -> None:
    """nop-claim-in-mutation-cache-only; TestClaimExists "found in mutation cache": the recorded claim is
    known only from this process's own write (the mutation cache), not (yet) from the informer nor the
    API server: nothing is made."""
    controller = await kit.start_controller()
    await controller.claims.stop()
    p = await kit.create(PODS, pod("p", {"gpu": GPU}))
    await kit.wait_event("p", "FailedResourceClaimCreation")
    written = owned_claim("p-gpu-written", p)
    written["metadata"].update(namespace=kit.namespace, uid="0c1a1m00-0000-0000-0000-000000000001",
                               resourceVersion="1")
    controller.ctx.mutations.mutated(written)  # what a create this process made leaves behind
    await record(kit, "p", {"gpu": "p-gpu-written"})
    await kit.create(RESOURCE_CLAIM_TEMPLATES, template("t"))
    await stays(kit, [], "nothing is created for a claim the process has written itself")
    assert await statuses(kit, "p") == {"gpu": "p-gpu-written"}


async def test_an_older_recorded_claim_and_a_new_one_are_recorded_with_one_apply(kit: Kit) -> None:
    """flapping-resourceclaim-statuses: claim-a is recorded (a claim the pod controls, without the
    pod-claim annotation), claim-b is not: claim-b's claim is generated and one apply records both."""
    await kit.create(RESOURCE_CLAIM_TEMPLATES, template("t"))
    p = await kit.create(PODS, pod("p", {"claim-a": GPU, "claim-b": GPU}))
    await kit.create(RESOURCE_CLAIMS, owned_claim("claim-a-object", p, pod_claim=None))
    await record(kit, "p", {"claim-a": "claim-a-object"})
    before = await writes(kit)
    await kit.start_controller()

    async def both() -> dict[str, str] | None:
        found = await statuses(kit, "p")
        return found if len(found) == 2 else None

    found = await eventually(both, what="both claims recorded")
    assert found["claim-a"] == "claim-a-object" and found["claim-b"].startswith("p-claim-b-")
    await stays(kit, sorted(["claim-a-object", found["claim-b"]]), "claim-a's claim kept, one made for B")

    async def one_apply() -> bool:
        return (await writes(kit))[APPLY_POD_STATUS] - before[APPLY_POD_STATUS] == 1

    await consistently(one_apply, 1.0, "one status apply records both")
    assert await one_apply()


async def test_an_allocated_claim_of_a_pod_bound_without_the_allocator_is_reserved_for_it(kit: Kit) -> None:
    """add-reserved: the pod has ``spec.nodeName``; once its generated claim is allocated (here by the
    test, as an allocator would), it is reserved for the pod."""
    await kit.create(RESOURCE_CLAIM_TEMPLATES, template("t"))
    await kit.start_controller()
    p = await kit.create(PODS, pod("bound", {"gpu": GPU}, node="node-1"))
    made = await eventually(lambda: _one(statuses(kit, "bound")), what="claim recorded")
    await kit.allocate(made, "node-1")

    async def reserved() -> list[dict[str, Any]] | None:
        claim = await kit.get(RESOURCE_CLAIMS, made) or {}
        return (claim.get("status") or {}).get("reservedFor")

    assert await eventually(reserved, what="reserved for the bound pod") == [consumer(p)]
