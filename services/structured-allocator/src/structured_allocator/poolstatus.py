"""The answer to a ResourcePoolStatusRequest (``resource.k8s.io/v1alpha3``, DRAResourcePoolStatus,
KEP-5677): what is available vs consumed per pool of one driver. Pure.

:func:`compute_status` follows kube-controller-manager's ``resourcepoolstatusrequest`` controller of
Kubernetes v1.37.1 (our own code):

* the pools are those of the ResourceSlices of ``spec.driver`` (and ``spec.poolName`` if set); only the
  slices at a pool's highest ``pool.generation`` count;
* a pool with fewer slices at that generation than ``pool.resourceSliceCount`` is *incomplete*: it gets a
  ``validationError`` starting ``PoolIncomplete:`` and no counts (the caller retries such a request
  instead of answering: the driver is still publishing);
* a complete pool: ``resourceSliceCount``, ``totalDevices``; ``allocatedDevices`` = distinct device names
  of the pool in the allocation results (admin-access results are observers and do not count);
  ``unavailableDevices`` = devices with a ``NoSchedule``/``NoExecute`` taint of their own or from a
  DeviceTaintRule selecting them (a rule with no ``deviceSelector`` selects nothing);
  ``availableDevices`` = ``max(0, total - allocated - unavailable)``; ``nodeName`` when every slice names
  the same node; plus the partition and shareable views (:mod:`.poolstatus_views`);
* pools sorted by driver, then pool name; ``poolCount`` is the number that matched, ``pools`` the first
  ``spec.limit`` (default 100) of them;
* condition ``Complete=True`` (reason ``CalculationComplete``, message ``Calculated status for N pools``,
  ``(M incomplete)`` added when M of them have a validationError). :func:`failed_status` is the
  ``Failed=True`` answer (reason ``CalculationFailed``).

The *allocations* are the caller's: the structured-allocator passes every claim's effective allocation
from its assume cache, i.e. the API server's plus those it has decided and is still writing.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from draflow_runtime.dra import allocation_results

from .core.quantity import Quantity, parse_quantity
from .poolstatus_views import (
    PREFIX_POOL_INCOMPLETE,
    DeviceRecord,
    PoolViewInput,
    device_records,
    pool_views,
    qadd,
    resolve_partitions,
)

__all__ = [
    "COMPLETE",
    "DEFAULT_LIMIT",
    "FAILED",
    "PoolStatusAnswer",
    "compute_status",
    "device_unavailable",
    "failed_status",
]

COMPLETE = "Complete"
FAILED = "Failed"
DEFAULT_LIMIT = 100
MAX_VALIDATION_ERROR_BYTES = 256
UNAVAILABLE_EFFECTS = ("NoSchedule", "NoExecute")


@dataclass(frozen=True)
class PoolStatusAnswer:
    status: dict[str, Any]
    incomplete: bool  # a returned pool is still being published: retry, do not write


def _rule_may_select(rule: Mapping[str, Any], driver: str, pool: str) -> bool:
    """A ``NoSchedule``/``NoExecute`` rule whose selector (none: selects nothing) fits the pool."""
    spec = rule.get("spec") or {}
    if (spec.get("taint") or {}).get("effect") not in UNAVAILABLE_EFFECTS:
        return False
    selector = spec.get("deviceSelector")
    return selector is not None and selector.get("driver") in (None, driver) and \
        selector.get("pool") in (None, pool)


def _rule_selects(rule: Mapping[str, Any], driver: str, pool: str, device: str) -> bool:
    return _rule_may_select(rule, driver, pool) and \
        rule["spec"]["deviceSelector"].get("device") in (None, device)


def device_unavailable(driver: str, pool: str, device: Mapping[str, Any],
                       rules: Iterable[Mapping[str, Any]]) -> bool:
    """A ``NoSchedule``/``NoExecute`` taint on the device or from a DeviceTaintRule selecting it."""
    taints = device.get("taints")
    if taints and any(t.get("effect") in UNAVAILABLE_EFFECTS for t in taints):
        return True
    return any(_rule_selects(r, driver, pool, device.get("name", "")) for r in rules)


def _truncate(message: str) -> str:
    return message.encode()[:MAX_VALIDATION_ERROR_BYTES].decode(errors="ignore")


def _condition(kind: str, reason: str, message: str, now: str) -> dict[str, Any]:
    return {"type": kind, "status": "True", "lastTransitionTime": now, "reason": reason, "message": message}


def failed_status(message: str, now: str) -> dict[str, Any]:
    """The answer when the status cannot be computed (upstream ``errorStatus``)."""
    return {"poolCount": 0, "conditions": [_condition(FAILED, "CalculationFailed", message, now)]}


def _newest_slices(driver: str, pool_filter: str | None, slices: Iterable[Mapping[str, Any]]
                   ) -> dict[str, tuple[int, list[Mapping[str, Any]]]]:
    """Pool name -> (newest generation, that generation's slices) for ``driver`` (and the pool filter)."""
    pools: dict[str, tuple[int, list[Mapping[str, Any]]]] = {}
    for s in slices:
        spec = s.get("spec") or {}
        if spec.get("driver") != driver:
            continue
        pool = spec.get("pool") or {}
        name = pool.get("name", "")
        if pool_filter and name != pool_filter:
            continue
        generation = int(pool.get("generation") or 0)
        known = pools.get(name)
        if known is None or generation > known[0]:
            pools[name] = (generation, [s])
        elif generation == known[0]:
            known[1].append(s)
    return pools


def _usage(driver: str, pools: set[str], allocations: Iterable[Mapping[str, Any]]
           ) -> tuple[dict[str, set[str]], dict[str, dict[str, Quantity]]]:
    """Per pool of ``driver`` in ``pools``: device names in use and capacity consumed (admin access
    skipped)."""
    in_use: dict[str, set[str]] = {}
    consumed: dict[str, dict[str, Quantity]] = {}
    for allocation in allocations:
        for r in allocation_results(allocation):
            pool = r.get("pool", "")
            if r.get("driver") != driver or pool not in pools or r.get("adminAccess"):
                continue
            in_use.setdefault(pool, set()).add(r.get("device", ""))
            capacity = r.get("consumedCapacity")
            if capacity:
                sums = consumed.setdefault(pool, {})
                for name, value in capacity.items():
                    sums[name] = qadd(sums.get(name), parse_quantity(value))
    return in_use, consumed


def _pool_status(driver: str, name: str, generation: int, slices: list[Mapping[str, Any]],
                 rules: list[Mapping[str, Any]], in_use: set[str], consumed: dict[str, Quantity],
                 request_attr: str | None) -> dict[str, Any]:
    out: dict[str, Any] = {"driver": driver, "poolName": name, "generation": generation}
    nodes = {(s.get("spec") or {}).get("nodeName") or "" for s in slices}
    if len(nodes) == 1 and "" not in nodes:
        out["nodeName"] = nodes.pop()
    expected = max(int(((s.get("spec") or {}).get("pool") or {}).get("resourceSliceCount") or 0)
                   for s in slices)
    if len(slices) < expected:
        out["validationError"] = _truncate(
            f"{PREFIX_POOL_INCOMPLETE} pool {driver}/{name} is incomplete: observed "
            f"{len(slices)}/{expected} slices at generation {generation}")
        return out
    rules = [r for r in rules if _rule_may_select(r, driver, name)]
    total = unavailable = 0
    devices: list[DeviceRecord] = []
    counters: list[Mapping[str, Any]] = []
    # Slice name order: the partition view's greedy fit runs in device order, keep it stable.
    for s in sorted(slices, key=lambda s: str((s.get("metadata") or {}).get("name", ""))):
        spec = s.get("spec") or {}
        listed = spec.get("devices") or ()
        total += len(listed)
        unavailable += sum(1 for d in listed if device_unavailable(driver, name, d, rules))
        devices.extend(device_records(s))
        counters.extend(spec.get("sharedCounters") or ())
    allocated = len(in_use)
    out.update(resourceSliceCount=len(slices), totalDevices=total, allocatedDevices=allocated,
               availableDevices=max(0, total - allocated - unavailable), unavailableDevices=unavailable)
    view = PoolViewInput(driver, name, devices, counters, frozenset(in_use), consumed)
    resolve_partitions(request_attr, view)
    partitions, shareable, error = pool_views(view)
    if partitions is not None:
        out["partitionSummary"] = partitions
    if shareable is not None:
        out["shareableSummary"] = shareable
    if error:
        out["validationError"] = _truncate(error)
    return out


def compute_status(request: Mapping[str, Any], slices: Iterable[Mapping[str, Any]],
                   allocations: Iterable[Mapping[str, Any]], taint_rules: Iterable[Mapping[str, Any]],
                   now: str) -> PoolStatusAnswer:
    """The status for ``request`` from the slices, the effective allocations (``status.allocation``
    objects) and the DeviceTaintRules (empty when DRADeviceTaintRules is off); ``now`` (RFC 3339) is
    the condition's ``lastTransitionTime``. Raises on malformed input (e.g. a quantity that does not
    parse): the caller answers with :func:`failed_status`."""
    spec = request.get("spec") or {}
    driver = spec.get("driver", "")
    pools = _newest_slices(driver, spec.get("poolName"), slices)
    limit = spec.get("limit")
    # Sorted, then cut to the limit: only the pools returned need their devices looked at.
    names = sorted(pools)[: DEFAULT_LIMIT if limit is None else int(limit)]
    in_use, consumed = _usage(driver, set(names), allocations)
    rules = list(taint_rules)
    request_attr = spec.get("defaultPartitionTypeAttribute")
    returned = [
        _pool_status(driver, name, *pools[name], rules, in_use.get(name, set()), consumed.get(name, {}),
                     request_attr)
        for name in names
    ]
    flagged = sum(1 for p in returned if "validationError" in p)
    message = f"Calculated status for {len(returned)} pools"
    if flagged:
        message += f" ({flagged} incomplete)"
    status: dict[str, Any] = {"poolCount": len(pools)}
    if returned:
        status["pools"] = returned
    status["conditions"] = [_condition(COMPLETE, "CalculationComplete", message, now)]
    incomplete = any(p.get("validationError", "").startswith(PREFIX_POOL_INCOMPLETE) for p in returned)
    return PoolStatusAnswer(status, incomplete)
