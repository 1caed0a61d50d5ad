"""The state of one ``Allocator.allocate`` call and the checks that read it: claim validation (requests,
subrequests, ``All`` device collection, the 32-results limit, constraints) and the per-device checks
(selectable, in use, counters, consumable capacity). The search itself is in :mod:`.allocator`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Literal

from .capacity import CapacityValueError, Needs, capacity_needs, consumed_capacity, fits_in_use
from .cel_env import CelCompileError
from .constraints import Constraint, Lookup, _raw_attribute, build_constraint
from .derived import evaluate_memo
from .groups import GroupState, consume
from .pools import Pool, PreparedDevice, PreparedSlice, node_matches
from .quantity import nano_units
from .requests import RequestData, claim_key, validate_request
from .selection import selectable
from .types import (
    MAX_RESULTS_PER_CLAIM,
    CelSelectorError,
    DeviceID,
    InvalidCapacityError,
    InvalidRequestError,
    PoolUnavailableError,
    SearchBudget,
    TooManyResultsError,
)

if TYPE_CHECKING:
    from .allocator import Allocator

__all__ = ["OPTIONAL_NODE_OPERATIONS", "Candidate", "RunState"]

OPTIONAL_NODE_OPERATIONS = "DRAOptionalNodeOperations"  # the node declared feature (status.declaredFeatures)

Candidate = tuple[Pool, PreparedSlice, PreparedDevice]


class RunState:
    """What one ``allocate`` call knows and has tentatively allocated so far."""

    def __init__(
        self,
        parent: Allocator,
        node: Mapping[str, Any],
        claims: Sequence[Mapping[str, Any]],
        admin_access_allowed: bool,
        budget: SearchBudget | None = None,
    ) -> None:
        self.a = parent
        self.budget = budget
        self.steps = 0
        self.states = 0  # search states visited (_allocate_one calls): the outcome's ``states``
        self.features = parent.features
        self.node = node
        self.node_name: str = (node.get("metadata") or {}).get("name", "")
        self.claims = claims
        self.admin_access_allowed = admin_access_allowed
        self.pools: list[Pool] = []
        self.candidates: list[Candidate] = []
        # per candidate: allocated before this run (taken_before, fixed for the run); None: not asked yet
        self.taken: list[bool | None] = []
        # requests[claim][request] = [RequestData] (one) or one per subrequest
        self.requests: list[list[list[RequestData]]] = []
        self.selected_sub: dict[tuple[int, int], int] = {}
        # (id of a RequestData, id of a PreparedDevice) -> selectable: fixed for one run (selectors, binding
        # conditions, the node) but asked again in every search state that reaches the pair. Both objects
        # live as long as the run, so their ids are stable keys.
        self._selectable: dict[tuple[int, int], bool] = {}
        self._capacity_needs: dict[tuple[int, int], Needs | Literal[False] | None] = {}  # the same keys
        self._consumed: dict[tuple[int, int], tuple[dict[str, int], dict[str, str]]] = {}  # the same keys
        self.constraints: list[list[Constraint]] = []
        self.allocating: dict[DeviceID, set[int]] = {}
        self.allocating_capacity: dict[DeviceID, dict[str, int]] = {}  # nano units
        self.allocating_shares: dict[DeviceID, int] = {}
        # DRAConsumableCapacity off: an allocation with a shareID counts as an ordinary allocation of its
        # device (upstream GatherAllocatedState puts it with the exclusively allocated devices)
        self.shared_in_use: frozenset[DeviceID] = (
            frozenset() if self.features.consumable_capacity
            else frozenset(did for did, _ in parent.allocated.shared)
        )
        self.consumed_counters: dict[tuple[str, str], dict[str, dict[str, int]]] = {}  # nano units
        self.consumed_groups: dict[tuple[str, str], dict[str, GroupState]] = {}
        # DRAOptionalNodeOperations: devices of slices with skipNodeOperations only on nodes that
        # declare the feature (kubelet publishes status.declaredFeatures).
        declared = (node.get("status") or {}).get("declaredFeatures") or []
        self.node_operations_optional: bool = (
            self.features.optional_node_operations and OPTIONAL_NODE_OPERATIONS in declared
        )
        self.results: list[list[dict[str, Any]]] = [[] for _ in claims]
        self.result_devices: list[list[tuple[PreparedSlice, PreparedDevice]]] = [[] for _ in claims]

    def _validate_claim(self, ci: int, claim: Mapping[str, Any]) -> None:
        key = claim_key(claim)
        devices = (claim.get("spec") or {}).get("devices") or {}
        per_claim: list[list[RequestData]] = []
        min_devices = 0
        for ri, request in enumerate(devices.get("requests") or []):
            name = request.get("name", "")
            subs = request.get("firstAvailable") or []
            if subs and not self.features.prioritized_list:
                raise InvalidRequestError(
                    f'claim "{key}", request "{name}": has subrequests, but the DRAPrioritizedList '
                    "feature is disabled",
                    claim=key,
                    request=name,
                )
            specs = (
                [(si, sub) for si, sub in enumerate(subs)] if subs else [(-1, request.get("exactly") or {})]
            )
            datas = []
            for si, spec in specs:
                rd = self._validated(key, ci, ri, si, name, spec)
                if rd.admin_access and not self.admin_access_allowed:
                    raise InvalidRequestError(
                        f'claim "{key}", request "{rd.name}": admin access is requested, but the namespace '
                        "is not labeled resource.kubernetes.io/admin-access=true",
                        claim=key,
                        request=rd.name,
                    )
                if rd.all_mode:
                    self._collect_all(rd, key)
                datas.append(rd)
            needed = min(d.num_devices for d in datas)
            if needed > MAX_RESULTS_PER_CLAIM - min_devices:
                raise TooManyResultsError(
                    f'claim "{key}", request "{name}": adding {needed} devices exceeds the claim limit of '
                    f"{MAX_RESULTS_PER_CLAIM}, with {min_devices} already accounted for",
                    claim=key,
                    request=name,
                )
            min_devices += needed
            per_claim.append(datas)
        self.requests.append(per_claim)
        constraints = []
        for i, spec in enumerate(devices.get("constraints") or []):
            c = build_constraint(spec, self.features.list_type_attributes)
            if c is None:
                raise InvalidRequestError(
                    f'claim "{key}", constraint #{i}: empty constraint (unsupported constraint type?)',
                    claim=key,
                )
            constraints.append(c)
        self.constraints.append(constraints)

    def _validated(self, key: str, ci: int, ri: int, si: int, name: str,
                   spec: Mapping[str, Any]) -> RequestData:
        """:func:`validate_request`, remembered by the Allocator (one per decision) for this very ``spec``
        object: it does not depend on the node. Errors are not remembered (a new call raises them
        again); an ``All`` request gets its own device list per run."""
        memo = self.a.validated_requests
        memo_key = (key, ci, ri, si, name, id(spec))
        hit = memo.get(memo_key)
        if hit is not None and hit[0] is spec:  # the entry holds ``spec``: its id is not reused meanwhile
            rd = hit[1]
        else:
            rd = validate_request(
                claim=key,
                claim_index=ci,
                request_index=ri,
                sub_index=si,
                base_name=name,
                spec=spec,
                classes=self.a.classes,
                cache=self.a.cel_cache,
                features=self.features,
            )
            memo[memo_key] = (spec, rd)
        return replace(rd, all_devices=[]) if rd.all_mode else rd

    def _collect_all(self, rd: RequestData, key: str) -> None:
        for pool in self.pools:
            if pool.incomplete or pool.invalid:
                state = "currently being updated" if pool.incomplete else "currently invalid"
                raise PoolUnavailableError(
                    f'claim "{key}", request "{rd.name}": asks for all devices, but resource pool '
                    f"{pool.id} is {state}",
                    claim=key,
                    request=rd.name,
                    pool=pool.id,
                )
            for s in pool.slices:
                for d in s.devices:
                    # Static capacity only (nothing allocated): a matching device that is
                    # already full stays in the list and makes All fail when it is allocated.
                    if self.selectable(rd, s, d) and self.capacity_ok(rd, d, static=True) is True:
                        rd.all_devices.append((pool, s, d))

    # -- per-device checks -------------------------------------------------------------------------
    def claim_name(self, ci: int) -> str:
        return claim_key(self.claims[ci])

    def selectable(self, rd: RequestData, s: PreparedSlice, d: PreparedDevice) -> bool:
        """``d`` of slice ``s`` may serve ``rd`` (remembered for the run). Raises on a CEL runtime error."""
        key = (id(rd), id(d))
        known = self._selectable.get(key)
        if known is None:
            known = self._selectable[key] = self._selectable_now(rd, s, d)
        return known

    def _selectable_now(self, rd: RequestData, s: PreparedSlice, d: PreparedDevice) -> bool:
        if not self.features.device_binding_and_status and d.binding_conditions:
            return False
        if not selectable(rd, d, self.claim_name(rd.claim_index)):
            return False
        return not s.per_device or node_matches(self.node, d.node_name, d.all_nodes, d.node_selector)

    def capacity_ok(self, rd: RequestData, d: PreparedDevice, *, static: bool = False) -> bool | None:
        """One more allocation of ``d`` for ``rd`` fits the device's capacities (``static``: on an
        empty device). Raises :class:`InvalidCapacityError` for a negative/unrepresentable value."""
        if not self.features.consumable_capacity:
            return True
        key = (id(rd), id(d))
        try:
            needs = self._capacity_needs[key]
        except KeyError:
            try:
                needs = capacity_needs(rd.capacity, d, self.features.fractional_capacity_range)
            except CapacityValueError as exc:
                raise self._capacity_error(rd, d, exc) from exc
            self._capacity_needs[key] = needs
        if needs is None or needs is False:
            return needs
        return fits_in_use(needs, None if static else self.a.allocated.capacity.get(d.id),
                           None if static else self.allocating_capacity.get(d.id))

    def consumed(self, rd: RequestData, d: PreparedDevice) -> tuple[dict[str, int], dict[str, str]]:
        """What one allocation of multi-allocatable ``d`` for ``rd`` consumes: nano units per capacity,
        and the result's ``consumedCapacity`` text (fixed for the run, remembered: the search may try the
        pair many times; callers copy before handing the text out)."""
        key = (id(rd), id(d))
        known = self._consumed.get(key)
        if known is None:
            try:
                quantities = consumed_capacity(rd.capacity, d, self.features.fractional_capacity_range)
            except CapacityValueError as exc:  # checked before; kept fail-closed
                raise self._capacity_error(rd, d, exc) from exc
            known = self._consumed[key] = ({k: nano_units(q.value) for k, q in quantities.items()},
                                           {k: q.canonical() for k, q in quantities.items()})
        return known

    def _capacity_error(
        self, rd: RequestData, d: PreparedDevice, exc: CapacityValueError
    ) -> InvalidCapacityError:
        claim = self.claim_name(rd.claim_index)
        return InvalidCapacityError(
            f'claim "{claim}", request "{rd.name}": checking capacity for device {d.id}: {exc}',
            claim=claim,
            request=rd.name,
            device=str(d.id),
            capacity=exc.capacity,
        )

    def in_use(self, did: DeviceID) -> bool:
        return self.taken_before(did) or bool(self.allocating.get(did))

    def taken_before(self, did: DeviceID) -> bool:
        """Allocated by an earlier claim (fixed for the run); :meth:`in_use` adds this run's own."""
        return did in self.a.allocated.devices or did in self.shared_in_use

    def _capacity_in_use(self, did: DeviceID) -> bool:
        return did in self.a.allocated.capacity or self.allocating_shares.get(did, 0) > 0

    def groups_ok(self, pool: Pool, d: PreparedDevice) -> Callable[[], None] | None:
        """DRADeviceCompatibilityGroups: admit ``d`` next to the devices on its counter sets (allocated
        and tentatively allocated); returns the undo of that, or None if incompatible."""
        running = self.consumed_groups.setdefault((pool.driver, pool.pool), {})
        return consume(running, self.a.group_baseline(pool), d)

    def lookup_for(self, rd: RequestData, d: PreparedDevice) -> Lookup | None:
        """The attribute source of ``d`` for ``rd``'s constraints: None (the device's own) unless the
        request derives attributes. Raises :class:`CelSelectorError` when a derived one fails."""
        if not rd.derived:
            return None

        def lookup(name: str) -> Any:
            expression = rd.derived.get(name)
            if expression is None:
                return _raw_attribute(d, name)
            claim = self.claim_name(rd.claim_index)
            where = f'claim "{claim}" request "{rd.name}": derived attribute {name} {expression!r}'
            try:
                compiled = self.a.derived_expression(expression)
            except CelCompileError as exc:
                raise CelSelectorError(
                    f"{where}: CEL compile error: {exc.message}",
                    claim=claim, request=rd.name, expression=expression,
                ) from exc
            value = evaluate_memo(compiled, d.derived, d.cel_input)
            if isinstance(value, str):
                raise CelSelectorError(
                    f"{where} on device {d.id}: CEL runtime error: {value}",
                    claim=claim, request=rd.name, expression=expression, device=str(d.id), runtime=True,
                )
            return value

        return lookup

    def counters_ok(self, pool: Pool, d: PreparedDevice, *, commit: bool) -> bool:
        """``d`` fits the counters of ``pool`` next to the allocated and tentatively allocated devices
        (upstream's checkAvailableCounters: every counter of the pool within what is available). Only
        the counters ``d`` consumes are compared: the others hold already (``available_counters``'
        flag, and every device added in this run passed this check)."""
        available, none_overdrawn = self.a.available_counters(pool)
        if not none_overdrawn:
            return False
        consumed = self.consumed_counters.setdefault((pool.driver, pool.pool), {})
        self._add_counters(consumed, d, 1)
        ok = True
        for set_name, counters in d.consumes:
            left, used = available.get(set_name), consumed[set_name]
            if left is not None and any(name in left and left[name] < used[name] for name in counters):
                ok = False
                break
        if not ok or not commit:
            self._add_counters(consumed, d, -1)
        return ok

    @staticmethod
    def _add_counters(consumed: dict[str, dict[str, int]], d: PreparedDevice, sign: int) -> None:
        for set_name, counters in d.consumes:
            target = consumed.setdefault(set_name, {})
            for name, value in counters.items():
                target[name] = target.get(name, 0) + sign * value
