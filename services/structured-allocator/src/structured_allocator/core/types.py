"""Inputs and results of the allocation core: features, device IDs, the allocated state, outcomes, errors.

Error tree (all carry ``claim`` and, where known, ``request``)::

    AllocationError                  broken input: the claim can never be allocated as written
    ├── UnknownDeviceClassError      request names a DeviceClass that does not exist
    ├── CelSelectorError             a selector does not compile or fails at runtime
    ├── InvalidRequestError          unsupported/disabled feature, empty selector, bad count...
    ├── TooManyResultsError          more than 32 results for one claim
    ├── InvalidCapacityError         a negative or unrepresentable consumable-capacity value
    └── PoolUnavailableError         allocationMode All on an incomplete or invalid pool

    SearchBudgetExhausted            NOT broken input: the search ran out of its SearchBudget
                                     (steps, deadline or cancelled); retry later
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar, NamedTuple

from draflow_runtime.dra import allocation_results

from .quantity import nano_units, parse_quantity

__all__ = [
    "MAX_RESULTS_PER_CLAIM",
    "AllocatedState",
    "AllocationError",
    "AllocationOutcome",
    "CelSelectorError",
    "DeviceID",
    "Features",
    "InvalidCapacityError",
    "InvalidRequestError",
    "PoolUnavailableError",
    "SearchBudget",
    "SearchBudgetExhausted",
    "TooManyResultsError",
    "UnknownDeviceClassError",
]

MAX_RESULTS_PER_CLAIM = 32


class DeviceID(NamedTuple):
    driver: str
    pool: str
    device: str

    def __str__(self) -> str:
        return f"{self.driver}/{self.pool}/{self.device}"


@dataclass(frozen=True)
class Features:
    """DRA feature gates relevant to allocation (upstream ``structured.Features``). The defaults are
    kube-scheduler's at v1.37 with its default gates: the beta and GA features on, the alpha ones off
    (``all()`` is the same: the default set, not upstream's ``FeaturesAll``).

    ``device_binding_and_status`` = DRADeviceBindingConditions and DRAResourceClaimDeviceStatus both
    on (upstream treats the pair as one allocator feature). The alpha gates of upstream's experimental
    allocator, off by default:

    * ``list_type_attributes`` (DRAListTypeAttributes): list-valued attributes in constraints;
    * ``compatibility_groups`` (DRADeviceCompatibilityGroups): devices whose counter consumption names
      ``compatibilityGroups`` share a counter set only with peers of a common group; with the gate off
      slices that use groups are ignored (their pool is incomplete);
    * ``derived_attributes`` (DRADerivedAttributes): a request's ``derivedAttributes`` (CEL) define
      attributes its constraints see; with the gate off such a request is an error;
    * ``optional_node_operations`` (DRAOptionalNodeOperations): devices of slices with
      ``skipNodeOperations`` go only to nodes declaring the feature (``status.declaredFeatures``) and
      the result carries ``skipNodeOperations``; with the gate off such devices are never allocated.
    """

    admin_access: bool = True
    prioritized_list: bool = True
    partitionable_devices: bool = True
    device_taints: bool = True
    device_binding_and_status: bool = True
    consumable_capacity: bool = True
    fractional_capacity_range: bool = True
    list_type_attributes: bool = False  # alpha
    compatibility_groups: bool = False  # alpha
    derived_attributes: bool = False  # alpha
    optional_node_operations: bool = False  # alpha

    @classmethod
    def all(cls) -> Features:
        return cls()

    @classmethod
    def none(cls) -> Features:
        return cls(**{f.name: False for f in fields(cls)})


@dataclass
class AllocatedState:
    """What existing allocations already use.

    * ``devices``: exclusively allocated devices (admin-access results do not count, as upstream);
    * ``shared``: (device, shareID) of allocations of multi-allocatable devices;
    * ``capacity``: consumed capacity per shared device, summed over its allocations (exact, in nano
      units: :func:`~.quantity.nano_units`).

    Build it with :meth:`from_claims` from claims' ``status.allocation`` and add in-flight allocations
    with :meth:`add_allocation`; :meth:`copy` before mutating a shared instance.
    """

    devices: set[DeviceID] = field(default_factory=set)
    shared: set[tuple[DeviceID, str]] = field(default_factory=set)
    capacity: dict[DeviceID, dict[str, int]] = field(default_factory=dict)

    @classmethod
    def from_claims(cls, claims: Iterable[Mapping[str, Any]]) -> AllocatedState:
        state = cls()
        for claim in claims:
            allocation = (claim.get("status") or {}).get("allocation")
            if allocation:
                state.add_allocation(allocation)
        return state

    def add_allocation(self, allocation: Mapping[str, Any]) -> None:
        """Record one ``status.allocation`` (idempotent for exclusive devices and share IDs)."""
        for result in allocation_results(allocation):
            did = DeviceID(result["driver"], result["pool"], result["device"])
            share_id = result.get("shareID")
            if share_id:
                key = (did, share_id)
                if key in self.shared:
                    continue
                self.shared.add(key)
                self.count_capacity(did, result, 1)
            elif not result.get("adminAccess"):
                self.devices.add(did)

    def count_capacity(self, did: DeviceID, result: Mapping[str, Any], sign: int) -> None:
        """Add (``sign`` 1) or take away (-1) the ``consumedCapacity`` of one allocation result."""
        consumed = self.capacity.setdefault(did, {})
        for name, value in (result.get("consumedCapacity") or {}).items():
            consumed[name] = consumed.get(name, 0) + sign * nano_units(parse_quantity(value).value)

    def copy(self) -> AllocatedState:
        return AllocatedState(
            set(self.devices), set(self.shared), {k: dict(v) for k, v in self.capacity.items()}
        )

    def is_allocated(self, did: DeviceID) -> bool:
        """In use in any way (exclusively or shared) — what counter accounting looks at."""
        return did in self.devices or did in self.capacity or any(d == did for d, _ in self.shared)


@dataclass
class AllocationOutcome:
    """Result of :meth:`Allocator.allocate`: ``results`` holds one ``status.allocation`` per claim
    when ``fits``; otherwise ``explanation`` says why not. ``states`` is how hard the search worked: the
    search states it visited (upstream's ``NumAllocateOneInvocations``)."""

    fits: bool
    results: list[dict[str, Any]] = field(default_factory=list)
    explanation: Any = None  # explain.Explanation when not fits
    states: int = 0


class AllocationError(Exception):
    """Broken input (not "does not fit"): names the claim and, where known, the request."""

    def __init__(self, message: str, *, claim: str = "", request: str = "") -> None:
        super().__init__(message)
        self.claim = claim
        self.request = request


class UnknownDeviceClassError(AllocationError):
    def __init__(self, message: str, *, claim: str, request: str, device_class: str) -> None:
        super().__init__(message, claim=claim, request=request)
        self.device_class = device_class


class CelSelectorError(AllocationError):
    def __init__(
        self,
        message: str,
        *,
        claim: str,
        request: str,
        expression: str,
        device_class: str = "",
        device: str = "",
        runtime: bool = False,
    ) -> None:
        super().__init__(message, claim=claim, request=request)
        self.expression = expression
        self.device_class = device_class
        self.device = device
        self.runtime = runtime


class InvalidRequestError(AllocationError):
    pass


class TooManyResultsError(AllocationError):
    pass


class InvalidCapacityError(AllocationError):
    """A consumable-capacity value the allocator refuses to act on: a negative consumed value (from
    the request, the policy default or the device) or one its range arithmetic cannot represent."""

    def __init__(self, message: str, *, claim: str, request: str, device: str, capacity: str) -> None:
        super().__init__(message, claim=claim, request=request)
        self.device = device
        self.capacity = capacity


class PoolUnavailableError(AllocationError):
    def __init__(self, message: str, *, claim: str, request: str, pool: str) -> None:
        super().__init__(message, claim=claim, request=request)
        self.pool = pool


@dataclass(frozen=True)
class SearchBudget:
    """Bounds one :meth:`Allocator.allocate` call (upstream: DRASchedulerFilterTimeout + context
    cancellation of the scheduler's Filter).

    * ``max_steps``: device tries; every candidate device the search considers for a slot is one step;
    * ``deadline``: absolute time in ``clock()`` seconds;
    * ``cancelled``: polled; returning True stops the search.

    ``max_steps`` is checked on every step, ``deadline`` and ``cancelled`` every
    :data:`CHECK_EVERY` steps (and once before the search starts), so checking stays cheap.
    """

    CHECK_EVERY: ClassVar[int] = 64

    max_steps: int | None = None
    deadline: float | None = None
    cancelled: Callable[[], bool] | None = None
    clock: Callable[[], float] = time.monotonic


class SearchBudgetExhausted(Exception):
    """The search stopped before it found an answer: NOT an :class:`AllocationError` (the input is
    fine, the claim may well fit); the caller explains it and retries later with backoff.

    ``steps``: device tries made; ``reason``: ``"steps"``, ``"deadline"`` or ``"cancelled"``.
    """

    def __init__(self, steps: int, reason: str) -> None:
        super().__init__(f"search budget exhausted after {steps} steps ({reason})")
        self.steps = steps
        self.reason = reason
