"""One decision's search over the nodes: which feasible node, and which devices there, for a pod.

:class:`NodeSearch` walks the node names from where the previous decision stopped (kube-scheduler's
``percentageOfNodesToScore`` idea): node filters (:mod:`.nodes`), node fit (:mod:`.nodefit`), the
selectors of the pod's already allocated claims, a cheap free-device count that skips nodes which cannot
hold the devices asked for, then the core :class:`~.core.Allocator` per node, until ``nodes_to_find``
feasible nodes are known. Among them the node where the pod's ``firstAvailable`` requests got the
earliest subrequests wins (upstream's DynamicResources Score, :mod:`.core.subrequest_score`); the scorer
breaks ties, then the node found first.

Bounded (see :mod:`.decision`): every ``Allocator.allocate`` call gets a :class:`~.core.SearchBudget`;
between nodes the search yields to the event loop at least every :data:`YIELD_EVERY` seconds and then
rebuilds the allocator (its counter cache may be stale).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from .claimfacts import min_devices
from .core import Allocator, SearchBudget, SearchBudgetExhausted
from .core.subrequest_score import subrequest_score
from .explain_http import PodExplanation
from .extres import ExtendedDemand
from .nodealloc_plan import NodeAllocatableCheck, admit
from .nodefit import PodDemand
from .nodes import claim_selector_reason, node_filter_reason
from .scoring import Candidate

if TYPE_CHECKING:
    from .decision import Decider

__all__ = ["YIELD_EVERY", "NodeSearch"]

YIELD_EVERY = 0.01  # seconds of searching after which the search yields to the event loop


class NodeSearch:
    """The search of one decision (see the module docstring); :meth:`run` once."""

    def __init__(self, decider: Decider, pod: Mapping[str, Any], demand: PodDemand,
                 to_allocate: list[Mapping[str, Any]], fixed: list[Any], explanation: PodExplanation,
                 only_node: str | None, cancelled: Callable[[], bool] | None,
                 extended: ExtendedDemand | None = None, na: NodeAllocatableCheck | None = None,
                 ruled_out: list[Mapping[str, Any]] | None = None) -> None:
        self.decider = decider
        self.state = decider.state
        self.pod = pod
        self.demand = demand
        self.to_allocate = to_allocate
        self.fixed = fixed
        self.explanation = explanation
        self.only_node = only_node
        self.cancelled = cancelled
        self.extended = extended
        self.na = na
        self.ruled_out = ruled_out

    def _allocator(self) -> Allocator:
        state, decider = self.state, self.decider
        return Allocator(state.classes_by_name(), state.slices, state.assume.state, decider.features,
                         cel_cache=decider.cel_cache)

    def _budget(self, deadline: float | None) -> SearchBudget:
        decider = self.decider
        return SearchBudget(max_steps=decider.search_steps or None, deadline=deadline,
                            cancelled=self.cancelled, clock=decider.monotonic)

    def _exhausted(self, exc: SearchBudgetExhausted) -> bool:
        """Count a search that ran out of budget; True when the whole decision must stop."""
        explanation = self.explanation
        explanation.budget_exhausted = True
        if exc.reason == "steps":
            explanation.node_reasons[f"search budget exhausted after {exc.steps} steps"] += 1
            return False
        why = (f"filter timeout {self.decider.filter_timeout:g}s" if exc.reason == "deadline"
               else "pod changed or went away")
        explanation.node_reasons[f"search budget exhausted after {exc.steps} steps ({why})"] += 1
        return True

    async def run(self) -> Candidate | None:
        decider, state, explanation = self.decider, self.state, self.explanation
        pod, to_allocate, only_node, extended = self.pod, self.to_allocate, self.only_node, self.extended
        allocator = self._allocator() if to_allocate or extended else None
        dra_names = extended.mapping if extended else ()
        deadline = decider.monotonic() + decider.filter_timeout if decider.filter_timeout else None
        budget = self._budget(deadline)
        last_yield = time.perf_counter()
        needed: int | None = 0
        for claim in to_allocate:
            n = min_devices(claim)
            needed = None if n is None or needed is None else needed + n
        names = [only_node] if only_node else state.node_names()
        explanation.nodes_total = len(names)
        feasible: list[Candidate] = []
        skipped: list[tuple[int, Mapping[str, Any]]] = []  # (free, node) skipped by the device count
        start = 0 if only_node else decider.next_start % max(1, len(names))
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
            if not only_node and self._does_not_fit(node, dra_names):
                continue  # before the claims' selectors, as NodeResourcesFit runs before DynamicResources
            reason = claim_selector_reason(node, self.fixed)
            if reason:
                if self.ruled_out is not None:
                    self.ruled_out.append(node)
                explanation.node_reasons[reason] += 1
                continue
            free, total, shared = self._free_devices(name)
            claims, node_needed = to_allocate, needed
            ext = extended.for_node(node, state.usage.allocatable(node).resources) if extended else None
            if ext is not None:
                claims = [*to_allocate, ext.claim]
                node_needed = None if needed is None else needed + (min_devices(ext.claim) or 0)
            if allocator is None or not claims:
                admit(feasible, Candidate(node, [], free, total), self.na, explanation)
            elif node_needed is not None and not shared and free < node_needed:
                skipped.append((free, node))
            else:
                try:
                    outcome = allocator.allocate(node, claims, budget=budget)
                except SearchBudgetExhausted as exc:
                    if self._exhausted(exc):
                        break
                else:
                    if outcome.fits:
                        admit(feasible, Candidate(node, outcome.results, free, total), self.na, explanation)
                    else:
                        explanation.consider(outcome.explanation)
            if len(feasible) >= decider.nodes_to_find:
                break
            if time.perf_counter() - last_yield >= YIELD_EVERY:
                await asyncio.sleep(0)  # let the event loop run (health, leases, informers, writes)
                last_yield = time.perf_counter()
                if allocator is not None:
                    allocator = self._allocator()
        if not only_node:
            decider.next_start = start + looked
        if feasible:
            return self._best(feasible)
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
                self._exhausted(exc)
                return None
            if outcome.fits:  # cannot happen (the count is a lower bound), but never lose a placement
                return Candidate(best_node, outcome.results, most_free, most_free)
            explanation.consider(outcome.explanation)
        return None

    def _best(self, feasible: list[Candidate]) -> Candidate:
        """The feasible node that serves the pod's ``firstAvailable`` requests best (upstream's
        DynamicResources Score, :func:`~.core.subrequest_score`), then the scorer's choice; ties go to
        the node found first."""
        to_allocate, features, scorer = self.to_allocate, self.decider.features, self.decider.scorer
        ranked = (features is None or features.prioritized_list) and any(
            r.get("firstAvailable") for c in to_allocate
            for r in ((c.get("spec") or {}).get("devices") or {}).get("requests") or ())
        n = len(to_allocate)

        def key(c: Candidate) -> tuple[float, float]:
            first = subrequest_score(to_allocate, c.allocations[:n]) if ranked else 0
            return (first, scorer.score(c))

        best, best_key = feasible[0], key(feasible[0])
        for c in feasible[1:]:
            k = key(c)
            if k > best_key:
                best, best_key = c, k
        return best

    def _does_not_fit(self, node: Mapping[str, Any], dra_names: Mapping[str, str] | tuple[()] = ()) -> bool:
        """NodeResourcesFit + NodePorts; every reason is counted, as kube-scheduler does."""
        reasons = self.state.usage.fit_reasons(node, self.demand, dra_names)
        for reason in reasons:
            self.explanation.node_reasons[reason] += 1
        return bool(reasons)

    def _free_devices(self, node_name: str) -> tuple[int, int, bool]:
        """(free, total) devices of the node's own slices and whether shared slices also serve it.
        Kept incrementally (:mod:`.device_counts`); every generation counts, an over-count that is
        safe for skipping (a lower bound on need)."""
        return self.state.device_counts.free_devices(node_name)
