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

Pure; devices are looked up through a callable (the allocator's SliceIndex). Table-tested in
``tests/test_nodealloc.py``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from fractions import Fraction
from typing import Any

from .core.quantity import Quantity, QuantityError, parse_quantity

__all__ = ["DeviceOf", "claim_statuses", "dra_requests", "fit_reasons", "mapped"]

GATE = "DRANodeAllocatableResources"
STATUS_FIELD = "nodeAllocatableResourceClaimStatuses"
DeviceOf = Callable[[Mapping[str, Any]], "Mapping[str, Any] | None"]  # allocation result -> device spec
_CHECKED = ("cpu", "memory", "ephemeral-storage")


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
               for r in _results(allocation) for spec in _resources(device_of(r)).values())


def _claim_totals(allocation: Mapping[str, Any], device_of: DeviceOf
                  ) -> tuple[dict[str, Quantity], dict[str, dict[str, Quantity]]]:
    mapping: dict[str, Quantity] = {}
    overhead: dict[str, dict[str, Quantity]] = {}
    for result in _results(allocation):
        for name, spec in _resources(device_of(result)).items():
            m = spec.get("mapping") or {}
            if m.get("capacityKey"):
                consumed = _q((result.get("consumedCapacity") or {}).get(m["capacityKey"]))
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
        mapping, overhead = _claim_totals(allocation, device_of)
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
