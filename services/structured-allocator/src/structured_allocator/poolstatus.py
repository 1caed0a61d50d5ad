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


@dataclass
class _Pool:
    driver: str
    name: str
    generation: int
    expected_slices: int
    node: str
    mixed_nodes: bool = False
    slices: int = 0
    total: int = 0
    unavailable: int = 0
    shared_counters: list[Mapping[str, Any]] | None = None
    devices: list[DeviceRecord] | None = None


def _rule_selects(rule: Mapping[str, Any], driver: str, pool: str, device: str) -> bool:
    spec = rule.get("spec") or {}
    if (spec.get("taint") or {}).get("effect") not in UNAVAILABLE_EFFECTS:
        return False
    selector = spec.get("deviceSelector")
    if selector is None:
        return False
    return all(selector.get(k) in (None, v) for k, v in (("driver", driver), ("pool", pool),
                                                          ("device", device)))


def device_unavailable(driver: str, pool: str, device: Mapping[str, Any],
                       rules: Iterable[Mapping[str, Any]]) -> bool:
    """A ``NoSchedule``/``NoExecute`` taint on the device or from a DeviceTaintRule selecting it."""
    if any(t.get("effect") in UNAVAILABLE_EFFECTS for t in device.get("taints") or ()):
        return True
    return any(_rule_selects(r, driver, pool, device.get("name", "")) for r in rules)


def _truncate(message: str) -> str:
    return message.encode()[:MAX_VALIDATION_ERROR_BYTES].decode(errors="ignore")


def _condition(kind: str, reason: str, message: str, now: str) -> dict[str, Any]:
    return {"type": kind, "status": "True", "lastTransitionTime": now, "reason": reason, "message": message}


def failed_status(message: str, now: str) -> dict[str, Any]:
    """The answer when the status cannot be computed (upstream ``errorStatus``)."""
    return {"poolCount": 0, "conditions": [_condition(FAILED, "CalculationFailed", message, now)]}


def _spec_of(slice_: Mapping[str, Any]) -> tuple[str, str, int, Mapping[str, Any]]:
    spec = slice_.get("spec") or {}
    pool = spec.get("pool") or {}
    return spec.get("driver", ""), pool.get("name", ""), int(pool.get("generation") or 0), spec


def _gather(driver: str, pool_filter: str | None, slices: Iterable[Mapping[str, Any]],
            rules: list[Mapping[str, Any]]) -> dict[str, _Pool]:
    chosen = [s for s in slices if _spec_of(s)[0] == driver
              and (not pool_filter or _spec_of(s)[1] == pool_filter)]
    newest: dict[str, int] = {}
    for s in chosen:
        _, name, generation, _ = _spec_of(s)
        newest[name] = max(newest.get(name, generation), generation)
    pools: dict[str, _Pool] = {}
    # Slice name order: the partition view's greedy fit runs in device order, keep it stable.
    for s in sorted(chosen, key=lambda s: str((s.get("metadata") or {}).get("name", ""))):
        _, name, generation, spec = _spec_of(s)
        if generation < newest[name]:
            continue
        node = spec.get("nodeName") or ""
        pool = pools.get(name)
        if pool is None:
            pool = pools[name] = _Pool(driver, name, generation,
                                       int((spec.get("pool") or {}).get("resourceSliceCount") or 0), node,
                                       shared_counters=[], devices=[])
        elif node != pool.node:
            pool.mixed_nodes = True
        devices = spec.get("devices") or ()
        pool.slices += 1
        pool.total += len(devices)
        pool.unavailable += sum(1 for d in devices if device_unavailable(driver, name, d, rules))
        assert pool.devices is not None and pool.shared_counters is not None
        pool.devices.extend(device_records(s))
        pool.shared_counters.extend(spec.get("sharedCounters") or ())
    return pools


def _usage(driver: str, allocations: Iterable[Mapping[str, Any]]
           ) -> tuple[dict[str, set[str]], dict[str, dict[str, Quantity]]]:
    """Per pool of ``driver``: device names in use and capacity consumed (admin access skipped)."""
    in_use: dict[str, set[str]] = {}
    consumed: dict[str, dict[str, Quantity]] = {}
    for allocation in allocations:
        for r in allocation_results(allocation):
            if r.get("adminAccess") or r.get("driver") != driver:
                continue
            pool = r.get("pool", "")
            in_use.setdefault(pool, set()).add(r.get("device", ""))
            sums = consumed.setdefault(pool, {})
            for name, value in (r.get("consumedCapacity") or {}).items():
                sums[name] = qadd(sums.get(name), parse_quantity(value))
    return in_use, consumed


def _pool_status(pool: _Pool, in_use: set[str], consumed: dict[str, Quantity],
                 request_attr: str | None) -> dict[str, Any]:
    out: dict[str, Any] = {"driver": pool.driver, "poolName": pool.name, "generation": pool.generation}
    if pool.node and not pool.mixed_nodes:
        out["nodeName"] = pool.node
    if pool.slices < pool.expected_slices:
        out["validationError"] = _truncate(
            f"{PREFIX_POOL_INCOMPLETE} pool {pool.driver}/{pool.name} is incomplete: observed "
            f"{pool.slices}/{pool.expected_slices} slices at generation {pool.generation}")
        return out
    allocated = len(in_use)
    out.update(resourceSliceCount=pool.slices, totalDevices=pool.total, allocatedDevices=allocated,
               availableDevices=max(0, pool.total - allocated - pool.unavailable),
               unavailableDevices=pool.unavailable)
    view = PoolViewInput(pool.driver, pool.name, list(pool.devices or ()), list(pool.shared_counters or ()),
                         frozenset(in_use), consumed)
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
    pools = _gather(driver, spec.get("poolName"), slices, list(taint_rules))
    in_use, consumed = _usage(driver, allocations)
    request_attr = spec.get("defaultPartitionTypeAttribute")
    answered = [
        _pool_status(pools[name], in_use.get(name, set()), consumed.get(name, {}), request_attr)
        for name in sorted(pools)
    ]
    limit = spec.get("limit")
    returned = answered[: DEFAULT_LIMIT if limit is None else int(limit)]
    flagged = sum(1 for p in returned if "validationError" in p)
    message = f"Calculated status for {len(returned)} pools"
    if flagged:
        message += f" ({flagged} incomplete)"
    status: dict[str, Any] = {"poolCount": len(answered)}
    if returned:
        status["pools"] = returned
    status["conditions"] = [_condition(COMPLETE, "CalculationComplete", message, now)]
    incomplete = any(p.get("validationError", "").startswith(PREFIX_POOL_INCOMPLETE) for p in returned)
    return PoolStatusAnswer(status, incomplete)
