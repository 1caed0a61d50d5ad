"""One scheduling decision, in memory only: which node and which devices for a pod's claims.

``await Decider.decide(pod)`` reads the informer caches and the assume cache, does no I/O, and returns

* :class:`Placement` — a node, and per claim the allocation to write (or only a reservation for a
  claim that is already allocated, e.g. shared by several pods); with DRAWorkloadResourceClaims a claim
  the pod's PodGroup lists is reserved for the PodGroup (``PlannedClaim.consumer``), and one already
  reserved for the group needs no write;
* :class:`Waiting` — the pod has ``schedulingGates`` (the API server already shows
  ``SchedulingGated``), a claim does not exist yet, or its allocation for another pod is being written
  (the pod is retried when that changes; nothing is reported);
* :class:`Unschedulable` — no node fits (:class:`~.explain_http.PodExplanation`), or the input is
  broken (unknown DeviceClass, invalid CEL selector: the error names class and expression), or an
  allocated claim is unavailable (its binding conditions failed or timed out, :mod:`.bindingconds`).
  When no node fits, ``deallocate`` names the allocated claim PostFilter gives back (:mod:`.postfilter`):
  one found unavailable (its selector ruled out a node that passed the node filters and node fit, or
  its binding failed), never one that is merely of no use because something else does not fit.

Search: node filters first (:mod:`.nodes`), node fit (:mod:`.nodefit`: pod count, resource requests
and host ports against what the node's bound and assumed pods use), a cheap free-device count that
skips nodes that cannot hold the devices asked for, then the core :class:`~.core.Allocator` per
node. Like kube-scheduler's ``percentageOfNodesToScore`` it stops after ``nodes_to_find`` feasible
nodes, starting where the last search stopped, so the cost of one decision does not grow with the
cluster (the SliceIndex makes each node's look-up independent of the number of slices elsewhere).
Among them the node where the pod's ``firstAvailable`` requests got the earliest subrequests wins
(upstream's DynamicResources Score, :mod:`.core.subrequest_score`); the scorer breaks ties. When a node's
score is known before its device search (exact-count requests, a count-only scorer), the window's nodes
are searched best score first and the first that fits wins (:mod:`.nodesearch`, "ranked first").

Bounded (issue 12, defect 6; upstream DRASchedulerFilterTimeout): every ``Allocator.allocate`` call gets
a :class:`~.core.SearchBudget` — ``search_steps`` device tries for that node, the decision's
``filter_timeout`` deadline and a cancellation hook (the pod is gone). A node whose search runs out of
steps counts as "search budget exhausted after N steps" and the search goes on with the next node; the
deadline or the hook stop the search (feasible nodes found so far still win). When nothing fits and a
budget ran out, the :class:`Unschedulable` says so (``budget_exhausted``) and the scheduler retries the
pod with backoff. Between nodes the search (:mod:`.nodesearch`) yields to the event loop at least every
:data:`~.nodesearch.YIELD_EVERY` seconds (so one decision holds the loop for about one node's search); after
a yield the allocator is rebuilt (its counter cache may be stale). Callers serialise decisions (the
scheduler's decision lock), so only informer events can change the caches across a yield.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from draflow_runtime.dra import RESERVED_FOR_MAX, is_reserved_for_pod_or_group

from .bindingconds import binding_status, utcnow
from .claimfacts import describe_error
from .core import AllocationError, CelCache, Features
from .explain_http import PodExplanation
from .extres import ExtendedClaim, ExtendedDemand, extended_demand
from .groupcycle import GroupCycle
from .nodealloc import mapped
from .nodealloc_plan import NodeAllocatableCheck, device_lookup, shared_mapped_claim
from .nodefit import PodDemand, pod_demand
from .nodes import claim_selector_reason, unsupported_reason
from .nodesearch import NodeSearch
from .outcomes import Decision, Placement, PlannedClaim, Unschedulable, Waiting
from .podclaims import resolve_claims
from .postfilter import claim_to_deallocate
from .scoring import Scorer
from .state import ClusterState

__all__ = [
    "Decider", "Decision", "ExtendedClaim", "Placement", "PlannedClaim", "Unschedulable", "Waiting",
    "describe_error",
]



def pending_mapped_claim(pod_uid: str, planned: list[PlannedClaim], cycle: GroupCycle,
                         slices: Any) -> str:
    """Why the pod cannot use a claim another member of its pod-group cycle is allocating, or "": a
    device of it *maps* node resources (DRANodeAllocatableResources), and such a claim is one pod's
    (upstream ``validateNodeAllocatableDRAClaimSharing``, pending allocations of the cycle)."""
    device_of = device_lookup(slices)
    for p in planned:
        if p.shares_pending and cycle.pending.get(p.claim["metadata"]["uid"], set()) - {pod_uid} \
                and mapped(p.allocation, device_of):
            return (f'node allocatable resource claim "{p.claim["metadata"]["name"]}" has a mapped device '
                    "and cannot be shared across pods")
    return ""


class Decider:
    def __init__(self, state: ClusterState, scorer: Scorer, nodes_to_find: int,
                 cel_cache: CelCache | None = None, *, binding_timeout: float = 600.0,
                 clock: Callable[[], datetime] = utcnow, search_steps: int = 0,
                 filter_timeout: float = 0.0, monotonic: Callable[[], float] = time.monotonic,
                 features: Features | None = None, node_allocatable: bool = False,
                 pod_groups: bool = False) -> None:
        self.state = state
        self.pod_groups = pod_groups  # DRAWorkloadResourceClaims: claims bound to the pod's PodGroup
        self.node_allocatable = node_allocatable  # DRANodeAllocatableResources (nodealloc_plan)
        self.features = features  # None: the core's defaults
        self.binding_timeout = binding_timeout
        self.clock = clock
        self.scorer = scorer
        self.nodes_to_find = nodes_to_find
        self.cel_cache = cel_cache or CelCache()
        self.next_start = 0  # where the next search starts in the node names (:mod:`.nodesearch`)
        self.search_steps = search_steps  # per allocate() call; 0: unbounded
        self.filter_timeout = filter_timeout  # per decision, seconds; 0: unbounded
        self.monotonic = monotonic

    # -- claims ----------------------------------------------------------------------------------------

    # -- the decision ------------------------------------------------------------------------------------

    async def decide(self, pod: Mapping[str, Any], *, only_node: str | None = None,
                     cancelled: Callable[[], bool] | None = None,
                     cycle: GroupCycle | None = None) -> Decision:
        """Place ``pod`` (see the module docstring). ``only_node``: the pod is already bound there
        (NATS allocate request): no node filters, that node only. ``cancelled``: polled during the
        search; True stops it (budget exhausted, reason ``cancelled``). ``cycle``: the pod-group cycle
        the pod is tried in (:mod:`.gang`): an allocation an earlier member of it decided is used as it
        is (pending, not written yet), not waited for (upstream ``podGroupStateData``)."""
        meta = pod["metadata"]
        pod_key, pod_uid = f"{meta['namespace']}/{meta['name']}", meta.get("uid")
        gates = (pod.get("spec") or {}).get("schedulingGates")
        if gates and not only_node:  # kube-scheduler's SchedulingGates: the API server reports it
            return Waiting("scheduling gates: " + ", ".join(g.get("name", "") for g in gates))
        unsupported = None if only_node else unsupported_reason(pod)
        if unsupported:
            return Unschedulable(PodExplanation(pod_key, [], waiting=unsupported))
        demand = pod_demand(pod)  # once per decision: node fit and the extended resources
        extended = None if only_node else self._extended(pod, demand)
        if extended is not None and extended.stale is not None:
            smeta = extended.stale["metadata"]
            return Unschedulable(PodExplanation(
                pod_key, [], waiting=f'ResourceClaim "{smeta["namespace"]}/{smeta["name"]}" for the '
                "pod's extended resources is left from an earlier attempt; deleting it"),
                stale_extended=extended.stale)
        resolved = resolve_claims(pod, self.state.claims.get, lambda ns, name: self.state.pod_group(ns, name),
                                  self.pod_groups)
        if not isinstance(resolved, tuple):
            return resolved
        resolved_claims, bound_to = resolved
        consumer_of = {c["metadata"]["uid"]: ref for c, ref in zip(resolved_claims, bound_to, strict=True)}
        assume = self.state.assume
        allocated: list[PlannedClaim] = []
        to_allocate: list[Mapping[str, Any]] = []
        unavailable: list[tuple[Mapping[str, Any], str]] = []  # (claim, why): binding failed / timed out
        for claim in resolved_claims:
            uid = claim["metadata"]["uid"]
            allocation = assume.allocation(uid)
            if allocation is None:
                to_allocate.append(claim)
                continue
            pending = assume.assumed(uid)
            ckey = f"{claim['metadata']['namespace']}/{claim['metadata']['name']}"
            if pending is not None and not pending.written:
                if cycle is not None and cycle.shares(uid):  # decided earlier in this pod-group cycle
                    allocated.append(PlannedClaim(claim, dict(allocation), True, consumer_of.get(uid),
                                                  shares_pending=True))
                    continue
                return Waiting(f'allocation of ResourceClaim "{ckey}" is being written', on_claim=ckey)
            reserved_for = (claim.get("status") or {}).get("reservedFor") or []
            reserved = is_reserved_for_pod_or_group(claim, pod, self.pod_groups)
            consumers, _ = assume.reservations(uid, reserved_for)  # including writes in flight
            if not reserved and consumers >= RESERVED_FOR_MAX:
                return Unschedulable(PodExplanation(
                    pod_key, [], waiting=f'ResourceClaim "{ckey}" is already reserved for '
                    f"{RESERVED_FOR_MAX} consumers, the most allowed"))
            binding = binding_status(claim, now=self.clock(), timeout=self.binding_timeout)
            if binding.state.unavailable:
                unavailable.append((claim, f'ResourceClaim "{ckey}" is not available: {binding.message}'))
            allocated.append(PlannedClaim(claim, None, not reserved, consumer_of.get(uid)))
        allocated_claims = [a.claim for a in allocated]
        if unavailable:
            return Unschedulable(
                PodExplanation(pod_key, [], waiting="; ".join(why for _, why in unavailable)),
                deallocate=claim_to_deallocate([c for c, _ in unavailable], str(pod_uid)),
                unavailable=[c for c, _ in unavailable])
        claim_keys = [f"{c['metadata']['namespace']}/{c['metadata']['name']}" for c in to_allocate]
        explanation = PodExplanation(pod_key, claim_keys)
        fixed = [assume.allocation(a.claim["metadata"]["uid"]) or {} for a in allocated]
        na = None  # pods already bound (only_node) skip node fit, this part of it too
        if self.node_allocatable and not only_node:
            pairs = list(zip(allocated_claims, fixed, strict=True))
            shared = shared_mapped_claim(pod, pairs, self.state.slices, self.pod_groups)
            if not shared and cycle is not None:
                shared = pending_mapped_claim(str(pod_uid), allocated, cycle, self.state.slices)
            if shared:
                return Unschedulable(PodExplanation(pod_key, [], waiting=shared))
            na = NodeAllocatableCheck(pod, demand, self.state.usage, self.state.slices, pairs, to_allocate)
        ruled_out: list[Mapping[str, Any]] = []  # nodes only the allocated claims' selectors rule out
        try:
            best = await NodeSearch(self, pod, demand, to_allocate, fixed, explanation, only_node, cancelled,
                                    extended, na, ruled_out).run()
        except AllocationError as err:
            explanation.error = describe_error(err)
            return Unschedulable(explanation, to_allocate)
        if best is None:
            # PostFilter gives back only a claim found unavailable (upstream ``unavailableClaims``): its
            # selector ruled out a node that passed the node filters and node fit
            found = [c for c, a in zip(allocated_claims, fixed, strict=True)
                     if any(claim_selector_reason(n, [a]) for n in ruled_out)]
            return Unschedulable(explanation, to_allocate,
                                 deallocate=claim_to_deallocate(found, str(pod_uid)),
                                 budget_exhausted=explanation.budget_exhausted, unavailable=found)
        node_name = best.node["metadata"]["name"]
        ext = extended.for_node(best.node, self.state.usage.allocatable(best.node).resources) \
            if extended is not None else None
        if ext is not None:
            ext.allocation = best.allocations[-1]
        new = [PlannedClaim(c, a, True, consumer_of.get(c["metadata"]["uid"]))
               for c, a in zip(to_allocate, best.allocations[:len(to_allocate)], strict=True)]
        return Placement(node_name, allocated + new, ext, best.node_allocatable)

    def _extended(self, pod: Mapping[str, Any], demand: PodDemand) -> ExtendedDemand | None:
        """The pod's requests of extended resources a DeviceClass maps (DRAExtendedResource, GA in
        1.37), or None."""
        return extended_demand(pod, demand.requests, self.state.classes_by_name(),
                               lambda index, value: self.state.claims.by_index(index, value))
