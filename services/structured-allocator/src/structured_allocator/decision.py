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
(upstream's DynamicResources Score, :mod:`.core.subrequest_score`); the scorer breaks ties.

Bounded (issue 12, defect 6; upstream DRASchedulerFilterTimeout): every ``Allocator.allocate`` call gets
a :class:`~.core.SearchBudget` — ``search_steps`` device tries for that node, the decision's
``filter_timeout`` deadline and a cancellation hook (the pod is gone). A node whose search runs out of
steps counts as "search budget exhausted after N steps" and the search goes on with the next node; the
deadline or the hook stop the search (feasible nodes found so far still win). When nothing fits and a
budget ran out, the :class:`Unschedulable` says so (``budget_exhausted``) and the scheduler retries the
pod with backoff. Between nodes the search yields to the event loop at least every
:data:`YIELD_EVERY` seconds (so one decision holds the loop for about one node's bounded search); after
a yield the allocator is rebuilt (its counter cache may be stale). Callers serialise decisions (the
scheduler's decision lock), so only informer events can change the caches across a yield.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from draflow_runtime.dra import RESERVED_FOR_MAX, is_reserved_for_pod_or_group

from .bindingconds import binding_status, utcnow
from .claimfacts import describe_error, min_devices
from .core import (
    AllocationError,
    Allocator,
    CelCache,
    Features,
    SearchBudget,
    SearchBudgetExhausted,
)
from .core.subrequest_score import subrequest_score
from .explain_http import PodExplanation
from .extres import ExtendedClaim, ExtendedDemand, extended_demand
from .groupcycle import GroupCycle
from .nodealloc import mapped
from .nodealloc_plan import NodeAllocatableCheck, admit, device_lookup, shared_mapped_claim
from .nodefit import PodDemand, pod_demand
from .nodes import claim_selector_reason, node_filter_reason, unsupported_reason
from .outcomes import Decision, Placement, PlannedClaim, Unschedulable, Waiting
from .podclaims import resolve_claims
from .postfilter import claim_to_deallocate
from .scoring import Candidate, Scorer
from .state import ClusterState

__all__ = [
    "Decider", "Decision", "ExtendedClaim", "Placement", "PlannedClaim", "Unschedulable", "Waiting",
    "describe_error",
]

YIELD_EVERY = 0.01  # seconds of searching after which the search yields to the event loop




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
        self._next_start = 0
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
            best = await self._search(pod, demand, to_allocate, fixed, explanation, only_node, cancelled,
                                      extended, na, ruled_out)
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

    def _allocator(self) -> Allocator:
        state = self.state
        return Allocator(state.classes_by_name(), state.slices, state.assume.state, self.features,
                         cel_cache=self.cel_cache)

    def _budget(self, deadline: float | None, cancelled: Callable[[], bool] | None) -> SearchBudget:
        return SearchBudget(max_steps=self.search_steps or None, deadline=deadline, cancelled=cancelled,
                            clock=self.monotonic)

    def _exhausted(self, exc: SearchBudgetExhausted, explanation: PodExplanation) -> bool:
        """Count a search that ran out of budget; True when the whole decision must stop."""
        explanation.budget_exhausted = True
        if exc.reason == "steps":
            explanation.node_reasons[f"search budget exhausted after {exc.steps} steps"] += 1
            return False
        why = (f"filter timeout {self.filter_timeout:g}s" if exc.reason == "deadline"
               else "pod changed or went away")
        explanation.node_reasons[f"search budget exhausted after {exc.steps} steps ({why})"] += 1
        return True

    async def _search(self, pod: Mapping[str, Any], demand: PodDemand, to_allocate: list[Mapping[str, Any]],
                      fixed: list[Any], explanation: PodExplanation, only_node: str | None,
                      cancelled: Callable[[], bool] | None,
                      extended: ExtendedDemand | None = None,
                      na: NodeAllocatableCheck | None = None,
                      ruled_out: list[Mapping[str, Any]] | None = None) -> Candidate | None:
        state = self.state
        allocator = self._allocator() if to_allocate or extended else None
        dra_names = extended.mapping if extended else ()
        deadline = self.monotonic() + self.filter_timeout if self.filter_timeout else None
        budget = self._budget(deadline, cancelled)
        last_yield = time.perf_counter()
        needed: int | None = 0
        for claim in to_allocate:
            n = min_devices(claim)
            needed = None if n is None or needed is None else needed + n
        names = [only_node] if only_node else state.node_names()
        explanation.nodes_total = len(names)
        feasible: list[Candidate] = []
        skipped: list[tuple[int, Mapping[str, Any]]] = []  # (free, node) skipped by the device count
        start = 0 if only_node else self._next_start % max(1, len(names))
        looked = 0
        for i in range(len(names)):
            looked = i + 1
            name = names[(start + i) % len(names)]
            node = state.nodes.get(name) or ({"metadata": {"name": name}} if only_node else None)
            if node is None:
                continue
            reason = None if only_node else node_filter_reason(node, pod)
            if reason:
                explanation.node_reasons[reason] += 1
                continue
            if not only_node and self._does_not_fit(node, demand, explanation, dra_names):
                continue  # before the claims' selectors, as NodeResourcesFit runs before DynamicResources
            reason = claim_selector_reason(node, fixed)
            if reason:
                if ruled_out is not None:
                    ruled_out.append(node)
                explanation.node_reasons[reason] += 1
                continue
            free, total, shared = self._free_devices(name)
            claims, node_needed = to_allocate, needed
            ext = extended.for_node(node, state.usage.allocatable(node).resources) if extended else None
            if ext is not None:
                claims = [*to_allocate, ext.claim]
                node_needed = None if needed is None else needed + (min_devices(ext.claim) or 0)
            if allocator is None or not claims:
                admit(feasible, Candidate(node, [], free, total), na, explanation)
            elif node_needed is not None and not shared and free < node_needed:
                skipped.append((free, node))
            else:
                try:
                    outcome = allocator.allocate(node, claims, budget=budget)
                except SearchBudgetExhausted as exc:
                    if self._exhausted(exc, explanation):
                        break
                else:
                    if outcome.fits:
                        admit(feasible, Candidate(node, outcome.results, free, total), na, explanation)
                    else:
                        explanation.consider(outcome.explanation)
            if len(feasible) >= self.nodes_to_find:
                break
            if time.perf_counter() - last_yield >= YIELD_EVERY:
                await asyncio.sleep(0)  # let the event loop run (health, leases, informers, writes)
                last_yield = time.perf_counter()
                if allocator is not None:
                    allocator = self._allocator()
        if not only_node:
            self._next_start = start + looked
        if feasible:
            return self._best(feasible, to_allocate)
        if skipped and allocator is not None:
            # Explain with the device funnel of the skipped node that had the most free devices.
            explanation.no_fit += len(skipped) - 1
            most_free, best_node = max(skipped, key=lambda s: s[0])
            ext = extended.for_node(best_node, state.usage.allocatable(best_node).resources) \
                if extended else None
            try:
                outcome = allocator.allocate(best_node, [*to_allocate, *([ext.claim] if ext else [])],
                                             budget=budget)
            except SearchBudgetExhausted as exc:
                self._exhausted(exc, explanation)
                return None
            if outcome.fits:  # cannot happen (the count is a lower bound), but never lose a placement
                return Candidate(best_node, outcome.results, most_free, most_free)
            explanation.consider(outcome.explanation)
        return None

    def _best(self, feasible: list[Candidate], to_allocate: list[Mapping[str, Any]]) -> Candidate:
        """The feasible node that serves the pod's ``firstAvailable`` requests best (upstream's
        DynamicResources Score, :func:`~.core.subrequest_score`), then the scorer's choice; ties go to
        the node found first."""
        ranked = (self.features is None or self.features.prioritized_list) and any(
            r.get("firstAvailable") for c in to_allocate
            for r in ((c.get("spec") or {}).get("devices") or {}).get("requests") or ())
        n = len(to_allocate)

        def key(c: Candidate) -> tuple[float, float]:
            first = subrequest_score(to_allocate, c.allocations[:n]) if ranked else 0
            return (first, self.scorer.score(c))

        best, best_key = feasible[0], key(feasible[0])
        for c in feasible[1:]:
            k = key(c)
            if k > best_key:
                best, best_key = c, k
        return best

    def _does_not_fit(self, node: Mapping[str, Any], demand: PodDemand,
                      explanation: PodExplanation, dra_names: Mapping[str, str] | tuple[()] = ()) -> bool:
        """NodeResourcesFit + NodePorts; every reason is counted, as kube-scheduler does."""
        reasons = self.state.usage.fit_reasons(node, demand, dra_names)
        for reason in reasons:
            explanation.node_reasons[reason] += 1
        return bool(reasons)

    def _free_devices(self, node_name: str) -> tuple[int, int, bool]:
        """(free, total) devices of the node's own slices and whether shared slices also serve it.
        Kept incrementally (:mod:`.device_counts`); every generation counts, an over-count that is
        safe for skipping (a lower bound on need)."""
        return self.state.device_counts.free_devices(node_name)
