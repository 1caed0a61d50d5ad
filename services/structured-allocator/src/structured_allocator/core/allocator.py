"""The structured-parameters allocator: choose devices for a pod's claims on one node.

Contract (pure, no I/O)::

    allocator = Allocator(classes, slices, allocated, features=Features.all(), cel_cache=None)
    outcome = allocator.allocate(node, claims)

* ``classes``: DeviceClass dicts by name; ``slices``: ResourceSlice dicts or a maintained
  :class:`SliceIndex`; ``allocated``: what existing (and in-flight) claims already use.
* ``outcome.fits`` with ``outcome.results[i]`` = the ``status.allocation`` for ``claims[i]``
  (``devices.results``, ``devices.config``, ``nodeSelector`` if restricted, ``allocationTimestamp``
  = ``clock()`` on every allocation when ``features.device_binding_and_status`` is on, as
  kube-scheduler stamps every allocation it writes with both binding gates on, with or without
  binding conditions); otherwise ``outcome.explanation`` says why, per request.
  "Does not fit" is a normal result; :class:`AllocationError` (and subclasses) means broken input:
  unknown class, invalid CEL, a selector failing at runtime, more than 32 results, ``All`` on an
  incomplete or invalid pool.
* The allocator never mutates its inputs. An Allocator may be reused for many ``allocate`` calls
  while the allocated state is unchanged (counter availability is cached per pool).
* Admin access: the namespace-label check (``resource.kubernetes.io/admin-access``) belongs to the
  service; pass ``admin_access_allowed=False`` to reject claims that request it.
* Bounded search: pass ``budget=SearchBudget(max_steps=..., deadline=..., cancelled=...)`` and the
  search raises :class:`SearchBudgetExhausted` (``steps``, ``reason``) when it runs out of steps
  (one step = one candidate device tried for one slot), passes the deadline or is cancelled — the
  counterpart of upstream's DRASchedulerFilterTimeout and context cancellation. That is not broken
  input and not "does not fit": the caller says "search budget exhausted after N steps" and retries
  later. Without a budget the search is unbounded (exponential in the worst case, as upstream's).

Search (upstream incubating ``allocateOne``): depth-first with backtracking over claims → requests →
subrequests (first one that leads to a full solution) → device slots; candidates in pool order
(driver, pool; binding-condition pools last) → slice name → device order, each slot starting after
the previous one's device, so a request tries combinations, not permutations. First solution wins.
``All`` collects the matching devices on their static capacity and re-checks what is left of each
when allocating it, so a full matching device makes ``All`` fail.

Conformance: ``tests/test_conformance_*.py`` cover upstream's allocator table
(k8s.io/dynamic-resource-allocation v0.37.1 ``allocatortesting``) case for case
(``tests/conformance_map.py``). Where draflow deliberately differs:

* Alpha gates (off by default in v1.37, as upstream; each a :class:`Features` flag): DRAListTypeAttributes
  (constraints over list attributes), DRADeviceCompatibilityGroups (:mod:`.groups`; off: slices using
  groups are ignored), DRADerivedAttributes (:mod:`.derived`; off: a request with
  ``derivedAttributes`` is an error), DRAOptionalNodeOperations (devices of slices with
  ``skipNodeOperations`` only on nodes declaring the feature in ``status.declaredFeatures``, the
  result carries ``skipNodeOperations``; off: such devices are never allocated).
* Invalid pools: upstream returns an error wrapping ``ErrFailedAllocationOnNode`` (the node is
  unschedulable); draflow returns "does not fit" with the pool and reason in the explanation — same
  outcome, and the reason reaches the user.
* ``allocationTimestamp`` is set here (upstream: by kube-scheduler's PreBind): the service writes the
  allocation the core returns.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from .cel_env import CelCache, CelCompileError
from .derived import DerivedExpression, compile_derived
from .groups import Baseline, baseline
from .pools import Pool, PreparedDevice, PreparedSlice
from .requests import RequestData
from .results import allocation_result
from .run_state import RunState
from .selection import taint_blocks
from .sliceindex import SliceIndex
from .types import (
    MAX_RESULTS_PER_CLAIM,
    AllocatedState,
    AllocationError,
    AllocationOutcome,
    Features,
    SearchBudget,
    SearchBudgetExhausted,
)

__all__ = ["Allocator"]


class _MaxSizeExceeded(Exception):
    """Internal: this branch would exceed 32 results for a claim (prunes the search)."""


class Allocator:
    """See the module docstring for the contract."""

    def __init__(
        self,
        classes: Mapping[str, Mapping[str, Any]],
        slices: Iterable[Mapping[str, Any]] | SliceIndex,
        allocated: AllocatedState,
        features: Features | None = None,
        cel_cache: CelCache | None = None,
        *,
        new_share_id: Callable[[], str] | None = None,
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        self.classes = classes
        self.index = slices if isinstance(slices, SliceIndex) else SliceIndex(slices)
        self.allocated = allocated
        self.features = features or Features.all()
        self.cel_cache = cel_cache if cel_cache is not None else CelCache()
        self.new_share_id = new_share_id or (lambda: str(uuid.uuid4()))
        self.clock = clock or (lambda: datetime.now(UTC))
        self.last_timestamp: tuple[int, str] | None = None  # results._timestamp: (second, its text)
        # (driver, pool) -> (what allocated devices left of each counter, in nano units; all of them >= 0)
        self._available_counters: dict[tuple[str, str], tuple[dict[str, dict[str, int]], bool]] = {}
        self._group_baselines: dict[tuple[str, str], Baseline] = {}
        self._derived: dict[str, DerivedExpression | CelCompileError] = {}
        # RunState._validated: (claim, indices, request name, id(spec)) -> (spec, validated request)
        self.validated_requests: dict[tuple[str, int, int, int, str, int], tuple[Any, RequestData]] = {}

    def allocate(
        self,
        node: Mapping[str, Any],
        claims: Sequence[Mapping[str, Any]],
        *,
        admin_access_allowed: bool = True,
        budget: SearchBudget | None = None,
    ) -> AllocationOutcome:
        """Allocate all ``claims`` (unallocated, in order) on ``node``. See the module docstring.

        Raises :class:`AllocationError` on broken input and :class:`SearchBudgetExhausted` when
        ``budget`` runs out before the search has an answer."""
        run = _Run(self, node, claims, admin_access_allowed, budget)
        return run.execute()

    # Counter availability depends only on the allocated state: cached per pool.
    def available_counters(self, pool: Pool) -> tuple[dict[str, dict[str, int]], bool]:
        """What the allocated devices left of each counter of ``pool`` (nano units; negative when they
        overdraw it), and whether every counter is still >= 0: none is overdrawn before this run adds
        a device, so after it only the counters the new device consumes can be (RunState.counters_ok)."""
        key = (pool.driver, pool.pool)
        cached = self._available_counters.get(key)
        if cached is None:
            available = {name: dict(counters) for name, counters in pool.counter_sets.items()}
            for s in [*pool.slices, *pool.slices_not_targeting]:
                for d in s.devices:
                    if not d.consumes or not self.allocated.is_allocated(d.id):
                        continue
                    for set_name, counters in d.consumes:
                        left = available.get(set_name, {})
                        for name, value in counters.items():
                            if name in left:
                                left[name] -= value
            ok = all(value >= 0 for counters in available.values() for value in counters.values())
            cached = self._available_counters[key] = (available, ok)
        return cached

    def group_baseline(self, pool: Pool) -> Baseline:
        """Compatibility groups of the pool's allocated devices (cached like counters)."""
        key = (pool.driver, pool.pool)
        cached = self._group_baselines.get(key)
        if cached is None:
            cached = self._group_baselines[key] = baseline(pool, self.allocated)
        return cached

    def derived_expression(self, expression: str) -> DerivedExpression:
        """A compiled derived-attribute expression (compile errors cached too)."""
        entry = self._derived.get(expression)
        if entry is None:
            try:
                entry = compile_derived(expression)
            except CelCompileError as exc:
                entry = exc
            self._derived[expression] = entry
        if isinstance(entry, CelCompileError):
            raise entry
        return entry


class _Run(RunState):
    """One ``allocate`` call: setup, the search and its budget (upstream's ``allocator`` struct)."""

    # -- setup -------------------------------------------------------------------------------------
    def execute(self) -> AllocationOutcome:
        # remembered per node by the index until a slice, the node's labels or the features change
        gathered = self.a.index.node_pools(self.node, self.features)
        self.pools, self.candidates = gathered.pools, gathered.candidates
        self.taken = [None] * len(self.candidates)
        for ci, claim in enumerate(self.claims):
            self._validate_claim(ci, claim)
        if self.budget is not None:
            self._check_budget(self.budget)
        try:
            done = self._allocate_one(0, 0, -1, 0, False, 0)
        except _MaxSizeExceeded:
            done = False
        if not done:
            from .explain import explain  # local import: explain depends on this module's helpers

            return AllocationOutcome(fits=False, explanation=explain(self), states=self.states)
        results = [allocation_result(self, ci) for ci in range(len(self.claims))]
        return AllocationOutcome(fits=True, results=results, states=self.states)

    # -- search --------------------------------------------------------------------------------------
    def _step(self) -> None:
        """Count one device try against the budget (cheap: the clock and hook every 64 steps)."""
        self.steps += 1
        budget = self.budget
        if budget is None:
            return
        if budget.max_steps is not None and self.steps > budget.max_steps:
            raise SearchBudgetExhausted(budget.max_steps, "steps")
        if self.steps % SearchBudget.CHECK_EVERY == 0:
            self._check_budget(budget)

    def _check_budget(self, budget: SearchBudget) -> None:
        if budget.cancelled is not None and budget.cancelled():
            raise SearchBudgetExhausted(self.steps, "cancelled")
        if budget.deadline is not None and budget.clock() >= budget.deadline:
            raise SearchBudgetExhausted(self.steps, "deadline")

    def _allocate_one(self, ci: int, ri: int, si: int, di: int, in_sub: bool, start: int) -> bool:
        self.states += 1
        if ci >= len(self.claims):
            return True
        if ri >= len(self.requests[ci]):
            try:
                return self._allocate_one(ci + 1, 0, -1, 0, False, 0)
            except _MaxSizeExceeded:
                return False
        datas = self.requests[ci][ri]
        if not in_sub and datas[0].sub_index >= 0:
            all_exceeded = True
            for sub in range(len(datas)):
                try:
                    ok = self._allocate_one(ci, ri, sub, 0, True, 0)
                except _MaxSizeExceeded:
                    continue
                all_exceeded = False
                if ok:
                    self.selected_sub[(ci, ri)] = sub
                    return True
            if all_exceeded:
                raise _MaxSizeExceeded
            return False
        rd = datas[si] if si >= 0 else datas[0]
        if rd.all_mode and not rd.all_devices:
            return False
        if di >= rd.num_devices:
            return self._allocate_one(ci, ri + 1, -1, 0, False, 0)
        if len(self.results[ci]) + rd.num_devices - di > MAX_RESULTS_PER_CLAIM:
            raise _MaxSizeExceeded
        if rd.all_mode:
            self._step()
            pool, s, d = rd.all_devices[di]
            undo = self._allocate_device(rd, pool, s, d, must=True)
            if undo is None:
                return False
            try:
                done = self._allocate_one(ci, ri, si, di + 1, in_sub, 0)
            except BaseException:
                undo()
                raise
            if not done:
                undo()
            return done
        candidates, taken, allocating = self.candidates, self.taken, self.allocating
        for index in range(start, len(candidates)):
            self._step()
            pool, s, d = candidates[index]
            if rd.admin_access:
                if ci in allocating.get(d.id, ()):
                    continue
            else:  # RunState.in_use, its fixed part remembered per candidate (a third of its cost)
                before = taken[index]
                if before is None:
                    before = taken[index] = self.taken_before(d.id)
                if before or allocating.get(d.id):
                    continue
            if not self.selectable(rd, s, d):
                continue
            if self.capacity_ok(rd, d) is not True:
                continue
            undo = self._allocate_device(rd, pool, s, d, must=False)
            if undo is None:
                continue
            try:
                done = self._allocate_one(ci, ri, si, di + 1, in_sub, index + 1)
            except BaseException:
                undo()
                raise
            if done:
                return True
            undo()
        return False

    def _allocate_device(
        self, rd: RequestData, pool: Pool, s: PreparedSlice, d: PreparedDevice, *, must: bool
    ) -> Callable[[], None] | None:
        ci = rd.claim_index
        multi = self.features.consumable_capacity and d.allow_multi
        if not multi and rd.admin_access and ci in self.allocating.get(d.id, ()):
            return None
        if must and not rd.admin_access and self.in_use(d.id):  # the candidate loop checked it already
            return None
        if s.skip_node_operations and not self.node_operations_optional:
            return None
        if not self.features.partitionable_devices and d.consumes:
            return None
        counters_taken = False
        groups_undo: Callable[[], None] | None = None
        if d.consumes and not (multi and self._capacity_in_use(d.id)):
            if self.features.compatibility_groups:
                groups_undo = self.groups_ok(pool, d)
                if groups_undo is None:
                    return None
            if not self.counters_ok(pool, d, commit=True):
                if groups_undo is not None:
                    groups_undo()
                return None
            counters_taken = True
        pool_key = (pool.driver, pool.pool)

        def release_counters() -> None:
            if counters_taken:
                self._add_counters(self.consumed_counters[pool_key], d, -1)
            if groups_undo is not None:
                groups_undo()

        if self.features.device_taints and taint_blocks(d, rd.tolerations):
            release_counters()
            return None
        constraints = self.constraints[ci]
        lookup = self.lookup_for(rd, d) if constraints else None
        for i, c in enumerate(constraints):
            if not c.add(rd.base_name, rd.sub_name, d, lookup):
                if must:
                    release_counters()
                    raise AllocationError(
                        f'claim "{self.claim_name(ci)}", request "{rd.name}": cannot add device {d.id} '
                        "because a claim constraint would not be satisfied",
                        claim=self.claim_name(ci),
                        request=rd.name,
                    )
                for prev in constraints[:i]:
                    prev.remove(rd.base_name, rd.sub_name, d)
                release_counters()
                return None
        if must and self.capacity_ok(rd, d) is not True:
            # All mode: the device was collected on its static capacity; what existing and
            # in-flight allocations (this call included) left of it is checked here.
            for c in constraints:
                c.remove(rd.base_name, rd.sub_name, d)
            release_counters()
            return None
        if not multi:
            self.allocating.setdefault(d.id, set()).add(ci)
        result: dict[str, Any] = {
            "request": rd.name,
            "driver": d.id.driver,
            "pool": d.id.pool,
            "device": d.id.device,
        }
        if rd.admin_access:
            result["adminAccess"] = True
        if s.skip_node_operations:
            result["skipNodeOperations"] = list(s.skip_node_operations)
        if rd.tolerations:
            result["tolerations"] = [dict(t) for t in rd.tolerations]
        if self.features.device_binding_and_status:
            if d.binding_conditions:
                result["bindingConditions"] = list(d.binding_conditions)
            if d.binding_failure_conditions:
                result["bindingFailureConditions"] = list(d.binding_failure_conditions)
        consumed: dict[str, int] | None = None  # nano units, as allocating_capacity
        if multi:
            consumed, written = self.consumed(rd, d)
            result["shareID"] = self.a.new_share_id()
            if written:
                result["consumedCapacity"] = dict(written)
            target = self.allocating_capacity.setdefault(d.id, {})
            for k, v in consumed.items():
                target[k] = target.get(k, 0) + v
            self.allocating_shares[d.id] = self.allocating_shares.get(d.id, 0) + 1
        self.results[ci].append(result)
        self.result_devices[ci].append((s, d))

        def undo() -> None:
            self.results[ci].pop()
            self.result_devices[ci].pop()
            for c in constraints:
                c.remove(rd.base_name, rd.sub_name, d)
            if multi:
                target = self.allocating_capacity[d.id]
                for k, v in (consumed or {}).items():
                    target[k] -= v
                self.allocating_shares[d.id] -= 1
                if not self.allocating_shares[d.id]:
                    del self.allocating_shares[d.id]
                    del self.allocating_capacity[d.id]
            else:
                self.allocating[d.id].discard(ci)
            release_counters()

        return undo
