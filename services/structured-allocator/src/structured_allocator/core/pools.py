"""ResourceSlices → resource pools for one node: the parsed slices and :func:`gather_pools`.

Each slice is parsed once into a :class:`PreparedSlice`; its devices carry the memo of CEL selector
results, which therefore lives exactly as long as that version of the slice. The node-independent
index of prepared slices, and the per-node cache of :func:`gather_pools` results, is
:class:`~.sliceindex.SliceIndex`.

:func:`gather_pools` follows upstream ``GatherPools`` (incubating): relevant slices (nodeName /
nodeSelector / allNodes match, perDeviceNodeSelection with at least one matching device), newest
generation per pool, completeness against ``resourceSliceCount`` (an incomplete pool is re-checked
against all slices of the pool: dropped if a newer generation exists, else marked incomplete),
invalid pools (duplicate device names, duplicate counter sets, counter references that do not
resolve), slices sorted by name, pools sorted by (driver, pool) with pools that have binding
conditions last. With DRADeviceCompatibilityGroups off, a slice with a device that declares
``consumesCounters[].compatibilityGroups`` is ignored as upstream does — it does not count towards
``resourceSliceCount``, so its pool is incomplete and none of the pool's devices is allocated (and
``All`` over it is an error); other pools are unaffected. With the gate on such slices are used and
the search enforces the groups (:mod:`.groups`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .cel_env import device_input
from .nodesel import node_matches, node_selector_matches
from .quantity import Quantity, nano_units, parse_quantity
from .types import DeviceID, Features

if TYPE_CHECKING:
    from .sliceindex import SliceIndex

__all__ = [
    "CapacityInfo",
    "Pool",
    "PreparedDevice",
    "PreparedSlice",
    "gather_pools",
    "node_matches",
    "node_selector_matches",
]


# -- prepared slices ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class CapacityInfo:
    value: Quantity
    default: Quantity | None = None
    valid_values: tuple[Quantity, ...] = ()
    range_min: Quantity | None = None
    range_max: Quantity | None = None
    range_step: Quantity | None = None
    has_range: bool = False


def _capacity_info(cap: Mapping[str, Any]) -> CapacityInfo:
    policy = cap.get("requestPolicy") or {}
    rng = policy.get("validRange")

    def q(v: str | None) -> Quantity | None:
        return parse_quantity(v) if v is not None else None

    return CapacityInfo(
        value=parse_quantity(cap["value"]),
        default=q(policy.get("default")),
        valid_values=tuple(parse_quantity(v) for v in policy.get("validValues") or []),
        range_min=q(rng.get("min")) if rng else None,
        range_max=q(rng.get("max")) if rng else None,
        range_step=q(rng.get("step")) if rng else None,
        has_range=rng is not None,
    )


class PreparedDevice:
    """One device of one slice version, parsed once; ``matches`` memoises selector results."""

    __slots__ = (
        "_cel",
        "all_nodes",
        "allow_multi",
        "attributes",
        "binding_conditions",
        "binding_failure_conditions",
        "binds_to_node",
        "capacity",
        "consume_groups",
        "consumes",
        "derived",
        "has_policy",
        "id",
        "matches",
        "name",
        "node_name",
        "node_selector",
        "raw",
        "taints",
    )

    def __init__(self, driver: str, pool: str, raw: Mapping[str, Any]) -> None:
        self.raw = raw
        self.name: str = raw["name"]
        self.id = DeviceID(driver, pool, self.name)
        self.attributes: Mapping[str, Any] = raw.get("attributes") or {}
        self.capacity: dict[str, CapacityInfo] = {
            k: _capacity_info(v) for k, v in (raw.get("capacity") or {}).items()
        }
        # Counter values in whole nano units (:func:`~.quantity.nano_units`: exact, integer arithmetic).
        self.consumes: list[tuple[str, dict[str, int]]] = [
            (
                c["counterSet"],
                {n: nano_units(parse_quantity(v["value"]).value)
                 for n, v in (c.get("counters") or {}).items()},
            )
            for c in raw.get("consumesCounters") or []
        ]
        # (counter set, compatibilityGroups) per consumesCounters entry (DRADeviceCompatibilityGroups).
        self.consume_groups: list[tuple[str, frozenset[str]]] = [
            (c["counterSet"], frozenset(c.get("compatibilityGroups") or ()))
            for c in raw.get("consumesCounters") or []
        ]
        self.taints: list[Mapping[str, Any]] = list(raw.get("taints") or [])
        self.allow_multi: bool = bool(raw.get("allowMultipleAllocations", False))
        self.binding_conditions: list[str] = list(raw.get("bindingConditions") or [])
        self.binding_failure_conditions: list[str] = list(raw.get("bindingFailureConditions") or [])
        self.binds_to_node: bool = bool(raw.get("bindsToNode", False))
        self.node_name: str | None = raw.get("nodeName")
        self.node_selector: Mapping[str, Any] | None = raw.get("nodeSelector")
        self.all_nodes: bool = bool(raw.get("allNodes", False))
        self.has_policy = any(c.default or c.valid_values or c.has_range for c in self.capacity.values())
        self.matches: dict[str, bool] = {}
        self.derived: dict[str, Any] = {}  # derived-attribute expression -> attribute or failure
        self._cel: dict[str, Any] | Exception | None = None

    def cel_input(self) -> dict[str, Any]:
        """The CEL ``device`` value (built once). Raises ValueError for malformed attributes."""
        if self._cel is None:
            try:
                self._cel = device_input(self.id.driver, self.raw)
            except ValueError as exc:
                self._cel = exc
        if isinstance(self._cel, Exception):
            raise self._cel
        return self._cel


class PreparedSlice:
    """One ResourceSlice version, parsed once."""

    def __init__(self, raw: Mapping[str, Any]) -> None:
        meta = raw.get("metadata") or {}
        spec = raw.get("spec") or {}
        pool = spec.get("pool") or {}
        self.raw = raw
        self.name: str = meta.get("name", "")
        self.resource_version: str | None = meta.get("resourceVersion")
        self.driver: str = spec.get("driver", "")
        self.pool: str = pool.get("name", "")
        self.generation: int = int(pool.get("generation", 0))
        self.slice_count: int = int(pool.get("resourceSliceCount", 1))
        self.node_name: str | None = spec.get("nodeName") or None
        self.node_selector: Mapping[str, Any] | None = spec.get("nodeSelector")
        self.all_nodes: bool = bool(spec.get("allNodes", False))
        self.per_device: bool = bool(spec.get("perDeviceNodeSelection", False))
        self.skip_node_operations: list[str] = list(spec.get("skipNodeOperations") or [])
        self.shared_counters: list[tuple[str, dict[str, int]]] = [  # nano units, as PreparedDevice.consumes
            (cs["name"], {n: nano_units(parse_quantity(v["value"]).value)
                          for n, v in (cs.get("counters") or {}).items()})
            for cs in spec.get("sharedCounters") or []
        ]
        self.devices = [PreparedDevice(self.driver, self.pool, d) for d in spec.get("devices") or []]
        # A device declares consumesCounters[].compatibilityGroups (DRADeviceCompatibilityGroups):
        # with the gate off the slice is ignored, which leaves its pool incomplete.
        self.uses_compatibility_groups: bool = any(
            c.get("compatibilityGroups")
            for d in spec.get("devices") or []
            for c in d.get("consumesCounters") or []
        )
        # DRANodeAllocatableResources: a device maps node resources (nodealloc looks only at those).
        self.maps_node_resources: bool = any(
            d.get("nodeAllocatableResources") for d in spec.get("devices") or []
        )

    @property
    def pool_id(self) -> tuple[str, str]:
        return (self.driver, self.pool)


# -- pools ----------------------------------------------------------------------------------------------


@dataclass
class Pool:
    driver: str
    pool: str
    incomplete: bool = False
    invalid: bool = False
    invalid_reason: str = ""
    slices: list[PreparedSlice] = field(default_factory=list)  # device slices targeting the node
    slices_not_targeting: list[PreparedSlice] = field(default_factory=list)
    counter_sets: dict[str, dict[str, int]] = field(default_factory=dict)  # nano units

    @property
    def id(self) -> str:
        return f"{self.driver}/{self.pool}"

    def has_binding_conditions(self) -> bool:
        return any(d.binding_conditions for s in self.slices for d in s.devices)


def _slice_relevant(s: PreparedSlice, node: Mapping[str, Any]) -> bool | None:
    if s.node_name or s.all_nodes or s.node_selector is not None:
        return node_matches(node, s.node_name, s.all_nodes, s.node_selector)
    if s.per_device:
        return any(node_matches(node, d.node_name, d.all_nodes, d.node_selector) for d in s.devices)
    return None  # unknown future node selection: skip


def gather_pools(index: SliceIndex, node: Mapping[str, Any], features: Features) -> list[Pool]:
    """The pools whose devices are accessible from ``node``, in allocation order (see module doc)."""
    node_name = (node.get("metadata") or {}).get("name", "")
    by_pool: dict[tuple[str, str], list[PreparedSlice]] = {}
    for s in index.slices_for_node(node_name):
        if not features.partitionable_devices and (s.per_device or s.shared_counters):
            continue
        if s.uses_compatibility_groups and not features.compatibility_groups:
            continue
        if not _slice_relevant(s, node):
            continue
        current = by_pool.get(s.pool_id)
        if current is None or s.generation > current[0].generation:
            by_pool[s.pool_id] = [s]
        elif s.generation == current[0].generation:
            current.append(s)
    pools: list[Pool] = []
    late: list[Pool] = []
    for pool_id, slices in by_pool.items():
        expected = slices[0].slice_count
        all_slices: list[PreparedSlice] | None = None
        if len(slices) != expected:
            generation = slices[0].generation
            others = index.pool_slices(pool_id)
            if any(o.generation > generation for o in others):
                continue  # obsolete: the driver is replacing this generation
            all_slices = [
                o
                for o in others
                if o.generation == generation
                and (features.compatibility_groups or not o.uses_compatibility_groups)
            ]
            if len(all_slices) != expected:
                pools.append(Pool(pool_id[0], pool_id[1], incomplete=True))
                continue
        pool = _build_pool(pool_id, slices, features, all_slices)
        (late if pool.has_binding_conditions() else pools).append(pool)
    pools.sort(key=lambda p: (p.driver, p.pool))
    late.sort(key=lambda p: (p.driver, p.pool))
    return pools + late


def _build_pool(
    pool_id: tuple[str, str],
    slices: list[PreparedSlice],
    features: Features,
    all_slices: list[PreparedSlice] | None,
) -> Pool:
    slices = sorted(slices, key=lambda s: s.name)
    device_slices: list[PreparedSlice] = []
    counter_slices: list[PreparedSlice] = []
    for s in slices:
        (counter_slices if features.partitionable_devices and s.shared_counters else device_slices).append(s)
    not_targeting: list[PreparedSlice] = []
    if all_slices is not None and len(all_slices) > len(slices):
        names = {s.name for s in slices}
        for s in all_slices:
            if s.name in names:
                continue
            (
                counter_slices if features.partitionable_devices and s.shared_counters else not_targeting
            ).append(s)
    pool = Pool(pool_id[0], pool_id[1], slices=device_slices, slices_not_targeting=not_targeting)
    seen: set[str] = set()
    for s in device_slices:
        for d in s.devices:
            if d.name in seen:
                return _invalid(pool_id, f"duplicate device name {d.name}")
            seen.add(d.name)
    if not features.partitionable_devices:
        return pool
    for s in counter_slices:
        for name, counters in s.shared_counters:
            if name in pool.counter_sets:
                return _invalid(pool_id, f"duplicate counter set name {name}")
            pool.counter_sets[name] = counters
    for s in [*device_slices, *not_targeting]:
        for d in s.devices:
            for set_name, counters in d.consumes:
                cs = pool.counter_sets.get(set_name)
                if cs is None:
                    return _invalid(pool_id, f"counter set {set_name} not found")
                for counter in counters:
                    if counter not in cs:
                        return _invalid(pool_id, f"counter {counter} not found in counter set {set_name}")
    return pool


def _invalid(pool_id: tuple[str, str], reason: str) -> Pool:
    return Pool(pool_id[0], pool_id[1], invalid=True, invalid_reason=reason)
