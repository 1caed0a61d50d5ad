"""Splitting a pool into ResourceSlice contents, within the limits of ``resource.k8s.io/v1``. Pure.

A driver describes pools (:class:`DesiredPool`); the API stores slices. :func:`split_pool` turns one pool
into the ordered list of slice contents (``{"sharedCounters": [...]}`` or ``{"devices": [...]}``):

- shared counter sets go into their own slices first, at most 8 sets per slice (a slice holds devices *or*
  counters, never both); they come first so that a change in the number of devices never moves them;
- then the devices, in the driver's order, greedily: a slice takes up to 128 devices, or 64 as soon as one
  of its devices uses taints, ``consumesCounters`` or list-typed attributes;
- a pool's ``partitionTypeAttribute`` goes on each device slice with a counter-consuming device;
- a pool with neither devices nor counters becomes one empty slice (upstream: "publish an empty slice
  rather than no pool"), so consumers still see the pool and its generation.

``reserve_for_taints=True`` (the default) treats every device as tainted, i.e. caps every slice at 64.
The publisher itself taints devices (driver unavailable, unhealthy); if the split depended on those taints,
tainting a 128-device slice would re-split the pool and delete/recreate slices exactly when a driver
blinks. Reserving the room keeps the split a function of the driver's inventory alone.

The same inventory always gives the same split (no sorting by hash, no set iteration).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

MAX_DEVICES_PER_SLICE = 128
MAX_DEVICES_PER_SLICE_ADVANCED = 64
MAX_COUNTER_SETS_PER_SLICE = 8
MAX_TAINTS_PER_DEVICE = 16

LIST_ATTRIBUTE_KINDS = ("ints", "bools", "strings", "versions")
PLACEMENT_FIELDS = ("nodeName", "nodeSelector", "allNodes", "perDeviceNodeSelection")


@dataclass(frozen=True)
class DesiredPool:
    """One pool as the driver wants it published.

    ``placement`` holds exactly one of the ResourceSliceSpec placement fields (``nodeName``,
    ``nodeSelector``, ``allNodes``, ``perDeviceNodeSelection``), already in API JSON form. ``devices`` and
    ``shared_counters`` are API JSON ``Device`` / ``CounterSet`` objects in publish order. ``owner_node`` is
    the node whose publisher owns the pool (for node-local pools the same as ``placement["nodeName"]``).
    ``generation_hint`` is the driver's lower bound for ``pool.generation`` (0: no hint).
    ``partition_type_attribute`` (DRAPartitionableDevicesType; "" = none) goes into the slices whose
    devices consume counters (the API allows it nowhere else).
    """

    driver: str
    name: str
    owner_node: str
    placement: Mapping[str, Any]
    devices: tuple[Mapping[str, Any], ...] = ()
    shared_counters: tuple[Mapping[str, Any], ...] = ()
    generation_hint: int = 0
    partition_type_attribute: str = ""

    @property
    def node_name(self) -> str | None:
        """The node of a node-local pool, None for network-attached pools."""
        return self.placement.get("nodeName")


class InvalidPool(ValueError):
    """The driver's pool cannot be published as it is (broken input, not a transient error)."""

    def __init__(self, driver: str, pool: str, problems: list[str]) -> None:
        super().__init__(f"pool {pool!r} of driver {driver!r} is invalid: " + "; ".join(problems))
        self.driver = driver
        self.pool = pool
        self.problems = problems


def uses_advanced_features(device: Mapping[str, Any]) -> bool:
    """True if the device lowers its slice's limit to 64 (taints, consumesCounters, list attributes)."""
    if device.get("taints") or device.get("consumesCounters"):
        return True
    for attr in (device.get("attributes") or {}).values():
        if any(kind in attr for kind in LIST_ATTRIBUTE_KINDS):
            return True
    return False


def validate_pool(pool: DesiredPool) -> list[str]:
    """Problems that make the API reject the pool or the allocator misread it; empty when fine."""
    problems: list[str] = []
    placements = [f for f in PLACEMENT_FIELDS if pool.placement.get(f)]
    if len(placements) != 1:
        problems.append(f"exactly one placement expected, got {placements or 'none'}")
    counter_sets: dict[str, set[str]] = {}
    for cs in pool.shared_counters:
        name = cs.get("name", "")
        if name in counter_sets:
            problems.append(f"duplicate counter set {name!r}")
        counter_sets[name] = set((cs.get("counters") or {}).keys())
    seen: set[str] = set()
    for dev in pool.devices:
        name = dev.get("name", "")
        if not name:
            problems.append("device without a name")
        elif name in seen:
            problems.append(f"duplicate device {name!r}")
        seen.add(name)
        if len(dev.get("taints") or ()) > MAX_TAINTS_PER_DEVICE:
            problems.append(f"device {name!r} has more than {MAX_TAINTS_PER_DEVICE} taints")
        for use in dev.get("consumesCounters") or ():
            cs_name = use.get("counterSet", "")
            if cs_name not in counter_sets:
                problems.append(f"device {name!r} consumes unknown counter set {cs_name!r}")
                continue
            missing = set((use.get("counters") or {}).keys()) - counter_sets[cs_name]
            if missing:
                problems.append(f"device {name!r} consumes unknown counters {sorted(missing)} of {cs_name!r}")
        if pool.partition_type_attribute and dev.get("consumesCounters") and \
                _partition_type(pool.driver, dev, pool.partition_type_attribute) is None:
            problems.append(f"device {name!r} consumes counters but has no string attribute "
                            f"{pool.partition_type_attribute!r} (the pool's partition type attribute)")
    return problems


def _partition_type(driver: str, device: Mapping[str, Any], attribute: str) -> str | None:
    """The device's string value of ``attribute`` (fully qualified; bare in the driver's domain)."""
    attrs = device.get("attributes") or {}
    value = attrs.get(attribute)
    if value is None and attribute.startswith(driver + "/"):
        value = attrs.get(attribute[len(driver) + 1:])
    string = (value or {}).get("string")
    return string if isinstance(string, str) else None


def _chunks(items: Iterable[Any], size: int) -> list[list[Any]]:
    out: list[list[Any]] = []
    for item in items:
        if not out or len(out[-1]) >= size:
            out.append([])
        out[-1].append(item)
    return out


def split_devices(
    devices: Iterable[Mapping[str, Any]], *, reserve_for_taints: bool = True
) -> list[list[Any]]:
    """Greedy, order-preserving split of devices into slices of ≤128 (≤64 with advanced features)."""
    out: list[list[Any]] = []
    advanced = False
    for dev in devices:
        dev_advanced = reserve_for_taints or uses_advanced_features(dev)
        if out:
            limit = MAX_DEVICES_PER_SLICE_ADVANCED if (advanced or dev_advanced) else MAX_DEVICES_PER_SLICE
            if len(out[-1]) < limit:
                out[-1].append(dev)
                advanced = advanced or dev_advanced
                continue
        out.append([dev])
        advanced = dev_advanced
    return out


def split_pool(pool: DesiredPool, *, reserve_for_taints: bool = True) -> list[dict[str, Any]]:
    """The ordered slice contents of a pool; raises :class:`InvalidPool` on broken input."""
    problems = validate_pool(pool)
    if problems:
        raise InvalidPool(pool.driver, pool.name, problems)
    contents: list[dict[str, Any]] = [
        {"sharedCounters": [dict(cs) for cs in chunk]}
        for chunk in _chunks(pool.shared_counters, MAX_COUNTER_SETS_PER_SLICE)
    ]
    for chunk in split_devices(pool.devices, reserve_for_taints=reserve_for_taints):
        content: dict[str, Any] = {"devices": [dict(d) for d in chunk]}
        if pool.partition_type_attribute and any(d.get("consumesCounters") for d in chunk):
            content["partitionTypeAttribute"] = pool.partition_type_attribute
        contents.append(content)
    return contents or [{"devices": []}]


def partition_type_dropped(sent: Iterable[Mapping[str, Any]], written: Mapping[str, Any]) -> bool:
    """Did the API server drop ``partitionTypeAttribute`` from a slice we sent with it (``written``: slice
    name -> the object it returned)? It does so with DRAPartitionableDevicesType off."""
    for obj in sent:
        back = written.get(obj["metadata"]["name"])
        if back and (obj.get("spec") or {}).get("partitionTypeAttribute") and \
                not (back.get("spec") or {}).get("partitionTypeAttribute"):
            return True
    return False
