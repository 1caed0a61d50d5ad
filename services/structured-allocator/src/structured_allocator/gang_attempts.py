"""Pod-group attempts of the scheduler (GenericWorkload): one queue key per PodGroup, one cycle per attempt.

A pending pod with ``spec.schedulingGroup.podGroupName`` is not tried on its own: its key turns into the
:class:`GroupKey` of its PodGroup (the queue merges the keys of all members) and
:meth:`GroupAttempts.reconcile` runs one cycle (:func:`~.gang.run_group_cycle`) for every pending member,
under the decision lock:

* the PodGroup is not known yet: the members wait, untouched (upstream GangScheduling ``PreEnqueue``),
  named in an info log line and in ``/explain``; the PodGroup's arrival retries them; a member with
  scheduling gates or a claim that does not exist yet stays out of the cycle (upstream SchedulingGates and
  DynamicResources ``PreEnqueue``);
* a gang whose pods (pending + scheduled) are fewer than ``minCount`` waits, untouched (upstream
  GangScheduling ``PreEnqueue``); a new member retries it;
* placed: every member that fits starts its write pipeline (its assumptions were made in the cycle);
  members that did not fit are reported unschedulable with their own reason, without PostFilter (as
  upstream: no per-pod PostFilter in a pod-group cycle);
* not placed: nothing is written; every member is reported unschedulable (its own reason, or the
  group's: ``pod group "ns/name" is unschedulable: minCount (3) cannot be satisfied: ...``) and
  PodGroupPostFilter runs (:mod:`.podgroup_postfilter`): each tried member's own PostFilter claim, then,
  if one of them had none, the group's one claim write. Retried after ``unschedulable_retry`` or when
  the cluster changes, as single pods are.

"Scheduled" members (upstream ``ScheduledPodsCount``: assumed or bound) are the group's pods bound to
a node (bound-pods informer) plus those whose write pipeline runs or ended here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from draflow_runtime.dra import pod_group_name
from draflow_runtime.informer import key_of as _key_of
from draflow_runtime.log import bind, get_logger
from draflow_runtime.reconcile import Done, RequeueAfter, RequeueWithBackoff

from .explain_http import PodExplanation
from .gang import CycleResult, run_group_cycle
from .groupcycle import min_count, pending_members_wait
from .outcomes import Unschedulable, Waiting
from .podclaims import resolve_claims
from .podgroup_postfilter import pod_group_post_filter

if TYPE_CHECKING:
    from .scheduler import Scheduler

__all__ = ["GroupAttempts", "GroupKey"]

log = get_logger(__name__)

Obj = Mapping[str, Any]
Outcome = Done | RequeueAfter | RequeueWithBackoff


@dataclass(frozen=True, slots=True)
class GroupKey:
    """Work-queue key of a PodGroup's cycle."""

    namespace: str
    name: str

    def __str__(self) -> str:
        return f"podgroup:{self.namespace}/{self.name}"


def key_of(pod: Obj) -> str:
    return _key_of(dict(pod))


def _queue_order(pod: Obj) -> tuple[int, str, str]:
    """Upstream's queue sort: higher priority first, then older first."""
    spec, meta = pod.get("spec") or {}, pod.get("metadata") or {}
    return -int(spec.get("priority") or 0), str(meta.get("creationTimestamp") or ""), str(meta.get("name"))


class GroupAttempts:
    def __init__(self, scheduler: Scheduler, *, enabled: bool, topology_aware: bool = False) -> None:
        self.sched = scheduler
        self.enabled = enabled  # GenericWorkload
        self.topology_aware = topology_aware  # TopologyAwareWorkloadScheduling (not implemented: off)

    def key_of(self, pod: Obj) -> GroupKey | None:
        """The key a pending member's attempts go to, or None (not in a group, or the gate is off)."""
        group = pod_group_name(pod) if self.enabled else ""
        return GroupKey(pod["metadata"]["namespace"], group) if group else None

    async def reconcile(self, key: GroupKey) -> Outcome:
        async with self.sched.decision_lock:
            with bind(podgroup=f"{key.namespace}/{key.name}"):
                return await self._attempt(key)

    async def _attempt(self, key: GroupKey) -> Outcome:
        sched, state = self.sched, self.sched.state
        pending, bound = state.pod_group_members(key.namespace, key.name)
        pending = [p for p in pending if state.ours(p) and not p["metadata"].get("deletionTimestamp")]
        pod_group = state.pod_group(key.namespace, key.name)
        if pod_group is None:  # upstream GangScheduling PreEnqueue: wait for it; its arrival retries
            # Nothing is written (as upstream: no condition that would call an autoscaler), but the wait
            # is named: a log line and `draflow explain` (the explanation store) say which PodGroup.
            missing = f'PodGroup "{key.namespace}/{key.name}" does not exist'
            for pod in pending:
                sched.explanations.record(PodExplanation(key_of(pod), [], waiting=missing))
            log.info("pod group does not exist: its pods wait", pods=sorted(key_of(p) for p in pending))
            return Done()
        placed = {p["metadata"]["uid"] for p in bound}
        placed |= {p["metadata"]["uid"] for p in pending
                   if key_of(p) in sched.in_flight or key_of(p) in sched._bound}
        members = sorted((p for p in pending if p["metadata"]["uid"] not in placed and self._enqueued(p)),
                         key=_queue_order)
        if (why := pending_members_wait(pod_group, len(pending) + len(bound))) is not None:
            log.debug("pod group waits", reason=why, pods=len(pending) + len(bound))
            return Done()
        if not members:
            return Done()
        with sched.tracer.start_as_current_span("schedule pod group") as span:
            span.set_attribute("draflow.podgroup", f"{key.namespace}/{key.name}")
            result = await run_group_cycle(sched.decider, state, members, needed=min_count(pod_group),
                                           scheduled=len(placed),
                                           cancelled=lambda p: sched._gone(key_of(p), p["metadata"]["uid"]))
            span.set_attribute("draflow.outcome", "placed" if result.placed else "unschedulable")
            if result.placed:
                return self._placed(result, span)
            return self._failed(key, pod_group, result, members[0], len(placed), span)

    def _enqueued(self, pod: Obj) -> bool:
        """Upstream's PreEnqueue plugins let the pod into the queue: no scheduling gates
        (SchedulingGates), every claim it names exists (DynamicResources). Others wait outside the
        cycle; their gate's removal or their claim's arrival retries the group."""
        if (pod.get("spec") or {}).get("schedulingGates"):
            return False
        state = self.sched.state
        resolved = resolve_claims(pod, state.claims.get, lambda ns, name: state.pod_group(ns, name),
                                  self.sched.decider.pod_groups)
        return not isinstance(resolved, Waiting)

    def _placed(self, result: CycleResult, span: Any) -> Outcome:
        sched = self.sched
        outcome: Outcome = Done()
        for member in result.tried:
            key = key_of(member.pod)
            if member.plan is not None:
                sched.run_assumed(member.plan, span)
            elif isinstance(member.decision, Waiting):
                self._wait(key, member.decision)
            elif isinstance(member.decision, Unschedulable):
                outcome = sched._unschedulable(member.pod, member.decision, span, post_filter=False)
        log.info("pod group placed", pods=len(result.plans),
                 unschedulable=len(result.tried) - len(result.plans))
        return outcome

    def _wait(self, key: str, decision: Waiting) -> None:
        if decision.on_claim:
            self.sched._waiters.setdefault(decision.on_claim, set()).add(key)

    def _failed(self, key: GroupKey, pod_group: Obj, result: CycleResult, first: Obj, scheduled: int,
                span: Any) -> Outcome:
        sched = self.sched
        why = f'pod group "{key.namespace}/{key.name}" is unschedulable: {result.message}'
        outcome: Outcome = Done()
        evaluated: list[tuple[Obj, Obj | None, bool]] = []  # (member, its own PostFilter claim, other)
        for member in result.tried:
            decision = member.decision
            if isinstance(decision, Waiting):
                self._wait(key_of(member.pod), decision)
                evaluated.append((member.pod, None, False))
                continue
            if not isinstance(decision, Unschedulable):  # it fitted, the group did not
                decision = Unschedulable(PodExplanation(key_of(member.pod), [], waiting=why))
            evaluated.append((member.pod, decision.deallocate, decision.stale_extended is not None))
            outcome = sched._unschedulable(member.pod, decision, span, post_filter=False)
        for pod in result.untried:
            sched._unschedulable(pod, Unschedulable(PodExplanation(key_of(pod), [], waiting=why)), span)
        log.info("pod group unschedulable", reason=result.message, tried=len(result.tried))
        self._post_filter(pod_group, result, evaluated, first, scheduled)
        if all(isinstance(m.decision, Waiting) for m in result.tried):
            return Done()  # retried when what they wait for shows up (claim events), as single pods
        return outcome if not isinstance(outcome, Done) else RequeueAfter(sched.settings.unschedulable_retry)

    def _post_filter(self, pod_group: Obj, result: CycleResult, evaluated: list[tuple[Obj, Obj | None, bool]],
                     first: Obj, scheduled: int) -> None:
        """PodGroupPostFilter (:mod:`.podgroup_postfilter`): the members' own claims, then the group's."""
        meta = pod_group["metadata"]
        plan = pod_group_post_filter(
            pod_group, evaluated, first, workload_claims=self.sched.decider.pod_groups,
            topology_aware=self.topology_aware, scheduled_members=scheduled,
            unavailable=result.cycle.unavailable,
            claim_of=lambda name: self.sched.state.claims.get(f"{meta['namespace']}/{name}"))
        if plan.refused:
            log.debug("pod group post-filter skipped", reason=plan.refused)
        for pod, claim in plan.per_pod:
            self.sched.give_backs.start(pod, claim)
        if plan.group is not None:
            self.sched.give_backs.start(first, plan.group.claim, consumer_uid=plan.group.group_uid,
                                    kind=plan.group.kind,
                                    why=f'pod group "{meta["namespace"]}/{meta["name"]}" cannot be placed')
