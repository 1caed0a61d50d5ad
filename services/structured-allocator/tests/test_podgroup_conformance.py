"""Conformance with upstream kube-scheduler v1.37.1 for pod groups, each case named after the upstream test
case it restates in our words:

* DynamicResources ``TestPodGroupPostFilter`` and the ``postfilter-*-podgroup*`` cases of ``TestPlugin``
  (``dynamicresources_test.go``) → :func:`~structured_allocator.podgroup_postfilter.pod_group_post_filter`;
* ``TestPreFilterReusesPendingAllocationWithNilNodeSelector`` and
  ``TestFilterReusesPendingAllocationRequiresDRAOptionalNodeOperations`` → a member of a pod-group cycle
  using the pending allocation an earlier member decided (``Decider.decide(cycle=...)``);
* GangScheduling ``TestPlacementFeasible`` and ``TestPodGroupSchedulingAlgorithm``
  (``schedule_one_podgroup_test.go``) → :func:`~structured_allocator.groupcycle.feasibility` and
  :func:`~structured_allocator.gang.run_group_cycle`.

Not restated: ``disabled`` (DynamicResourceAllocation off: draflow is DRA), composite pod groups beyond the
refusal (CompositePodGroup is not in draflow's gates), placement scoring and topology-aware placements
(TopologyAwareWorkloadScheduling, alpha, not implemented), PodGroup status conditions."""

from __future__ import annotations

from typing import Any

import pytest
from sa_builders import alloc, dev, res
from test_decision_budget import decider
from test_decision_pod_groups import GroupState, add_claim
from test_gang_cycle import gang, group, member, state_with
from test_podgroup_postfilter import GROUP_REF, OTHER_REF, POD_REF, a_claim, pod_group

from structured_allocator.decision import Placement, Unschedulable
from structured_allocator.gang import run_group_cycle
from structured_allocator.groupcycle import GroupCycle, feasibility
from structured_allocator.podgroup_postfilter import pod_group_post_filter

P1 = {"metadata": {"name": "a", "namespace": "ns", "uid": "uid-a"},
      "spec": {"schedulingGroup": {"podGroupName": "workers"}}}
P2 = {"metadata": {"name": "b", "namespace": "ns", "uid": "uid-b"},
      "spec": {"schedulingGroup": {"podGroupName": "workers"}}}
GROUP_CLAIM = a_claim("workers-gpu-x", reserved=[GROUP_REF])
POD_CLAIM = a_claim("own-b", reserved=[{"resource": "pods", "name": "b", "uid": "uid-b"}], owned=False)


def post_filter(evaluated: list[tuple[dict[str, Any], dict[str, Any] | None, bool]], *,
                cached: list[dict[str, Any]] = (GROUP_CLAIM,),  # type: ignore[assignment]
                unavailable: list[dict[str, Any]] | None = None, workload: bool = True,
                topology_aware: bool = False, scheduled: int = 0,
                pg: dict[str, Any] | None = None) -> tuple[list[str], tuple[str, str] | None, str]:
    by_name = {c["metadata"]["name"]: c for c in cached}
    plan = pod_group_post_filter(pg or pod_group(), evaluated, evaluated[0][0], workload_claims=workload,
                                 topology_aware=topology_aware, scheduled_members=scheduled,
                                 unavailable=unavailable or [], claim_of=by_name.get)
    group_action = (plan.group.kind, plan.group.claim_key) if plan.group else None
    return [c["metadata"]["name"] for _, c in plan.per_pod], group_action, plan.refused


# -- TestPodGroupPostFilter / TestPlugin postfilter cases ---------------------------------------------------

def test_empty() -> None:  # nothing allocated: nothing to give back
    unallocated = a_claim("workers-gpu-x", allocated=False)
    assert post_filter([(P1, None, False)], cached=[unallocated]) == ([], None, "")


def test_deallocate_pod_level_claim() -> None:  # the member's own claim; it found one, so no group write
    assert post_filter([(P1, POD_CLAIM, False)]) == (["own-b"], None, "")


def test_deallocate_podgroup_level_claim() -> None:  # unavailable, reserved only for the group
    assert post_filter([(P1, None, False)], unavailable=[GROUP_CLAIM]) == (
        [], ("deallocate", "ns/workers-gpu-x"), "")


def test_delete_pod_level_extended_claim() -> None:  # the stale special claim counts as found
    assert post_filter([(P1, None, True)]) == ([], None, "")


def test_unreserve_podgroup_claim() -> None:  # available, reserved for the group: unreserved
    assert post_filter([(P1, None, False)]) == ([], ("unreserve", "ns/workers-gpu-x"), "")


def test_unreserve_podgroup_multiple_unscheduled_pods() -> None:
    assert post_filter([(P1, None, False), (P2, None, False)]) == ([], ("unreserve", "ns/workers-gpu-x"), "")


def test_mixed_pod_level_and_podgroup_claims() -> None:  # b's claim goes, a found nothing: the group's too
    assert post_filter([(P1, None, False), (P2, POD_CLAIM, False)], unavailable=[POD_CLAIM]) == (
        ["own-b"], ("unreserve", "ns/workers-gpu-x"), "")


def test_skip_deallocate_feature_disabled() -> None:  # DRAWorkloadResourceClaims off: members' claims only
    assert post_filter([(P1, None, False)], unavailable=[GROUP_CLAIM], workload=False) == ([], None, "")


def test_skip_deallocate_topology_aware_podgroup() -> None:
    pg = pod_group(schedulingConstraints={"topology": [{"key": "zone"}]})
    assert post_filter([(P1, POD_CLAIM, False)], topology_aware=True, pg=pg) == (
        [], None, "PodGroupPostFilter does not support topology-aware workloads")


def test_composite_pod_group_is_refused() -> None:  # upstream: CompositePodGroupKeyType
    pg = pod_group(parentCompositePodGroupName="all")
    refused = post_filter([(P1, POD_CLAIM, False)], pg=pg)
    assert refused == ([], None, "PodGroupPostFilter does not support CompositePodGroups")


def test_postfilter_deallocate_reserved_podgroup() -> None:  # TestPlugin: wrong topology, for the group
    action = post_filter([(P1, None, False)], unavailable=[GROUP_CLAIM])[1]
    assert action == ("deallocate", "ns/workers-gpu-x")


def test_postfilter_deallocate_unreserved_podgroup() -> None:  # wrong topology, reserved for nobody
    nobody = a_claim("workers-gpu-x", reserved=[])
    assert post_filter([(P1, None, False)], cached=[nobody], unavailable=[nobody])[1] == (
        "deallocate", "ns/workers-gpu-x")


def test_postfilter_skip_deallocate_reserved_podgroup_when_pods_active() -> None:  # a member is bound
    assert post_filter([(P1, None, False)], unavailable=[GROUP_CLAIM], scheduled=1) == ([], None, "")


def test_unreserve_needs_the_reservation_of_the_member_or_its_group() -> None:
    other = a_claim("workers-gpu-x", reserved=[OTHER_REF])
    assert post_filter([(P1, None, False)], cached=[other])[1] is None
    mine = a_claim("workers-gpu-x", reserved=[POD_REF])
    assert post_filter([(P1, None, False)], cached=[mine])[1] == ("unreserve", "ns/workers-gpu-x")


# -- reusing a pending allocation in a pod-group cycle ----------------------------------------------------

def _pending(state: GroupState, allocation: dict[str, Any]) -> GroupCycle:
    state.assume.assume("uid-workers-gpu-x", "ns/workers-gpu-x", allocation, "ns/first")
    cycle = GroupCycle()
    cycle.allocated("uid-workers-gpu-x", "uid-first")
    return cycle


async def test_pre_filter_reuses_pending_allocation_with_nil_node_selector() -> None:
    # a network-attached device: the pending allocation has no node selector, so any node will do
    state = GroupState({"n1": [dev("d0")], "n2": [dev("e0")]}, [group()])
    add_claim(state, "workers-gpu-x", owner="PodGroup")
    allocation = alloc(res("gpu", "d0", pool="n1"), node_selector=None)
    out = await decider(state, pod_groups=True).decide(member("b"), cycle=_pending(state, allocation))
    assert isinstance(out, Placement) and out.claims[0].shares_pending
    assert out.claims[0].allocation == allocation


async def test_filter_reuses_pending_allocation_requires_dra_optional_node_operations() -> None:
    state = GroupState({"n1": [dev("d0")], "n2": [dev("e0")]}, [group()])
    state.nodes.items["n2"]["status"]["declaredFeatures"] = ["DRAOptionalNodeOperations"]
    add_claim(state, "workers-gpu-x", owner="PodGroup")
    allocation = alloc(res("gpu", "d0", pool="n1", skipNodeOperations=True), node_selector=None)
    out = await decider(state, pod_groups=True).decide(member("b"), cycle=_pending(state, allocation))
    assert isinstance(out, Placement) and out.node == "n2"  # n1 does not declare the feature
    del state.nodes.items["n2"]["status"]["declaredFeatures"]
    out = await decider(state, pod_groups=True).decide(member("b"), cycle=_pending(state, allocation))
    assert isinstance(out, Unschedulable)


# -- GangScheduling PlacementFeasible, TestPodGroupSchedulingAlgorithm -------------------------------------

@pytest.mark.parametrize(("needed", "scheduled", "remaining", "verdict"), [
    pytest.param(3, 3, 0, "ok", id="all-pods-succeed-min-count-met-at-end"),
    pytest.param(3, 0, 2, "no", id="first-pod-fails-min-count-not-satisfiable"),
    pytest.param(3, 1, 2, "wait", id="min-count-not-yet-satisfied"),
    pytest.param(1, 1, 2, "ok", id="basic-policy-one-pod-is-enough"),
])
def test_placement_feasible(needed: int, scheduled: int, remaining: int, verdict: str) -> None:
    assert feasibility(needed, scheduled, remaining)[0] == verdict


async def test_all_pods_feasible() -> None:
    state = state_with(3, gang(3))
    out = await run_group_cycle(decider(state, pod_groups=True), state, [member(n) for n in "abc"],
                                needed=3, scheduled=0)
    assert out.placed and len(out.plans) == 3


async def test_pod_group_already_meeting_quorum_before_any_pod_is_evaluated() -> None:
    state = state_with(1, gang(2))
    out = await run_group_cycle(decider(state, pod_groups=True), state, [member("c")], needed=2, scheduled=2)
    assert out.placed


async def test_all_pods_unschedulable() -> None:
    state = state_with(0, gang(2))
    out = await run_group_cycle(decider(state, pod_groups=True), state, [member("a"), member("b")],
                                needed=2, scheduled=0)
    assert not out.placed and len(out.tried) == 1  # the first failure already rules minCount out


async def test_first_placement_feasible_call_returned_unschedulable() -> None:
    state = state_with(3, gang(5))
    out = await run_group_cycle(decider(state, pod_groups=True), state, [member("a"), member("b")],
                                needed=5, scheduled=0)
    assert not out.placed and out.tried == [] and len(out.untried) == 2
    assert out.message == "minCount (5) cannot be satisfied: 0 scheduled, 2 remaining"
