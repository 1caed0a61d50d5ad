"""One pod-group scheduling cycle, in memory (GenericWorkload; upstream
``podGroupSchedulingDefaultAlgorithm``).

:func:`run_group_cycle` tries the pending members of a PodGroup one after another with the
:class:`~.decision.Decider`. Each member that fits is **assumed at once** (its devices, reservations and
node usage, :func:`assume_plan`), so the next member sees them; a claim an earlier member allocated is
used by the later ones as it is (:class:`~.groupcycle.GroupCycle`: no wait for its write, no second
allocation, the devices counted once). After each member GangScheduling's ``PlacementFeasible``
(:func:`~.groupcycle.feasibility`) decides whether ``minCount`` can still be reached; the cycle stops as
soon as it cannot. The group is placed when at least ``minCount`` members are (counting those already
assumed or bound) and at least one member was placed in this cycle; otherwise every assumption of the
cycle is taken back (:func:`forget_plan`, last first) and nothing is written. No I/O here: the caller
(:mod:`.gang_attempts`) starts the write pipelines of a placed group, or reports and runs
PodGroupPostFilter (:mod:`.podgroup_postfilter`) for a failed one.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from . import extended_writes as xw
from . import nodealloc as na
from .assume import AssumeCache
from .binder import ClaimPlan, PodPlan
from .groupcycle import GroupCycle, feasibility
from .nodefit import NodeUsage, PodUsage, pod_demand
from .outcomes import Decision, Placement, Unschedulable

__all__ = ["CycleResult", "MemberResult", "assume_plan", "forget_plan", "plan_of", "run_group_cycle"]

Obj = Mapping[str, Any]


class _Decider(Protocol):
    async def decide(self, pod: Obj, *, only_node: str | None = None,
                     cancelled: Callable[[], bool] | None = None,
                     cycle: GroupCycle | None = None) -> Decision: ...


class _State(Protocol):
    assume: AssumeCache
    usage: NodeUsage


def plan_of(pod: Obj, placement: Placement, *, bind: bool = True) -> PodPlan:
    """The write plan of a placement (trace contexts are added when the pipeline starts)."""
    return PodPlan(pod, placement.node, [
        ClaimPlan(p.claim, p.allocation, p.reserve, None, consumer=p.consumer,
                  shares_pending=p.shares_pending)
        for p in placement.claims
    ], bind=bind, extended=placement.extended, node_allocatable=placement.node_allocatable)


def assume_plan(state: _State, plan: PodPlan) -> None:
    """Hold in memory what ``plan`` will write: its allocations (or its share of an allocation an
    earlier member of the same cycle decided), its ``reservedFor`` entries, the special claim of
    extended resources, and the pod on its node (node fit)."""
    assume = state.assume
    for cp in plan.claims:
        if cp.allocation is not None and not (cp.shares_pending and assume.share(cp.uid, plan.key)):
            assume.assume(cp.uid, cp.key, cp.allocation, plan.key)
        if cp.reserve:
            assume.reserve(cp.uid, cp.consumer_uid(plan.uid))
    xw.assume_extended(assume, plan)
    if plan.bind:
        pod = plan.pod if not plan.node_allocatable else \
            {**plan.pod, "status": {na.STATUS_FIELD: list(plan.node_allocatable)}}
        state.usage.assume(plan.uid, PodUsage(plan.node, pod_demand(pod, use_status=bool(
            plan.node_allocatable))))


def forget_plan(state: _State, plan: PodPlan) -> None:
    """Take back :func:`assume_plan` of a plan nothing was written for (a pod-group cycle that failed)."""
    assume = state.assume
    for cp in plan.claims:
        if cp.allocation is not None and not assume.unshare(cp.uid, plan.key):
            assume.release(cp.uid)
        if cp.reserve:
            assume.unreserve(cp.uid, cp.consumer_uid(plan.uid))
    xw.release_extended(assume, plan)
    state.usage.forget(plan.uid)


@dataclass
class MemberResult:
    pod: Obj
    decision: Decision
    plan: PodPlan | None = None  # placed (assumed in memory)


@dataclass
class CycleResult:
    tried: list[MemberResult]
    untried: list[Obj]  # members the cycle did not get to (it stopped early)
    placed: bool  # the group goes to binding: the plans of ``tried`` are assumed
    message: str  # why not (GangScheduling's PlacementFeasible), "" when placed
    cycle: GroupCycle = field(default_factory=GroupCycle)

    @property
    def plans(self) -> list[PodPlan]:
        return [m.plan for m in self.tried if m.plan is not None]


async def run_group_cycle(decider: _Decider, state: _State, members: Sequence[Obj], *, needed: int,
                          scheduled: int, cancelled: Callable[[Obj], Callable[[], bool] | None] | None = None
                          ) -> CycleResult:
    """Try ``members`` (pending, in queue order) as one group needing ``needed`` placed members, of
    which ``scheduled`` are already assumed or bound (see the module docstring). ``cancelled(pod)``:
    the search's cancellation hook for that member."""
    cycle = GroupCycle()
    remaining = len(members)
    verdict, message = feasibility(needed, scheduled, remaining)
    if verdict == "no":
        return CycleResult([], list(members), False, message, cycle)
    tried: list[MemberResult] = []
    placed_now = 0
    placed = False
    try:
        for pod in members:
            decision = await decider.decide(pod, cancelled=cancelled(pod) if cancelled else None, cycle=cycle)
            result = MemberResult(pod, decision)
            if isinstance(decision, Placement):
                result.plan = plan = plan_of(pod, decision)
                assume_plan(state, plan)
                for cp in plan.claims:
                    if cp.allocation is not None:
                        cycle.allocated(cp.uid, plan.uid)
                placed_now += 1
            elif isinstance(decision, Unschedulable):
                cycle.found_unavailable(decision.unavailable)
            tried.append(result)
            remaining -= 1
            verdict, message = feasibility(needed, scheduled + placed_now, remaining)
            if verdict == "no":
                break
        placed = verdict == "ok" and placed_now > 0
    finally:  # not placed, or the cycle was cancelled (the reconcile timed out): nothing stays assumed
        if not placed:
            for member in reversed(tried):
                if member.plan is not None:
                    forget_plan(state, member.plan)
    if not placed:
        message = message or "no pod of the group fits"
    return CycleResult(tried, list(members[len(tried):]), placed, "" if placed else message, cycle)
