"""Node-allocatable resources backed by devices (DRANodeAllocatableResources, alpha in Kubernetes v1.37).

A device may say which node resources (``cpu``, ``memory``, ``ephemeral-storage``, ``hugepages-*``) it
stands for or costs (``spec.devices[].nodeAllocatableResources``): a **mapping** (the device *is* that
much of the resource: ``deviceMultiplier`` per allocated device, or ``capacityMultiplier`` times the
result's ``consumedCapacity[capacityKey]``) and/or an **overhead** (``perPod``, ``perContainer``). As
kube-scheduler's DynamicResources plugin does (v1.37.1 ``nodeallocatabledynamicresources.go``):

* :func:`claim_statuses` — for a pod on a node, one ``NodeAllocatableResourceClaimStatus`` per claim
  whose devices carry such resources: the claim's name, the containers that reference it, the summed
  mapping and overhead per resource (sorted by name; claims sorted by name). The allocator writes them
  to ``pod.status.nodeAllocatableResourceClaimStatuses`` before it binds the pod.
* :func:`dra_requests` — what those statuses add to the pod's requests (upstream component-helpers
  ``addDRANodeAllocatableClaimResources``): every mapping, plus per claim ``perPod`` and
  ``perContainer`` times the number of referencing containers. Node fit counts them for the pod being
  placed and for every pod already on the node (:func:`~.nodefit.pod_requests` reads the status).
* :func:`fit_reasons` — the plugin's own check: the pod's requests plus its DRA share against what is
  left of the node's cpu, memory, ephemeral-storage and hugepages (``Insufficient <name>``).
* :func:`mapped` — whether an allocation has a device with a *mapping*; such a claim cannot be shared by
  two pods (an overhead-only claim can).

Which device a result is on a candidate node is the caller's look-up (``nodealloc_plan.device_lookup``,
upstream ``filterSlicesForNode`` + ``getDeviceFromSlices``): it raises :class:`NodeAllocatableError` for
a device that is not found among the slices reaching the node or, in a ``perDeviceNodeSelection``
slice, does not match the node itself. As upstream, a claim counts when one of its devices found that
way carries such resources; then every one of its devices must be found, and a ``capacityKey`` mapping
needs the result's ``consumedCapacity`` (present without the key: nothing is added). Those errors are
the plugin's Filter error status: the attempt for the pod fails with the message (a
:class:`~.core.AllocationError`, reported as broken input).

Pure; devices are looked up through a callable (the allocator's SliceIndex). Table-tested in
``tests/test_nodealloc.py``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from fractions import Fraction
from typing import Any

from .core import AllocationError
from .core.quantity import Quantity, QuantityError, parse_quantity

__all__ = ["DeviceOf", "NodeAllocatableError", "claim_statuses", "dra_requests", "fit_reasons", "mapped"]

GATE = "DRANodeAllocatableResources"
STATUS_FIELD = "nodeAllocatableResourceClaimStatuses"
DeviceOf = Callable[[Mapping[str, Any]], "Mapping[str, Any] | None"]  # allocation result -> device spec
_CHECKED = ("cpu", "memory", "ephemeral-storage")


class NodeAllocatableError(AllocationError):
    """A pod's node-allocatable DRA share cannot be computed on a node (upstream: the Filter's error
    status): a device not found or not matching the node, a capacity mapping without consumed capacity."""


def _lenient(device_of: DeviceOf, result: Mapping[str, Any]) -> Mapping[str, Any] | None:
    try:
        return device_of(result)
    except NodeAllocatableError:
        return None


def _q(text: Any) -> Quantity | None:
    try:
        return parse_quantity(str(text))
    except QuantityError:
        return None


def _add(into: dict[str, Quantity], name: str, value: Quantity) -> None:
    into[name] = into[name].add(value) if name in into else value


def _results(allocation: Mapping[str, Any] | None) -> list[Mapping[str, Any]]:
    return list(((allocation or {}).get("devices") or {}).get("results") or [])


def _resources(device: Mapping[str, Any] | None) -> Mapping[str, Any]:
    return (device or {}).get("nodeAllocatableResources") or {}


def mapped(allocation: Mapping[str, Any] | None, device_of: DeviceOf) -> bool:
    """Whether a device of ``allocation`` maps a node resource (such a claim is one pod's only)."""
    return any(spec.get("mapping")
               for r in _results(allocation) for spec in _resources(_lenient(device_of, r)).values())


def _claim_totals(claim: Mapping[str, Any], allocation: Mapping[str, Any], device_of: DeviceOf
                  ) -> tuple[dict[str, Quantity], dict[str, dict[str, Quantity]]]:
    mapping: dict[str, Quantity] = {}
    overhead: dict[str, dict[str, Quantity]] = {}
    meta = claim.get("metadata") or {}
    claim_name = str(meta.get("name", ""))
    where = f"claim {meta.get('namespace', '')}/{claim_name}"
    for result in _results(allocation):
        device_name = result.get("device", "")
        try:
            device = device_of(result)
        except NodeAllocatableError as exc:
            raise NodeAllocatableError(f"{where}, device {device_name}, driver {result.get('driver', '')}: "
                                       f"{exc}", claim=claim_name) from exc
        for name, spec in _resources(device).items():
            m = spec.get("mapping") or {}
            if m.get("capacityKey"):
                if not result.get("consumedCapacity"):
                    raise NodeAllocatableError(
                        f"{where}, device {device_name}: consumedCapacity is not set, but capacity key "
                        f"'{m['capacityKey']}' is set in nodeAllocatableResources for resource {name}",
                        claim=claim_name)
                consumed = _q(result["consumedCapacity"].get(m["capacityKey"]))
                factor = _q(m.get("capacityMultiplier", "1"))
                if consumed is not None and factor is not None:
                    _add(mapping, name, Quantity(consumed.value * factor.value, consumed.format))
            elif m.get("deviceMultiplier") is not None:
                per_device = _q(m["deviceMultiplier"])
                if per_device is not None:
                    _add(mapping, name, per_device)
            o = spec.get("overhead") or {}
            for part in ("perPod", "perContainer"):
                value = _q(o.get(part)) if o.get(part) is not None else None
                if value is not None:
                    _add(overhead.setdefault(name, {}), part, value)
    return mapping, overhead


def _containers_by_claim(pod: Mapping[str, Any]) -> dict[str, list[str]]:
    """Pod claim name -> names of the (init and regular) containers that reference it, in spec order."""
    out: dict[str, list[str]] = {}
    spec = pod.get("spec") or {}
    for container in [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]:
        for ref in (container.get("resources") or {}).get("claims") or []:
            out.setdefault(ref.get("name", ""), []).append(container.get("name", ""))
    return out


def claim_statuses(pod: Mapping[str, Any],
                   claims: Iterable[tuple[str, Mapping[str, Any], Mapping[str, Any]]],
                   device_of: DeviceOf) -> list[dict[str, Any]]:
    """``nodeAllocatableResourceClaimStatuses`` for ``pod``; ``claims``: (pod claim name, claim,
    allocation)."""
    containers = _containers_by_claim(pod)
    statuses: dict[str, dict[str, Any]] = {}
    for pod_claim, claim, allocation in claims:
        # A claim counts when a device of it, as found for the node, carries such resources (upstream's
        # first pass, which skips what it cannot find); then every device of it must be found.
        if not any(_resources(_lenient(device_of, r)) for r in _results(allocation)):
            continue
        mapping, overhead = _claim_totals(claim, allocation, device_of)
        if not mapping and not overhead:
            continue
        name = claim["metadata"]["name"]
        statuses[name] = {
            "resourceClaimName": name,
            "containers": list(containers.get(pod_claim, [])),
            "mapping": [{"name": n, "quantity": mapping[n].canonical()} for n in sorted(mapping)],
            "overhead": [{"name": n, **{k: v.canonical() for k, v in sorted(overhead[n].items())}}
                         for n in sorted(overhead)],
        }
    return [statuses[n] for n in sorted(statuses)]


def dra_requests(statuses: Sequence[Mapping[str, Any]] | None) -> dict[str, Fraction]:
    """What the claim statuses add to the pod's requests (exact values)."""
    out: dict[str, Fraction] = {}
    for status in statuses or ():
        for m in status.get("mapping") or ():
            q = _q(m.get("quantity")) if m.get("quantity") is not None else None
            if q is not None:
                out[m["name"]] = out.get(m["name"], Fraction(0)) + q.value
        referencing = len(status.get("containers") or ())
        for o in status.get("overhead") or ():
            total = Fraction(0)
            per_pod = _q(o["perPod"]) if o.get("perPod") is not None else None
            per_container = _q(o["perContainer"]) if o.get("perContainer") is not None else None
            if per_pod is not None:
                total += per_pod.value
            if per_container is not None and referencing:
                total += per_container.value * referencing
            out[o["name"]] = out.get(o["name"], Fraction(0)) + total
    return out


def fit_reasons(requests: Mapping[str, int], allocatable: Mapping[str, int],
                used: Mapping[str, int]) -> list[str]:
    """The plugin's ``nodeFitsResources``: ``requests`` (scheduler units, DRA share included) against
    what is left of cpu, memory, ephemeral-storage and hugepages on the node."""
    reasons = []
    for name in sorted(requests, key=lambda n: (n not in _CHECKED, n)):
        if name not in _CHECKED and not name.startswith("hugepages-"):
            continue
        want = requests[name]
        if want > 0 and want > allocatable.get(name, 0) - used.get(name, 0):
            reasons.append(f"Insufficient {name}")
    return reasons
