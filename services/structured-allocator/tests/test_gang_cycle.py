"""One pod-group cycle in memory (GenericWorkload) — upstream kube-scheduler v1.37.1 cases in our words
(``schedule_one_podgroup_test.go``, GangScheduling ``PlacementFeasible``/``PreEnqueue``, DynamicResources
pending allocations shared in a PodGroup cycle):

* members placed in one cycle share the allocation of the group's claim an earlier member decided: one
  allocation, its device counted once (without it a gang whose members share a claim never places:
  the second member waits for a write that only a placed group would make);
* a gang that cannot reach ``minCount`` takes every assumption of the cycle back and stops early;
* basic policy: the group places when one member fits; members already bound count towards ``minCount``.

Over the fake caches of ``test_decision_budget``."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from sa_builders import alloc, dev, res
from test_decision_budget import decider
from test_decision_pod_groups import GROUP_REF, GroupState, add_claim

from structured_allocator.decision import Placement, Unschedulable, Waiting
from structured_allocator.gang import run_group_cycle
from structured_allocator.groupcycle import GroupCycle, feasibility, min_count, pending_members_wait

CLAIM_UID = "uid-workers-gpu-x"


def group(policy: dict[str, Any] | None = None, claims: bool = True) -> dict[str, Any]:
    spec: dict[str, Any] = {"schedulingPolicy": policy or {"basic": {}}}
    if claims:
        spec["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": "t"}]
    return {"metadata": {"name": "workers", "namespace": "ns", "uid": "uid-pg"}, "spec": spec}


def gang(n: int) -> dict[str, Any]:
    return group({"gang": {"minCount": n}})


def member(name: str, *, own: str = "") -> dict[str, Any]:
    """A member using the group's claim ``workers-gpu-x``, and its own claim ``own`` if given."""
    claims = [{"name": "gpu", "resourceClaimTemplateName": "t"}]
    statuses = [{"name": "gpu", "resourceClaimName": "workers-gpu-x"}]
    if own:
        claims.append({"name": "own", "resourceClaimName": own})
    return {"metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}"},
            "spec": {"containers": [{"name": "c"}], "schedulingGroup": {"podGroupName": "workers"},
                     "resourceClaims": claims},
            "status": {"resourceClaimStatuses": statuses}}


def state_with(devices: int, pg: dict[str, Any], own: tuple[str, ...] = ()) -> GroupState:
    state = GroupState({"n1": [dev(f"d{i}") for i in range(devices)]}, [pg])
    add_claim(state, "workers-gpu-x", owner="PodGroup")
    for name in own:
        add_claim(state, name)
    return state


async def test_members_of_one_cycle_share_the_pending_allocation_of_the_groups_claim() -> None:
    state = state_with(2, gang(2))
    out = await run_group_cycle(decider(state, pod_groups=True), state, [member("a"), member("b")],
                                needed=2, scheduled=0)
    assert out.placed, out.message
    first, second = out.plans
    (allocating,), (sharing,) = first.claims, second.claims
    assert allocating.allocation is not None and not allocating.shares_pending
    assert allocating.consumer == GROUP_REF and allocating.reserve
    assert sharing.shares_pending and sharing.allocation == allocating.allocation  # the same devices
    assert len(state.assume.state.devices) == 1  # one device held, not two
    assert out.cycle.pending == {CLAIM_UID: {"uid-a", "uid-b"}}


async def test_a_later_member_uses_an_allocation_decided_in_its_cycle_instead_of_waiting() -> None:
    state = state_with(2, gang(2))
    cycle = GroupCycle()
    d = decider(state, pod_groups=True)
    first = await d.decide(member("a"), cycle=cycle)
    assert isinstance(first, Placement)
    allocation = first.claims[0].allocation
    assert allocation is not None
    state.assume.assume(CLAIM_UID, "ns/workers-gpu-x", allocation, "ns/a")
    assert isinstance(await d.decide(member("b")), Waiting)  # not in the cycle: wait for the write
    cycle.allocated(CLAIM_UID, "uid-a")
    second = await d.decide(member("b"), cycle=cycle)
    assert isinstance(second, Placement)
    assert second.claims[0].shares_pending and second.claims[0].allocation == allocation


async def test_a_gang_that_cannot_reach_min_count_takes_every_assumption_back() -> None:
    # the group's claim + two own claims of one device each: three devices wanted, two exist
    state = state_with(2, gang(2), own=("own-a", "own-b"))
    out = await run_group_cycle(decider(state, pod_groups=True), state,
                                [member("a", own="own-a"), member("b", own="own-b")], needed=2, scheduled=0)
    assert not out.placed
    assert out.message == "minCount (2) cannot be satisfied: 1 scheduled, 0 remaining"
    assert isinstance(out.tried[1].decision, Unschedulable)
    assert out.plans and not state.assume.allocations()  # nothing held after the cycle
    assert state.usage.assumed == 0


async def test_the_cycle_stops_as_soon_as_min_count_is_out_of_reach() -> None:
    state = state_with(1, gang(3), own=("own-a", "own-b", "own-c"))  # the first member does not fit
    members = [member(n, own=f"own-{n}") for n in ("a", "b", "c")]
    out = await run_group_cycle(decider(state, pod_groups=True), state, members, needed=3, scheduled=0)
    assert not out.placed and len(out.tried) == 1
    assert [p["metadata"]["name"] for p in out.untried] == ["b", "c"]
    assert out.message == "minCount (3) cannot be satisfied: 0 scheduled, 2 remaining"


async def test_basic_policy_places_the_members_that_fit() -> None:
    state = state_with(2, group(), own=("own-a", "own-b"))
    out = await run_group_cycle(decider(state, pod_groups=True), state,
                                [member("a", own="own-a"), member("b", own="own-b")], needed=1, scheduled=0)
    assert out.placed and len(out.plans) == 1 and isinstance(out.tried[1].decision, Unschedulable)
    assert len(state.assume.state.devices) == 2  # the placed member's devices stay held


async def test_members_already_bound_count_towards_min_count() -> None:
    state = state_with(2, gang(2))
    out = await run_group_cycle(decider(state, pod_groups=True), state, [member("b")], needed=2, scheduled=1)
    assert out.placed


async def test_no_member_placed_in_the_cycle_is_no_placement_even_with_min_count_met() -> None:
    state = state_with(0, group())
    out = await run_group_cycle(decider(state, pod_groups=True), state, [member("a")], needed=1, scheduled=1)
    assert not out.placed and out.message == "no pod of the group fits"


def test_placement_feasible_and_the_gang_pre_enqueue_wait() -> None:
    assert feasibility(3, 1, 1) == ("no", "minCount (3) cannot be satisfied: 1 scheduled, 1 remaining")
    assert feasibility(3, 1, 2) == ("wait", "minCount (3) is not yet satisfied: 1 scheduled, 2 remaining")
    assert feasibility(3, 3, 0) == ("ok", "")
    assert min_count(group()) == 1 and min_count(gang(4)) == 4
    waiting = "waiting for minCount pods from a gang to appear in scheduling queue"
    assert pending_members_wait(gang(3), 2) == waiting
    assert pending_members_wait(gang(3), 3) is None and pending_members_wait(group(), 0) is None


async def test_an_allocated_claim_that_rules_out_a_node_is_reported_unavailable() -> None:
    # "held" is allocated on node-1 (its only device); the pod's own claim then fits nowhere: node-1 is
    # full, n2 is ruled out by held's node selector — upstream's unavailableClaims for PodGroupPostFilter
    state = GroupState({"node-1": [dev("d0")], "n2": [dev("e0")]}, [group(claims=False)])
    held = add_claim(state, "held")
    held["status"] = {"allocation": alloc(res("gpu", "d0")), "reservedFor": []}
    state.assume.observe_claim(held)
    add_claim(state, "own-a")
    pod = member("a", own="own-a")
    pod["spec"]["resourceClaims"] = [{"name": "held", "resourceClaimName": "held"},
                                     {"name": "own", "resourceClaimName": "own-a"}]
    out = await decider(state, pod_groups=True).decide(pod, cycle=GroupCycle())
    assert isinstance(out, Unschedulable)
    assert [c["metadata"]["name"] for c in out.unavailable] == ["held"]
    assert out.explanation.node_reasons["cannot use the node of an already allocated claim"] == 1


async def test_a_cycle_cut_short_holds_nothing() -> None:
    # the reconcile's timeout cancels the cycle during the second member: the first one's assumption goes
    state = state_with(2, gang(2))
    real = decider(state, pod_groups=True)

    class Cancelling:
        calls = 0

        async def decide(self, pod: dict[str, Any], **kw: Any) -> Any:
            self.calls += 1
            if self.calls == 2:
                raise asyncio.CancelledError
            return await real.decide(pod, **kw)

    with pytest.raises(asyncio.CancelledError):
        await run_group_cycle(Cancelling(), state, [member("a"), member("b")], needed=2, scheduled=0)
    assert not state.assume.allocations() and state.usage.assumed == 0
