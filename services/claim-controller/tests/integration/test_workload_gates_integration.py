"""PodGroup members under kube-controller-manager's feature gates GenericWorkload and
DRAWorkloadResourceClaims switched off in the controller (the API server keeps serving PodGroups), as
upstream's resourceclaim controller (v1.37.1 ``TestSyncHandler``) behaves; ``tests/unit/upstream_map.py``
names the cases.

Before: with DRAWorkloadResourceClaims off the controller did not look at PodGroups at all: a member got a
claim of its own for a claim its PodGroup lists (upstream refuses), a member of a PodGroup that does not
exist got its claims at once (upstream waits for the group), the group's claim recorded for a bound member
was reserved for the pod (upstream leaves it alone), and with GenericWorkload off too a member was treated
as a pod of no group (upstream refuses it)."""

from __future__ import annotations

from typing import Any

import pytest
from cc_kit import Kit, consumer, eventually, pod, template
from test_pod_groups_integration import GPU, member, pod_group
from test_upstream_pods_integration import owned_claim, record, statuses, stays

from draflow_runtime.kube import POD_GROUPS, PODS, RESOURCE_CLAIM_TEMPLATES, RESOURCE_CLAIMS

pytestmark = pytest.mark.integration

NODE = "node-1"


async def bound_member_with_allocated_claim(kit: Kit) -> tuple[dict[str, Any], str]:
    """A member bound to NODE whose status records an allocated claim it controls for the group's claim."""
    bound = await kit.create(PODS, member("bound", {"gpu": GPU}, node=NODE))
    claim = owned_claim("bound-gpu-earlier", bound)
    claim["spec"] = template("x")["spec"]["spec"]
    await kit.create(RESOURCE_CLAIMS, claim)
    await kit.allocate("bound-gpu-earlier", NODE)
    await record(kit, "bound", {"gpu": "bound-gpu-earlier"})
    return bound, "bound-gpu-earlier"


async def reserved_for(kit: Kit, name: str) -> list[dict[str, Any]]:
    claim = await kit.get(RESOURCE_CLAIMS, name) or {}
    return list((claim.get("status") or {}).get("reservedFor") or ())


async def test_with_workload_claims_off_a_groups_claim_is_refused_but_a_members_own_claim_is_made(
        kit: Kit) -> None:
    """skip-create-for-pod-with-podgroup-claim-workloadresourceclaims-disabled,
    create-for-grouped-pod-with-claim-workloadresourceclaims-disabled,
    skip-add-reserved-podgroup-workloadresourceclaims-disabled, and (gate off)
    skip-create-for-pod-podgroup-does-not-exist."""
    await kit.create(RESOURCE_CLAIM_TEMPLATES, template("gpu-template"))
    await kit.create(POD_GROUPS, pod_group())
    bound, earlier = await bound_member_with_allocated_claim(kit)
    await kit.start_controller(feature_gates="DRAWorkloadResourceClaims=false")
    await kit.create(PODS, member("m", {"gpu": GPU, "scratch": GPU}))
    await kit.create(PODS, member("lost", {"scratch": GPU}, group="nowhere"))

    event = await kit.wait_event("m", "FailedResourceClaimCreation")
    assert "DRAWorkloadResourceClaims feature is disabled" in event["message"]
    await kit.create(PODS, member("own", {"scratch": GPU}))
    made = await eventually(lambda: _named(statuses(kit, "own"), "scratch"), what="the member's own claim")
    assert made.startswith("own-scratch-")
    await stays(kit, sorted([earlier, made]), "nothing for the group's claim nor the member of no group")
    assert await statuses(kit, "m") == {} and await statuses(kit, "lost") == {}
    assert await reserved_for(kit, earlier) == []  # the group's claim is not reserved for the pod
    assert await statuses(kit, "bound") == {"gpu": earlier}
    assert consumer(bound) not in await reserved_for(kit, earlier)


async def test_with_generic_workload_off_a_member_pod_gets_an_event_and_nothing_else(kit: Kit) -> None:
    """skip-create-for-pod-with-podgroup-claim-genericworkload-disabled,
    skip-add-reserved-podgroup-genericworkload-disabled."""
    await kit.create(RESOURCE_CLAIM_TEMPLATES, template("gpu-template"))
    await kit.create(POD_GROUPS, pod_group())
    _, earlier = await bound_member_with_allocated_claim(kit)
    await kit.start_controller(feature_gates="DRAWorkloadResourceClaims=false,GenericWorkload=false")
    await kit.create(PODS, member("m", {"gpu": GPU, "scratch": GPU}))
    await kit.create(PODS, pod("control", {"gpu": GPU}))

    for name in ("m", "bound"):
        event = await kit.wait_event(name, "FailedResourceClaimCreation")
        assert "GenericWorkload feature is disabled" in event["message"]
    control = await eventually(lambda: _named(statuses(kit, "control"), "gpu"),
                               what="the control pod's claim")
    await stays(kit, sorted([earlier, control]), "no claim for the member")
    assert await statuses(kit, "m") == {}
    assert await reserved_for(kit, earlier) == []


async def _named(probe: Any, key: str) -> str | None:
    return (await probe).get(key)
