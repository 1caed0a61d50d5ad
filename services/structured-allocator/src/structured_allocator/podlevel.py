"""Pod-level resources (``spec.resources``) and a pod's node-allocatable DRA share
(DRANodeAllocatableResources; upstream kube-scheduler v1.37.1 ``validatePodLevelResourcesCoverDRA`` and
component-helpers ``PodRequests``).

With pod-level requests set, the pod's cpu / memory / hugepages requests *are* the pod-level values: the
devices' share is inside that budget, not on top of it (:func:`pod_level_names`). The budget must hold
it: :func:`pod_level_reason` says why not —

* pod-level requests below the containers' aggregate (sidecars and init containers as node fit counts
  them) plus the DRA share: ``pod level request for <name> is insufficient to cover the aggregated
  container and node-allocatable DRA requests``;
* a pod-level hugepages limit below the containers' aggregate limits plus the DRA share;
* a pod-level limit below one container's limit plus what the claims that container references add
  (mapping and overhead, per pod and per container): ``... for container <name>``.

Pure; the statuses are those :func:`~.nodealloc.claim_statuses` computes for the candidate node.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from fractions import Fraction
from typing import Any

from .nodealloc import dra_requests
from .nodefit import _HUGEPAGES, _POD_LEVEL, _add, _aggregate, _parse_list, _spec_requests

__all__ = ["pod_level_names", "pod_level_reason"]

Obj = Mapping[str, Any]


def _supported(name: str) -> bool:
    return name in _POD_LEVEL or name.startswith(_HUGEPAGES)


def pod_level_names(pod: Obj) -> set[str]:
    """The resources whose pod requests are the pod-level values (the DRA share is inside them)."""
    requests = ((pod.get("spec") or {}).get("resources") or {}).get("requests") or {}
    return {name for name in requests if _supported(name)}


def _spec_limits(container: Obj, _: Obj | None) -> dict[str, Fraction]:
    return _parse_list((container.get("resources") or {}).get("limits"))


def _container_share(statuses: Sequence[Obj], container: str) -> dict[str, Fraction]:
    """upstream ``GetContainerDRAAllocations``: what the claims ``container`` references add, mapping
    plus per-pod and (once) per-container overhead."""
    return dra_requests([{**s, "containers": [container]} for s in statuses
                         if container in (s.get("containers") or ())])


def pod_level_reason(pod: Obj, statuses: Sequence[Obj]) -> str | None:
    """Why the pod's pod-level resources cannot hold its DRA share (see the module docstring), or None."""
    spec = pod.get("spec") or {}
    resources = spec.get("resources") or {}
    if not statuses or not resources:
        return None
    share = dra_requests(statuses)
    pod_requests = _parse_list(resources.get("requests"))
    if pod_requests:
        aggregate = _aggregate(spec, {}, _spec_requests)
        _add(aggregate, share)
        for name in sorted(pod_requests):
            if _supported(name) and name in aggregate and aggregate[name] > pod_requests[name]:
                return (f"pod level request for {name} is insufficient to cover the aggregated container "
                        "and node-allocatable DRA requests")
    pod_limits = _parse_list(resources.get("limits"))
    if not pod_limits:
        return None
    limits = _aggregate(spec, {}, _spec_limits)
    for name, value in share.items():  # DRA counts where a limit is declared; hugepages always
        if name in limits or name.startswith(_HUGEPAGES):
            limits[name] = limits.get(name, Fraction(0)) + value
    for name in sorted(limits):
        if name.startswith(_HUGEPAGES) and name in pod_limits and limits[name] > pod_limits[name]:
            return (f"pod level limit for {name} is insufficient to cover the aggregated container and "
                    "node-allocatable DRA limits")
    for container in spec.get("containers") or ():
        own = _spec_limits(container, None)
        added = _container_share(statuses, container.get("name", ""))
        for name in sorted(own):
            if name.startswith(_HUGEPAGES) or name not in pod_limits:
                continue
            if own[name] + added.get(name, Fraction(0)) > pod_limits[name]:
                return (f"pod level limit for {name} is insufficient to cover the limit and DRA overhead "
                        f"for container {container.get('name', '')}")
    return None
