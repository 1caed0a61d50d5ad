"""One decision's search over the nodes: which feasible node, and which devices there, for a pod.

:class:`NodeSearch` walks the node names from where the previous decision stopped (kube-scheduler's
``percentageOfNodesToScore`` idea): node filters (:mod:`.nodes`), node fit (:mod:`.nodefit`), the
selectors of the pod's already allocated claims, and a cheap free-device count that skips nodes which
cannot hold the devices asked for. The count comes first when it can (a node with too few free devices
is never a candidate, whatever else it passes; most nodes of a filling cluster are such nodes): the other
checks of a node it skipped run only when nothing fits, for the explanation, which is then the one of
the checks in kube-scheduler's order. The nodes that pass are searched with the core
:class:`~.core.Allocator` (the device search, the expensive part), in one of two ways:

* **every node** (the general case): each node is searched as it is walked, until ``nodes_to_find``
  feasible nodes are known. Among them the node where the pod's ``firstAvailable`` requests got the
  earliest subrequests wins (upstream's DynamicResources Score, :mod:`.core.subrequest_score`); the
  scorer breaks ties, then the node found first.
* **ranked first** (:func:`exact_devices`): when every request of the claims to allocate asks for an
  exact count of devices (no ``firstAvailable``, no ``All``), no extended-resource claim is added and
  the scorer scores only device counts (``pack``, ``spread``), a feasible node's score is known before
  its search: the claims take exactly that many devices wherever they fit. The walk collects the first
  ``nodes_to_find`` nodes that pass the cheap checks and the search runs on them best score first (ties:
  the node found first); the first that fits has the best score of them all and wins. A node that does
  not fit is replaced by the next node of the walk, so the window keeps ``nodes_to_find`` nodes not
  known to fail. Same winner as searching every node when each node that passes the cheap checks also
  fits (the side-by-side workloads: one search per decision instead of 32); when some do not, the
  window can end earlier than "the first ``nodes_to_find`` feasible nodes" (those not searched are not
  known to fail), and the winner is the best of a prefix of that window. Nothing fits: every node was
  walked and searched, as in the general case. Broken input fails the decision as it does when every
  node is searched: a walked node where a search could raise an error that depends on its devices
  (:class:`~.core.DeviceErrorCheck`: a CEL runtime error, an invalid capacity, a node selector of
  a slice that is not node-local) turns the decision into the general case from its start (nodes already
  searched are not searched again).

Both ways stop at the decision's deadline or cancellation; the devices chosen always come from a search
on the current caches (an assumed or allocated device is never chosen, whatever the ranking said).

Bounded (see :mod:`.decision`): every ``Allocator.allocate`` call gets a :class:`~.core.SearchBudget`;
between nodes the search yields to the event loop at least every :data:`YIELD_EVERY` seconds and then
rebuilds the allocator (its counter cache may be stale).
"""

from __future__ import annotations

import asyncio
import heapq
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

from prometheus_client import Counter

from draflow_runtime.metrics import registered_collector

from .claimfacts import exact_devices, min_devices
from .core import Allocator, DeviceErrorCheck, SearchBudget, SearchBudgetExhausted
from .core.subrequest_score import subrequest_score
from .explain_http import PodExplanation
from .extres import ExtendedDemand
from .nodealloc_plan import NodeAllocatableCheck, admit
from .nodefit import PodDemand
from .nodes import claim_selector_reason, node_filter_reason
from .scoring import Candidate

if TYPE_CHECKING:
    from .decision import Decider

__all__ = ["COUNT_FIRST", "DEVICE_SEARCHES", "YIELD_EVERY", "NodeSearch"]

YIELD_EVERY = 0.01  # seconds of searching after which the search yields to the event loop
COUNT_FIRST = True  # the free-device count before a node's other checks (``NodeSearch.count_first``)

DEVICE_SEARCHES = registered_collector(
    Counter, "draflow_allocator_device_searches",
    "Device searches (one core allocate call on one node) made by decisions, by result: fits, no_fit, "
    "exhausted.", ["result"])


class _Walked(NamedTuple):
    """A node that passed the cheap checks: what its device search needs."""

    node: Mapping[str, Any]
    free: int
    total: int
    claims: Sequence[Mapping[str, Any]]
    looked: int  # node names walked up to and including this one


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
        self.allocator = self._allocator() if to_allocate or extended else None
        deadline = decider.monotonic() + decider.filter_timeout if decider.filter_timeout else None
        self.budget = SearchBudget(max_steps=decider.search_steps or None, deadline=deadline,
                                   cancelled=cancelled, clock=decider.monotonic)
        self.needed: int | None = 0
        for claim in to_allocate:
            n = min_devices(claim)
            self.needed = None if n is None or self.needed is None else self.needed + n
        self.names = [only_node] if only_node else self.state.node_names()
        self.start = 0 if only_node else decider.next_start % max(1, len(self.names))
        self.looked = 0  # node names walked
        self.skipped: list[tuple[int, Mapping[str, Any]]] = []  # (free, node) skipped by the device count
        # The device count first: a node with too few free devices is never a candidate, whatever its
        # other checks say, so the walk skips it at once; its checks run only if nothing fits, for the
        # explanation (:meth:`_explain_unchecked`). Not with extended resources (their devices depend
        # on the node) nor for a pod already bound (one node, no count skip).
        self.count_first = (COUNT_FIRST and not only_node and extended is None and self.allocator is not None
                            and bool(to_allocate) and self.needed is not None)
        self.unchecked: list[Mapping[str, Any]] = []  # nodes the count skipped before their checks
        self.stopped = False  # the deadline passed or the pod went away
        self._last_yield = time.perf_counter()

    def _allocator(self) -> Allocator:
        state, decider = self.state, self.decider
        return Allocator(state.classes_by_name(), state.slices, state.assume.state, decider.features,
                         cel_cache=decider.cel_cache)

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
        self.explanation.nodes_total = len(self.names)
        taken = self._ranked_taken()
        best = await (self._ranked(taken) if taken is not None else self._every_node())
        if not self.only_node:
            self.decider.next_start = self.start + self.looked
        if best is None:
            self._explain_unchecked()
        if best is not None or not self.skipped or self.allocator is None:
            return best
        # Explain with the device funnel of the skipped node that had the most free devices.
        explanation, extended = self.explanation, self.extended
        explanation.no_fit += len(self.skipped) - 1
        most_free, best_node = max(self.skipped, key=lambda s: s[0])
        ext = extended.for_node(best_node, self.state.usage.allocatable(best_node).resources) \
            if extended else None
        try:
            outcome = self.allocator.allocate(best_node, [*self.to_allocate, *([ext.claim] if ext else [])],
                                              budget=self.budget)
        except SearchBudgetExhausted as exc:
            DEVICE_SEARCHES.labels("exhausted").inc()
            self._exhausted(exc)
            return None
        DEVICE_SEARCHES.labels("fits" if outcome.fits else "no_fit").inc()
        if outcome.fits:  # cannot happen (the count is a lower bound), but never lose a placement
            return Candidate(best_node, outcome.results, most_free, most_free)
        explanation.consider(outcome.explanation)
        return None

    # -- the walk: cheap checks in rotation order -----------------------------------------------------------

    async def _next(self) -> _Walked | None:
        """The next node that passes the cheap checks and needs no skipping, or None at the end. Yields
        to the event loop when the search has held it for :data:`YIELD_EVERY` seconds."""
        state, only_node, extended = self.state, self.only_node, self.extended
        dra_names = extended.mapping if extended else ()
        names = self.names
        count_first, needed = self.count_first, self.needed or 0
        while self.looked < len(names):
            await self._pause()
            name = names[(self.start + self.looked) % len(names)]
            self.looked += 1
            node = state.nodes.get(name) or ({"metadata": {"name": name}} if only_node else None)
            if node is None:
                continue
            if count_first:
                free, total, shared = self._free_devices(name)
                if not shared and free < needed:
                    self.unchecked.append(node)
                    continue
            if not self._passes(node, dra_names):
                continue
            if not count_first:
                free, total, shared = self._free_devices(name)
            claims, node_needed = self.to_allocate, self.needed
            ext = extended.for_node(node, state.usage.allocatable(node).resources) if extended else None
            if ext is not None:
                claims = [*claims, ext.claim]
                node_needed = None if node_needed is None else node_needed + (min_devices(ext.claim) or 0)
            if self.allocator is not None and claims and node_needed is not None and not shared \
                    and free < node_needed:
                self.skipped.append((free, node))
                continue
            return _Walked(node, free, total, claims, self.looked)
        return None

    def _passes(self, node: Mapping[str, Any], dra_names: Mapping[str, str] | tuple[()] = ()) -> bool:
        """The node filters, node fit and the selectors of the pod's allocated claims, in
        kube-scheduler's order; each reason is counted in the explanation."""
        explanation, only_node = self.explanation, self.only_node
        reason = None if only_node else node_filter_reason(node, self.pod)
        if reason:
            explanation.node_reasons[reason] += 1
            return False
        if not only_node and self._does_not_fit(node, dra_names):
            return False  # before the claims' selectors, as NodeResourcesFit runs before DynamicResources
        reason = claim_selector_reason(node, self.fixed)
        if reason:
            if self.ruled_out is not None:
                self.ruled_out.append(node)
            explanation.node_reasons[reason] += 1
            return False
        return True

    def _explain_unchecked(self) -> None:
        """Nothing fits: the nodes the device count skipped before their other checks get them now, so
        the explanation (and PostFilter's nodes ruled out) is the one of the walk in kube-scheduler's
        order: a node that passes them was skipped by the count."""
        for node in self.unchecked:
            if self._passes(node):
                free, _, _ = self._free_devices(node["metadata"]["name"])
                self.skipped.append((free, node))
        self.unchecked.clear()

    async def _pause(self) -> None:
        """Yield to the event loop (health, leases, informers, writes) when the search has held it for
        :data:`YIELD_EVERY` seconds; the allocator is rebuilt after (its counter cache may be stale)."""
        if time.perf_counter() - self._last_yield >= YIELD_EVERY:
            await asyncio.sleep(0)
            self._last_yield = time.perf_counter()
            if self.allocator is not None:
                self.allocator = self._allocator()

    def _search(self, walked: _Walked, feasible: list[Candidate]) -> None:
        """The device search on one walked node: a feasible candidate is appended to ``feasible``.
        Sets ``stopped`` when the decision's deadline passed or the pod went away."""
        node, free, total, claims, _ = walked
        if self.allocator is None or not claims:
            admit(feasible, Candidate(node, [], free, total), self.na, self.explanation)
            return
        try:
            outcome = self.allocator.allocate(node, claims, budget=self.budget)
        except SearchBudgetExhausted as exc:
            DEVICE_SEARCHES.labels("exhausted").inc()
            self.stopped = self._exhausted(exc)
            return
        DEVICE_SEARCHES.labels("fits" if outcome.fits else "no_fit").inc()
        if outcome.fits:
            admit(feasible, Candidate(node, outcome.results, free, total), self.na, self.explanation)
        else:
            self.explanation.consider(outcome.explanation)

    # -- every node searched ----------------------------------------------------------------------------

    async def _every_node(self, walked: Sequence[_Walked] = (),
                          tried: frozenset[int] | set[int] = frozenset()) -> Candidate | None:
        """Each node searched in walk order until ``nodes_to_find`` fit; ``walked``: nodes walked
        already (by the ranked search), ``tried``: the indexes of those searched already (none fit)."""
        feasible: list[Candidate] = []
        window = self.decider.nodes_to_find
        for i, w in enumerate(walked):
            if i not in tried:
                await self._pause()
                self._search(w, feasible)
            if self.stopped or len(feasible) >= window:
                self.looked = w.looked  # as if the walk had stopped here
                return self._best(feasible) if feasible else None
        while len(feasible) < window and (more := await self._next()) is not None:
            self._search(more, feasible)
            if self.stopped:
                break
        return self._best(feasible) if feasible else None

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

    # -- ranked first ---------------------------------------------------------------------------------------

    def _ranked_taken(self) -> int | None:
        """How many devices the claims take on any node where they fit, when the search may be ranked
        (module docstring); else None."""
        if self.only_node or self.extended is not None or self.allocator is None or not self.to_allocate \
                or not getattr(self.decider.scorer, "counts_only", False):
            return None
        taken = 0
        for claim in self.to_allocate:
            n = exact_devices(claim)
            if n is None:
                return None
            taken += n
        return taken

    async def _ranked(self, taken: int) -> Candidate | None:
        scorer, window = self.decider.scorer, self.decider.nodes_to_find
        heap: list[tuple[float, int, _Walked]] = []  # (-score, walk order, node): best score first
        walked: list[_Walked] = []
        tried: set[int] = set()  # walk order of the nodes searched (none fit)
        check: DeviceErrorCheck | None = None  # made at the first node walked, again after a yield
        while True:
            while len(heap) < window and (w := await self._next()) is not None:
                walked.append(w)
                allocator = self.allocator  # rebuilt after a yield
                assert allocator is not None  # ranked only with claims to search (_ranked_taken)
                if check is None or check.allocator is not allocator:
                    check = DeviceErrorCheck(allocator, w.claims)
                if check.possible(w.node):
                    return await self._every_node(walked, tried)
                probe = Candidate(w.node, (), w.free, w.total, taken=taken)
                heapq.heappush(heap, (-scorer.score(probe), len(walked) - 1, w))
            if not heap:
                return None
            _, order, w = heapq.heappop(heap)
            feasible: list[Candidate] = []
            await self._pause()
            self._search(w, feasible)
            if feasible:
                return feasible[0]
            if self.stopped:
                return None
            tried.add(order)

    # -- cheap checks -----------------------------------------------------------------------------------

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
