"""The per-pool views of a ResourcePoolStatusRequest answer: ``partitionSummary`` and ``shareableSummary``.

Pure functions (KEP-5677 as kube-controller-manager's ``resourcepoolstatusrequest`` controller of
Kubernetes v1.37.1 computes them; our own code). Input is one *complete* pool: its devices (each with the
``partitionTypeAttribute`` of its own slice), the shared counter sets of all its slices, the names of its
devices in use (by any non-admin allocation) and the capacity those allocations consume.

* **Grouping attribute** of a device (DRAPartitionableDevicesType): its slice's ``partitionTypeAttribute``;
  when *no* slice of the pool declares one, the request's ``defaultPartitionTypeAttribute``; otherwise
  none. The device's partition type is that attribute's *string* value (a name in the driver's domain
  may be written bare on the device; the fully qualified key wins when both exist).
* **partitionSummary**: counter-consuming devices with a grouping attribute, grouped by
  (attribute, type); per group ``total`` devices and ``allocatable`` = how many of its unused devices
  still fit, greedily in device order, into the counters left after the in-use devices' consumption
  (each group measured on its own against that baseline). Sorted by attribute, then type.
* **shareableSummary**: devices with ``allowMultipleAllocations``: fully available (unused) vs
  partially available (used), and per capacity name the sum over those devices, the consumption of
  all allocations in the pool and ``max(0, total - consumed)``, sorted by name.

A structural problem is a ``validationError`` with a machine-readable prefix; the first one wins and the
partition view is then dropped (the shareable view stays unless it is the problem).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from fractions import Fraction
from typing import Any

from .core.quantity import Quantity, parse_quantity

__all__ = [
    "PREFIX_PARTITION_COST_MISMATCH",
    "PREFIX_PARTITION_SUMMARY_OVER_CAP",
    "PREFIX_PARTITION_TYPE_MISSING",
    "PREFIX_POOL_INCOMPLETE",
    "PREFIX_SHAREABLE_OVER_CAP",
    "DeviceRecord",
    "PoolViewInput",
    "device_records",
    "partition_summary",
    "pool_views",
    "qadd",
    "resolve_partition_type",
    "resolve_partitions",
    "shareable_summary",
]

# The API's +k8s:maxItems=32 on both lists: more is reported, never truncated.
MAX_STATUS_LIST_ITEMS = 32

PREFIX_POOL_INCOMPLETE = "PoolIncomplete:"  # the only transient one: the request is retried
PREFIX_PARTITION_TYPE_MISSING = "PartitionTypeMissing:"
PREFIX_PARTITION_COST_MISMATCH = "PartitionCostMismatch:"
PREFIX_PARTITION_SUMMARY_OVER_CAP = "PartitionSummaryOverCap:"
PREFIX_SHAREABLE_OVER_CAP = "ShareableSummaryOverCap:"

Counters = dict[str, dict[str, Fraction]]  # counter set -> counter -> amount left


@dataclass(frozen=True)
class DeviceRecord:
    """What the views need of one device."""

    name: str
    partition_attr: str = ""  # the grouping attribute resolved for it ("" = none)
    partition_type: str | None = None  # its value on the device; None = absent or not a string
    consumes_counters: tuple[Mapping[str, Any], ...] = ()
    allow_multiple: bool = False
    capacity: Mapping[str, Any] = field(default_factory=dict)  # name -> {"value": quantity}
    attributes: Mapping[str, Any] = field(default_factory=dict)


@dataclass
class PoolViewInput:
    driver: str
    pool: str
    devices: list[DeviceRecord]
    shared_counters: list[Mapping[str, Any]] = field(default_factory=list)
    in_use: frozenset[str] = frozenset()
    consumed: Mapping[str, Quantity] = field(default_factory=dict)


def qadd(total: Quantity | None, value: Quantity) -> Quantity:
    """``total + value`` keeping ``total``'s format, or ``value``'s when ``total`` is zero or unset
    (apimachinery's ``Quantity.Add``)."""
    if total is None or total.value == 0:
        return Quantity((total.value if total else 0) + value.value, value.format)
    return Quantity(total.value + value.value, total.format)


def device_records(slice_: Mapping[str, Any]) -> list[DeviceRecord]:
    """One record per device of a slice, carrying the slice's own ``partitionTypeAttribute``."""
    spec = slice_.get("spec") or {}
    attr = spec.get("partitionTypeAttribute") or ""
    return [
        DeviceRecord(
            name=d.get("name", ""), partition_attr=attr,
            consumes_counters=tuple(d.get("consumesCounters") or ()),
            allow_multiple=bool(d.get("allowMultipleAllocations")),
            capacity=d.get("capacity") or {}, attributes=d.get("attributes") or {},
        )
        for d in spec.get("devices") or ()
    ]


def resolve_partition_type(driver: str, attributes: Mapping[str, Any], name: str) -> str | None:
    """The string value of attribute ``name`` (fully qualified) on a device, or None. A name in the
    driver's domain may be written bare on the device; the fully qualified key wins."""
    attr = attributes.get(name)
    if attr is None and name.startswith(driver + "/"):
        attr = attributes.get(name[len(driver) + 1:])
    if not isinstance(attr, Mapping):
        return None
    value = attr.get("string")
    return value if isinstance(value, str) else None


def resolve_partitions(request_attr: str | None, pool: PoolViewInput) -> None:
    """Give every device its grouping attribute and type: its slice's own declaration, else (only when
    no slice of the pool declares one) the request's default."""
    pool_declares = any(d.partition_attr for d in pool.devices)
    resolved = []
    for d in pool.devices:
        attr = d.partition_attr
        if not attr:
            if pool_declares or not request_attr:
                resolved.append(d)
                continue
            attr = request_attr
        typ = resolve_partition_type(pool.driver, d.attributes, attr)
        resolved.append(replace(d, partition_attr=attr, partition_type=typ))
    pool.devices = resolved


def pool_views(pool: PoolViewInput) -> tuple[list[dict[str, Any]] | None, dict[str, Any] | None, str]:
    """(partitionSummary or None, shareableSummary or None, validationError or "")."""
    grouped = any(d.partition_attr for d in pool.devices)
    partitions: list[dict[str, Any]] | None = None
    error = ""
    if grouped and not pool.shared_counters:
        error = (f"{PREFIX_PARTITION_TYPE_MISSING} pool {pool.driver}/{pool.pool} declares "
                 "partitionTypeAttribute but publishes no sharedCounters")
    elif grouped:
        partitions, error = partition_summary(pool)
    shareable, shareable_error = shareable_summary(pool)
    error = error or shareable_error
    if shareable_error:
        shareable = None
    if error:
        partitions = None
    return partitions, shareable, error


def _cost(consumption: Sequence[Mapping[str, Any]]) -> list[tuple[str, str, Fraction]]:
    return [(c.get("counterSet", ""), name, parse_quantity((v or {}).get("value", "0")).value)
            for c in consumption for name, v in (c.get("counters") or {}).items()]


def _fits(cost: list[tuple[str, str, Fraction]], avail: Counters) -> bool:
    for counter_set, name, amount in cost:
        have = avail.get(counter_set, {}).get(name)
        if have is None or have < amount:
            return False
    return True


def _deduct(cost: list[tuple[str, str, Fraction]], avail: Counters) -> None:
    for counter_set, name, amount in cost:
        counters = avail.get(counter_set)
        if counters is not None and name in counters:
            counters[name] -= amount


def _baseline(pool: PoolViewInput) -> Counters:
    """Each counter set's counters minus what the in-use devices consume (once per device)."""
    avail: Counters = {}
    for cs in pool.shared_counters:
        counters = avail.setdefault(cs.get("name", ""), {})
        for name, v in (cs.get("counters") or {}).items():
            counters[name] = parse_quantity((v or {}).get("value", "0")).value
    for d in pool.devices:
        if d.name in pool.in_use:
            _deduct(_cost(d.consumes_counters), avail)
    return avail


def partition_summary(pool: PoolViewInput) -> tuple[list[dict[str, Any]] | None, str]:
    """Per (attribute, type): total devices and how many unused ones still fit the counters left."""
    groups: dict[tuple[str, str], tuple[int, list[DeviceRecord]]] = {}
    costs: dict[tuple[str, str], list[tuple[str, str, Fraction]]] = {}
    where = f"pool {pool.driver}/{pool.pool}"
    for d in pool.devices:
        if not d.consumes_counters or not d.partition_attr:
            continue
        if d.partition_type is None:
            return None, (f"{PREFIX_PARTITION_TYPE_MISSING} device {d.name!r} in {where} does not carry "
                          f"partition type attribute {d.partition_attr!r}")
        key = (d.partition_attr, d.partition_type)
        cost = _cost(d.consumes_counters)
        if key not in groups:
            groups[key], costs[key] = (0, []), cost
        elif sorted(cost) != sorted(costs[key]):
            return None, (f"{PREFIX_PARTITION_COST_MISMATCH} devices of partition type "
                          f"{d.partition_type!r} in {where} consume different counters")
        total, fresh = groups[key]
        if d.name not in pool.in_use:
            fresh.append(d)
        groups[key] = (total + 1, fresh)
    baseline = _baseline(pool)
    out = []
    for (attr, typ), (total, fresh) in sorted(groups.items()):
        avail = {name: dict(counters) for name, counters in baseline.items()}
        allocatable = 0
        for d in fresh:
            cost = _cost(d.consumes_counters)
            if _fits(cost, avail):
                allocatable += 1
                _deduct(cost, avail)
        out.append({"attribute": attr, "type": typ, "total": total, "allocatable": allocatable})
    if len(out) > MAX_STATUS_LIST_ITEMS:
        return None, (f"{PREFIX_PARTITION_SUMMARY_OVER_CAP} {where} has {len(out)} partition types, "
                      f"exceeding the maximum of {MAX_STATUS_LIST_ITEMS}")
    return out, ""


def shareable_summary(pool: PoolViewInput) -> tuple[dict[str, Any] | None, str]:
    """Fully / partially available shareable devices and per-capacity totals; None without any."""
    full = partial = 0
    totals: dict[str, Quantity] = {}
    shareable = False
    for d in pool.devices:
        if not d.allow_multiple:
            continue
        shareable = True
        if d.name in pool.in_use:
            partial += 1
        else:
            full += 1
        for name, cap in d.capacity.items():
            totals[name] = qadd(totals.get(name), parse_quantity((cap or {}).get("value", "0")))
    if not shareable:
        return None, ""
    capacity = []
    for name in sorted(totals):
        total = totals[name]
        consumed = pool.consumed.get(name, Quantity(Fraction(0)))
        left = total.value - consumed.value
        available = Quantity(max(left, Fraction(0)), total.format)
        capacity.append({"name": name, "total": total.canonical(), "consumed": consumed.canonical(),
                         "available": available.canonical()})
    if len(capacity) > MAX_STATUS_LIST_ITEMS:
        return None, (f"{PREFIX_SHAREABLE_OVER_CAP} pool {pool.driver}/{pool.pool} has {len(capacity)} "
                      f"shareable capacity keys, exceeding the maximum of {MAX_STATUS_LIST_ITEMS}")
    out: dict[str, Any] = {"fullyAvailableDevices": full, "partiallyAvailableDevices": partial}
    if capacity:
        out["capacity"] = capacity
    return out, ""
