"""PostFilter (pure): which allocated claim to give back when no node fits the pod.

Upstream's DynamicResources PostFilter: a claim allocated earlier (for this pod, or by someone for a node
that no longer works, or whose binding conditions failed) pins the pod to that allocation's nodes. When
the pod fits nowhere, one such claim found *unavailable* (the decision passes only those: its selector
ruled out a node that passed the node filters and node fit, or its binding failed) that nobody else uses —
``reservedFor`` empty or only this pod — is deallocated, so a later attempt can allocate it afresh.
Claims that other pods use are never touched. Upstream picks one at random; here claims whose binding
failed come first, then the pod's claim order, so the choice is reproducible.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["claim_to_deallocate", "deallocatable"]


def deallocatable(claim: Mapping[str, Any], pod_uid: str) -> bool:
    """Allocated (as the API server has it), not being deleted, reserved for nobody or only ``pod_uid``."""
    status = claim.get("status") or {}
    if not status.get("allocation") or (claim.get("metadata") or {}).get("deletionTimestamp"):
        return False
    return all(r.get("uid") == pod_uid for r in status.get("reservedFor") or [])


def claim_to_deallocate(claims: Iterable[Mapping[str, Any]], pod_uid: str,
                        unavailable: Iterable[str] = ()) -> Mapping[str, Any] | None:
    """The claim PostFilter deallocates, or None. ``unavailable``: claim UIDs whose binding failed."""
    candidates = [c for c in claims if deallocatable(c, pod_uid)]
    first = set(unavailable)
    candidates.sort(key=lambda c: (c["metadata"].get("uid") not in first))
    return candidates[0] if candidates else None
