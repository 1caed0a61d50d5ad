"""Claims bound to a PodGroup (DRAWorkloadResourceClaims) in one decision, in memory — upstream
kube-scheduler v1.37.1 DynamicResources cases in our words: a member pod's claim that its PodGroup lists
with the same name and source is reserved for the group (one ``reservedFor`` entry), not for the pod; a
claim already reserved for the group needs no write; with the gate off the same pod reserves for itself
and a claim owned by the group is not the pod's. Over the fake caches of ``test_decision_budget``."""

from __future__ import annotations

from typing import Any

import pytest
from sa_builders import alloc, claim, dev, req, res
from test_decision_budget import FakeState, decider

from structured_allocator.decision import Placement, Unschedulable

GROUP_REF = {"apiGroup": "scheduling.k8s.io", "resource": "podgroups", "name": "workers", "uid": "uid-pg"}


class GroupState(FakeState):
    def __init__(self, nodes: dict[str, list[dict[str, Any]]], groups: list[dict[str, Any]]) -> None:
        super().__init__(nodes)
        self.groups = {f"ns/{g['metadata']['name']}": g for g in groups}

    def pod_group(self, namespace: str, name: str) -> dict[str, Any] | None:
        return self.groups.get(f"{namespace}/{name}")


def pod_group(**entry: str) -> dict[str, Any]:
    return {"metadata": {"name": "workers", "namespace": "ns", "uid": "uid-pg"},
            "spec": {"schedulingPolicy": {"basic": {}}, "resourceClaims": [{"name": "gpu", **entry}]}}


def member(claim_entry: dict[str, str], statuses: list[dict[str, str]] | None = None,
           group: str = "workers") -> dict[str, Any]:
    return {"metadata": {"name": "p", "namespace": "ns", "uid": "uid-p"},
            "spec": {"containers": [{"name": "c"}], "schedulingGroup": {"podGroupName": group},
                     "resourceClaims": [{"name": "gpu", **claim_entry}]},
            "status": {"resourceClaimStatuses": statuses or []}}


def add_claim(state: FakeState, name: str, *, owner: str = "", allocated: bool = False,
              reserved: list[dict[str, str]] | None = None) -> dict[str, Any]:
    c = claim(name, req("gpu"))
    c["metadata"].update(uid=f"uid-{name}", namespace="ns")
    if owner == "PodGroup":
        c["metadata"]["ownerReferences"] = [{"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
                                             "name": "workers", "uid": "uid-pg", "controller": True}]
    if allocated:
        c["status"] = {"allocation": alloc(res("gpu", "d0"), node_selector=None),
                       "reservedFor": reserved or []}
        state.assume.observe_claim(c, uid=c["metadata"]["uid"])
    state.claims.items[f"ns/{name}"] = c
    return c


async def test_a_members_new_allocation_is_reserved_for_its_podgroup() -> None:
    state = GroupState({"n1": [dev("d0")]}, [pod_group(resourceClaimName="shared")])
    add_claim(state, "shared")
    out = await decider(state, pod_groups=True).decide(member({"resourceClaimName": "shared"}))
    assert isinstance(out, Placement)
    (planned,) = out.claims
    assert planned.allocation is not None and planned.reserve and planned.consumer == GROUP_REF


async def test_with_the_gate_off_the_same_member_reserves_for_itself() -> None:
    state = GroupState({"n1": [dev("d0")]}, [pod_group(resourceClaimName="shared")])
    add_claim(state, "shared")
    out = await decider(state, pod_groups=False).decide(member({"resourceClaimName": "shared"}))
    assert isinstance(out, Placement)
    assert out.claims[0].allocation is not None and out.claims[0].consumer is None


async def test_the_groups_allocated_template_claim_is_reserved_for_the_group() -> None:
    state = GroupState({"n1": [dev("d0")]}, [pod_group(resourceClaimTemplateName="t")])
    add_claim(state, "workers-gpu-x", owner="PodGroup", allocated=True)
    pod = member({"resourceClaimTemplateName": "t"}, [{"name": "gpu", "resourceClaimName": "workers-gpu-x"}])
    out = await decider(state, pod_groups=True).decide(pod)
    assert isinstance(out, Placement) and out.node == "n1"
    (planned,) = out.claims
    assert planned.allocation is None and planned.reserve and planned.consumer == GROUP_REF


async def test_a_claim_already_reserved_for_the_group_needs_no_write() -> None:
    state = GroupState({"n1": [dev("d0")]}, [pod_group(resourceClaimTemplateName="t")])
    add_claim(state, "workers-gpu-x", owner="PodGroup", allocated=True, reserved=[GROUP_REF])
    pod = member({"resourceClaimTemplateName": "t"}, [{"name": "gpu", "resourceClaimName": "workers-gpu-x"}])
    out = await decider(state, pod_groups=True).decide(pod)
    assert isinstance(out, Placement)
    assert [(p.allocation, p.reserve) for p in out.claims] == [(None, False)]


async def test_with_the_gate_off_a_claim_owned_by_the_group_is_not_the_pods() -> None:
    state = GroupState({"n1": [dev("d0")]}, [pod_group(resourceClaimTemplateName="t")])
    add_claim(state, "workers-gpu-x", owner="PodGroup", allocated=True, reserved=[GROUP_REF])
    pod = member({"resourceClaimTemplateName": "t"}, [{"name": "gpu", "resourceClaimName": "workers-gpu-x"}])
    out = await decider(state, pod_groups=False).decide(pod)
    assert isinstance(out, Unschedulable)
    assert out.explanation.waiting == 'ResourceClaim "ns/workers-gpu-x" was not created for this pod'


@pytest.mark.parametrize("entry", [{"resourceClaimName": "other"}, {"resourceClaimTemplateName": "t"}],
                         ids=["other-claim-name", "template-instead-of-name"])
async def test_a_claim_the_group_lists_from_another_source_stays_the_pods(entry: dict[str, str]) -> None:
    state = GroupState({"n1": [dev("d0")]}, [pod_group(**entry)])
    add_claim(state, "shared")
    out = await decider(state, pod_groups=True).decide(member({"resourceClaimName": "shared"}))
    assert isinstance(out, Placement) and out.claims[0].consumer is None


async def test_a_member_of_a_podgroup_that_does_not_exist_is_unschedulable() -> None:
    state = GroupState({"n1": [dev("d0")]}, [])
    add_claim(state, "shared")
    out = await decider(state, pod_groups=True).decide(member({"resourceClaimName": "shared"}))
    assert isinstance(out, Unschedulable)
    assert out.explanation.waiting == 'PodGroup "ns/workers" does not exist'
