"""How well a node serves a pod's ``firstAvailable`` requests (DRAPrioritizedList; upstream
kube-scheduler DynamicResources ``Score`` / ``computeScore``, v1.37.1).

A request with subrequests asks for the first of them that can be satisfied; a node where an earlier one
fits serves the pod better than a node where only a later one does. The score of a node is, over the
pod's claims and each of their ``firstAvailable`` requests, ``8 - i`` for the subrequest at index ``i``
the allocation used there (8 = ``FirstAvailableDeviceRequestMaxSize``): the first subrequest is worth
8, the eighth 1. ``exactly`` requests add nothing, and a pod without ``firstAvailable`` requests scores 0
everywhere. Pure.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

__all__ = ["FIRST_AVAILABLE_MAX", "subrequest_score"]

FIRST_AVAILABLE_MAX = 8  # resource.k8s.io/v1 FirstAvailableDeviceRequestMaxSize


def _used_subrequests(allocation: Mapping[str, Any] | None) -> set[str]:
    results = ((allocation or {}).get("devices") or {}).get("results") or ()
    return {r.get("request", "") for r in results if "/" in r.get("request", "")}


def subrequest_score(claims: Iterable[Mapping[str, Any]], allocations: Sequence[Mapping[str, Any]]) -> int:
    """The node's score for ``claims`` (in the pod's order). A claim with ``status.allocation`` is scored
    by it; the others take, in order, the allocations decided for this node. Fewer allocations than
    unallocated claims is a caller's error (``ValueError``), as upstream's."""
    score = 0
    pending = iter(allocations)
    for claim in claims:
        allocation = (claim.get("status") or {}).get("allocation")
        if allocation is None:
            allocation = next(pending, None)
            if allocation is None:
                raise ValueError("fewer allocations than claims needing one")
        used = _used_subrequests(allocation)
        for request in ((claim.get("spec") or {}).get("devices") or {}).get("requests") or ():
            for i, sub in enumerate(request.get("firstAvailable") or ()):
                if f"{request.get('name', '')}/{sub.get('name', '')}" in used:
                    score += FIRST_AVAILABLE_MAX - i
    return score
