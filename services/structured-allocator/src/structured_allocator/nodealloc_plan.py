"""DRANodeAllocatableResources in a decision and its writes (the pure rules are :mod:`.nodealloc`).

* :class:`NodeAllocatableCheck` — built once per decision with the pod's claims; for each node that
  fits otherwise, :meth:`~NodeAllocatableCheck.check` gives the pod's claim statuses there and why the
  pod's requests plus its devices' share do not fit what is left of the node (kube-scheduler's
  DynamicResources Filter, ``calculateAndCheckNodeAllocatableResources``).
* :func:`shared_mapped_claim` — an allocated claim with a mapped device that is reserved for another pod
  (``validateNodeAllocatableDRAClaimSharing``: such a claim is one pod's only).
* :func:`record` / :func:`clear` — ``pod.status.nodeAllocatableResourceClaimStatuses`` written before
  the binding (upstream PreBind) and emptied when the placement is undone (upstream Unreserve); merge
  patches on ``pods/status`` with the pod's UID as a precondition.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from draflow_runtime.dra import is_reserved_for_pod_or_group, pod_claims
from draflow_runtime.kube import PODS, KubeClient

from .core import AllocationError, SliceIndex
from .core.nodesel import node_matches
from .core.pools import PreparedSlice
from .explain_http import PodExplanation
from .nodealloc import STATUS_FIELD, NodeAllocatableError, claim_statuses, dra_requests, fit_reasons, mapped
from .nodefit import NodeUsage, PodDemand, units
from .podlevel import pod_level_names, pod_level_reason
from .scoring import Candidate

__all__ = ["NodeAllocatableCheck", "admit", "clear", "device_lookup", "record", "shared_mapped_claim"]


def _matches(node: Mapping[str, Any], name: str | None, all_nodes: bool,
             selector: Mapping[str, Any] | None) -> bool:
    try:
        return node_matches(node, name, all_nodes, selector)
    except AllocationError:
        return False  # a selector upstream cannot parse matches nothing there either


def _reaches(s: PreparedSlice, node: Mapping[str, Any]) -> bool:
    """Upstream ``filterSlicesForNode``: the slice is the node's, for all nodes, selects it, or selects
    per device (each device checked on its own)."""
    if s.node_name or s.all_nodes or s.node_selector is not None:
        return _matches(node, s.node_name, s.all_nodes, s.node_selector)
    return s.per_device


def device_lookup(slices: SliceIndex, node: Mapping[str, Any] | None = None) -> Any:
    """Allocation result -> the device's spec (upstream ``getDeviceFromSlices``): among the slices of its
    pool that reach ``node`` (all of them when None); a device of a ``perDeviceNodeSelection`` slice must
    match ``node`` itself. Not found or not matching: :class:`~.nodealloc.NodeAllocatableError`."""
    node_name = ((node or {}).get("metadata") or {}).get("name", "")

    def device_of(result: Mapping[str, Any]) -> Mapping[str, Any]:
        driver, pool, name = result.get("driver", ""), result.get("pool", ""), result.get("device", "")
        for s in slices.pool_slices((driver, pool)):
            if node is not None and not _reaches(s, node):
                continue
            for device in (s.raw.get("spec") or {}).get("devices") or ():
                if device.get("name") != name:
                    continue
                if node is not None and s.per_device and not _matches(
                        node, device.get("nodeName"), bool(device.get("allNodes")),
                        device.get("nodeSelector")):
                    raise NodeAllocatableError(f"device {name} does not match node {node_name}")
                return device  # type: ignore[no-any-return]
        raise NodeAllocatableError(f"device {name} not found in pool {pool} for driver {driver}")

    return device_of


def shared_mapped_claim(pod: Mapping[str, Any], claims: Sequence[tuple[Mapping[str, Any], Mapping[str, Any]]],
                        slices: SliceIndex, pod_groups: bool = False) -> str | None:
    """Why an allocated claim (claim, allocation) cannot be used by ``pod``: a mapped device and reserved
    for someone else (another pod, or another PodGroup than the pod's with ``pod_groups``); None when
    every claim may be."""
    device_of = device_lookup(slices)
    for claim, allocation in claims:
        reserved = (claim.get("status") or {}).get("reservedFor") or []
        ours = is_reserved_for_pod_or_group(claim, pod, pod_groups)
        if reserved and not ours and mapped(allocation, device_of):
            return (f'node allocatable resource claim "{claim["metadata"]["name"]}" has a mapped device '
                    "and cannot be shared across pods")
    return None


class NodeAllocatableCheck:
    """The pod's node-allocatable DRA share on each candidate node."""

    def __init__(self, pod: Mapping[str, Any], demand: PodDemand, usage: NodeUsage, slices: SliceIndex,
                 allocated: Sequence[tuple[Mapping[str, Any], Mapping[str, Any]]],
                 to_allocate: Sequence[Mapping[str, Any]]) -> None:
        self.pod, self.demand, self.usage, self.slices = pod, demand, usage, slices
        by_name = {pc.claim_name: pc.name for pc in pod_claims(pod) if pc.claim_name}
        self.allocated = [(by_name.get(c["metadata"]["name"], ""), c, a) for c, a in allocated]
        self.to_allocate = [(by_name.get(c["metadata"]["name"], ""), c) for c in to_allocate]

    def check(self, node: Mapping[str, Any], allocations: Sequence[Mapping[str, Any]]
              ) -> tuple[list[dict[str, Any]], list[str]]:
        """(claim statuses, reasons the pod does not fit ``node`` with them); ``allocations``: those of
        the claims to allocate, in order (more, e.g. the extended-resource claim's, are ignored)."""
        if not self.slices.maps_node_resources:
            return [], []  # no device maps node resources: no claim gets a status (claim_statuses)
        new = ((n, c, a) for (n, c), a in zip(self.to_allocate, allocations, strict=False))
        claims = [*self.allocated, *new]
        statuses = claim_statuses(self.pod, claims, device_lookup(self.slices, node))
        if not statuses:
            return [], []
        why = pod_level_reason(self.pod, statuses)
        if why:
            return statuses, [why]
        requests = dict(self.demand.requests)
        inside = pod_level_names(self.pod)  # pod-level requests hold the DRA share already
        for name, value in dra_requests(statuses).items():
            if name not in inside:
                requests[name] = requests.get(name, 0) + units(name, value)
        name = (node.get("metadata") or {}).get("name", "")
        used = self.usage.totals(name).requested
        return statuses, fit_reasons(requests, self.usage.allocatable(node).resources, used)


def admit(feasible: list[Candidate], candidate: Candidate, na: NodeAllocatableCheck | None,
          explanation: PodExplanation) -> None:
    """Add ``candidate`` unless the pod's node-allocatable DRA share does not fit its node (the reasons
    go to the explanation); a fitting candidate carries the pod's claim statuses there."""
    if na is not None:
        statuses, reasons = na.check(candidate.node, candidate.allocations)
        for reason in reasons:
            explanation.node_reasons[reason] += 1
        if reasons:
            return
        if statuses:
            candidate = replace(candidate, node_allocatable=statuses)
    feasible.append(candidate)


async def record(kube: KubeClient, field_manager: str, pod: Mapping[str, Any],
                 statuses: Sequence[Mapping[str, Any]]) -> None:
    """Write the claim statuses into the pod's status (idempotent)."""
    meta = pod["metadata"]
    body = {"metadata": {"uid": meta["uid"]}, "status": {STATUS_FIELD: list(statuses)}}
    await kube.patch(PODS, meta["name"], body, meta["namespace"], subresource="status",
                     field_manager=field_manager)


async def clear(kube: KubeClient, field_manager: str, pod: Mapping[str, Any]) -> None:
    """Empty the pod's claim statuses (an explicit empty list, as upstream's Unreserve)."""
    await record(kube, field_manager, pod, [])
